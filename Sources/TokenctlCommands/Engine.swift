// The engine's entry: parse argv, run the command it names (Commands), map errors to exit statuses.
import TokenctlCore
import TokenctlEssentials

/// Every command of tokenctl behind the front: what `tokenctl-engine` runs with the user's argv.
public enum Engine {
    /// Run the command `arguments` (argv without the program name) names, reading and writing
    /// through `io`, and say how it ended.
    public static func run(_ arguments: [String], io: IOStreams = .standard) async -> ExitStatus {
        await IOStreams.$current.withValue(io) { await runCommand(arguments) }
    }

    private static func runCommand(_ arguments: [String]) async -> ExitStatus {
        if arguments == [DetachedRefresh.childArgument] {
            // A refresh started by another engine process, outliving it (`DetachedRefresh`).
            return ExitStatus(rawValue: await DetachedRefresh.serveChild()) ?? .failure
        }
        let startedAt = TokenctlCore.Clock.system.now()
        let invocation: Invocation
        do { invocation = try Commands.parser.parse(arguments) } catch { return Output.usageError(error) }
        let formatter = HelpFormatter(toolName: "tokenctl")

        let command: any EngineCommand.Type
        switch invocation.action {
        case .version:
            Output.standardOutput("tokenctl \(toolVersion) (engine \(enginePath))\n")
            return .success
        case .topLevelHelp:
            Output.standardOutput(
                formatter.topLevelHelp(
                    overview:
                        "OAuth 2.0 / OpenID Connect access tokens for shells, scripts and cron, kept in the Secret Service.",
                    commands: Commands.all.map { $0.spec },
                    footer:
                        "  See 'tokenctl help <command>' or 'man tokenctl-<command>' for detailed help, 'tokenctl help providers' for the provider presets, and tokenctl(1) for exit statuses and files."
                ))
            return .success
        case .commandHelp(let name):
            Output.standardOutput(formatter.help(for: Commands.parser.command(named: name)!))
            return .success
        case .topicHelp:
            Output.standardOutput(ProvidersHelp.text) // the one topic
            return .success
        case .run(let name):
            guard let named = Commands.named(name) else { return .failure } // the parser knows only these
            command = named
        }
        let commandName = command.spec.name

        let profileText =
            invocation.profileName ?? Environment.process[EnvironmentSwitches.profile.description]
            ?? ProfileName.default.rawValue
        guard let profile = ProfileName(rawValue: profileText) else {
            return Output.usageError(
                UsageError(
                    "Invalid profile name '\(profileText)': use 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'.",
                    command: commandName))
        }
        let paths: Paths
        do { paths = try Paths.resolve() } catch {
            Output.report(TokenctlError(.configuration, error.description))
            return .configuration
        }
        let timeoutOption = invocation.options.value(SharedCommandSpecs.timeout)
        let timeout: Double
        if let timeoutOption {
            // Under a second cannot hold a lock wait, a round trip and a keyring write: a refresh
            // sent and then abandoned may leave the server's rotation unseen.
            guard let value = Double(timeoutOption), value.isFinite, value >= 1, value <= 3600 else {
                return Output.usageError(
                    UsageError(
                        "Invalid value '\(timeoutOption.prefix(40))' for '--timeout': expected seconds between 1 and 3600.",
                        command: commandName))
            }
            timeout = value
        } else {
            timeout = command.defaultTimeout
        }
        let context = CommandContext(
            options: invocation.options, profile: profile,
            profileChosen: invocation.profileName != nil
                || !(Environment.process[EnvironmentSwitches.profile.description] ?? "").isEmpty,
            verbose: invocation.verbose, paths: paths, timeout: timeout,
            deadline: command.hasDeadline(invocation.options) ? Deadline(startedAt + timeout) : nil)

        do {
            return try await command.run(context)
        } catch let error as UsageError {
            return Output.usageError(error)
        } catch let error as TokenctlError {
            Output.report(error)
            return error.exitStatus
        } catch {
            Output.standardError("Error: \(error)\n")
            return .failure
        }
    }
}
