import Foundation
import Testing

/// What `Scripts/test` provides: the built binary, a private session bus with an unlocked
/// gnome-keyring, and the test authorization server's script. End-to-end tests fail (not skip)
/// without it, so a broken harness can never pass silently.
public struct TestEnvironment: Sendable {
    public let binary: String
    public let authServerScript: String
    public let python: String
    public let keyringControl: String
    public let busAddress: String
    public let sharedRuntimeDirectory: String

    public static func require() throws -> TestEnvironment {
        let env = ProcessInfo.processInfo.environment
        guard env["TOKENCTL_TEST_ENV"] == "1", let binary = env["TOKENCTL_BINARY"],
            let script = env["TOKENCTL_AUTHSERVER_PY"],
            let bus = env["DBUS_SESSION_BUS_ADDRESS"], let runtime = env["XDG_RUNTIME_DIR"]
        else {
            throw HarnessError("end-to-end tests need the services that Scripts/test starts: run Scripts/test")
        }
        return TestEnvironment(
            binary: binary, authServerScript: script, python: env["TOKENCTL_TEST_PYTHON"] ?? "/usr/bin/python3",
            keyringControl: env["TOKENCTL_KEYRING_CONTROL"] ?? "", busAddress: bus, sharedRuntimeDirectory: runtime)
    }
}

public struct HarnessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The result of running a command.
public struct RunResult: Sendable, CustomStringConvertible {
    public let status: Int32
    public let stdout: String
    public let stderr: String

    public init(status: Int32, stdout: String, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }

    public var description: String { "exit \(status)\n--- stdout:\n\(stdout)--- stderr:\n\(stderr)" }
}

/// A command about to be run; `start()` returns a handle to wait on, so many can run at once.
///
/// posix_spawn and waitpid directly: Foundation's Process has hung here under parallel tests.
public final class RunningCommand: @unchecked Sendable {
    public let pid: pid_t
    private let stdoutPath: String
    public let stderrPath: String
    private let stdinPath: String?

    public init(
        executable: String, arguments: [String], environment: [String: String], stdin: String?, directory: String
    )
        throws
    {
        let id = UUID().uuidString
        stdoutPath = directory + "/out." + id
        stderrPath = directory + "/err." + id
        if let stdin {
            let path = directory + "/in." + id
            guard
                FileManager.default.createFile(
                    atPath: path, contents: Data(stdin.utf8), attributes: [.posixPermissions: 0o600])
            else {
                throw HarnessError("cannot write \(path)")
            }
            stdinPath = path
        } else {
            stdinPath = nil
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdinPath ?? "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // The test runner blocks most signals; children must start with none blocked and default
        // handlers, or SIGTERM/SIGINT tests (and stopping servers) silently do nothing.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptySet = sigset_t()
        sigemptyset(&emptySet)
        var defaultSet = sigset_t()
        sigemptyset(&defaultSet)
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT] { sigaddset(&defaultSet, signal) }
        posix_spawnattr_setsigmask(&attributes, &emptySet)
        posix_spawnattr_setsigdefault(&attributes, &defaultSet)
        // Each command leads a process group of its own, as a shell's job or a CI step does, so
        // that a test can kill the whole group (`signalGroup`).
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw HarnessError("cannot run \(executable): \(String(cString: strerror(result)))") }
        self.pid = pid
    }

    public func wait() -> RunResult {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let out = (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? ""
        let err = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
        for path in [stdoutPath, stderrPath] + (stdinPath.map { [$0] } ?? []) { unlink(path) }
        // WIFEXITED / WTERMSIG by hand: the macros are not imported.
        let signal = status & 0x7F
        return RunResult(status: signal == 0 ? (status >> 8) & 0xFF : 128 + signal, stdout: out, stderr: err)
    }

    public func signal(_ number: Int32) { kill(pid, number) }

    /// Signal the command's whole process group (`timeout -s KILL`, a CI runner ending a job).
    public func signalGroup(_ number: Int32) { kill(-pid, number) }

    /// What the command has written to stdout so far.
    public var currentStandardOutput: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }

    /// What the command has written to stderr so far.
    public var currentStandardError: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// Wait until stderr contains `text` (or the process has gone quiet for `timeout` seconds).
    public func waitForStandardError(containing text: String, timeout: Double = 20) -> String? {
        let deadline = Date().timeIntervalSince1970 + timeout
        while Date().timeIntervalSince1970 < deadline {
            let current = currentStandardError
            if current.contains(text) { return current }
            usleep(50_000)
        }
        return nil
    }
}

/// What `read` returns once it has `count` elements, waiting up to five seconds (a log line
/// or event that a server or another process writes after its answer); then whatever it has.
public func awaiting<Element>(_ count: Int, _ read: () throws -> [Element]) rethrows -> [Element] {
    let deadline = Date().addingTimeInterval(5)
    while true {
        let found = try read()
        if found.count >= count || Date() > deadline { return found }
        Thread.sleep(forTimeInterval: 0.02)
    }
}

/// Run a program to completion.
@discardableResult
public func runProgram(
    _ executable: String, _ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
    stdin: String? = nil
) throws -> RunResult {
    try RunningCommand(
        executable: executable, arguments: arguments, environment: environment, stdin: stdin,
        directory: NSTemporaryDirectory().hasSuffix("/")
            ? String(NSTemporaryDirectory().dropLast()) : NSTemporaryDirectory()
    ).wait()
}

/// Write an executable script from a child shell. Written from this (multi-threaded) test
/// process, its open descriptor could be inherited by a child that another test forks at that
/// moment, and executing the script would then fail with ETXTBSY.
public func writeExecutable(_ path: String, _ contents: String) throws {
    let result = try runProgram("/bin/sh", ["-c", "cat > \"$0\" && chmod 700 \"$0\"", path], stdin: contents)
    guard result.status == 0 else { throw HarnessError("cannot write \(path): \(result)") }
}
