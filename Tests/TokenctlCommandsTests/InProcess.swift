import Foundation
import TokenctlCommands
import TokenctlEssentials

/// What a command run in-process printed and how it ended.
struct InProcessResult: CustomStringConvertible {
    var status: ExitStatus
    var stdout: String
    var stderr: String

    var description: String {
        "exit \(status.rawValue)\nstdout: \(stdout.debugDescription)\nstderr: \(stderr.debugDescription)"
    }
}

/// Run `tokenctl ARGUMENTS` in this process through `Engine.run`, with standard input, output
/// and error on private files (not pipes: a command that prints more than a pipe holds would
/// block the test that runs it).
func tokenctl(_ arguments: String..., stdin: String = "") async throws -> InProcessResult {
    try await tokenctlArguments(arguments, stdin: stdin)
}

func tokenctlArguments(_ arguments: [String], stdin: String = "") async throws -> InProcessResult {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "tokenctl-inprocess-" + UUID().uuidString)
    try FileManager.default.createDirectory(
        at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    defer { try? FileManager.default.removeItem(at: directory) }
    let paths = ["in", "out", "err"].map { directory.appendingPathComponent($0).path }
    try Data(stdin.utf8).write(to: URL(fileURLWithPath: paths[0]))
    let input = open(paths[0], O_RDONLY | O_CLOEXEC)
    let output = open(paths[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    let error = open(paths[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    defer { for descriptor in [input, output, error] where descriptor >= 0 { close(descriptor) } }
    let status = await Engine.run(arguments, io: IOStreams(input: input, output: output, error: error))
    return InProcessResult(
        status: status, stdout: try String(contentsOfFile: paths[1], encoding: .utf8),
        stderr: try String(contentsOfFile: paths[2], encoding: .utf8))
}
