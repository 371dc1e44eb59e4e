import TokenctlCore
import TokenctlEssentials

/// Everything a command takes from outside the engine, in one value that `Engine.run` hands to
/// every command (gh's `cmdutil.Factory`): the standard streams, the environment variables,
/// the paths, the clock, the executable this engine runs from, the core service, the
/// programs a command replaces itself with, and the systemd user manager and crontab the
/// schedules and the forward socket are installed with. Commands read nothing global: a test
/// builds one of these with doubles (private paths, a clock of its own, a service over an
/// in-memory store and a scripted HTTP client, a recording systemd and crontab) and runs any
/// command in-process, in parallel with other tests.
public struct EngineEnvironment: Sendable {
    public var io: IOStreams
    /// The environment variables commands read (TOKENCTL_PROFILE, KUBERNETES_EXEC_INFO, the
    /// forward socket, the locale …).
    public var variables: Environment
    /// Where tokenctl's files are: resolved from `variables` unless a test says otherwise.
    public var paths: @Sendable () -> Result<Paths, PathsError>
    public var clock: Clock
    /// This engine's executable (`--version`, `doctor`, the schedules); nil when unknown.
    public var executable: String?
    /// Makes the core service a command uses.
    public var services: ServiceFactory
    /// Replaces this process with another program (`exec`).
    public var programs: ProgramRunner
    /// The systemd user manager (`schedule`'s timer, `forward`'s socket unit, `doctor`).
    public var userUnits: SystemdUserUnits
    /// The user's crontab (`schedule --cron`, `doctor`).
    public var crontab: Crontab
    /// systemd-creds, the TPM and linger (`keyring`, `doctor`, `schedule install`'s warning).
    public var unattendedHost: UnattendedHost

    public init(
        io: IOStreams, variables: Environment, paths: (@Sendable () -> Result<Paths, PathsError>)? = nil,
        clock: Clock, executable: String?, services: ServiceFactory, programs: ProgramRunner,
        userUnits: SystemdUserUnits, crontab: Crontab, unattendedHost: UnattendedHost? = nil
    ) {
        self.io = io
        self.variables = variables
        self.paths = paths ?? { Result { () throws(PathsError) -> Paths in try Paths.resolve(variables) } }
        self.clock = clock
        self.executable = executable
        self.services = services
        self.programs = programs
        self.userUnits = userUnits
        self.crontab = crontab
        self.unattendedHost = unattendedHost ?? .live(variables)
    }

    /// The process's own: its streams (or `io`), environment, XDG paths, the system clock, the
    /// Secret Service behind the live core, exec(3), systemctl(1) and crontab(1).
    public static func live(io: IOStreams = .standard) -> EngineEnvironment {
        EngineEnvironment(
            io: io, variables: .process, clock: .system, executable: currentExecutable(), services: .live,
            programs: .live, userUnits: .live, crontab: .live(.process))
    }

    /// This engine's own path (what `--version` and `doctor` report: beside the front, or under
    /// libexec in a package).
    var enginePath: String { executable ?? "unknown" }

    /// The engine refreshes run in, each in a detached child of its own (`DetachedRefresh`): this
    /// executable when it is the engine. Commands run in-process by a test bundle refresh in it,
    /// and so does every command under TOKENCTL_TEST_REFRESH_IN_PROCESS=1.
    var detachedRefreshEngine: String? {
        guard let executable, executable.hasSuffix("/tokenctl-engine"),
            variables[EnvironmentSwitches.refreshInProcess] != "1"
        else { return nil }
        return executable
    }

    /// TOKENCTL_PROFILE, when set and not empty.
    var profileVariable: String? { variables[EnvironmentSwitches.profile.description] }

    /// The forward socket this environment names or finds (`ForwardClient.socketSource`): the
    /// variable's value as it is (set but empty turns forwarding off), XDG_RUNTIME_DIR's socket.
    var forwardSocketSource: ForwardClient.Source? {
        var copies: [UnsafeMutablePointer<CChar>] = []
        defer { copies.forEach { $0.deallocate() } }
        return ForwardClient.socketSource { name in
            guard let value = variables.value(String(cString: name)) else { return nil }
            let bytes = Array(value.utf8CString)
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
            copy.initialize(from: bytes, count: bytes.count)
            copies.append(copy)
            return UnsafePointer(copy)
        }
    }
}

/// Makes the core service for a command (gh's `Factory.HttpClient` and `Factory.Config` in
/// one): the live one over the Secret Service and libcurl, or a test's over doubles.
public struct ServiceFactory: Sendable {
    /// What the command decided about the service it needs.
    public struct Settings: Sendable {
        public var paths: Paths
        /// `--timeout` in seconds (the retries' and the lock wait's bound); `deadline` is when it ends.
        public var timeout: Double
        public var userAgent: String
        public var deadline: Deadline?
        public var storeOptions: SecretServiceStore.Options
        public var narrate: TokenBroker.Narrator?
        public var detachedRefreshEngine: String?
        public var verbose: Bool
        /// The variables of the command's environment (where to look for the session bus).
        public var variables: Environment
        /// The command's streams (what -v says about the session bus goes to its stderr).
        public var io: IOStreams
    }

    /// The session bus found for the service, and where it was found; nil when none (or none needed).
    public typealias Bus = (address: String, source: String)

    private let make: @Sendable (Settings) -> (service: TokenctlService, bus: Bus?)

    public init(_ make: @escaping @Sendable (Settings) -> (service: TokenctlService, bus: Bus?)) {
        self.make = make
    }

    func service(_ settings: Settings) -> (service: TokenctlService, bus: Bus?) { make(settings) }

    /// The live core: the session bus located once (cron gives no DBUS_SESSION_BUS_ADDRESS),
    /// configuration under the XDG paths, the Secret Service behind the rotation journal, libcurl,
    /// flock and the kernel keyring hot cache.
    public static let live = ServiceFactory { settings in
        let bus = locateSessionBus(settings.variables, verbose: settings.verbose, io: settings.io)
        let service = TokenctlService.live(
            paths: settings.paths, timeout: settings.timeout, deadline: settings.deadline,
            userAgent: settings.userAgent, storeOptions: settings.storeOptions, narrate: settings.narrate,
            detachedRefreshEngine: settings.detachedRefreshEngine, environment: settings.variables)
        return (service, bus)
    }
}

/// The programs a command starts (the browser of a login) or replaces itself with (`exec`).
public struct ProgramRunner: Sendable {
    /// Start `arguments` (searched in PATH) in the background, to outlive this process; whether
    /// it started.
    public var launch: @Sendable (_ arguments: [String]) -> Bool

    /// Replace this process with `arguments` (searched in PATH), `variables` added to its
    /// environment; returns only on failure, with the variables named in `removedOnFailure`
    /// gone from this process again.
    public var exec:
        @Sendable (_ arguments: [String], _ variables: [(name: String, value: String)], _ removedOnFailure: [String])
            -> Subprocess.ExecFailure

    public init(
        launch: @escaping @Sendable ([String]) -> Bool,
        exec: @escaping @Sendable ([String], [(name: String, value: String)], [String]) -> Subprocess.ExecFailure
    ) {
        self.launch = launch
        self.exec = exec
    }

    /// `Subprocess.launch`, and exec(3) with the variables set in the process's own
    /// environment, which the program inherits.
    public static let live = ProgramRunner(launch: Subprocess.launch) { arguments, variables, removedOnFailure in
        for (name, value) in variables { Environment.setProcessVariable(name, value) }
        // The program inherits only what tokenctl was given, not the connection of a refresh,
        // and SIGPIPE at its default (Subprocess.exec).
        let failure = Subprocess.exec(arguments)
        for name in removedOnFailure { Environment.unsetProcessVariable(name) }
        return failure
    }
}

/// The session bus for this process (cron gives no DBUS_SESSION_BUS_ADDRESS): found by the core,
/// exported here for GLib, and reported with -v on `io`'s stderr.
func locateSessionBus(_ variables: Environment, verbose: Bool, io: IOStreams) -> (address: String, source: String)? {
    guard let bus = SessionBus.locate(environment: variables) else {
        if verbose {
            io.standardError(
                "tokenctl: no D-Bus session bus found (DBUS_SESSION_BUS_ADDRESS unset, no bus socket in the runtime directory)\n"
            )
        }
        return nil
    }
    if !bus.fromVariable {
        Environment.setProcessVariable("DBUS_SESSION_BUS_ADDRESS", bus.address)
        if verbose {
            io.standardError(
                "tokenctl: DBUS_SESSION_BUS_ADDRESS was unset; using the session bus at \(bus.address.dropFirst("unix:path=".count)) (found in \(bus.source))\n"
            )
        }
    }
    return (bus.address, bus.source)
}
