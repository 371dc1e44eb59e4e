import Foundation
import Testing
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials

// What the in-process tests of commands that need a session share: the services Scripts/test
// starts (a private session bus with an unlocked gnome-keyring, the test authorization server's
// script), one test authorization server per test, and one private user environment per test.
// A small copy of Tests/TokenctlEndToEndTests/Support (TestEnvironment, AuthServer,
// RunningCommand): that target runs the built executables and shares no module with this one.

struct SessionHarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What `Scripts/test` provides. The session tests fail (not skip) without it, so a broken
/// harness can never pass silently.
struct SessionServices: Sendable {
    let python: String
    let authServerScript: String

    static func require() throws -> SessionServices {
        let environment = ProcessInfo.processInfo.environment
        guard environment["TOKENCTL_TEST_ENV"] == "1", let script = environment["TOKENCTL_AUTHSERVER_PY"],
            environment["DBUS_SESSION_BUS_ADDRESS"] != nil
        else {
            throw SessionHarnessError(
                "the in-process session tests need the services that Scripts/test starts: run Scripts/test --filter TokenctlCommandsTests"
            )
        }
        return SessionServices(
            python: environment["TOKENCTL_TEST_PYTHON"] ?? "/usr/bin/python3", authServerScript: script)
    }
}

/// A child process's exit status and output.
struct ChildResult: CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String
    var description: String { "exit \(status)\nstdout: \(stdout.debugDescription)\nstderr: \(stderr.debugDescription)" }
}

/// A program started with posix_spawn, its output in private files (Foundation's Process has
/// hung under parallel tests), with the test process's environment.
final class Child: @unchecked Sendable {
    let pid: pid_t
    private let directory: String

    init(_ executable: String, _ arguments: [String], stdin: String? = nil) throws {
        directory = NSTemporaryDirectory() + "tokenctl-child-" + UUID().uuidString
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        FileManager.default.createFile(
            atPath: directory + "/in", contents: Data((stdin ?? "").utf8), attributes: [.posixPermissions: 0o600])
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, directory + "/in", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, directory + "/out", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, directory + "/err", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        // The test runner blocks most signals; a child starts with none blocked, so SIGTERM stops it.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard result == 0 else {
            throw SessionHarnessError("cannot run \(executable): \(String(cString: strerror(result)))")
        }
        self.pid = pid
    }

    func wait() -> ChildResult {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let out = (try? String(contentsOfFile: directory + "/out", encoding: .utf8)) ?? ""
        let err = (try? String(contentsOfFile: directory + "/err", encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(atPath: directory)
        let signal = status & 0x7F
        return ChildResult(status: signal == 0 ? (status >> 8) & 0xFF : 128 + signal, stdout: out, stderr: err)
    }

    func signal(_ number: Int32) { kill(pid, number) }

    static func run(_ executable: String, _ arguments: [String], stdin: String? = nil) throws -> ChildResult {
        try Child(executable, arguments, stdin: stdin).wait()
    }
}

/// One test authorization server (Scripts/testserver/authserver.py) for one test, stopped by
/// PID when the test drops it.
final class TestAuthServer: @unchecked Sendable {
    let url: String
    private let server: Child
    private let directory: String

    init(_ configuration: [String: Any] = [:]) throws {
        let services = try SessionServices.require()
        directory = NSTemporaryDirectory() + "tokenctl-authserver-" + UUID().uuidString
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let portFile = directory + "/port"
        server = try Child(
            services.python, [services.authServerScript, "--port", "0", "--port-file", portFile, "--exit-with-parent"])
        var port: String?
        for _ in 0..<400 {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8), !text.isEmpty {
                port = text.trimmingCharacters(in: .whitespacesAndNewlines)
                break
            }
            usleep(25_000)
        }
        guard let port else {
            server.signal(SIGKILL)
            throw SessionHarnessError("the test authorization server did not start: \(server.wait())")
        }
        url = "http://127.0.0.1:\(port)"
        // A new server may get the port (the issuer URL) an earlier test's had: nothing for it in the keyring.
        for kind in ["session", "client-secret"] {
            _ = try? Child.run(
                "/usr/bin/secret-tool", ["clear", "application", "tokenctl", "issuer", url, "kind", kind])
        }
        if !configuration.isEmpty { try request("POST", "/_test/config", json: configuration) }
    }

    private var stopped = false

    func stop() {
        guard !stopped else { return }
        stopped = true
        server.signal(SIGTERM)
        _ = server.wait()
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }

    @discardableResult
    func request(_ method: String, _ path: String, json: Any? = nil) throws -> Any {
        var arguments = ["-sS", "-X", method, url + path]
        var input: String?
        if let json {
            input = String(decoding: try JSONSerialization.data(withJSONObject: json), as: UTF8.self)
            arguments += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
        }
        let result = try Child.run("/usr/bin/curl", arguments, stdin: input)
        guard result.status == 0 else { throw SessionHarnessError("curl \(path) failed: \(result)") }
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8), options: [.fragmentsAllowed])
    }

    /// A new refresh token (a new token family) for `subject`.
    func issue(clientID: String = "cli", subject: String = "alice", scope: String = "openid offline_access") throws
        -> String
    {
        let answer = try request("POST", "/_test/issue", json: ["client_id": clientID, "sub": subject, "scope": scope])
        guard let token = (answer as? [String: Any])?["refresh_token"] as? String else {
            throw SessionHarnessError("no refresh token issued: \(answer)")
        }
        return token
    }

    func log() throws -> [[String: Any]] { (try request("GET", "/_test/log") as? [[String: Any]]) ?? [] }

    func tokenStatus(_ token: String) throws -> [String: Any] {
        (try request("GET", "/_test/token-status?token=\(token)") as? [String: Any]) ?? [:]
    }
}

/// A private user for one in-process test: HOME, the XDG directories, the lock directory and a
/// fake crontab of its own, set in this process's environment while the test runs (commands
/// read the environment, which is process-wide: the suites that use this are `.serialized`,
/// and only they set it). The session bus and keyring are Scripts/test's, shared.
final class PrivateUser: @unchecked Sendable {
    static let variables = [
        "HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "TOKENCTL_RUNTIME_DIR",
        "TOKENCTL_CRONTAB", "TOKENCTL_PROFILE",
    ]

    let root: String
    let crontabFile: String
    private var saved: [String: String?] = [:]
    /// (profile, issuer, client ID) of every login, to drop their hot-cache keys at the end:
    /// the kernel user keyring is shared by every process of the uid and outlives the test.
    private var loggedIn: [(String, String, String)] = []

    init() throws {
        root = NSTemporaryDirectory() + "tokenctl-inprocess-user-" + UUID().uuidString
        for directory in ["home", "config", "state", "cache", "runtime"] {
            try FileManager.default.createDirectory(
                atPath: root + "/" + directory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
        crontabFile = root + "/home/crontab.txt"
        let crontab = root + "/fake-crontab"
        // Written by a child shell: an executable this (multi-threaded) process held open could be
        // inherited by a child another test forks at that moment, and then fail with ETXTBSY.
        let script =
            "#!/bin/sh\nf=\"\(crontabFile)\"\ncase \"$1\" in -l) [ -f \"$f\" ] && exec cat \"$f\"; echo \"no crontab for test\" >&2; exit 1;; -) cat > \"$f\";; esac\n"
        let written = try Child.run("/bin/sh", ["-c", "cat > \"$0\" && chmod 700 \"$0\"", crontab], stdin: script)
        guard written.status == 0 else { throw SessionHarnessError("cannot write \(crontab): \(written)") }
        let values = [
            "HOME": root + "/home", "XDG_CONFIG_HOME": root + "/config", "XDG_STATE_HOME": root + "/state",
            "XDG_CACHE_HOME": root + "/cache", "XDG_RUNTIME_DIR": root + "/runtime",
            "TOKENCTL_RUNTIME_DIR": root + "/runtime",
            "TOKENCTL_CRONTAB": crontab,
        ]
        for name in Self.variables {
            saved[name] = getenv(name).map { String(cString: $0) }
            if let value = values[name] { setenv(name, value, 1) } else { unsetenv(name) }
        }
    }

    /// Put the environment back and remove the user's files and hot-cache keys.
    func finish() {
        for (profile, issuer, clientID) in loggedIn {
            HotCache(environment: .fixed([:])).invalidate(
                profile: ProfileName(rawValue: profile)!, issuer: issuer, clientID: clientID)
        }
        for (name, value) in saved {
            if let value { setenv(name, value, 1) } else { unsetenv(name) }
        }
        saved = [:]
        loggedIn = []
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Sign `profile` in at `server` by importing a refresh token the server just issued, in-process.
    @discardableResult
    func login(
        _ server: TestAuthServer, profile: String, clientID: String = "cli", subject: String = "alice",
        scope: String = "openid offline_access", extra: [String] = []
    ) async throws -> InProcessResult {
        let refreshToken = try server.issue(clientID: clientID, subject: subject, scope: scope)
        loggedIn.append((profile, server.url, clientID))
        // The longest --timeout: these tests share one process with every other suite, whose
        // blocking waits can hold the few threads of Swift's cooperative pool for minutes (seen:
        // 130 s and 305 s on a 2-core CI machine), and the command's deadline keeps running
        // while its task waits for a thread. These tests are not about the bound.
        let result = try await tokenctlArguments(
            [
                "--profile", profile, "login", "--timeout", "3600", "--issuer", server.url, "--client-id", clientID,
                "--refresh-token-stdin",
            ] + extra,
            stdin: refreshToken)
        guard result.status == .success else { throw SessionHarnessError("login failed: \(result)") }
        return result
    }

    /// Remember a login made another way (a device login), for the hot-cache clean-up.
    func willLogIn(_ server: TestAuthServer, profile: String, clientID: String = "cli") {
        loggedIn.append((profile, server.url, clientID))
    }

    func profileFile(_ profile: String) -> String { root + "/config/tokenctl/profiles/\(profile).conf" }
}

/// A JSON object printed on stdout, decoded.
func jsonObject(_ text: String) throws -> [String: Any] {
    try #require(
        try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not a JSON object: \(text)")
}

/// A fresh profile name for one test: profiles, their keyring items and hot-cache keys never meet.
func uniqueProfile(_ stem: String) -> String {
    stem + "-" + String(UUID().uuidString.prefix(8)).lowercased()
}

/// Run `body` as a private user with a test authorization server of its own, both ended when it
/// returns (explicitly: neither may end while a command still runs).
func withSession<T>(_ configuration: [String: Any] = [:], _ body: (PrivateUser, TestAuthServer) async throws -> T)
    async throws -> T
{
    let server = try TestAuthServer(configuration)
    defer { server.stop() }
    let user = try PrivateUser()
    defer { user.finish() }
    return try await body(user, server)
}

/// A command run in-process in a task of its own, its output in private files that the test
/// reads while it runs (a device login waits for the test to approve its code).
final class BackgroundCommand: @unchecked Sendable {
    private let directory: URL
    private let descriptors: [Int32]
    private let task: Task<TokenctlEssentials.ExitStatus, Never>

    init(_ arguments: [String], stdin: String = "") throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "tokenctl-inprocess-" + UUID().uuidString)
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try Data(stdin.utf8).write(to: directory.appendingPathComponent("in"))
        let input = open(directory.appendingPathComponent("in").path, O_RDONLY | O_CLOEXEC)
        let output = open(directory.appendingPathComponent("out").path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        let error = open(directory.appendingPathComponent("err").path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        descriptors = [input, output, error]
        let streams = IOStreams(input: input, output: output, error: error)
        task = Task { await Engine.run(arguments, io: streams) }
    }

    var standardError: String {
        (try? String(contentsOf: directory.appendingPathComponent("err"), encoding: .utf8)) ?? ""
    }

    /// What stderr holds once it contains `text` (at most 30 s).
    func waitForStandardError(containing text: String) async throws -> String {
        for _ in 0..<600 {
            let current = standardError
            if current.contains(text) { return current }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw SessionHarnessError("stderr never showed \(text.debugDescription): \(standardError.debugDescription)")
    }

    func wait() async throws -> InProcessResult {
        let status = await task.value
        for descriptor in descriptors where descriptor >= 0 { close(descriptor) }
        defer { try? FileManager.default.removeItem(at: directory) }
        return InProcessResult(
            status: status, stdout: try String(contentsOf: directory.appendingPathComponent("out"), encoding: .utf8),
            stderr: try String(contentsOf: directory.appendingPathComponent("err"), encoding: .utf8))
    }
}
