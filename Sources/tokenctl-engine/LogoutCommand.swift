import TokenctlCore
import TokenctlEssentials

enum LogoutCommand {
    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let service = context.service()
        if context.options.has("--orphans") && context.options.has("--all") {
            throw UsageError("'--orphans' and '--all' exclude each other.", command: "logout")
        }
        if context.options.has("--orphans") && context.options.has("--forget") {
            throw UsageError("'--orphans' and '--forget' exclude each other ('--orphans' removes keyring items no profile uses).", command: "logout")
        }
        let forget = context.options.has("--forget")
        if context.options.has("--orphans") {
            let removed = try service.removeOrphanedSessions()
            for identity in removed {
                Output.standardError("Removed the orphaned session of profile '\(identity.profile)' (issuer \(identity.issuer), client id \(identity.clientID)).\n")
            }
            if removed.isEmpty { Output.standardError("No orphaned sessions.\n") }
            return .success
        }
        let names = context.options.has("--all") ? try service.profiles.all() : [context.profile]
        var status = ExitStatus.success
        for name in names {
            let report = try await service.logout(name, revoke: !context.options.has("--no-revoke"), forget: forget)
            switch report.revocation {
            case .failure(let error)?:
                // Honest: the session is gone here, not at the server.
                let token = report.revokedTokenType == "access_token" ? "access token" : "refresh token"
                let until = report.unrevokedTokenExpiresAt.map { "until \(Output.timestamp($0))" } ?? "until it expires"
                Output.standardError(
                    "Logged out profile '\(name)' here, but the server did not revoke its \(token): \(error.message). "
                    + "The \(token) may stay valid at the server \(until).\n")
                status = worse(status, .revocationFailed)
            case .success?:
                Output.standardError("Logged out profile '\(name)'; the server revoked its refresh token.\n")
            case nil:
                if report.removed {
                    Output.standardError("Logged out profile '\(name)' (not revoked at the server).\n")
                } else if !report.forgotten {
                    Output.standardError("Profile '\(name)' was not logged in.\n")
                }
            }
            if report.forgotten {
                Output.standardError("Removed profile '\(name)': its configuration and caches are gone.\n")
            }
        }
        return status
    }

    /// The first failure's status wins over success; a failed revocation (76) over nothing else.
    private static func worse(_ a: ExitStatus, _ b: ExitStatus) -> ExitStatus {
        a == .success ? b : a
    }
}
