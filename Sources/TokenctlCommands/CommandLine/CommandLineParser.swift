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
        var scan = Scan(parser: self, arguments: arguments)
        var failure: UsageError?
        ArgumentSyntax.scan(
            argv, takesValue: { name in scan.option(named: Scan.text(name)).map { !$0.isFlag } ?? false }
        ) {
            index, item in
            do throws(UsageError) {
                switch item {
                case .endOfOptions:
                    scan.sawEndOfOptions = true
                    return .proceed
                case .operand(let pointer):
                    return try scan.operand(at: index, pointer)
                case .option(let name, let value, let inline):
                    return try scan.option(Scan.text(name), value: value, inline: inline)
                }
            } catch {
                failure = error
                return .stop
            }
        }
        if let failure { throw failure }
        if let early = scan.early { return early }
        var invocation = scan.invocation
        if let command = scan.command {
            invocation.action = scan.helpRequested ? .commandHelp(command.name) : .run(command.name)
        } else {
            // No command (`tokenctl`, `tokenctl --profile x`): show the top-level help.
            invocation.action = .topLevelHelp
        }
        return invocation
    }

    /// What the words read so far have said: the command, its options, whether help was asked
    /// for, and an invocation that ends the reading early (`--version`, `help COMMAND`).
    private struct Scan {
        let parser: CommandLineParser
        let arguments: [String]
        var invocation = Invocation(action: .topLevelHelp, options: ParsedOptions(), profileName: nil, verbose: false)
        var command: CommandSpec?
        var helpRequested = false
        var early: Invocation?
        var sawEndOfOptions = false

        init(parser: CommandLineParser, arguments: [String]) {
            self.parser = parser
            self.arguments = arguments
        }

        static func text(_ bytes: ArgumentSyntax.Bytes) -> String { String(decoding: bytes, as: UTF8.self) }

        /// The options allowed where the reading stands: the command's and the global ones
        /// (`--version` only before a command).
        var allowedOptions: [OptionSpec] {
            (command?.options ?? []) + GlobalOptions.all + (command == nil ? [GlobalOptions.version] : [])
        }

        /// The option spelled `name` among those allowed where it stands, if any.
        func option(named name: String) -> OptionSpec? {
            allowedOptions.first { $0.names.contains(name) }
        }

        /// A word that is not an option: the command (or `help`), else one of its arguments.
        mutating func operand(at index: Int, _ pointer: UnsafePointer<CChar>) throws(UsageError)
            -> ArgumentSyntax.Next
        {
            let argument = arguments[index]
            guard let command else {
                if argument == "help" && !sawEndOfOptions {
                    // `tokenctl help [COMMAND]` (after `--`, `help` is a command name like any other).
                    early = try parser.help(Array(arguments[(index + 1)...]), invocation)
                    return .stop
                }
                guard let found = parser.command(named: String(cString: pointer)) else {
                    throw parser.unknownCommand(argument)
                }
                command = found
                return .proceed
            }
            invocation.options.arguments.append(argument)
            if invocation.options.arguments.count > command.maximumArguments {
                throw UsageError("Unexpected argument '\(argument)'.", command: command.name)
            }
            return command.takesCommandLine ? .operandsOnly : .proceed
        }

        /// An option spelled `spelled`, with its value (`inline`: given as `--name=value`).
        mutating func option(_ spelled: String, value: UnsafePointer<CChar>?, inline: Bool) throws(UsageError)
            -> ArgumentSyntax.Next
        {
            if spelled == GlobalOptions.version.key && command == nil {
                early = parser.withAction(.version, invocation)
                return .stop
            }
            if GlobalOptions.help.names.contains(spelled) {
                helpRequested = true
                return .proceed
            }
            guard let option = option(named: spelled) else { throw unknownOption(spelled) }
            if option.isFlag {
                guard !inline else { throw UsageError("'\(spelled)' does not take a value.", command: command?.name) }
                if option == GlobalOptions.verbose {
                    invocation.verbose = true
                } else {
                    invocation.options.insertFlag(option.key)
                }
                return .proceed
            }
            guard let value else {
                throw UsageError("Missing value for '\(spelled) <\(option.valueName!)>'.", command: command?.name)
            }
            if option == GlobalOptions.profile {
                guard invocation.profileName == nil else {
                    throw UsageError("'--profile' was given more than once.", command: command?.name)
                }
                invocation.profileName = String(cString: value)
                return .proceed
            }
            guard invocation.options.value(option.key) == nil else {
                throw UsageError("'\(option.key)' was given more than once.", command: command?.name)
            }
            invocation.options.setValue(String(cString: value), for: option.key)
            return .proceed
        }

        /// An option not allowed where it stands, with the closest one that is.
        func unknownOption(_ spelled: String) -> UsageError {
            let spellings = allowedOptions.flatMap(\.names).filter { $0.hasPrefix("--") }
            let hint = closestMatch(to: spelled, in: spellings).map { " Did you mean '\($0)'?" } ?? ""
            guard let command else { return UsageError("Unknown option '\(spelled)'.\(hint)", command: nil) }
            return UsageError("Unknown option '\(spelled)' for '\(command.name)'.\(hint)", command: command.name)
        }
    }

    /// `tokenctl help [COMMAND]`: `rest` is what follows `help`.
    fileprivate func help(_ rest: [String], _ invocation: Invocation) throws(UsageError) -> Invocation {
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

    fileprivate func withAction(_ action: Invocation.Action, _ invocation: Invocation) -> Invocation {
        var copy = invocation
        copy.action = action
        return copy
    }

    fileprivate func unknownCommand(_ name: String) -> UsageError {
        let hint = closestMatch(to: name, in: commands.map(\.name)).map { " Did you mean '\($0)'?" } ?? ""
        return UsageError("Unknown command '\(name)'.\(hint)", command: nil)
    }
}
