import Foundation
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials

/// An engine for one test, with nothing of the machine's: a private directory for the paths,
/// environment variables of its own, a virtual clock (sleeps pass at once), the core service over
/// an in-memory store, no cross-process lock and a scripted HTTP client, an `exec` and a
/// browser launch that only record, and a systemd user manager and a crontab of its own.
/// Commands run through `Engine.run` with it need no session bus, keyring, server, systemd or
/// cron, and tests that use one run in parallel.
public final class TestEngine: @unchecked Sendable {
    public let root: String
    public let paths: Paths
    public let store = InMemorySessionStore()
    public let clock: VirtualClock
    public let http: FakeHTTPClient
    /// The systemd user manager the commands see (`schedule`, `forward`, `doctor`).
    public let systemd: SystemdDouble
    /// The crontab the commands see.
    public let crontab = CrontabDouble()
    /// systemd-creds, the TPM and linger, as `keyring` and `doctor` see them (linger on).
    public let unattended: UnattendedDouble
    /// The environment variables the commands see.
    public let variables: [String: String]
    private let execs = TestLock<[Exec]>([])
    private let launches = TestLock<[[String]]>([])

    /// A program `exec` was asked to run, and the variables it would have had.
    public struct Exec: Sendable {
        public var arguments: [String]
        public var variables: [String: String]
    }

    /// - Parameters:
    ///   - variables: environment variables besides HOME and the XDG directories of the private root.
    ///   - http: the authorization server's answers (every request fails unless given).
    public init(
        variables: [String: String] = [:],
        http: @escaping FakeHTTPClient.Handler = { _, _ in .failure(HTTPTransportError(.other, "no server")) }
    ) throws {
        root = NSTemporaryDirectory() + "tokenctl-testengine-" + UUID().uuidString
        for directory in ["home", "config", "state", "cache", "runtime"] {
            try FileManager.default.createDirectory(
                atPath: root + "/" + directory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
        paths = Paths(
            configDirectory: root + "/config/tokenctl", lockDirectory: root + "/runtime/tokenctl",
            stateDirectory: root + "/state/tokenctl", cacheDirectory: root + "/cache/tokenctl")
        var all = [
            "HOME": root + "/home", "XDG_CONFIG_HOME": root + "/config", "XDG_STATE_HOME": root + "/state",
            "XDG_CACHE_HOME": root + "/cache", "XDG_RUNTIME_DIR": root + "/runtime",
            "TOKENCTL_RUNTIME_DIR": root + "/runtime", "PATH": "/usr/bin:/bin",
        ]
        all.merge(variables) { $1 }
        self.variables = all
        // Real time, so that deadlines measured on the system clock agree; sleeps pass at once.
        clock = VirtualClock(now: Clock.system.now())
        self.http = FakeHTTPClient(http)
        systemd = SystemdDouble(packagedUnitDirectory: root + "/packaged-units")
        unattended = UnattendedDouble(root: root)
        unattended.setLinger(true)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    /// What the commands run with: `io`, and this engine's doubles.
    public func environment(io: IOStreams) -> EngineEnvironment {
        let (store, clock, http, execs, launches, paths) = (store, clock.clock, http, execs, launches, paths)
        let (userUnits, crontab, unattendedHost) = (systemd.units, crontab.crontab, unattended.host)
        return EngineEnvironment(
            io: io, variables: .fixed(variables), paths: { .success(paths) }, clock: clock, executable: nil,
            services: ServiceFactory { settings in
                let service = TokenctlService(
                    paths: settings.paths, store: store, locks: NoProfileLocks(), clock: clock,
                    retry: RetryPolicy(timeout: settings.timeout, attemptTimeout: min(15, settings.timeout)),
                    lockWait: settings.timeout, deadline: settings.deadline,
                    events: EventLog(stateDirectory: settings.paths.stateDirectory), narrate: settings.narrate,
                    httpClient: { _ in http })
                return (service, nil)
            },
            programs: ProgramRunner(
                launch: { arguments in
                    launches.withLock { $0.append(arguments) }
                    return false
                }
            ) { arguments, variables, _ in
                execs.withLock {
                    $0.append(
                        Exec(
                            arguments: arguments,
                            variables: Dictionary(variables.map { ($0.name, $0.value) }) { $1 }))
                }
                return Subprocess.ExecFailure(code: ENOENT)
            }, userUnits: userUnits, crontab: crontab, unattendedHost: unattendedHost)
    }

    /// Run `tokenctl ARGUMENTS` with this engine.
    public func run(_ arguments: String..., stdin: String = "") async throws -> InProcessResult {
        try await runArguments(arguments, stdin: stdin)
    }

    public func runArguments(_ arguments: [String], stdin: String = "") async throws -> InProcessResult {
        try await runInProcess(arguments, stdin: stdin) { self.environment(io: $0) }
    }

    /// The programs started in the background (a login's browser), in order; none starts.
    public var programsLaunched: [[String]] { launches.withLock { $0 } }

    /// The programs `exec` was asked to run, in order.
    public var programsRun: [Exec] { execs.withLock { $0 } }

    /// A profile at `issuer` (its token endpoint `issuer/token`, its revocation endpoint
    /// `issuer/revoke`) signed in with `tokenSet`.
    public func signIn(
        _ profile: String, issuer: String = "https://issuer.test", clientID: String = "cli", tokenSet: TokenSet
    ) throws {
        let name = ProfileName(rawValue: profile)!
        let configuration = ProfileConfiguration(
            issuer: try EndpointURL(issuer), clientID: clientID, tokenEndpoint: try EndpointURL(issuer + "/token"),
            revocationEndpoint: try EndpointURL(issuer + "/revoke"))
        try ProfileRepository(paths: paths).save(configuration, as: name)
        try store.write(tokenSet, for: SessionIdentity(profile: name, configuration: configuration))
    }

    /// A token set obtained a minute ago on this engine's clock, its access token valid for
    /// `expiresIn` seconds from now.
    public func tokenSet(
        accessToken: String = "access-1", refreshToken: String? = "refresh-1", expiresIn: Double = 3600
    ) -> TokenSet {
        TokenSet.fixture(
            accessToken: accessToken, refreshToken: refreshToken, obtainedAt: clock.now - 60, expiresIn: expiresIn + 60)
    }
}
