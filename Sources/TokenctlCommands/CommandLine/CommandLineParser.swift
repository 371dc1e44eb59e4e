import TokenctlCore
import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The hand-written argv parser: global options, a command, its options.
///
/// Accepts `--opt value`, `--opt=value`, `--` (everything after is an argument), global
/// options before or after the command, `-h/--help` anywhere, `help COMMAND`, `--version`.
/// The words are read by `ArgumentSyntax`, the reader the front's `token` hit uses too; this
/// gives them their meaning (which options exist where, values, errors).
public struct CommandLineParser: Sendable {
    public let toolName: String
    public let commands: [CommandSpec]
    /// Help topics that are not commands (`help providers`).
    public let topics: [String]

    public init(toolName: String, commands: [CommandSpec], topics: [String] = []) {
        self.toolName = toolName
        self.commands = commands
        self.topics = topics
    }

    public func command(named name: String) -> CommandSpec? {
        commands.first { $0.name == name }
    }

    public func parse(_ arguments: [String]) throws(UsageError) -> Invocation {
        // The words as C strings for ArgumentSyntax, the reader the front's hit uses too.
        try ArgumentSyntax.withArgumentVector(arguments) { argv throws(UsageError) -> Invocation in
            try parse(arguments, argv)
        }
    }

    private func parse(_ arguments: [String], _ argv: UnsafeBufferPointer<UnsafeMutablePointer<CChar>?>)
        throws(UsageError) -> Invocation
    {
        var invocation = Invocation(action: .topLevelHelp, options: ParsedOptions(), profileName: nil, verbose: false)
        var command: CommandSpec?
        var helpRequested = false
        var failure: UsageError?
        var early: Invocation?
        var sawEndOfOptions = false

        func text(_ bytes: ArgumentSyntax.Bytes) -> String { String(decoding: bytes, as: UTF8.self) }
        func text(_ pointer: UnsafePointer<CChar>) -> String { String(cString: pointer) }
        /// The option spelled `name` among those allowed where it stands, if any.
        func option(named name: String) -> OptionSpec? {
            let candidates =
                (command?.options ?? []) + GlobalOptions.all + (command == nil ? [GlobalOptions.version] : [])
            return candidates.first { $0.names.contains(name) }
        }

        ArgumentSyntax.scan(argv, takesValue: { name in option(named: text(name)).map { !$0.isFlag } ?? false }) {
            index, item in
            do throws(UsageError) {
                switch item {
                case .endOfOptions:
                    sawEndOfOptions = true
                    return .proceed
                case .operand(let pointer):
                    let argument = arguments[index]
                    if command == nil {
                        if argument == "help" && !sawEndOfOptions {
                            // `tokenctl help [COMMAND]` (after `--`, `help` is a command name like any other).
                            early = try help(Array(arguments[(index + 1)...]), invocation)
                            return .stop
                        }
                        guard let found = self.command(named: text(pointer)) else { throw unknownCommand(argument) }
                        command = found
                        return .proceed
                    }
                    invocation.options.arguments.append(argument)
                    if invocation.options.arguments.count > command!.maximumArguments {
                        throw UsageError("Unexpected argument '\(argument)'.", command: command!.name)
                    }
                    return command!.takesCommandLine ? .operandsOnly : .proceed
                case .option(let nameBytes, let value, let inline):
                    let spelled = text(nameBytes)
                    if spelled == GlobalOptions.version.key && command == nil {
                        early = withAction(.version, invocation)
                        return .stop
                    }
                    if GlobalOptions.help.names.contains(spelled) {
                        helpRequested = true
                        return .proceed
                    }
                    guard let option = option(named: spelled) else {
                        let candidates =
                            (command?.options ?? []) + GlobalOptions.all
                            + (command == nil ? [GlobalOptions.version] : [])
                        let spellings = candidates.flatMap(\.names).filter { $0.hasPrefix("--") }
                        let hint = closestMatch(to: spelled, in: spellings).map { " Did you mean '\($0)'?" } ?? ""
                        if command == nil { throw UsageError("Unknown option '\(spelled)'.\(hint)", command: nil) }
                        throw UsageError(
                            "Unknown option '\(spelled)' for '\(command!.name)'.\(hint)", command: command!.name)
                    }
                    if option.isFlag {
                        guard !inline else {
                            throw UsageError("'\(spelled)' does not take a value.", command: command?.name)
                        }
                        if option == GlobalOptions.verbose {
                            invocation.verbose = true
                        } else {
                            invocation.options.insertFlag(option.key)
                        }
                        return .proceed
                    }
                    guard let value else {
                        throw UsageError(
                            "Missing value for '\(spelled) <\(option.valueName!)>'.", command: command?.name)
                    }
                    if option == GlobalOptions.profile {
                        guard invocation.profileName == nil else {
                            throw UsageError("'--profile' was given more than once.", command: command?.name)
                        }
                        invocation.profileName = text(value)
                        return .proceed
                    }
                    guard invocation.options.value(option.key) == nil else {
                        throw UsageError("'\(option.key)' was given more than once.", command: command?.name)
                    }
                    invocation.options.setValue(text(value), for: option.key)
                    return .proceed
                }
            } catch {
                failure = error
                return .stop
            }
        }
        if let failure { throw failure }
        if let early { return early }
        if let command {
            invocation.action = helpRequested ? .commandHelp(command.name) : .run(command.name)
        } else {
            // No command (`tokenctl`, `tokenctl --profile x`): show the top-level help.
            invocation.action = .topLevelHelp
        }
        return invocation
    }

    /// `tokenctl help [COMMAND]`: `rest` is what follows `help`.
    private func help(_ rest: [String], _ invocation: Invocation) throws(UsageError) -> Invocation {
        guard let topic = rest.first else { return withAction(.topLevelHelp, invocation) }
        if topic == "help" || GlobalOptions.help.names.contains(topic) {
            return withAction(.topLevelHelp, invocation)
        }
        guard rest.count == 1 else {
            throw UsageError("'help' takes one command name.", command: nil)
        }
        if topics.contains(topic) { return withAction(.topicHelp(topic), invocation) }
        guard self.command(named: topic) != nil else { throw unknownCommand(topic) }
        return withAction(.commandHelp(topic), invocation)
    }

    private func withAction(_ action: Invocation.Action, _ invocation: Invocation) -> Invocation {
        var copy = invocation
        copy.action = action
        return copy
    }

    private func unknownCommand(_ name: String) -> UsageError {
        let hint = closestMatch(to: name, in: commands.map(\.name)).map { " Did you mean '\($0)'?" } ?? ""
        return UsageError("Unknown command '\(name)'.\(hint)", command: nil)
    }
}
