import TokenctlEssentials

/// Each profile's session, when the Secret Service can be used.
struct SessionCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        guard context.storeUsable else {
            return context.configured.map { name, _ in
                DoctorFinding(
                    "session '\(name)'", ok: false, "not checked: the Secret Service cannot be used (see above)")
            }
        }
        return context.configured.map { name, _ in Self.finding(name, service: context.service) }
    }

    static func finding(_ name: ProfileName, service: TokenctlService) -> DoctorFinding {
        let status: SessionStatus
        do { status = try service.status(name) } catch {
            return DoctorFinding("session '\(name)'", ok: false, error.message, hint: error.hint)
        }
        switch status.state {
        case .authenticated, .expiredRefreshable:
            return DoctorFinding(
                "session '\(name)'", ok: true,
                "\(status.state.rawValue)" + (status.subject.map { " as \($0)" } ?? ""))
        case .signedOut:
            return DoctorFinding(
                "session '\(name)'", ok: false,
                "signed out (no session for \(status.issuer), client \(status.clientID))",
                hint: "Run '\(tokenctl: name, .login([]))'.")
        case .ended:
            return DoctorFinding(
                "session '\(name)'", ok: false,
                "ended by the server (\(status.endedReason ?? "terminal failure"))",
                hint: "Run '\(tokenctl: name, .login([]))'.")
        case .storeUnavailable:
            return DoctorFinding(
                "session '\(name)'", ok: false, status.storeProblem ?? "store unavailable",
                hint: status.storeHint)
        }
    }
}

/// Sessions in the Secret Service that no profile uses, when it can be used.
struct KeyringResidueCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        guard context.storeUsable, let orphans = try? context.service.orphanedSessions(), !orphans.isEmpty else {
            return []
        }
        return [
            DoctorFinding(
                "keyring residue", level: .warn, "\(orphans.count) orphaned session(s) no profile uses",
                hint:
                    "See '\(tokenctl: .default, .status([.all]))'; remove them with '\(tokenctl: .default, .logout([.orphans]))'."
            )
        ]
    }
}
