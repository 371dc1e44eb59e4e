import TokenctlCore
import TokenctlEssentials

enum StatusCommand {
    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let service = context.service()
        let all = context.options.has("--all")
        let names = all ? try service.profiles.all() : [context.profile]
        let statuses = try names.map { name throws(TokenctlError) in try service.status(name) }
        let now = Clock.system.now()
        if context.options.has("--json") {
            let objects = statuses.map { json($0, now: now) }
            Output.standardOutput((all ? "[" + objects.joined(separator: ",") + "]" : objects.first ?? "null") + "\n")
        } else {
            if statuses.isEmpty { Output.standardError("No profiles configured.\n") }
            Output.standardOutput(statuses.map { human($0) }.joined(separator: "\n"))
        }
        if all {
            if statuses.contains(where: { $0.state == .storeUnavailable }) { return .unavailable }
            return statuses.allSatisfy({ $0.exitStatus == .success }) ? .success : .loginRequired
        }
        return statuses.first?.exitStatus ?? .success
    }

    static func human(_ status: SessionStatus) -> String {
        var lines = ["Profile \(status.profile): \(status.state.rawValue)", "  issuer:        \(status.issuer)", "  client id:     \(status.clientID)"]
        switch status.state {
        case .storeUnavailable:
            lines.append("  problem:       \(status.storeProblem ?? "unknown")")
        case .signedOut:
            lines.append("  Run 'tokenctl --profile \(status.profile) login' to sign in.")
        case .authenticated, .expiredRefreshable:
            if let subject = status.subject { lines.append("  subject:       \(subject)") }
            if let left = status.accessTokenTimeLeft {
                lines.append("  access token:  " + (left > 0 ? "valid for \(Output.duration(left))" : "expired (refreshes on next use)"))
            }
            lines.append("  refresh token: \(status.hasRefreshToken ? "present" : "none (log in again when the access token expires)")")
            if let scope = status.scope { lines.append("  scope:         \(scope)") }
            if let last = status.lastRefreshAt { lines.append("  last refresh:  \(Output.timestamp(last))") }
            else if let obtained = status.obtainedAt { lines.append("  logged in:     \(Output.timestamp(obtained))") }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func json(_ status: SessionStatus, now: Double) -> String {
        var fields = [
            "\"profile\":\(Output.jsonString(status.profile.rawValue))",
            "\"state\":\(Output.jsonString(status.state.rawValue))",
            "\"issuer\":\(Output.jsonString(status.issuer))",
            "\"client_id\":\(Output.jsonString(status.clientID))",
            "\"subject\":\(status.subject.map(Output.jsonString) ?? "null")",
            "\"scope\":\(status.scope.map(Output.jsonString) ?? "null")",
            "\"access_token_expires_in\":\(status.accessTokenTimeLeft.map { String(Int($0.rounded(.down))) } ?? "null")",
            "\"refresh_token_present\":\(status.hasRefreshToken)",
            "\"obtained_at\":\(status.obtainedAt.map { Output.jsonString(Output.timestamp($0)) } ?? "null")",
            "\"last_refresh_at\":\(status.lastRefreshAt.map { Output.jsonString(Output.timestamp($0)) } ?? "null")",
        ]
        fields.append("\"cache\":\(Output.jsonString(status.cache))")
        if let problem = status.storeProblem { fields.append("\"store_problem\":\(Output.jsonString(problem))") }
        return "{" + fields.joined(separator: ",") + "}"
    }
}
