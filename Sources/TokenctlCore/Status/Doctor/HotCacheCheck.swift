import TokenctlEssentials

/// The hot cache: either state works; the check says which one `token` uses.
struct HotCacheCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        switch context.service.hotCache?.state ?? .none {
        case .kernelKeyring:
            return [DoctorFinding("hot cache", ok: true, "kernel user keyring (token hits need no D-Bus)")]
        case .none:
            return [
                DoctorFinding(
                    "hot cache", level: .warn,
                    "none: the kernel keyring is unavailable here, so every 'token' reads the Secret Service")
            ]
        }
    }
}
