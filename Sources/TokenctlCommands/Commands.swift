import TokenctlEssentials

/// One engine command: the specification that help prints and the parser accepts, and the code
/// that runs it, in one type (in the spirit of swift-argument-parser, hand-written). Adding a
/// command is one file with one such type, plus its line in `Commands.all`.
protocol EngineCommand {
    static var spec: CommandSpec { get }
    /// Whether `--timeout` bounds the whole command (from its start: the lock wait, every HTTP
    /// attempt and every Secret Service call end by then). False for commands that wait for a
    /// person or run until interrupted.
    static func hasDeadline(_ options: ParsedOptions) -> Bool
    /// `--timeout` when it is not given, in seconds (30; `doctor` 10).
    static var defaultTimeout: Double { get }
    static func run(_ context: CommandContext) async throws -> ExitStatus
}

extension EngineCommand {
    static func hasDeadline(_ options: ParsedOptions) -> Bool { true }
    static var defaultTimeout: Double { 30 }
}

/// The engine's commands, in the order help lists them.
enum Commands {
    static let timeout = SharedCommandSpecs.timeout

    nonisolated(unsafe) static let all: [any EngineCommand.Type] = [ // immutable: metatypes only
        LoginCommand.self, TokenCommand.self, RefreshCommand.self, LogoutCommand.self, StatusCommand.self,
        EventsCommand.self,
        DoctorCommand.self, ScheduleCommand.self, GitCredentialCommand.self, ExecCommand.self, ForwardCommand.self,
        KeyCommand.self, KeyringCommand.self, ProxyPasswordCommand.self, CompletionCommand.self,
    ]

    static let parser = CommandLineParser(toolName: "tokenctl", commands: all.map { $0.spec }, topics: ["providers"])

    static func named(_ name: String) -> (any EngineCommand.Type)? {
        all.first { $0.spec.name == name }
    }
}
