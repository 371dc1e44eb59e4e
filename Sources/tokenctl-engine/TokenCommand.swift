import TokenctlCore
import TokenctlEssentials

enum TokenCommand: EngineCommand {
    /// Shared with the front, which parses `token` hits with exactly the engine's options.
    static let spec = SharedCommandSpecs.token

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let minimumTimeToLive = try context.seconds("--min-ttl", command: "token", default: AccessTokenLifetime.defaultMinimumTimeToLive)
        let format = context.options.value("--format") ?? "raw"
        guard ["raw", "header", "json"].contains(format) else {
            throw UsageError("Invalid value '\(format)' for '--format': expected raw, header or json.", command: "token")
        }
        let served = try await context.service().token(
            context.profile, minimumTimeToLive: minimumTimeToLive, force: context.options.has("--force"))
        let tokenSet = served.tokenSet
        if served.fromAnotherProcessRefresh {
            context.verboseLog("waited for another process's refresh of '\(context.profile)'; serving the token it cached")
        }
        let now = Clock.system.now()
        context.verboseLog("access token for '\(context.profile)' valid for \(Output.duration(tokenSet.timeLeft(at: now)))")
        switch format {
        case "header":
            Output.standardOutput("Authorization: \(tokenSet.tokenType) \(tokenSet.accessToken)\n")
        case "json":
            var fields = [
                "\"access_token\":\(Output.jsonString(tokenSet.accessToken))",
                "\"token_type\":\(Output.jsonString(tokenSet.tokenType))",
            ]
            if let expiry = tokenSet.expiresAt {
                fields.append("\"expires_at\":\(Output.jsonString(Output.timestamp(expiry)))")
                fields.append("\"expires_in\":\(max(0, Int(saturating: expiry - now)))")
            }
            Output.standardOutput("{" + fields.joined(separator: ",") + "}\n")
        default:
            Output.standardOutput(tokenSet.accessToken + "\n")
        }
        return .success
    }
}
