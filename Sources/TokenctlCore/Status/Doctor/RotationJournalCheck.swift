import TokenctlEssentials

/// The rotation journal, which lives in the kernel keyring too.
struct RotationJournalCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        if let journal = context.journal, journal.isAvailable {
            return [
                DoctorFinding(
                    "rotation journal", ok: true,
                    "kernel user keyring (a rotated session is held in memory until the Secret Service has it)")
            ]
        }
        return [
            DoctorFinding(
                "rotation journal", level: .warn,
                "unavailable: the kernel keyring cannot be used here, so a crash or a hung keyring between a rotation and its keyring write can lose the session"
            )
        ]
    }
}
