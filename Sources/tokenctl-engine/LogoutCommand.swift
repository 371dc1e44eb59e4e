import TokenctlCore
import TokenctlEssentials

enum LogoutCommand {
    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let service = context.service()
        if context.options.has("--orphans") && context.options.has("--all") {
            throw UsageError("'--orphans' and '--all' exclude each other.", command: "logout")
        }
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
            let report = try await service.logout(name, revoke: !context.options.has("--no-revoke"))
            switch report.revocation {
            case .failure(let error)?:
                Output.standardError("Error: profile '\(name)': \(error.message); the local session was removed anyway.\n")
                status = RefreshCommand.worse(status, error.exitStatus)
            case .success?:
                Output.standardError("Logged out profile '\(name)'; the server revoked its refresh token.\n")
            case nil:
                Output.standardError(report.removed
                    ? "Logged out profile '\(name)' (not revoked at the server).\n"
                    : "Profile '\(name)' was not logged in.\n")
            }
        }
        return status
    }
}
