import Dispatch
import Synchronization
import TokenctlEssentials

/// The forward's one serving process: accepts on the listening sockets (the one systemd hands
/// over with Accept=no, sd_listen_fds(3); or `forward listen`'s own) and serves every connection
/// in this process, concurrently, through one `ForwardServer`.
///
/// Nothing is started per connection. One loop on a thread of its own waits (poll(2)) on the
/// listening sockets and every open connection, reads requests without blocking, and writes
/// the answers; a complete request is answered in a task (the service's single-flight path),
/// at most `maximumAnswering` at once. Each connection is bounded: its request within
/// `ForwardServer.requestTimeout` and `ForwardProtocol.maximumRequestSize`, its answer within
/// `ForwardServer.answerTimeout`; a silent peer is cut at its deadline and holds nothing but its
/// descriptor meanwhile. Beyond `maximumConnections` open at once, new connections wait in the
/// kernel's accept queue (listen(2)'s backlog), where a connecting client waits too: queued,
/// never reset.
public final class ForwardListener: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Connections open at once; more wait in the accept queue.
        public var maximumConnections: Int
        /// Requests being answered at once; complete requests beyond it wait their turn.
        public var maximumAnswering: Int
        /// Exit after this long without a connection (socket activation starts the next
        /// process on the next connection); nil: serve until stopped.
        public var idleExit: Double?

        public init(maximumConnections: Int = 512, maximumAnswering: Int = 16, idleExit: Double? = nil) {
            self.maximumConnections = maximumConnections
            self.maximumAnswering = maximumAnswering
            self.idleExit = idleExit
        }
    }

    /// Under the socket unit: longer than `ForcedRefreshLimit`'s interval, so an idle restart
    /// never shortens it.
    public static let unitIdleExit: Double = 120

    public enum Ending: Equatable, Sendable {
        /// SIGINT, SIGTERM or SIGHUP.
        case stopped
        /// `idleExit` passed with no connection.
        case idle
    }

    public let server: ForwardServer
    public let sockets: [Int32]
    public let limits: Limits
    /// Told once a minute what the process holds (connections, resident memory), when set.
    let report: (@Sendable (String) -> Void)?
    /// Answers the tasks made, for the loop to write (`ForwardServingLoop`).
    let finished = Mutex<[(Int, ForwardServer.Reply)]>([])
    /// The loop's wake-up pipe: a task that finished an answer writes to it.
    let wakeRead: Int32
    let wakeWrite: Int32

    public init(
        server: ForwardServer, sockets: [Int32], limits: Limits = Limits(),
        report: (@Sendable (String) -> Void)? = nil
    ) throws(TokenctlError) {
        guard let ends = UnixSocket.wakePipe() else {
            throw TokenctlError(.unexpected, "cannot make the serving loop's wake-up pipe")
        }
        for socket in sockets { UnixSocket.makeNonBlocking(socket) }
        self.server = server
        self.sockets = sockets
        self.limits = limits
        self.report = report
        wakeRead = ends.0
        wakeWrite = ends.1
    }

    deinit {
        UnixSocket.close(wakeRead)
        UnixSocket.close(wakeWrite)
    }

    /// Serve until stopped (or idle); the listening sockets stay open (the caller's).
    public func run() async -> Ending {
        await withCheckedContinuation { continuation in
            DispatchQueue(label: "tokenctl.forward.listener").async {
                continuation.resume(returning: self.loop())
            }
        }
    }

    /// The loop (its own thread): `ForwardServingLoop` holds its state and does each step.
    private func loop() -> Ending {
        var state = ForwardServingLoop(listener: self, now: ForwardClient.monotonicNow())
        while true {
            let stopping = UnixSocket.stopRequested
            var now = ForwardClient.monotonicNow()
            state.writeFinishedAnswers(now: now)
            state.startWaitingAnswers()
            if stopping, state.answering == 0 { break }
            if state.isBusy { state.lastActivity = now }
            if state.idleExitDue(now: now) {
                server.audit.flush(at: server.service.clock.now(), all: true)
                return .idle
            }
            var waiting = state.waitingList(now: now, stopping: stopping)
            UnixSocket.wait(&waiting.entries, within: max(0, waiting.until - now))
            now = ForwardClient.monotonicNow()
            state.serveReady(waiting, now: now)
            state.enforceDeadlines(now: now)
            server.audit.flush(at: server.service.clock.now())
            state.reportIfDue(now: now)
        }
        state.dropAll()
        server.audit.flush(at: server.service.clock.now(), all: true)
        return .stopped
    }
}
