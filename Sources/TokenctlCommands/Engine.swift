// The engine's entry: parse argv, run the command it names (Commands), map errors to exit statuses.
import TokenctlCore
import TokenctlEssentials

/// Every command of tokenctl behind the front: what `tokenctl-engine` runs with the user's argv.
public enum Engine {
    /// Run the command `arguments` (argv without the program name) names in the process's own
    /// environment, reading and writing through `io`, and say how it ended.
    public static func run(_ arguments: [String], io: IOStreams = .standard) async -> ExitStatus {
        await run(arguments, environment: .live(io: io))
    }

    /// Run the command `arguments` names with everything it takes from outside from
    /// `environment` (a test's doubles, or `EngineEnvironment.live`), and say how it ended.
    public static func run(_ arguments: [String], environment: EngineEnvironment) async -> ExitStatus {
        let io = environment.io
        if arguments == [DetachedRefresh.childArgument] {
            // A refresh started by another engine process, outliving it (`DetachedRefresh`).
            return ExitStatus(rawValue: await DetachedRefresh.serveChild()) ?? .failure
        }
        let startedAt = environment.clock.now()
        let invocation: Invocation
        do { invocation = try Commands.parser.parse(arguments) } catch { return Output.usageError(error, to: io) }
        let command: any EngineCommand.Type
        switch invocation.action {
        case .run(let name):
            guard let named = Commands.named(name) else { return .failure } // the parser knows only these
            command = named
        default:
            return help(invocation.action, environment)
        }
        let context: CommandContext
        do throws(NotRun) {
            context = try self.context(for: command, invocation, environment, startedAt: startedAt)
        } catch { return error.status }

        do {
            return try await command.run(context)
        } catch let error as UsageError {
            return Output.usageError(error, to: io)
        } catch let error as TokenctlError {
            Output.report(error, to: io)
            return error.exitStatus
        } catch {
            io.standardError("Error: \(error)\n")
            return .failure
        }
    }

    /// `--version` and the help texts, on stdout.
    private static func help(_ action: Invocation.Action, _ environment: EngineEnvironment) -> ExitStatus {
        let io = environment.io
        let formatter = HelpFormatter(toolName: "tokenctl")
        switch action {
        case .version:
            io.standardOutput("tokenctl \(toolVersion) (engine \(environment.enginePath))\n")
        case .topLevelHelp:
            io.standardOutput(
                formatter.topLevelHelp(
                    overview:
                        "OAuth 2.0 / OpenID Connect access tokens for shells, scripts and cron, kept in the Secret Service.",
                    commands: Commands.all.map { $0.spec },
                    footer:
                        "  See 'tokenctl help <command>' or 'man tokenctl-<command>' for detailed help, 'tokenctl help providers' for the provider presets, and tokenctl(1) for exit statuses and files."
                ))
        case .commandHelp(let name):
            io.standardOutput(formatter.help(for: Commands.parser.command(named: name)!))
        case .topicHelp:
            io.standardOutput(ProvidersHelp.text) // the one topic
        case .run:
            return .failure // runs, not help
        }
        return .success
    }

    /// The exit status of a command line that cannot run (a usage or configuration error).
    private struct NotRun: Error {
        let status: ExitStatus
        init(_ status: ExitStatus) { self.status = status }
    }

    /// What `command` runs with: the profile (--profile, TOKENCTL_PROFILE, the default), the
    /// paths, --timeout and the deadline it makes; the exit status when one cannot be had.
    private static func context(
        for command: any EngineCommand.Type, _ invocation: Invocation, _ environment: EngineEnvironment,
        startedAt: Double
    ) throws(NotRun) -> CommandContext {
        let commandName = command.spec.name
        let io = environment.io
        let profileText = invocation.profileName ?? environment.profileVariable ?? ProfileName.default.rawValue
        guard let profile = ProfileName(rawValue: profileText) else {
            throw NotRun(
                Output.usageError(
                    UsageError(
                        "Invalid profile name '\(profileText)': use 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'.",
                        command: commandName), to: io))
        }
        let paths: Paths
        switch environment.paths() {
        case .success(let resolved): paths = resolved
        case .failure(let error):
            Output.report(TokenctlError(.configuration, error.description), to: io)
            throw NotRun(.configuration)
        }
        let timeout = try self.timeout(invocation.options, command, io)
        return CommandContext(
            options: invocation.options, profile: profile,
            profileChosen: invocation.profileName != nil || environment.profileVariable != nil,
            verbose: invocation.verbose, paths: paths, timeout: timeout,
            deadline: command.hasDeadline(invocation.options) ? Deadline(startedAt + timeout) : nil,
            environment: environment)
    }

    /// `--timeout` checked, or the command's default.
    private static func timeout(_ options: ParsedOptions, _ command: any EngineCommand.Type, _ io: IOStreams)
        throws(NotRun) -> Double
    {
        guard let text = options.value(SharedCommandSpecs.timeout) else { return command.defaultTimeout }
        // Under a second cannot hold a lock wait, a round trip and a keyring write: a refresh
        // sent and then abandoned may leave the server's rotation unseen.
        guard let value = Double(text), value.isFinite, value >= 1, value <= 3600 else {
            throw NotRun(
                Output.usageError(
                    UsageError(
                        "Invalid value '\(text.prefix(40))' for '--timeout': expected seconds between 1 and 3600.",
                        command: command.spec.name), to: io))
        }
        return value
    }
}
