import TokenctlCore

/// A command's standard input, output and error, as file descriptors, and whether each is a
/// terminal (gh's `iostreams.IOStreams`). Every command reads and writes through the one value
/// `IOStreams.current`, which `Engine.run` sets for the command's task from its `EngineEnvironment`: the process's
/// own descriptors in `tokenctl-engine`, pipes when a test runs a command in-process.
public struct IOStreams: Sendable, Equatable {
    public var input: Int32
    public var output: Int32
    public var error: Int32

    public init(input: Int32 = 0, output: Int32 = 1, error: Int32 = 2) {
        self.input = input
        self.output = output
        self.error = error
    }

    /// The process's standard input, output and error.
    public static let standard = IOStreams()

    /// The streams of the command running in this task.
    @TaskLocal public static var current = IOStreams.standard

    public var inputIsTerminal: Bool { Terminal.isTerminal(input) }
    public var outputIsTerminal: Bool { Terminal.isTerminal(output) }
    public var errorIsTerminal: Bool { Terminal.isTerminal(error) }
}
