import TokenctlCore
import TokenctlEssentials

/// git's credential helper protocol (gitcredentials(7), git-credential(1)): `get` answers with a
/// valid access token as the password (or, when git offers `capability[]=authtype`, as a Bearer
/// credential, git 2.46+); `erase` (the token was rejected) drops the cached access token so the
/// next `get` refreshes; `store` does nothing. Configured per URL:
///
///     git config --global credential.https://git.example.com.helper '!tokenctl --profile work git-credential'
enum GitCredentialCommand: EngineCommand {
    static let minimumTimeToLiveOption = OptionSpec(
        "--min-ttl", value: "seconds",
        help: "The token handed to git stays valid at least this long (default: 60; capped at half its lifetime).")

    static let spec = CommandSpec(
        name: "git-credential",
        abstract: "Act as a git credential helper: hand git a valid access token.",
        usage: "get|store|erase [--min-ttl <seconds>] [--scope <scopes>] [--audience <audience>] [--resource <uris>]",
        options: [minimumTimeToLiveOption] + SharedCommandSpecs.target + [Commands.timeout],
        arguments: [("action", "get, store or erase (git gives it).")],
        argumentChoices: Action.allCases.map(\.rawValue),
        discussion: """
            Configure it per URL, for example:
              git config --global credential.https://git.example.com.helper '!tokenctl --profile work git-credential'
            get answers username (the profile's git_username, default oauth2), password (a valid
            access token) and password_expiry_utc; when git offers capability[]=authtype (git 2.46+),
            authtype=Bearer and credential instead. It answers https requests, and plain http only
            to the loopback (127.0.0.0/8, [::1] or localhost, with or without a port; never a host
            that only starts like one). A request without protocol or host, for another protocol,
            or with a control character in a value gets no answer. Without an answer (or without a
            session) it prints nothing and exits 0, so git asks the next helper, and says why on
            stderr. erase (git's "this credential was rejected") makes the
            next get refresh; it never logs out. store does nothing. With --scope, --audience or
            --resource, git is given a token for just that (see 'tokenctl help token').
            """)

    /// What git asks for (gitcredentials(7)).
    enum Action: String, CaseIterable, Sendable {
        case get, store, erase
    }

    /// `git-credential`'s options and action, checked.
    struct Options: Equatable, Sendable {
        var action: Action
        var minimumTimeToLive: Double
        var target: TokenTarget

        init(_ parsed: ParsedOptions) throws(UsageError) {
            action = try parsed.action(
                Action.self, command: spec.name, wording: .named("action", note: " (git gives it)"))
            minimumTimeToLive = try parsed.seconds(
                minimumTimeToLiveOption, command: spec.name, default: AccessTokenLifetime.defaultMinimumTimeToLive)
            target = try parsed.target(command: spec.name)
        }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = try Options(context.options)
        // git writes the attributes, then closes the pipe: always read them (a helper that
        // leaves them unread can make git die of SIGPIPE).
        let attributes = try Attributes(
            StandardInput.lines(from: context.io, timeout: context.timeout, what: "git credential request"))
        switch options.action {
        case .get: return try await get(context, attributes, options)
        case .erase: return try await erase(context, attributes, options)
        case .store: return .success
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

    /// Why tokenctl does not answer this request, or nil when it may. git always sends a
    /// `protocol` and, for http and https, a `host`; never a control character in a value.
    /// Anything else did not come from git for an http(s) remote (git also asks helpers for
    /// `protocol=cert` passphrases and for mail servers): nothing is answered, and git asks the
    /// next helper. Plain http is answered only for the loopback (an IPv4 literal in
    /// 127.0.0.0/8, `[::1]` or `localhost`, with or without a port): anywhere else the token
    /// would cross the network in clear text.
    static func refusal(_ attributes: Attributes) -> String? {
        // A tab may stand in a WWW-Authenticate header (RFC 9110 §5.5) that git passes on.
        for (key, value) in attributes.values
        where value.unicodeScalars.contains(where: {
            ($0.value < 0x20 && !($0 == "\t" && key == "wwwauth[]")) || $0.value == 0x7F
        }) {
            return
                "the request's '\(Output.printable(String(key.prefix(40))))' has a control character, which git never sends"
        }
        guard let scheme = attributes["protocol"] else { return "the request names no protocol" }
        guard scheme == "https" || scheme == "http" else {
            return
                "tokenctl answers for https (and http to the loopback) only, not for '\(Output.printable(String(scheme.prefix(40))))'"
        }
        guard let host = attributes["host"], !host.isEmpty else { return "the request names no host" }
        if scheme == "http", !EndpointURL.isLoopbackAuthority(host) {
            return "not sending a token over plain http to \(Output.printable(String(host.prefix(100)))); use https"
        }
        return nil
    }

    static func get(_ context: CommandContext, _ attributes: Attributes, _ options: Options) async throws -> ExitStatus
    {
        let host = attributes["host"] ?? ""
        if let refusal = refusal(attributes) {
            // Nothing on stdout: git goes on to the next helper, or asks.
            context.io.standardError("tokenctl: no token for git: \(refusal) (git asks the next helper).\n")
            return .success
        }
        let served: (tokenSet: TokenSet, gitUsername: String?)
        do {
            served = try await context.handOutToken(
                target: options.target, minimumTimeToLive: options.minimumTimeToLive, command: "git-credential",
                needsGitUsername: true)
        } catch {
            guard error.kind == .loginRequired || error.kind == .configuration else { throw error }
            // Nothing on stdout: git goes on to the next helper, or asks.
            context.io.standardError(
                "tokenctl: no token for git: \(Output.sentence(error.message))" + (error.hint.map { " \($0)" } ?? "")
                    + "\n")
            return .success
        }
        let tokenSet = served.tokenSet
        var answer: [String] = []
        if attributes.all("capability[]").contains("authtype") {
            answer += [
                "capability[]=authtype", "authtype=\(tokenSet.tokenType == "DPoP" ? "DPoP" : "Bearer")",
                "credential=\(tokenSet.accessToken)", "ephemeral=1",
            ]
        } else {
            answer += ["username=\(served.gitUsername ?? "oauth2")", "password=\(tokenSet.accessToken)"]
        }
        if let expiry = tokenSet.expiresAt {
            answer.append("password_expiry_utc=\(Int(saturating: expiry.rounded(.down)))")
        }
        context.verboseLog(
            "gave git the access token of '\(context.profile)' for \(Output.printable(host)), \(Output.validity(tokenSet.timeLeft(at: context.clock.now())))"
        )
        context.io.standardOutput(answer.joined(separator: "\n") + "\n")
        return .success
    }

    static func erase(_ context: CommandContext, _ attributes: Attributes, _ options: Options) async throws
        -> ExitStatus
    {
        if let refusal = refusal(attributes) {
            context.verboseLog("nothing to erase: \(refusal)")
            return .success
        }
        let rejected = attributes["credential"] ?? attributes["password"]
        if let socket = context.servedForwardSocket {
            // The serving side keeps its session; only this machine's copy of the token goes.
            if let issuer = ForwardedSession(socketPath: socket, hotCache: nil, clock: context.clock).issuer {
                HotCache(environment: context.variables).invalidate(
                    profile: context.profile, issuer: issuer, clientID: ForwardClient.cacheClientID,
                    target: options.target)
            }
            context.verboseLog("git says the forwarded access token was rejected: the next get asks the serving side")
            return .success
        }
        do {
            let discarded = try await context.service().discardAccessToken(
                context.profile, target: options.target, ifAccessTokenIs: rejected)
            context.verboseLog(
                discarded
                    ? "git says the access token of '\(context.profile)' was rejected: the next get refreshes"
                    : "git rejected a token that is no longer the session's: nothing to do")
        } catch {
            guard error.kind == .loginRequired || error.kind == .configuration else { throw error }
            context.verboseLog("nothing to erase: \(error.message)")
        }
        return .success
    }
}
