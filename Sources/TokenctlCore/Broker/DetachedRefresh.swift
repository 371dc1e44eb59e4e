import Dispatch
import Synchronization
import TokenctlEssentials

/// The refresh exchange in a process that outlives its caller.
///
/// A refresh that has reached the server when its process dies is answered to nobody: on a
/// server that rotates refresh tokens without a grace period, the next process then sends the
/// spent token, the server sees a reuse and revokes the whole family (RFC 9700 §4.14.2). A caller
/// can die at any moment: `timeout -s KILL`, a CI runner killing the job's process group, a user's
/// Ctrl-C. So the exchange — from taking the profile lock, through sending, to persisting the
/// answer — runs in a child engine started in a session of its own (`setsid`, through
/// posix_spawn): no signal aimed at the caller, its process group or its terminal reaches it.
/// The caller waits for what the child reports (its narration, then the token set or the error)
/// and hands it out as if it had refreshed itself. Only a kill of everything (the cgroup, the
/// machine) can still lose the refresh in flight.
///
/// One child serves all the refreshes a service has in flight at once (`refresh --all`'s eight,
/// a served forward connection's), each request tagged with an id: the process start and its
/// Secret Service connection are paid once per burst, not once per profile. When nothing is in
/// flight any more, the caller closes its side and the child exits; the next refresh starts
/// another. A refresh never starts one unless it must: the hot path never comes here.
///
/// Nothing secret crosses argv or the environment: requests go on the child's standard input,
/// reports come back on its standard output, one socket pair of this process's own.
public final class DetachedRefresh: Sendable {
    /// The engine executable the child runs (this very engine).
    public let enginePath: String
    /// What the child needs to build the same service as the caller.
    public let settings: Settings
    /// Told what a store prompt asks a person (printed even without `--verbose`).
    public let notice: (@Sendable (String) -> Void)?
    /// The child taking new requests, if one runs.
    private let current = Mutex<ChildConnection?>(nil)

    /// The caller's service settings, so the child's bounds are the caller's.
    public struct Settings: Sendable, Equatable {
        /// `--timeout`, in seconds (`TokenctlService.live`).
        public var timeout: Double
        public var storeCallTimeout: Double
        public var interactive: Bool
        public var verbose: Bool
        public var userAgent: String

        public init(timeout: Double, storeCallTimeout: Double, interactive: Bool, verbose: Bool, userAgent: String) {
            self.timeout = timeout
            self.storeCallTimeout = storeCallTimeout
            self.interactive = interactive
            self.verbose = verbose
            self.userAgent = userAgent
        }
    }

    public init(enginePath: String, settings: Settings, notice: (@Sendable (String) -> Void)? = nil) {
        self.enginePath = enginePath
        self.settings = settings
        self.notice = notice
    }

    /// The only argument the child is started with; `Engine.run` hands such a process to
    /// `DetachedRefresh.serveChild`.
    public static let childArgument = "--detached-refresh-exchange"

    /// One refresh, as the broker's in-process `refreshUnderLock` takes it.
    struct Request: Equatable {
        var profile: ProfileName
        var target: TokenTarget
        var snapshot: TokenSet?
        var minimumTimeToLive: Double
        var force: Bool
        var capMargin: Bool
        var deadline: Deadline?
        var settings: Settings
    }

    // MARK: The caller's side

    /// Run `request` in the detached child (started if none runs) and return what it reports.
    ///
    /// - Throws: the child's error as it reported it; `.transient` when no child can be started
    ///   (nothing was sent) or it has not answered by the time the caller gives up (the child
    ///   goes on and stores what the server answers).
    func run(_ request: Request, narrate: TokenBroker.Narrator?) async throws(TokenctlError) -> TokenSet {
        let relay: DetachedRefreshWire.Relay = { [notice] record in
            switch record {
            case .narration(let line): narrate?(line)
            case .notice(let line): notice?(line)
            }
        }
        let limit = Self.waitLimit(request, now: Clock.system.now())
        var slot: ReportSlot?
        var pid: Int32 = 0
        // A child that went idle meanwhile takes no more requests: then another is started.
        for _ in 0..<3 where slot == nil {
            guard let connection = connection() else { break }
            pid = connection.pid
            slot = connection.submit(request, limit: limit, relay: relay)
            if slot == nil { current.withLock { if $0 === connection { $0 = nil } } }
        }
        guard let slot else {
            throw TokenctlError(
                .transient,
                "could not start the refresh process for profile '\(request.profile)' (\(enginePath))",
                hint: "Nothing was sent; the session is kept. Try again later.")
        }
        narrate?("refreshing in a detached process (pid \(pid)) that finishes the exchange even if this one is killed")
        switch await slot.outcome() {
        case .tokens(let tokenSet):
            return tokenSet
        case .failure(let error):
            throw error
        case .noAnswer(let why):
            throw TokenctlError(
                .transient, "the refresh process of profile '\(request.profile)' (pid \(pid)) \(why)",
                hint:
                    "It goes on by itself and stores what the server answers; the session is kept. Run '\(tokenctl: request.profile, .token([]))' again in a moment."
            )
        }
    }

    /// The running child, or a new one; nil when none can be started.
    private func connection() -> ChildConnection? {
        current.withLock { running in
            if let running, !running.isClosing { return running }
            guard let child = Subprocess.detach([enginePath, Self.childArgument]) else { return nil }
            let connection = ChildConnection(child)
            running = connection
            return connection
        }
    }

    /// How long the caller waits (without a deadline, a lock wait and an exchange of
    /// `--timeout` each): past the deadline by as much as the child may take past it (a
    /// sent refresh gets `RetryPolicy.sentRefreshMinimum`, the write of its answer
    /// `SecretServiceStore.minimumWriteTime`), with room to spare.
    static func waitLimit(_ request: Request, now: Double) -> Double {
        let end =
            request.deadline?.time
            ?? now + 2 * request.settings.timeout
        return end + 15
    }

    // MARK: The child's side

    /// The child: read requests from standard input until its end, run each in this process
    /// as it comes (one service for all), report each on standard output, and return once all
    /// are reported (0; the reports carry the outcomes).
    public static func serveChild(standardInput: Int32 = 0, standardOutput: Int32 = 1) async -> Int32 {
        let output = DetachedRefreshWire.Writer(descriptor: standardOutput)
        let requests = AsyncStream<(UInt64, Result<Request, DetachedRefreshWire.WireError>)> { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                DetachedRefreshWire.readRequests(from: standardInput) { continuation.yield($0) }
                continuation.finish()
            }
        }
        var service: TokenctlService?
        var paths: Paths?
        await withTaskGroup(of: Void.self) { group in
            for await (id, parsed) in requests {
                let request: Request
                switch parsed {
                case .success(let value): request = value
                case .failure(let error):
                    output.failure(
                        id, TokenctlError(.unexpected, "the detached refresh got an unreadable request: \(error)"))
                    continue
                }
                if service == nil {
                    do throws(PathsError) { paths = try Paths.resolve() } catch {
                        output.failure(id, TokenctlError(.configuration, error.description))
                        continue
                    }
                    service = makeService(request, paths: paths!, output: output)
                }
                let shared = service!
                group.addTask {
                    do throws(TokenctlError) {
                        let profile = try shared.resolve(request.profile)
                        let tokenSet = try await shared.broker.refreshUnderLock(
                            profile, target: request.target, snapshot: request.snapshot,
                            minimumTimeToLive: request.minimumTimeToLive, force: request.force,
                            capMargin: request.capMargin)
                        output.tokens(id, tokenSet)
                    } catch {
                        output.failure(id, error)
                    }
                }
            }
        }
        return 0
    }

    /// The child's service: the caller's settings and deadline, refreshing in this process.
    private static func makeService(_ request: Request, paths: Paths, output: DetachedRefreshWire.Writer)
        -> TokenctlService
    {
        let settings = request.settings
        // A narration or notice belongs to no one request: it goes with id 0, which every
        // waiting caller relays.
        let notice: (@Sendable (String) -> Void)? =
            settings.interactive ? { @Sendable (line: String) in output.notice(line) } : nil
        let narrate: TokenBroker.Narrator? =
            settings.verbose ? { @Sendable (line: String) in output.narration(line) } : nil
        let storeOptions = SecretServiceStore.Options(
            callTimeout: settings.storeCallTimeout, interactive: settings.interactive, promptNotice: notice)
        return TokenctlService.live(
            paths: paths, timeout: settings.timeout, deadline: request.deadline, userAgent: settings.userAgent,
            storeOptions: storeOptions, narrate: narrate)
    }
}
