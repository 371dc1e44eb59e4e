import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// A throwaway user for one test: its own HOME, config, state and runtime (lock) directories,
/// sharing the private session bus and keyring that Scripts/test started.
final class Sandbox: @unchecked Sendable {
    let environment: TestEnvironment
    let root: String
    var variables: [String: String]
    /// (profile, issuer, client ID) of every login, to drop their hot-cache keys at the end:
    /// the kernel user keyring is shared by every process of the uid and outlives the test.
    private var loggedIn: [(String, String, String)] = []

    init() throws {
        environment = try TestEnvironment.require()
        root = NSTemporaryDirectory() + "tokenctl-e2e-" + UUID().uuidString
        for directory in ["home", "config", "state", "runtime"] {
            try FileManager.default.createDirectory(
                atPath: root + "/" + directory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
        variables = [
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": root + "/home",
            "XDG_CONFIG_HOME": root + "/config",
            "XDG_STATE_HOME": root + "/state",
            "XDG_RUNTIME_DIR": root + "/runtime",
            // Each test's locks of its own (profile names repeat across tests run in parallel);
            // without it they would all meet in /run/user/<uid>/tokenctl, as a user's processes do.
            "TOKENCTL_RUNTIME_DIR": root + "/runtime",
            "DBUS_SESSION_BUS_ADDRESS": environment.busAddress,
            "LANG": "C.UTF-8",
        ]
    }

    deinit {
        for (profile, issuer, clientID) in loggedIn {
            HotCache(environment: .fixed([:])).invalidate(
                profile: ProfileName(rawValue: profile)!, issuer: issuer, clientID: clientID)
        }
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Run `tokenctl` with `arguments`.
    @discardableResult
    func tokenctl(_ arguments: String..., stdin: String? = nil, extraEnvironment: [String: String] = [:]) throws
        -> RunResult
    {
        try start(arguments, stdin: stdin, extraEnvironment: extraEnvironment).wait()
    }

    func start(_ arguments: [String], stdin: String? = nil, extraEnvironment: [String: String] = [:]) throws
        -> RunningCommand
    {
        try RunningCommand(
            executable: environment.binary, arguments: arguments,
            environment: variables.merging(extraEnvironment) { $1 }, stdin: stdin, directory: root)
    }

    /// Run `count` tokenctl processes at once and wait for all.
    func concurrently(_ count: Int, _ arguments: [String]) throws -> [RunResult] {
        let commands = try (0..<count).map { _ in try start(arguments) }
        return commands.map { $0.wait() }
    }

    /// Log `profile` in at `server` with a fresh refresh token for `subject`.
    @discardableResult
    func login(
        _ server: AuthServer, profile: String = "default", clientID: String = "cli", subject: String = "alice",
        scope: String = "openid offline_access"
    ) throws -> String {
        let refreshToken = try server.issue(clientID: clientID, subject: subject, scope: scope)
        loggedIn.append((profile, server.url, clientID))
        let result = try tokenctl(
            "--profile", profile, "login", "--issuer", server.url, "--client-id", clientID, "--refresh-token-stdin",
            stdin: refreshToken)
        guard result.status == 0 else { throw HarnessError("login failed: \(result)") }
        return refreshToken
    }

    /// Drop this identity's hot-cache keys at the end too (a login the test ran itself).
    func forgetsHotCacheAtEnd(profile: String, issuer: String, clientID: String) {
        loggedIn.append((profile, issuer, clientID))
    }

    /// The token set stored in the keyring for a profile, read back with secret-tool (not tokenctl).
    func storedTokenSet(profile: String = "default", issuer: String, clientID: String = "cli") throws -> [String: Any]?
    {
        let result = try runProgram(
            "/usr/bin/secret-tool",
            [
                "lookup", "application", "tokenctl", "profile", profile, "issuer", issuer, "client_id", clientID,
                "kind", "session",
            ],
            environment: variables)
        guard result.status == 0, !result.stdout.isEmpty else { return nil }
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
    }

    func profileFile(_ profile: String = "default") -> String {
        root + "/config/tokenctl/profiles/\(profile).conf"
    }

    /// Every regular file under the sandbox, for "no secret on disk" checks.
    func allFiles() -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [] }
        return enumerator.compactMap { $0 as? String }.map { root + "/" + $0 }.filter {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
    }

    /// Switch off the kernel-keyring hot cache (the test-only switch): every `token` goes to
    /// the Secret Service, as on a machine whose kernel keyring is unavailable.
    func useSecretServicePathOnly() {
        variables["TOKENCTL_TEST_DISABLE_KERNEL_KEYRING"] = "1"
    }
}
