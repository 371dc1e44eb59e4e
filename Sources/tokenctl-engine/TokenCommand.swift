import TokenctlCore
import TokenctlEssentials

enum TokenCommand: EngineCommand {
    /// Shared with the front, which parses `token` hits with exactly the engine's options.
    static let spec = SharedCommandSpecs.token

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let minimumTimeToLive = try context.seconds("--min-ttl", command: "token", default: AccessTokenLifetime.defaultMinimumTimeToLive)
        let format = context.options.value("--format") ?? "raw"
        guard spec.options.first(where: { $0.key == "--format" })!.choices.contains(format) else {
            throw UsageError("Invalid value '\(format)' for '--format': expected raw, header, json or exec-credential.", command: "token")
        }
        // The front serves raw, header and json hits itself; exec-credential comes here first.
        let target = try context.target(command: "token")
        let served = try await context.service().token(
            context.profile, target: target, minimumTimeToLive: minimumTimeToLive, force: context.options.has("--force"),
            consultHotCache: format == "exec-credential")
        let tokenSet = served.tokenSet
        if served.fromAnotherProcessRefresh {
            context.verboseLog("waited for another process's refresh of '\(context.profile)'; serving the token it cached")
        }
        let now = Clock.system.now()
        context.verboseLog("access token for '\(context.profile)'\(target.isSession ? "" : " (\(target))") valid for \(Output.duration(tokenSet.timeLeft(at: now)))")
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
        case "exec-credential":
            Output.standardOutput(execCredential(tokenSet, minimumTimeToLive: minimumTimeToLive) + "\n")
        default:
            Output.standardOutput(tokenSet.accessToken + "\n")
        }
        return .success
    }

    /// A kubectl exec credential (client.authentication.k8s.io, v1 or the v1beta1 that
    /// KUBERNETES_EXEC_INFO asks for). It expires when tokenctl would refresh (the token's
    /// expiry minus the min-ttl margin), so kubectl asks again in time.
    static func execCredential(_ tokenSet: TokenSet, minimumTimeToLive: Double) -> String {
        let group = "client.authentication.k8s.io/"
        var apiVersion = group + "v1"
        if let info = Environment.process["KUBERNETES_EXEC_INFO"],
           let requested = try? FlatJSONObject(parsing: Array(info.utf8)).string("apiVersion"),
           requested == group + "v1beta1" {
            apiVersion = requested
        }
        var status = [("token", JSONText.Value.string(tokenSet.accessToken))]
        if let expiry = tokenSet.expiresAt {
            let margin = tokenSet.refreshMargin(minimumTimeToLive: minimumTimeToLive)
            status.append(("expirationTimestamp", .string(Timestamp.iso8601((expiry - margin).rounded(.down)))))
        }
        return JSONText.object([
            ("apiVersion", .string(apiVersion)), ("kind", .string("ExecCredential")),
            ("status", JSONText.Value(raw: JSONText.object(status))),
        ])
    }
}
