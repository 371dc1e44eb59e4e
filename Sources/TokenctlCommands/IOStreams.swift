import TokenctlCore
import TokenctlEssentials

/// A command's standard input, output and error, as file descriptors, and whether each is a
/// terminal (gh's `iostreams.IOStreams`). Every command reads and writes through the value its
/// `EngineEnvironment` holds, passed to it (`CommandContext.io`), never through a global: the
/// process's own descriptors in `tokenctl-engine`, files when a test runs a command in-process.
/// Code that runs on a thread or task of its own (the forward listener's report, a login's
/// countdown, the Secret Service's prompt notice) writes to the same streams.
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

    public var inputIsTerminal: Bool { Terminal.isTerminal(input) }
    public var outputIsTerminal: Bool { Terminal.isTerminal(output) }
    public var errorIsTerminal: Bool { Terminal.isTerminal(error) }

    /// Write `text` to standard output (the product only), all of it.
    public func standardOutput(_ text: String) { Descriptor.writeAll(output, text) }

    /// Write `text` to standard error (everything for humans), all of it.
    public func standardError(_ text: String) { Descriptor.writeAll(error, text) }
}
