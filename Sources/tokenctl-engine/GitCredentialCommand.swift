import TokenctlCore
import TokenctlEssentials

/// git's credential helper protocol (gitcredentials(7), git-credential(1)): `get` answers with a
/// valid access token as the password (or, when git offers `capability[]=authtype`, as a Bearer
/// credential, git 2.46+); `erase` (the token was rejected) drops the cached access token so the
/// next `get` refreshes; `store` does nothing. Configured per URL:
///
///     git config --global credential.https://git.example.com.helper '!tokenctl --profile work git-credential'
enum GitCredentialCommand: EngineCommand {
    static let spec = CommandSpec(
        name: "git-credential",
        abstract: "Act as a git credential helper: hand git a valid access token.",
        usage: "get|store|erase [--min-ttl <seconds>] [--scope <scopes>] [--audience <audience>] [--resource <uris>]",
        options: [
            OptionSpec("--min-ttl", value: "seconds", help: "The token handed to git stays valid at least this long (default: 60; capped at half its lifetime)."),
        ] + SharedCommandSpecs.target + [Commands.timeout],
        arguments: [("action", "get, store or erase (git gives it).")],
        argumentChoices: ["get", "store", "erase"],
        discussion: """
        Configure it per URL, for example:
          git config --global credential.https://git.example.com.helper '!tokenctl --profile work git-credential'
        get answers username (the profile's git_username, default oauth2), password (a valid
        access token) and password_expiry_utc; when git offers capability[]=authtype (git 2.46+),
        authtype=Bearer and credential instead. It never answers for plain http to another host
        than the loopback. Without a session it prints nothing and exits 0, so git asks the next
        helper, and says why on stderr. erase (git's "this credential was rejected") makes the
        next get refresh; it never logs out. store does nothing. With --scope, --audience or
        --resource, git is given a token for just that (see 'tokenctl help token').
        """)

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        guard let action = context.options.arguments.first else {
            throw UsageError("Missing the action: get, store or erase (git gives it).", command: spec.name)
        }
        guard spec.argumentChoices.contains(action) else {
            throw UsageError("Unknown action '\(Output.printable(String(action.prefix(40))))': expected get, store or erase.", command: spec.name)
        }
        let minimumTimeToLive = try context.seconds("--min-ttl", command: spec.name, default: AccessTokenLifetime.defaultMinimumTimeToLive)
        // git writes the attributes, then closes the pipe: always read them (a helper that
        // leaves them unread can make git die of SIGPIPE).
        let attributes = try Attributes(StandardInput.lines(timeout: context.timeout, what: "git credential request"))
        switch action {
        case "get": return try await get(context, attributes, minimumTimeToLive: minimumTimeToLive)
        case "erase": return try await erase(context, attributes)
        default: return .success
        }
    }

    /// `key=value` lines; repeated keys (`capability[]`) keep every value.
    struct Attributes {
        var values: [(key: String, value: String)] = []

        init(_ lines: [String]) {
            for line in lines {
                guard let equals = line.firstIndex(of: "=") else { continue }
                values.append((String(line[..<equals]), String(line[line.index(after: equals)...])))
            }
        }

        subscript(_ key: String) -> String? { values.first { $0.key == key }?.value }
        func all(_ key: String) -> [String] { values.filter { $0.key == key }.map(\.value) }
    }

    /// Whether `host` (git's `host`, maybe with a port) is the loopback.
    static func isLoopback(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("[") {
            name = String(name.dropFirst().prefix { $0 != "]" })
        } else if let colon = name.lastIndex(of: ":") {
            name = String(name[..<colon])
        }
        return name == "localhost" || name == "::1" || name.hasPrefix("127.")
    }

    static func get(_ context: CommandContext, _ attributes: Attributes, minimumTimeToLive: Double) async throws -> ExitStatus {
        let host = attributes["host"] ?? ""
        if attributes["protocol"] == "http", !isLoopback(host) {
            Output.standardError("tokenctl: not sending a token over plain http to \(Output.printable(host)); use https (git asks the next helper).\n")
            return .success
        }
        let target = try context.target(command: spec.name)
        let served: TokenctlService.ServedToken
        do {
            served = try await context.service().token(context.profile, target: target, minimumTimeToLive: minimumTimeToLive, force: false, consultHotCache: true)
        } catch {
            guard error.kind == .loginRequired || error.kind == .configuration else { throw error }
            // Nothing on stdout: git goes on to the next helper, or asks.
            Output.standardError("tokenctl: no token for git: \(Output.sentence(error.message))" + (error.hint.map { " \($0)" } ?? "") + "\n")
            return .success
        }
        let tokenSet = served.tokenSet
        var answer: [String] = []
        if attributes.all("capability[]").contains("authtype") {
            answer += ["capability[]=authtype", "authtype=\(tokenSet.tokenType == "DPoP" ? "DPoP" : "Bearer")", "credential=\(tokenSet.accessToken)", "ephemeral=1"]
        } else {
            answer += ["username=\(served.configuration.gitUsername ?? "oauth2")", "password=\(tokenSet.accessToken)"]
        }
        if let expiry = tokenSet.expiresAt {
            answer.append("password_expiry_utc=\(Int(saturating: expiry.rounded(.down)))")
        }
        context.verboseLog("gave git the access token of '\(context.profile)' for \(Output.printable(host)), valid for \(Output.duration(tokenSet.timeLeft(at: TokenctlCore.Clock.system.now())))")
        Output.standardOutput(answer.joined(separator: "\n") + "\n")
        return .success
    }

    static func erase(_ context: CommandContext, _ attributes: Attributes) async throws -> ExitStatus {
        let rejected = attributes["credential"] ?? attributes["password"]
        let target = try context.target(command: spec.name)
        do {
            let discarded = try await context.service().discardAccessToken(context.profile, target: target, ifAccessTokenIs: rejected)
            context.verboseLog(discarded
                ? "git says the access token of '\(context.profile)' was rejected: the next get refreshes"
                : "git rejected a token that is no longer the session's: nothing to do")
        } catch {
            guard error.kind == .loginRequired || error.kind == .configuration else { throw error }
            context.verboseLog("nothing to erase: \(error.message)")
        }
        return .success
    }
}
