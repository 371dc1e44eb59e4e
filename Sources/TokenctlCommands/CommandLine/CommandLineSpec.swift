import TokenctlCore
import TokenctlEssentials

/// One option of a command: a flag, or an option taking a value (`--opt value`, `--opt=value`).
public struct OptionSpec: Sendable, Equatable {
    /// Every spelling, long name last (`["-h", "--help"]`). The last name is the key in `ParsedOptions`.
    public let names: [String]
    /// The value's placeholder in help (`seconds`); `nil` for a flag.
    public let valueName: String?
    public let help: String
    /// The values the option accepts, when they are a fixed list (`--format raw|header|…`): the
    /// command checks them and shell completion offers them.
    public let choices: [String]
    /// What the value is, for shell completion: a file, a profile name, or anything.
    public let valueKind: ValueKind

    public enum ValueKind: Sendable, Equatable { case text, file, profile }

    public init(
        _ names: String..., value: String? = nil, choices: [String] = [], valueKind: ValueKind = .text, help: String
    ) {
        self.names = names
        self.valueName = value
        self.help = help
        self.choices = choices
        self.valueKind = valueKind
    }

    public var key: String { names.last! }
    public var isFlag: Bool { valueName == nil }
}

/// A command's description: what help prints and what the parser accepts.
public struct CommandSpec: Sendable {
    public let name: String
    public let abstract: String
    /// The usage line after `tokenctl [--profile <name>] NAME`.
    public let usage: String
    public let options: [OptionSpec]
    /// How many positional arguments the command takes at most.
    public let maximumArguments: Int
    /// `(placeholder, help)` for each positional argument.
    public let arguments: [(String, String)]
    public let discussion: String?
    /// The first positional argument starts a command line of its own (`exec -- COMMAND ARGS…`):
    /// it and everything after it are arguments, never tokenctl's options.
    public let takesCommandLine: Bool
    /// The values the first positional argument accepts, when they are a fixed list
    /// (`schedule install|remove|status`): the command checks them and completion offers them.
    public let argumentChoices: [String]

    public init(
        name: String, abstract: String, usage: String, options: [OptionSpec],
        arguments: [(String, String)] = [], argumentChoices: [String] = [], discussion: String? = nil,
        takesCommandLine: Bool = false, maximumArguments: Int? = nil
    ) {
        self.argumentChoices = argumentChoices
        self.name = name
        self.abstract = abstract
        self.usage = usage
        self.options = options
        self.arguments = arguments
        self.maximumArguments = takesCommandLine ? Int.max : maximumArguments ?? arguments.count
        self.discussion = discussion
        self.takesCommandLine = takesCommandLine
    }
}

/// Options shared by every command.
public enum GlobalOptions {
    public static let profile = OptionSpec(
        "--profile", value: "name", valueKind: .profile,
        help: "The profile to use (default: $TOKENCTL_PROFILE, else 'default').")
    public static let verbose = OptionSpec(
        "-v", "--verbose", help: "Explain what tokenctl does on stderr (never a secret).")
    public static let help = OptionSpec("-h", "--help", help: "Show help information.")
    public static let version = OptionSpec("--version", help: "Show the version.")

    public static let all = [profile, verbose, help]
}

/// What the user asked for on the command line.
///
/// Kept in small arrays rather than a Dictionary and a Set: the static front parses argv on
/// every `token` hit, and hashing Strings pages in about 1 MB of the Swift runtime.
public struct ParsedOptions: Sendable, Equatable {
    /// Option values by key, in the order given (each key at most once).
    public private(set) var valueList: [(key: String, value: String)] = []
    /// Flags given, each once.
    public private(set) var flagList: [String] = []
    public var arguments: [String] = []

    public init() {}

    public func value(_ key: String) -> String? { valueList.first { $0.key == key }?.value }
    public func has(_ key: String) -> Bool { flagList.contains(key) }

    /// Set an option's value (replacing an earlier one).
    public mutating func setValue(_ value: String, for key: String) {
        valueList.removeAll { $0.key == key }
        valueList.append((key, value))
    }

    public mutating func insertFlag(_ key: String) {
        if !flagList.contains(key) { flagList.append(key) }
    }

    public var values: [String: String] {
        Dictionary(valueList.map { ($0.key, $0.value) }, uniquingKeysWith: { $1 })
    }

    public var flags: Set<String> { Set(flagList) }

    public static func == (lhs: ParsedOptions, rhs: ParsedOptions) -> Bool {
        lhs.arguments == rhs.arguments && lhs.flagList.count == rhs.flagList.count
            && lhs.valueList.count == rhs.valueList.count
            && lhs.flagList.allSatisfy(rhs.flagList.contains)
            && lhs.valueList.allSatisfy { rhs.value($0.key) == $0.value }
    }
}

/// A bad command line: exit status 64 (EX_USAGE).
public struct UsageError: Error, Equatable, CustomStringConvertible {
    public let message: String
    /// The command whose usage to print, or `nil` for the top level.
    public let command: String?

    public init(_ message: String, command: String?) {
        self.message = message
        self.command = command
    }

    public var description: String { message }
}

/// The parsed command line.
public struct Invocation: Sendable, Equatable {
    public enum Action: Sendable, Equatable {
        /// Print the top-level help.
        case topLevelHelp
        /// Print the version.
        case version
        /// Print one command's help.
        case commandHelp(String)
        /// Print a help topic that is not a command (`help providers`).
        case topicHelp(String)
        /// Run a command.
        case run(String)
    }

    public var action: Action
    public var options: ParsedOptions
    public var profileName: String?
    public var verbose: Bool
}
