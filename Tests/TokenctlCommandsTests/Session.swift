import Foundation
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

// What the in-process tests of commands with a real session share: the services Scripts/test
// starts (a private session bus with an unlocked gnome-keyring, the test authorization server,
// TokenctlTestSupport's AuthServer), one test authorization server per test, and one private
// user per test, whose HOME, XDG directories and crontab reach the commands through their
// `EngineEnvironment` (the process's environment is never changed, so these tests run in
// parallel).

/// A private user for one in-process test: HOME, the XDG directories, the lock directory and a
/// fake crontab of its own, in the environment the commands it runs get. The session bus and
/// keyring are Scripts/test's, shared.
final class PrivateUser: @unchecked Sendable {
    let root: String
    let crontabFile: String
    /// The variables the commands see instead of the process's, and those they do not see.
    private let overrides: [String: String]
    private static let removed: Set<String> = ["TOKENCTL_PROFILE"]
    /// (profile, issuer, client ID) of every login, to drop their hot-cache keys at the end:
    /// the kernel user keyring is shared by every process of the uid and outlives the test.
    private let loggedIn = TestLock<[(String, String, String)]>([])

    init() throws {
        root = NSTemporaryDirectory() + "tokenctl-inprocess-user-" + UUID().uuidString
        for directory in ["home", "config", "state", "cache", "runtime"] {
            try FileManager.default.createDirectory(
                atPath: root + "/" + directory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
        crontabFile = root + "/home/crontab.txt"
        let crontab = root + "/fake-crontab"
        try writeExecutable(
            crontab,
            "#!/bin/sh\nf=\"\(crontabFile)\"\ncase \"$1\" in -l) [ -f \"$f\" ] && exec cat \"$f\"; echo \"no crontab for test\" >&2; exit 1;; -) cat > \"$f\";; esac\n"
        )
        overrides = [
            "HOME": root + "/home", "XDG_CONFIG_HOME": root + "/config", "XDG_STATE_HOME": root + "/state",
            "XDG_CACHE_HOME": root + "/cache", "XDG_RUNTIME_DIR": root + "/runtime",
            "TOKENCTL_RUNTIME_DIR": root + "/runtime",
            "TOKENCTL_CRONTAB": crontab,
        ]
    }

    /// The user's environment with `extra` variables: the process's, with the user's own
    /// directories and crontab, and no TOKENCTL_PROFILE.
    func environment(io: IOStreams, extra: [String: String] = [:]) -> EngineEnvironment {
        var overrides = self.overrides
        overrides.merge(extra) { $1 }
        let variables = Environment { [overrides] name in
            if let value = overrides[name] { return value }
            return PrivateUser.removed.contains(name) ? nil : Environment.process.value(name)
        }
        var environment = EngineEnvironment.live(io: io)
        environment.variables = variables
        environment.paths = { Result { () throws(PathsError) -> Paths in try Paths.resolve(variables) } }
        environment.crontab = .live(variables) // the user's TOKENCTL_CRONTAB
        return environment
    }

    /// Run `tokenctl ARGUMENTS` in-process as this user.
    func tokenctl(_ arguments: String..., stdin: String = "", variables: [String: String] = [:]) async throws
        -> InProcessResult
    {
        try await tokenctlArguments(arguments, stdin: stdin, variables: variables)
    }

    func tokenctlArguments(_ arguments: [String], stdin: String = "", variables: [String: String] = [:]) async throws
        -> InProcessResult
    {
        try await runInProcess(arguments, stdin: stdin) { self.environment(io: $0, extra: variables) }
    }

    /// A command run in-process as this user, in a task of its own.
    func background(_ arguments: [String], stdin: String = "") throws -> BackgroundCommand {
        try BackgroundCommand(arguments, stdin: stdin) { self.environment(io: $0) }
    }

    /// Remove the user's files and hot-cache keys.
    func finish() {
        for (profile, issuer, clientID) in loggedIn.withLock({ $0 }) {
            HotCache(environment: .fixed([:])).invalidate(
                profile: ProfileName(rawValue: profile)!, issuer: issuer, clientID: clientID)
        }
        loggedIn.withLock { $0 = [] }
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Sign `profile` in at `server` by importing a refresh token the server just issued, in-process.
    @discardableResult
    func login(
        _ server: AuthServer, profile: String, clientID: String = "cli", subject: String = "alice",
        scope: String = "openid offline_access", extra: [String] = []
    ) async throws -> InProcessResult {
        let refreshToken = try server.issue(clientID: clientID, subject: subject, scope: scope)
        willLogIn(server, profile: profile, clientID: clientID)
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
        guard result.status == .success else { throw HarnessError("login failed: \(result)") }
        return result
    }

    /// Remember a login made another way (a device login), for the hot-cache clean-up.
    func willLogIn(_ server: AuthServer, profile: String, clientID: String = "cli") {
        loggedIn.withLock { $0.append((profile, server.url, clientID)) }
    }

    func profileFile(_ profile: String) -> String { root + "/config/tokenctl/profiles/\(profile).conf" }
}

/// Run `body` as a private user with a test authorization server of its own, both ended when it
/// returns (explicitly: neither may end while a command still runs).
func withSession<T>(_ configuration: [String: Any] = [:], _ body: (PrivateUser, AuthServer) async throws -> T)
    async throws -> T
{
    let server = try AuthServer(configuration)
    defer { server.stop() }
    let user = try PrivateUser()
    defer { user.finish() }
    return try await body(user, server)
}
