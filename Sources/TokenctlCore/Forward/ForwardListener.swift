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
    private let finished = Mutex<[(Int, ForwardServer.Reply)]>([])
    private let wakeRead: Int32
    private let wakeWrite: Int32

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

    // MARK: the loop (its own thread; the state below is that thread's only)

    private enum Phase {
        case reading(deadline: Double)
        case answering
        case writing(ForwardServer.Reply, offset: Int, deadline: Double)
    }

    private struct Connection {
        var descriptor: Int32
        var peer: UnixSocket.Peer?
        var request: [UInt8] = []
        var phase: Phase
    }

    private func loop() -> Ending {
        var connections: [Int: Connection] = [:]
        var waitingTurn: [Int] = []
        var answering = 0
        var nextID = 0
        var lastActivity = ForwardClient.monotonicNow()
        var acceptPausedUntil = 0.0
        var nextReport = lastActivity + 60
        let requestTimeout = server.requestTimeout
        let answerTimeout = server.answerTimeout

        func drop(_ id: Int) {
            guard var connection = connections.removeValue(forKey: id) else { return }
            if case .writing(var reply, _, _) = connection.phase {
                reply.answer.withUnsafeMutableBytes { $0.initializeMemory(as: UInt8.self, repeating: 0) }
            }
            connection.request.withUnsafeMutableBytes { $0.initializeMemory(as: UInt8.self, repeating: 0) }
            UnixSocket.close(connection.descriptor)
        }
        func answer(_ id: Int, _ reply: ForwardServer.Reply, now: Double) {
            connections[id]?.phase = .writing(reply, offset: 0, deadline: now + answerTimeout)
            sendAnswer(id, now: now)
        }
        func sendAnswer(_ id: Int, now: Double) {
            guard let connection = connections[id],
                case .writing(let reply, let offset, let deadline) = connection.phase
            else { return }
            guard let sent = UnixSocket.writeSome(connection.descriptor, reply.answer, from: offset) else {
                server.record(reply, peer: connection.peer, delivered: false)
                return drop(id)
            }
            if sent >= reply.answer.count {
                UnixSocket.finishSending(connection.descriptor)
                server.record(reply, peer: connection.peer, delivered: true)
                return drop(id)
            }
            connections[id]?.phase = .writing(reply, offset: sent, deadline: deadline)
        }
        func readRequest(_ id: Int, now: Double) {
            guard var connection = connections[id], case .reading = connection.phase else { return }
            let limit = ForwardProtocol.maximumRequestSize + 1 - connection.request.count
            let result = UnixSocket.readSome(connection.descriptor, into: &connection.request, limit: limit)
            connections[id] = connection
            let bytes = connection.request
            let complete = bytes.count >= 2 && bytes[bytes.count - 1] == 0x0A && bytes[bytes.count - 2] == 0x0A
            switch result {
            case .wouldBlock: return
            case .failed(let reason):
                guard let reply = server.unread(.failed(reason)) else { return drop(id) }
                return answer(id, reply, now: now)
            case .endOfFile where bytes.isEmpty:
                return drop(id) // a liveness probe: nothing to answer or log
            case .bytes where bytes.count > ForwardProtocol.maximumRequestSize:
                guard let reply = server.unread(.tooLarge) else { return drop(id) }
                return answer(id, reply, now: now)
            case .bytes where !complete: return
            case .bytes, .endOfFile:
                connections[id]?.phase = .answering
                waitingTurn.append(id)
            }
        }

        while true {
            let stopping = UnixSocket.stopRequested
            var now = ForwardClient.monotonicNow()
            // Answers ready: write them.
            for (id, reply) in finished.withLock({ list in
                defer { list.removeAll() }
                return list
            }) {
                answering -= 1
                if connections[id] != nil { answer(id, reply, now: now) }
            }
            // Complete requests: answer them, a bounded number at once, oldest first.
            while answering < limits.maximumAnswering, !waitingTurn.isEmpty {
                let id = waitingTurn.removeFirst()
                guard let connection = connections[id], let peer = connection.peer else { continue }
                answering += 1
                let request = connection.request
                Task { [self] in
                    let reply = await server.reply(to: request, from: peer)
                    finished.withLock { $0.append((id, reply)) }
                    UnixSocket.wake(wakeWrite)
                }
            }
            if stopping, answering == 0 { break }
            if !connections.isEmpty || answering > 0 { lastActivity = now }
            if let idleExit = limits.idleExit, connections.isEmpty, answering == 0, now - lastActivity >= idleExit {
                server.audit.flush(at: server.service.clock.now(), all: true)
                return .idle
            }
            // What to wait for, and until when.
            var entries = [UnixSocket.Waiting(wakeRead)]
            let accepting = !stopping && connections.count < limits.maximumConnections && now >= acceptPausedUntil
            if accepting { entries += sockets.map { UnixSocket.Waiting($0) } }
            var ids: [Int] = []
            var earliest = now + 0.5
            if let idleExit = limits.idleExit { earliest = min(earliest, lastActivity + idleExit) }
            if !accepting, now < acceptPausedUntil { earliest = min(earliest, acceptPausedUntil) }
            for (id, connection) in connections {
                switch connection.phase {
                case .reading(let deadline):
                    entries.append(UnixSocket.Waiting(connection.descriptor))
                    earliest = min(earliest, deadline)
                case .writing(_, _, let deadline):
                    entries.append(UnixSocket.Waiting(connection.descriptor, reading: false, writing: true))
                    earliest = min(earliest, deadline)
                case .answering: continue
                }
                ids.append(id)
            }
            UnixSocket.wait(&entries, within: max(0, earliest - now))
            now = ForwardClient.monotonicNow()
            if entries[0].readable { UnixSocket.drain(wakeRead) }
            // Ready connections first, then new ones.
            let connectionEntries = entries.suffix(ids.count)
            for (id, entry) in zip(ids, connectionEntries) {
                let ready = entry.readable || entry.writable || entry.failed
                guard ready else { continue }
                if entry.writing { sendAnswer(id, now: now) } else { readRequest(id, now: now) }
            }
            if accepting {
                for entry in entries.dropFirst().prefix(sockets.count) where entry.readable {
                    taking: for _ in 0..<64 where connections.count < limits.maximumConnections {
                        let descriptor: Int32
                        switch UnixSocket.acceptWaiting(entry.descriptor) {
                        case .nothing: break taking
                        case .exhausted:
                            // Out of descriptors: let open ones finish; the queue holds the rest.
                            acceptPausedUntil = now + 0.1
                            break taking
                        case .connection(let accepted): descriptor = accepted
                        }
                        nextID += 1
                        let id = nextID
                        lastActivity = now
                        switch UnixSocket.peer(of: descriptor) {
                        case .peer(let peer):
                            connections[id] = Connection(
                                descriptor: descriptor, peer: peer, phase: .reading(deadline: now + requestTimeout))
                            if let refused = server.admit(peer) { answer(id, refused, now: now) }
                        case .failed(let reason):
                            connections[id] = Connection(descriptor: descriptor, peer: nil, phase: .answering)
                            answer(id, server.unidentified(reason), now: now)
                        case .notASocket:
                            UnixSocket.close(descriptor)
                        }
                    }
                }
            }
            // Deadlines.
            for (id, connection) in connections {
                switch connection.phase {
                case .reading(let deadline) where now >= deadline:
                    if let reply = server.unread(.timedOut) { answer(id, reply, now: now) } else { drop(id) }
                case .writing(let reply, _, let deadline) where now >= deadline:
                    server.record(reply, peer: connection.peer, delivered: false)
                    drop(id)
                default: continue
                }
            }
            server.audit.flush(at: server.service.clock.now())
            if let report, now >= nextReport {
                nextReport = now + 60
                report(
                    "\(connections.count) connections open, \(answering) being answered, resident \(UnixSocket.residentKilobytes().map { "\($0) kB" } ?? "unknown")"
                )
            }
        }
        for id in Array(connections.keys) { drop(id) }
        server.audit.flush(at: server.service.clock.now(), all: true)
        return .stopped
    }
}
