import TokenctlCore
import TokenctlEssentials

enum StatusCommand: EngineCommand {
    static let allOption = OptionSpec("--all", help: "Show every configured profile, and orphaned keyring sessions.")
    static let jsonOption = OptionSpec(
        "--json", help: "Print JSON on stdout (an array with --all); schema in tokenctl-status(1).")
    static let watchOption = OptionSpec(
        "--watch", help: "Print the state, then one line per change (login, refresh, logout, expiry) until interrupted."
    )
    static let offlineOption = OptionSpec(
        "--offline", help: "Never contact the server: the signature verdict comes from the cached keys only.")

    static let spec = CommandSpec(
        name: "status",
        abstract: "Show the session state (never a token).",
        usage: "[--all] [--json] [--watch] [--offline] [--timeout <seconds>]",
        options: [allOption, jsonOption, watchOption, offlineOption, Commands.timeout],
        discussion:
            "States: authenticated, expired-refreshable, signed-out, ended (the server ended the session), store-unavailable. Exit status: 0 authenticated or expired-refreshable, 77 signed out or ended, 69 the Secret Service cannot be read, 78 not configured."
    )

    /// `status`' options, checked.
    struct Options: Equatable, Sendable {
        var all: Bool
        var json: Bool
        var watch: Bool
        var offline: Bool

        init(_ parsed: ParsedOptions) throws(UsageError) {
            (all, json, watch, offline) = (
                parsed.has(allOption), parsed.has(jsonOption), parsed.has(watchOption), parsed.has(offlineOption)
            )
            if watch && all { throw UsageError("'--watch' follows one profile; drop '--all'.", command: "status") }
        }
    }

    /// --watch runs until interrupted.
    static func hasDeadline(_ options: ParsedOptions) -> Bool { !options.has(watchOption) }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = try Options(context.options)
        // A well-known socket nothing serves (left by an ended ssh -R) means the local session.
        if !options.all, !options.watch, let socket = context.servedForwardSocket {
            return forwardedStatus(context, socket: socket, json: options.json)
        }
        let service = context.service()
        let json = options.json
        if options.watch {
            return await watch(service, context.profile, json: json, context)
        }
        let all = options.all
        let names = all ? try service.profiles.all() : [context.profile]
        let offline = options.offline
        let statuses = try await service.statuses(names, offline: offline)
        // Residue: items no profile uses any more (listed with --all, never used for tokens).
        let orphans =
            all && !statuses.contains(where: { $0.state == .storeUnavailable })
            ? (try? service.orphanedSessions()) ?? [] : []
        if json {
            let now = context.clock.now()
            let objects =
                statuses.map { self.json($0, credentials: StatusCredentials.gather(service, $0.profile, now: now)) }
                + orphans.map(orphanJSON)
            context.io.standardOutput(
                (all ? "[" + objects.joined(separator: ",") + "]" : objects.first ?? "null") + "\n")
        } else {
            if statuses.isEmpty { context.io.standardError("No profiles configured.\n") }
            context.io.standardOutput(
                statuses.map {
                    human($0) + (StatusCredentials.gather(service, $0.profile, now: context.clock.now())?.text ?? "")
                }.joined(
                    separator: "\n"))
            if !orphans.isEmpty {
                var text = "\nOrphaned sessions in the keyring (not used; remove with 'tokenctl logout --orphans'):\n"
                for orphan in orphans {
                    text += "  profile \(orphan.profile), issuer \(orphan.issuer), client id \(orphan.clientID)\n"
                }
                context.io.standardOutput(text)
            }
        }
        if all {
            if statuses.contains(where: { $0.state == .storeUnavailable }) { return .unavailable }
            return statuses.allSatisfy({ $0.exitStatus == .success }) ? .success : .loginRequired
        }
        return statuses.first?.exitStatus ?? .success
    }

    /// A forwarded session's state: what the serving side answers now (never the token).
    static func forwardedStatus(_ context: CommandContext, socket: String, json: Bool) -> ExitStatus {
        let now = context.clock.now()
        var fields: [(String, JSONText.Value)] = [
            ("profile", .string(context.profile.rawValue)), ("forwarded", .bool(true)), ("socket", .string(socket)),
        ]
        var lines = ["Profile: \(context.profile)", "Forwarded over: \(socket)"]
        let status: ExitStatus
        do {
            let served = try ForwardedSession(socketPath: socket, hotCache: nil, clock: context.clock).token(
                context.profile, target: .session, minimumTimeToLive: AccessTokenLifetime.defaultMinimumTimeToLive,
                force: false, command: "status", timeout: context.timeout)
            let host = served.servedBy ?? "the serving side"
            lines.insert("State: authenticated (forwarded from \(host))", at: 1)
            lines.append(
                "Access token: \(served.tokenSet.tokenType), \(Output.validity(served.tokenSet.timeLeft(at: now)))")
            fields += [
                ("state", .string("authenticated")), ("served_by", .string(host)),
                ("token_type", .string(served.tokenSet.tokenType)),
            ]
            if let session = served.servingSession {
                fields.append(("serving_session", .string(session)))
            }
            if let expiry = served.tokenSet.expiresAt {
                fields.append(("access_token_expires_at", .string(Output.timestamp(expiry))))
            }
            status = .success
        } catch {
            lines.insert("State: unavailable (forwarded): \(Output.printable(error.message))", at: 1)
            if let hint = error.hint { lines.append("Hint: \(Output.printable(hint.text))") }
            fields += [
                ("state", .string("forward-failed")), ("error", .string(error.message)),
                ("exit_status", .number(Int(error.exitStatus.rawValue))),
            ]
            status = error.exitStatus
        }
        context.io.standardOutput(json ? JSONText.object(fields) + "\n" : lines.joined(separator: "\n") + "\n")
        return status
    }

    /// The current state, then one line per change, until interrupted.
    static func watch(_ service: TokenctlService, _ profile: ProfileName, json: Bool, _ context: CommandContext) async
        -> ExitStatus
    {
        var last = ExitStatus.success
        for await status in service.watch(profile) {
            let time = Output.timestamp(context.clock.now())
            context.io.standardOutput(json ? self.json(status) + "\n" : "\(time) \(oneLine(status))\n")
            last = status.exitStatus
        }
        return last
    }

    static func oneLine(_ status: SessionStatus) -> String {
        var text = "\(status.profile) \(status.state.rawValue)"
        if let subject = status.subject { text += " as \(subject)" }
        if status.state == .authenticated, let left = status.accessTokenTimeLeft {
            text += ", access token \(Output.validity(left))"
        }
        if let reason = status.endedReason { text += " (\(reason))" }
        if let problem = status.storeProblem { text += ": " + Output.sentence(problem) }
        if let hint = status.storeHint { text += " " + hint.text }
        if status.pendingWriteSince != nil { text += " (rotation pending in the kernel keyring)" }
        // Claims, issuers and errors come from outside: no escape sequence reaches a terminal.
        return Output.printable(text)
    }

    static func human(_ status: SessionStatus) -> String {
        var lines = [
            "Profile \(status.profile): \(status.state.rawValue)", "  issuer:        \(status.issuer)",
            "  client id:     \(status.clientID)",
        ]
        if let grant = status.grant {
            let clientAuth = status.clientAuth.map {
                $0 == ClientAuthenticationMethod.publicClient.rawValue ? "\($0) (a public client)" : $0
            }
            lines.append("  machine:       \(grant) grant, \(clientAuth ?? "no client authentication")")
        } else if let clientAuth = status.clientAuth {
            lines.append("  client auth:   \(clientAuth)")
        }
        switch status.state {
        case .storeUnavailable:
            lines.append("  problem:       " + Output.sentence(status.storeProblem ?? "unknown"))
            if let hint = status.storeHint { lines.append("  hint:          \(hint.text)") }
        case .signedOut:
            lines.append("  Run '\(CommandHint.login(status.profile))' to sign in.")
        case .ended:
            lines.append("  The server ended the session (\(status.endedReason ?? "terminal failure")).")
            lines.append("  Run '\(CommandHint.login(status.profile))' to sign in again.")
        case .authenticated, .expiredRefreshable:
            lines += sessionLines(status)
        }
        if let since = status.pendingWriteSince {
            lines.append(
                "  pending write: since \(Output.timestamp(since)), the rotated session is held in memory (kernel keyring) until the Secret Service takes it"
                    + (status.pendingWriteReason.map { "; last error: " + Output.printable($0) } ?? ""))
        }
        // Claims, issuers and errors come from outside: no escape sequence reaches a terminal.
        return lines.map(Output.printable).joined(separator: "\n") + "\n"
    }

    /// What `status` says of a live session: its subject and claims, the signature, the tokens,
    /// DPoP, the targeted tokens, when it was last refreshed and where it is stored.
    static func sessionLines(_ status: SessionStatus) -> [String] {
        var lines: [String] = []
        if let subject = status.subject { lines.append("  subject:       \(subject)") }
        for (name, value) in status.claims where name != "sub" {
            lines.append("  \(Output.padded(name + ":", to: 14)) \(display(value))")
        }
        lines.append("  signature:     " + signatureLine(status))
        if let left = status.accessTokenTimeLeft {
            let validity =
                left == .infinity
                ? "no expiry stated (served until a server rejects it)"
                : left > 0 ? "valid for \(Output.duration(left))" : "expired (refreshes on next use)"
            lines.append("  access token:  " + validity + (status.accessTokenFormat.map { " (\($0))" } ?? ""))
        }
        lines.append("  refresh token: \(refreshTokenLine(status))")
        if let scope = status.scope { lines.append("  scope:         \(scope)") }
        if let dpop = status.dpop {
            let jkt = status.dpopThumbprint.map { " (jkt \($0))" } ?? ""
            lines.append(
                "  dpop:          "
                    + (dpop == "bound"
                        ? "bound\(jkt)"
                        : dpop == "bearer"
                            ? "bearer" : "key\(jkt), but the server issued Bearer tokens (dpop_allow_bearer)"))
        }
        for (target, left) in status.targetedTokens {
            lines.append(
                "  token for:     \(target): "
                    + (left > 0 ? "valid for \(Output.duration(left))" : "expired (refreshes on next use)"))
        }
        if let last = status.lastRefreshAt {
            lines.append("  last refresh:  \(Output.timestamp(last))")
        } else if let obtained = status.obtainedAt {
            lines.append("  logged in:     \(Output.timestamp(obtained))")
        }
        lines.append(
            "  store:         "
                + (status.store == "kernel-keyring"
                    ? "kernel-keyring (a machine's token, cached in the kernel keyring only)" : status.store))
        if status.scopeNarrowedByServer, case (let problem?, let hint?) = problemAndHint(status) {
            lines.append("  warning:       " + Output.sentence(problem))
            lines.append("  hint:          \(hint)")
        }
        return lines
    }

    /// The refresh token's line: present (and until when, when the server said), or none.
    static func refreshTokenLine(_ status: SessionStatus) -> String {
        let noRefreshToken =
            status.accessTokenTimeLeft == .infinity
            ? "none (log in again when a server rejects the access token)"
            : "none (log in again when the access token expires)"
        var refresh =
            status.hasRefreshToken
            ? "present"
            : status.grant != nil ? "none (a machine: a new access token is asked for when due)" : noRefreshToken
        if status.hasRefreshToken, let left = status.refreshTokenTimeLeft {
            // The server said how long it lives (GitHub App tokens: about six months).
            refresh =
                left > 0
                ? "present, expires in \(Output.duration(left))"
                : "expired \(Output.duration(-left)) ago (run '\(CommandHint.login(status.profile))' to sign in again)"
        }
        return refresh
    }

    /// The verdict, and which token it is about when that is not the ID token.
    static func signatureLine(_ status: SessionStatus) -> String {
        guard let verdict = status.signature else {
            return status.accessTokenFormat == "opaque"
                ? "none to check (no ID token; the access token is opaque)" : "none to check"
        }
        return verdict.rawValue + (status.signatureSource == "access_token" ? " (access token)" : "")
    }

    static func display(_ value: JSONValue) -> String {
        switch value {
        case .string(let text): Output.printable(text)
        case .number(let number): Int(exactly: number).map(String.init) ?? String(number)
        case .bool(let flag): String(flag)
        case .array(let items): items.map(display).joined(separator: ", ")
        case .object: "{…}"
        case .null: "null"
        }
    }

    /// What stands in the way of `token` for this profile, and the command or step that helps;
    /// nil when nothing does.
    static func problemAndHint(_ status: SessionStatus) -> (problem: String?, hint: String?) {
        switch status.state {
        case .storeUnavailable: (status.storeProblem, status.storeHint?.text)
        case .signedOut:
            ("profile '\(status.profile)' is not logged in", "Run '\(CommandHint.login(status.profile))' to sign in.")
        case .ended:
            (
                "the server ended the session (\(status.endedReason ?? "terminal failure"))",
                "Run '\(CommandHint.login(status.profile))' to sign in again."
            )
        case .authenticated, .expiredRefreshable:
            status.scopeNarrowedByServer
                ? (
                    "the server narrowed this session's scope on a refresh (some servers tie the refresh token of a 'token --scope' refresh to that scope)",
                    "Run '\(CommandHint.login(status.profile))' to sign in with the full scope again."
                )
                : (nil, nil)
        }
    }

    /// The stable JSON schema documented in tokenctl-status(1), STATUS JSON.
    static func json(_ status: SessionStatus, credentials: StatusCredentials? = nil) -> String {
        var fields: [(String, JSONText.Value)] =
            [
                ("profile", .string(status.profile.rawValue)),
                ("state", .string(status.state.rawValue)),
                ("issuer", .string(status.issuer)),
                ("client_id", .string(status.clientID)),
                ("subject", .string(status.subject)),
                (
                    "claims",
                    status.claims.isEmpty
                        ? .null
                        : JSONText.Value(raw: JSONText.object(status.claims.map { ($0.name, jsonValue($0.value)) }))
                ),
                ("claims_source", .string(status.claimsSource)),
                ("access_token_format", .string(status.accessTokenFormat)),
                ("signature", .string(status.signature?.rawValue)),
                // null also for a token with no stated expiry (status says "no expiry stated").
                (
                    "access_token_expires_in",
                    .number(
                        status.accessTokenTimeLeft.flatMap { $0.isFinite ? Int(saturating: $0.rounded(.down)) : nil })
                ),
                ("refresh_token_present", status.state == .storeUnavailable ? .null : .bool(status.hasRefreshToken)),
                ("scope", .string(status.scope)),
                ("dpop", .string(status.dpop)),
                ("dpop_jkt", .string(status.dpopThumbprint)),
                (
                    "targeted_tokens",
                    .array(
                        status.targetedTokens.map { target, left in
                            JSONText.Value(
                                raw: JSONText.object([
                                    ("scope", .string(target.scopeField)), ("audience", .string(target.audience)),
                                    ("resource", .string(target.resourceField)),
                                    ("expires_in", .number(Int(saturating: left.rounded(.down)))),
                                ]))
                        })
                ),
                ("obtained_at", .string(status.obtainedAt.map(Output.timestamp))),
                ("last_refresh_at", .string(status.lastRefreshAt.map(Output.timestamp))),
                ("ended_reason", .string(status.endedReason)),
                ("store", .string(status.store)),
                ("cache", .string(status.cache)),
                ("grant", .string(status.grant)),
                ("client_auth", .string(status.clientAuth)),
            ] + StatusCredentials.jsonFields(credentials)
        // Every key in every state (null when it does not apply): a stable schema for scripts.
        fields.append(("store_problem", .string(status.storeProblem)))
        fields.append(("store_hint", .string(status.storeHint?.text)))
        // What is wrong and what to run, as separate fields, whatever the state.
        let (problem, hint) = problemAndHint(status)
        fields.append(("problem", .string(problem)))
        fields.append(("hint", .string(hint)))
        fields.append(("pending_write", pendingWriteJSON(status)))
        return JSONText.object(fields)
    }

    /// STATUS JSON's `pending_write`: since when and why, or null.
    static func pendingWriteJSON(_ status: SessionStatus) -> JSONText.Value {
        let pending = status.pendingWriteSince.map { since in
            JSONText.Value(
                raw: JSONText.object([
                    ("since", .string(Output.timestamp(since))), ("reason", .string(status.pendingWriteReason)),
                ]))
        }
        return pending ?? .null
    }

    static func jsonValue(_ value: JSONValue) -> JSONText.Value {
        switch value {
        case .string(let text): .string(text)
        case .number(let number):
            JSONText.Value(raw: number == number.rounded() && abs(number) < 1e15 ? String(Int(number)) : String(number))
        case .bool(let flag): .bool(flag)
        case .array(let items): .array(items.map(jsonValue))
        case .object(let object):
            JSONText.Value(
                raw: JSONText.object(object.sorted { $0.key < $1.key }.map { ($0.key, jsonValue($0.value)) }))
        case .null: .null
        }
    }

    static func orphanJSON(_ identity: SessionIdentity) -> String {
        JSONText.object([
            ("profile", .string(identity.profile.rawValue)), ("state", .string("orphaned")),
            ("issuer", .string(identity.issuer)), ("client_id", .string(identity.clientID)),
        ])
    }
}
