import TokenctlCore
import TokenctlEssentials

/// `tokenctl forward enable|disable|status|serve|listen`: hand out access tokens of chosen
/// profiles over a user-only socket to remote hosts (`ssh -R`) and containers, never a refresh
/// token. The client side is `token`, `exec`, `git-credential` and `status` with
/// TOKENCTL_FORWARD_SOCKET set (the front speaks the protocol itself for `token`).
enum ForwardCommand: EngineCommand {
    static let scopeOption = OptionSpec(
        "--scope", value: "scopes",
        help: "With enable: the most a remote may ask for (forward_scope); a request without a scope gets these.")
    static let audienceOption = OptionSpec(
        "--audience", value: "list",
        help: "With enable: the audiences and resource URIs a remote may name (forward_audience).")
    static let socketOption = OptionSpec(
        "--socket", value: "path",
        help: "With listen: the socket to serve (default: the runtime directory's tokenctl/forward.sock).")
    static let noUnitOption = OptionSpec(
        "--no-unit", help: "With enable: only mark the profiles; do not enable the systemd user socket.")

    enum Action: String, CaseIterable, Sendable {
        case enable, disable, status, serve, listen
    }

    static let spec = CommandSpec(
        name: "forward",
        abstract: "Share access tokens with remote hosts and containers over a socket (never the refresh token).",
        usage:
            "enable|disable|status|serve|listen [--scope <scopes>] [--audience <list>] [--socket <path>] [<profile>…]",
        options: [scopeOption, audienceOption, noUnitOption, socketOption, Commands.timeout],
        arguments: [
            (
                "action",
                "enable, disable, status, serve (for the socket unit: the socket systemd hands over) or listen."
            ),
            (
                "profile",
                "With enable or disable: the profiles (default: --profile, $TOKENCTL_PROFILE or 'default'; disable: all)."
            ),
        ],
        argumentChoices: Action.allCases.map(\.rawValue),
        discussion: """
            On the machine that holds the session: 'tokenctl forward enable' marks the profile as \
            forwarded (forward = true in its file) and enables the systemd user socket \
            tokenctl-forward.socket at $XDG_RUNTIME_DIR/tokenctl/forward.sock, whose first \
            connection starts one 'tokenctl forward serve' that serves every connection and exits \
            when idle; without a user manager, run 'tokenctl forward listen' (the same in the \
            foreground). A remote's forced refreshes refresh at most once per profile every 30 \
            seconds. Then: ssh -R \
            /run/user/REMOTE_UID/tokenctl-forward.sock:$XDG_RUNTIME_DIR/tokenctl/forward.sock HOST \
            (the remote sshd_config needs StreamLocalBindUnlink yes, or the socket file an earlier \
            connection left there makes the forward fail). \
            On the remote side (or in a container, with TOKENCTL_FORWARD_SOCKET naming the socket) \
            'tokenctl token', 'exec', 'git-credential' and 'status' use the forwarded session. \
            Anyone who can open the socket there (that user, and root) gets access tokens of the \
            forwarded profiles while the connection lasts; never a refresh token. Every hand-out \
            is a tokenForwarded event ('tokenctl events').
            """,
        maximumArguments: 65)

    /// listen and serve run until interrupted or bound themselves.
    static func hasDeadline(_ options: ParsedOptions) -> Bool { false }

    struct Options: Equatable, Sendable {
        var action: Action
        var profiles: [ProfileName]
        var scope: [String]?
        var audience: [String]?
        var enableUnit: Bool
        var socket: String?

        init(_ parsed: ParsedOptions) throws(UsageError) {
            let action = try parsed.action(Action.self, command: "forward")
            self.action = action
            profiles = []
            for name in parsed.arguments.dropFirst() {
                guard let profile = ProfileName(rawValue: name) else {
                    throw UsageError(
                        "Invalid profile name '\(Output.printable(String(name.prefix(64))))': use 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'.",
                        command: "forward")
                }
                profiles.append(profile)
            }
            if !profiles.isEmpty, action != .enable, action != .disable {
                throw UsageError("'forward \(action.rawValue)' takes no profile names.", command: "forward")
            }
            func words(_ option: OptionSpec) throws(UsageError) -> [String]? {
                guard let value = parsed.value(option) else { return nil }
                guard action == .enable else {
                    throw UsageError("'\(option.key)' applies to 'forward enable' only.", command: "forward")
                }
                let list = value.split(separator: " ").map(String.init)
                guard !list.isEmpty, list.count <= TokenTarget.maximumWords,
                    list.allSatisfy({
                        $0.utf8.count <= TokenTarget.maximumValueLength && $0.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
                    })
                else {
                    throw UsageError(
                        "Invalid value for '\(option.key)': expected up to \(TokenTarget.maximumWords) space-separated words of printable ASCII.",
                        command: "forward")
                }
                return list
            }
            scope = try words(scopeOption)
            audience = try words(audienceOption)
            enableUnit = !parsed.has(noUnitOption)
            if parsed.has(noUnitOption), action != .enable {
                throw UsageError("'--no-unit' applies to 'forward enable' only.", command: "forward")
            }
            socket = parsed.value(socketOption)
            if let socket {
                guard action == .listen else {
                    throw UsageError("'--socket' applies to 'forward listen' only.", command: "forward")
                }
                guard socket.hasPrefix("/"), socket.utf8.count < 108 else {
                    throw UsageError(
                        "Invalid value for '--socket': expected an absolute path of at most 107 bytes.",
                        command: "forward")
                }
            }
        }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = try Options(context.options)
        switch options.action {
        case .enable: return try enable(context, options)
        case .disable: return try disable(context, options)
        case .status: return status(context)
        case .serve: return await serve(context)
        case .listen: return try await listen(context, options)
        }
    }

    static func unit(_ context: CommandContext) -> ForwardSocketUnit {
        ForwardSocketUnit(
            executable: ScheduleCommand.schedule(context).executable, environment: context.variables,
            units: context.environment.userUnits)
    }

    // MARK: enable / disable

    static func enable(_ context: CommandContext, _ options: Options) throws -> ExitStatus {
        let repository = ProfileRepository(paths: context.paths)
        let names = options.profiles.isEmpty ? [context.profile] : options.profiles
        for name in names {
            var configuration = try repository.require(name)
            configuration.forward = true
            if let scope = options.scope { configuration.forwardScope = scope }
            if let audience = options.audience { configuration.forwardAudience = audience }
            try repository.save(configuration, as: name)
            var limits: [String] = []
            if let scope = configuration.forwardScope {
                limits.append("scope within '\(scope.joined(separator: " "))'")
            }
            if let audience = configuration.forwardAudience {
                limits.append("audience or resource within '\(audience.joined(separator: " "))'")
            }
            context.io.standardError(
                "Forwarding profile '\(name)'" + (limits.isEmpty ? "" : " (\(limits.joined(separator: ", ")))") + ".\n")
        }
        let socket = context.paths.forwardSocket
        guard options.enableUnit else {
            context.io.standardError("Serve the socket with 'tokenctl forward listen' (or the socket unit).\n")
            return .success
        }
        let unit = unit(context)
        if UnixSocket.isServed(socket) {
            context.io.standardError("The forward socket is already served: \(socket)\n")
        } else if unit.managerAvailable() {
            let description = try unit.enable()
            context.io.standardError("Enabled \(description).\nServing \(socket)\n")
        } else {
            context.io.standardError(
                "No systemd user manager answers ('systemctl --user'): serve the socket in the foreground with 'tokenctl forward listen' (e.g. in tmux or screen).\n"
            )
        }
        printForwardingHelp(socket: socket, to: context.io)
        return .success
    }

    static func printForwardingHelp(socket: String, to io: IOStreams) {
        io.standardError(
            """
            To use it from a remote host:  ssh -R /run/user/REMOTE_UID/\(ForwardProtocol.wellKnownName):\(socket) HOST
                                           (the remote host's sshd_config needs StreamLocalBindUnlink yes)
            In a container:                docker run --user "$(id -u)" -v \(socket):/run/tokenctl.sock -e TOKENCTL_FORWARD_SOCKET=/run/tokenctl.sock IMAGE tokenctl token

            """)
    }

    static func disable(_ context: CommandContext, _ options: Options) throws -> ExitStatus {
        let repository = ProfileRepository(paths: context.paths)
        let names =
            options.profiles.isEmpty ? try repository.all().sorted { $0.rawValue < $1.rawValue } : options.profiles
        var remaining = 0
        for name in try repository.all() {
            guard var configuration = try? repository.load(name), configuration.forward else { continue }
            guard names.contains(name) else {
                remaining += 1
                continue
            }
            configuration.forward = false
            configuration.forwardScope = nil
            configuration.forwardAudience = nil
            try repository.save(configuration, as: name)
            context.io.standardError("No longer forwarding profile '\(name)'.\n")
        }
        for name in options.profiles where (try? repository.load(name)) == nil {
            context.io.standardError("tokenctl: profile '\(name)' is not configured.\n")
        }
        if remaining == 0 {
            for line in unit(context).disable() {
                context.io.standardError(line.prefix(1).uppercased() + line.dropFirst() + ".\n")
            }
            context.io.standardError(
                "No profile is forwarded now; a 'tokenctl forward listen' still running refuses every request.\n")
        }
        return .success
    }

    // MARK: status

    static func status(_ context: CommandContext) -> ExitStatus {
        let repository = ProfileRepository(paths: context.paths)
        let forwarded = ((try? repository.all()) ?? []).sorted { $0.rawValue < $1.rawValue }.compactMap { name in
            (try? repository.load(name)).flatMap { $0 }.flatMap { $0.forward ? (name, $0) : nil }
        }
        var lines: [String] = []
        if let client = context.environment.forwardSocketSource?.path {
            lines.append("This machine gets its tokens from the forward socket \(client).")
        }
        if forwarded.isEmpty {
            lines.append("No profile is forwarded ('tokenctl forward enable' shares one).")
        } else {
            lines.append("Forwarded profiles:")
            for (name, configuration) in forwarded {
                var limits: [String] = []
                if let scope = configuration.forwardScope {
                    limits.append("forward_scope = \(scope.joined(separator: " "))")
                }
                if let audience = configuration.forwardAudience {
                    limits.append("forward_audience = \(audience.joined(separator: " "))")
                }
                lines.append("  \(name)" + (limits.isEmpty ? " (no limits)" : " (\(limits.joined(separator: "; ")))"))
            }
        }
        let socket = context.paths.forwardSocket
        let served = UnixSocket.isServed(socket)
        lines.append(
            "Socket: \(socket) (\(served ? "served" : UnixSocket.isSocketFile(socket) ? "not served: nothing accepts connections" : "absent"))"
        )
        if let state = unit(context).state() { lines.append("Socket unit: \(ForwardSocketUnit.socketName) \(state)") }
        let events = EventLog(stateDirectory: context.paths.stateDirectory).records(minimumSignificance: .medium)
            .filter { $0.event == .tokenForwarded || $0.event == .forwardRefused }.suffix(10)
        if events.isEmpty {
            lines.append("No hand-outs yet.")
        } else {
            lines.append("Recent hand-outs:")
            for record in events {
                lines.append(
                    "  \(Timestamp.iso8601(record.time)) \(record.event == .tokenForwarded ? "handed out" : "refused") \(record.profile): \(Output.printable(record.reason ?? ""))"
                )
            }
        }
        context.io.standardOutput(lines.joined(separator: "\n") + "\n")
        return forwarded.isEmpty || served ? .success : .unavailable
    }

    // MARK: serve / listen

    /// Under the socket unit (Accept=no): serve the listening socket systemd hands over
    /// (sd_listen_fds(3)), or a listening socket on standard input, in this one process until
    /// idle; a connected socket on standard input (a unit with Accept=yes that an earlier version
    /// wrote) gets its one answer.
    static func serve(_ context: CommandContext) async -> ExitStatus {
        let server = ForwardServer(service: context.service())
        let io = context.io
        var sockets = UnixSocket.socketsFromServiceManager()
        if sockets.isEmpty, UnixSocket.isListening(io.input) { sockets = [io.input] }
        guard !sockets.isEmpty else {
            switch await server.serve(connection: io.input, output: io.output) {
            case .notASocket:
                io.standardError(
                    "Error: 'tokenctl forward serve' serves the socket systemd hands it (tokenctl-forward.socket), and there is none here.\nRun 'tokenctl forward enable' to use the socket unit, or serve in the foreground with 'tokenctl forward listen'.\n"
                )
                return .usage
            case .handedOut:
                return .success
            case .refused(_, let reason):
                context.verboseLog("refused a forwarded request: \(reason)")
                return .success
            }
        }
        StopSignals.catchThem()
        let listener: ForwardListener
        do {
            listener = try ForwardListener(
                server: server, sockets: sockets, limits: .init(idleExit: idleExit(context.variables)),
                report: report(context))
        } catch {
            context.io.standardError("tokenctl: \(error.message)\n")
            return .failure
        }
        _ = await listener.run()
        return .success
    }

    /// TOKENCTL_FORWARD_IDLE_EXIT when it is whole seconds from 1 to 86400, else the default.
    static func idleExit(_ variables: Environment) -> Double {
        guard let text = variables[EnvironmentSwitches.forwardIdleExit], let seconds = Int(text),
            (1...86400).contains(seconds)
        else { return ForwardListener.unitIdleExit }
        return Double(seconds)
    }

    /// With --verbose, the serving loop's minute report on standard error (the journal).
    static func report(_ context: CommandContext) -> (@Sendable (String) -> Void)? {
        guard context.verbose else { return nil }
        let io = context.io
        return { line in io.standardError("tokenctl: " + line + "\n") }
    }

    static func listen(_ context: CommandContext, _ options: Options) async throws -> ExitStatus {
        let path = options.socket ?? context.paths.forwardSocket
        let listening = try UnixSocket.listen(at: path, makingPrivateDirectory: options.socket == nil)
        defer { UnixSocket.close(listening) }
        let identity = UnixSocket.fileIdentity(path)
        StopSignals.catchThem()
        // Every connection is served in this process (ForwardListener), as under the socket unit.
        let listener = try ForwardListener(
            server: ForwardServer(service: context.service()), sockets: [listening], report: report(context))
        context.io.standardError("tokenctl: serving forwarded tokens at \(path) (until interrupted)\n")
        _ = await listener.run()
        // Only our own socket: a new listener may have replaced it meanwhile.
        if let identity, let now = UnixSocket.fileIdentity(path), now == identity { UnixSocket.remove(path) }
        context.io.standardError("tokenctl: stopped serving \(path)\n")
        return .success
    }
}
