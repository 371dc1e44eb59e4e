import Foundation
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials

// Commands run in this process through `Engine.run`: their standard input, output and error on
// private files (not pipes: a command that prints more than a pipe holds would block the test
// that runs it), with the process's own environment or a test's (`TestEngine`).

/// What a command run in-process printed and how it ended.
public struct InProcessResult: CustomStringConvertible, Sendable {
    public var status: ExitStatus
    public var stdout: String
    public var stderr: String

    public var description: String {
        "exit \(status.rawValue)\nstdout: \(stdout.debugDescription)\nstderr: \(stderr.debugDescription)"
    }
}

/// A command's standard input, output and error as three private files, read back when it ends.
public final class TestStreams: @unchecked Sendable {
    private let directory: URL
    private let descriptors: [Int32]
    public let io: IOStreams

    public init(stdin: String = "") throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "tokenctl-inprocess-" + UUID().uuidString)
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try Data(stdin.utf8).write(to: directory.appendingPathComponent("in"))
        let input = open(directory.appendingPathComponent("in").path, O_RDONLY | O_CLOEXEC)
        let output = open(directory.appendingPathComponent("out").path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        let error = open(directory.appendingPathComponent("err").path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        descriptors = [input, output, error]
        io = IOStreams(input: input, output: output, error: error)
    }

    /// What stderr holds so far.
    public var standardError: String {
        (try? String(contentsOf: directory.appendingPathComponent("err"), encoding: .utf8)) ?? ""
    }

    /// Close the files and read what the command printed.
    public func finish(_ status: ExitStatus) throws -> InProcessResult {
        for descriptor in descriptors where descriptor >= 0 { close(descriptor) }
        defer { try? FileManager.default.removeItem(at: directory) }
        return InProcessResult(
            status: status, stdout: try String(contentsOf: directory.appendingPathComponent("out"), encoding: .utf8),
            stderr: try String(contentsOf: directory.appendingPathComponent("err"), encoding: .utf8))
    }
}

/// Run `tokenctl ARGUMENTS` in this process with the process's own environment (help, usage
/// errors: what needs neither a session nor a private user).
public func tokenctl(_ arguments: String..., stdin: String = "") async throws -> InProcessResult {
    try await tokenctlArguments(arguments, stdin: stdin)
}

public func tokenctlArguments(_ arguments: [String], stdin: String = "") async throws -> InProcessResult {
    try await runInProcess(arguments, stdin: stdin) { .live(io: $0) }
}

/// Run `arguments` through `Engine.run` with the environment `environment` makes for the streams.
public func runInProcess(
    _ arguments: [String], stdin: String = "", environment: (IOStreams) -> EngineEnvironment
) async throws -> InProcessResult {
    let streams = try TestStreams(stdin: stdin)
    let status = await Engine.run(arguments, environment: environment(streams.io))
    return try streams.finish(status)
}

/// A command run in-process in a task of its own, its output in private files that the test
/// reads while it runs (a device login waits for the test to approve its code).
public final class BackgroundCommand: @unchecked Sendable {
    private let streams: TestStreams
    private let task: Task<ExitStatus, Never>

    public init(_ arguments: [String], stdin: String = "", environment: (IOStreams) -> EngineEnvironment) throws {
        let streams = try TestStreams(stdin: stdin)
        self.streams = streams
        let made = environment(streams.io)
        task = Task { await Engine.run(arguments, environment: made) }
    }

    public var standardError: String { streams.standardError }

    /// What stderr holds once it contains `text` (at most 30 s).
    public func waitForStandardError(containing text: String) async throws -> String {
        for _ in 0..<600 {
            let current = standardError
            if current.contains(text) { return current }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw HarnessError("stderr never showed \(text.debugDescription): \(standardError.debugDescription)")
    }

    public func wait() async throws -> InProcessResult {
        try streams.finish(await task.value)
    }
}

/// A JSON object printed on stdout, decoded.
public func jsonObject(_ text: String) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
        throw HarnessError("not a JSON object: \(text)")
    }
    return object
}

/// A fresh profile name for one test: profiles, their keyring items and hot-cache keys never meet.
public func uniqueProfile(_ stem: String) -> String {
    stem + "-" + String(UUID().uuidString.prefix(8)).lowercased()
}
