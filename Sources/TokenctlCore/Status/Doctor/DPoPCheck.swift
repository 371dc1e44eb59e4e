import TokenctlEssentials

/// DPoP profiles sign a proof for every request, with libgcrypt.
struct DPoPCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        let dpopProfiles = context.configured.filter { $0.1.dpop }
        guard !dpopProfiles.isEmpty else { return [] }
        do {
            try Gcrypt.requireLibrary()
            return [
                DoctorFinding(
                    "dpop", ok: true,
                    "libgcrypt loads: proofs can be signed for \(dpopProfiles.count) profile(s) with dpop = true")
            ]
        } catch {
            return [
                DoctorFinding(
                    "dpop", ok: false, error.reason,
                    hint: "Install libgcrypt20: DPoP sessions cannot sign the proofs their tokens need without it.")
            ]
        }
    }
}
