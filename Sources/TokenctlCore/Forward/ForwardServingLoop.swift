import TokenctlEssentials

/// The state of `ForwardListener`'s loop and its steps, on the loop's own thread only: the open
/// connections and where each is (reading its request, waiting for its answer, writing it),
/// the complete requests waiting their turn, and the accept pause.
struct ForwardServingLoop {
    enum Phase {
        case reading(deadline: Double)
        case answering
        case writing(ForwardServer.Reply, offset: Int, deadline: Double)
    }

    struct Connection {
        var descriptor: Int32
        var peer: UnixSocket.Peer?
        var request: [UInt8] = []
        var phase: Phase
    }

    /// What one poll(2) waits for: the wake-up pipe, the listening sockets when accepting, and
    /// the connections in `ids`' order; and the time to wake up by.
    struct Waiting {
        var entries: [UnixSocket.Waiting]
        var ids: [Int]
        var accepting: Bool
        var until: Double
    }

    let listener: ForwardListener
    var connections: [Int: Connection] = [:]
    var waitingTurn: [Int] = []
    var answering = 0
    var nextID = 0
    var lastActivity: Double
    var acceptPausedUntil = 0.0
    var nextReport: Double

    init(listener: ForwardListener, now: Double) {
        self.listener = listener
        lastActivity = now
        nextReport = now + 60
    }

    var server: ForwardServer { listener.server }
    var limits: ForwardListener.Limits { listener.limits }
    var isBusy: Bool { !connections.isEmpty || answering > 0 }

    func idleExitDue(now: Double) -> Bool {
        guard let idleExit = limits.idleExit else { return false }
        return connections.isEmpty && answering == 0 && now - lastActivity >= idleExit
    }

    // MARK: Answers

    /// Write the answers the tasks finished.
    mutating func writeFinishedAnswers(now: Double) {
        for (id, reply) in listener.finished.withLock({ list in
            defer { list.removeAll() }
            return list
        }) {
            answering -= 1
            if connections[id] != nil { answer(id, reply, now: now) }
        }
    }

    /// Answer complete requests in tasks, a bounded number at once, oldest first.
    mutating func startWaitingAnswers() {
        while answering < limits.maximumAnswering, !waitingTurn.isEmpty {
            let id = waitingTurn.removeFirst()
            guard let connection = connections[id], let peer = connection.peer else { continue }
            answering += 1
            let request = connection.request
            let listener = self.listener
            Task {
                let reply = await listener.server.reply(to: request, from: peer)
                listener.finished.withLock { $0.append((id, reply)) }
                UnixSocket.wake(listener.wakeWrite)
            }
        }
    }

    mutating func answer(_ id: Int, _ reply: ForwardServer.Reply, now: Double) {
        let deadline = now + server.answerTimeout
        connections[id]?.phase = .writing(reply, offset: 0, deadline: deadline)
        sendAnswer(id)
    }

    mutating func sendAnswer(_ id: Int) {
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

    // MARK: Requests

    mutating func readRequest(_ id: Int, now: Double) {
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

    // MARK: Waiting

    func waitingList(now: Double, stopping: Bool) -> Waiting {
        var entries = [UnixSocket.Waiting(listener.wakeRead)]
        let accepting = !stopping && connections.count < limits.maximumConnections && now >= acceptPausedUntil
        if accepting { entries += listener.sockets.map { UnixSocket.Waiting($0) } }
        var ids: [Int] = []
        var until = now + 0.5
        if let idleExit = limits.idleExit { until = min(until, lastActivity + idleExit) }
        if !accepting, now < acceptPausedUntil { until = min(until, acceptPausedUntil) }
        for (id, connection) in connections {
            switch connection.phase {
            case .reading(let deadline):
                entries.append(UnixSocket.Waiting(connection.descriptor))
                until = min(until, deadline)
            case .writing(_, _, let deadline):
                entries.append(UnixSocket.Waiting(connection.descriptor, reading: false, writing: true))
                until = min(until, deadline)
            case .answering: continue
            }
            ids.append(id)
        }
        return Waiting(entries: entries, ids: ids, accepting: accepting, until: until)
    }

    /// After poll(2): ready connections first, then new ones.
    mutating func serveReady(_ waiting: Waiting, now: Double) {
        if waiting.entries[0].readable { UnixSocket.drain(listener.wakeRead) }
        for (id, entry) in zip(waiting.ids, waiting.entries.suffix(waiting.ids.count)) {
            guard entry.readable || entry.writable || entry.failed else { continue }
            if entry.writing { sendAnswer(id) } else { readRequest(id, now: now) }
        }
        guard waiting.accepting else { return }
        for entry in waiting.entries.dropFirst().prefix(listener.sockets.count) where entry.readable {
            acceptWaiting(on: entry.descriptor, now: now)
        }
    }

    /// Take up to 64 connections from one listening socket's queue, while under the limit.
    mutating func acceptWaiting(on socket: Int32, now: Double) {
        for _ in 0..<64 where connections.count < limits.maximumConnections {
            let descriptor: Int32
            switch UnixSocket.acceptWaiting(socket) {
            case .nothing: return
            case .exhausted:
                // Out of descriptors: let open ones finish; the queue holds the rest.
                acceptPausedUntil = now + 0.1
                return
            case .connection(let accepted): descriptor = accepted
            }
            nextID += 1
            let id = nextID
            lastActivity = now
            switch UnixSocket.peer(of: descriptor) {
            case .peer(let peer):
                connections[id] = Connection(
                    descriptor: descriptor, peer: peer, phase: .reading(deadline: now + server.requestTimeout))
                if let refused = server.admit(peer) { answer(id, refused, now: now) }
            case .failed(let reason):
                connections[id] = Connection(descriptor: descriptor, peer: nil, phase: .answering)
                answer(id, server.unidentified(reason), now: now)
            case .notASocket:
                UnixSocket.close(descriptor)
            }
        }
    }

    // MARK: Deadlines, reports, the end

    /// A silent peer is cut at its request's deadline, a slow reader at its answer's.
    mutating func enforceDeadlines(now: Double) {
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
    }

    mutating func reportIfDue(now: Double) {
        guard let report = listener.report, now >= nextReport else { return }
        nextReport = now + 60
        let resident = UnixSocket.residentKilobytes().map { "\($0) kB" } ?? "unknown"
        report("\(connections.count) connections open, \(answering) being answered, resident \(resident)")
    }

    /// Close a connection, zeroing the request and answer it held.
    mutating func drop(_ id: Int) {
        guard var connection = connections.removeValue(forKey: id) else { return }
        if case .writing(var reply, _, _) = connection.phase {
            reply.answer.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
        }
        connection.request.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
        UnixSocket.close(connection.descriptor)
    }

    mutating func dropAll() {
        for id in Array(connections.keys) { drop(id) }
    }
}
