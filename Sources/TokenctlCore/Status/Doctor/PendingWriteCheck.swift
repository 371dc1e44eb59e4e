import TokenctlEssentials

/// Rotations the Secret Service does not hold yet (it may have been unusable since): written
/// now when it can be used, else each one's line.
struct PendingWriteCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        var findings: [DoctorFinding] = []
        for (name, configuration) in context.configured {
            let identity = SessionIdentity(profile: name, configuration: configuration)
            if context.storeUsable { await context.service.completePendingWrite(name) }
            guard let pending = context.service.store.pendingWrite(identity) else { continue }
            findings.append(
                DoctorFinding(
                    "pending write '\(name)'", ok: false,
                    "a rotated session is held only in memory (kernel keyring) since \(Timestamp.iso8601(pending.journaledAt))"
                        + (pending.pendingReason.map { ": \(TerminalText.short($0))" } ?? ""),
                    hint:
                        "Make the Secret Service writable (see the checks above); the next tokenctl command then writes it. Until then a reboot or logout loses it."
                ))
        }
        return findings
    }
}
