import Dispatch
import Synchronization
import TokenctlEssentials

/// Where one request's outcome arrives, from the connection's reader.
final class ReportSlot: Sendable {
    private let state = Mutex<
        (outcome: DetachedRefreshWire.Outcome?, waiter: CheckedContinuation<DetachedRefreshWire.Outcome, Never>?)
    >((nil, nil))

    func fulfil(_ outcome: DetachedRefreshWire.Outcome) {
        let waiter = state.withLock { state -> CheckedContinuation<DetachedRefreshWire.Outcome, Never>? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: outcome)
    }

    func outcome() async -> DetachedRefreshWire.Outcome {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> DetachedRefreshWire.Outcome? in
                if let outcome = state.outcome { return outcome }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// One detached child and the requests waiting for its reports: a reader on a Dispatch thread
/// routes each report to its request's slot, gives up on a request at its limit, and fails what
/// is left when the child ends. When no request waits any more, the connection closes its side
/// (the child finishes and exits) and takes no new ones.
final class ChildConnection: Sendable {
    private let child: Subprocess.DetachedChild
    var pid: Int32 { child.pid }

    private struct Waiting {
        var slot: ReportSlot
        var limit: Double
        var relay: DetachedRefreshWire.Relay
    }

    private struct State {
        var waiting: [UInt64: Waiting] = [:]
        var nextID: UInt64 = 1
        var closing = false
    }

    private let state = Mutex(State())
    /// Held while a request is written: requests of several callers never interleave.
    private let writing = Mutex(())

    init(_ child: Subprocess.DetachedChild) {
        self.child = child
        DispatchQueue.global(qos: .userInitiated).async { [self] in readReports() }
    }

    var isClosing: Bool { state.withLock { $0.closing } }

    /// Send `request`; nil when this connection no longer takes requests.
    func submit(_ request: DetachedRefresh.Request, limit: Double, relay: @escaping DetachedRefreshWire.Relay)
        -> ReportSlot?
    {
        let slot = ReportSlot()
        let id: UInt64? = state.withLock { state in
            guard !state.closing else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.waiting[id] = Waiting(slot: slot, limit: limit, relay: relay)
            return id
        }
        guard let id else { return nil }
        let bytes: [UInt8]
        do { bytes = try DetachedRefreshWire.encode(request, id: id) } catch {
            finish(id, .failure(TokenctlError(.unexpected, "could not prepare the refresh: \(error)")))
            return slot
        }
        let written = writing.withLock { _ in Descriptor.writeAll(child.socket, bytes) }
        if written != 0 { finish(id, .noAnswer("could not be sent the request")) }
        return slot
    }

    /// Hand `outcome` to request `id`; close this side once nothing waits.
    private func finish(_ id: UInt64, _ outcome: DetachedRefreshWire.Outcome) {
        let slot = state.withLock { state -> ReportSlot? in
            let slot = state.waiting.removeValue(forKey: id)?.slot
            if state.waiting.isEmpty && !state.closing {
                state.closing = true
                child.finishSending()
            }
            return slot
        }
        slot?.fulfil(outcome)
    }

    private func readReports() {
        var pending: [UInt8] = []
        var fields: [UInt64: [String: [UInt8]]] = [:]
        var buffer = [UInt8](repeating: 0, count: 16384)
        defer {
            let left = state.withLock { state -> [ReportSlot] in
                state.closing = true
                defer { state.waiting = [:] }
                return state.waiting.values.map(\.slot)
            }
            left.forEach { $0.fulfil(.noAnswer("ended without a report")) }
            child.close()
            child.reap()
        }
        while true {
            let now = Clock.system.now()
            let expired = state.withLock { state in state.waiting.filter { $0.value.limit <= now }.map(\.key) }
            expired.forEach { finish($0, .noAnswer("has not answered in time")) }
            let next = state.withLock { state in state.waiting.values.map(\.limit).min() }
            if !child.waitReadable(timeout: next.map { $0 - now } ?? 60) { continue }
            let count = Descriptor.retryingInterrupted {
                buffer.withUnsafeMutableBytes { system_read(child.socket, $0.baseAddress, $0.count) }
            }
            if count <= 0 { return }
            pending += buffer[0..<count]
            let parsed: (records: [(String, [UInt8])], used: Int)
            do { parsed = try DetachedRefreshWire.records(pending[...]) } catch { return }
            pending.removeFirst(parsed.used)
            guard pending.count <= 2 * DetachedRefreshWire.maximumSize else { return }
            for (tag, payload) in parsed.records {
                guard let (id, name) = DetachedRefreshWire.split(tag) else { return }
                switch name {
                case "narrate", "notice":
                    let text = String(decoding: payload, as: UTF8.self)
                    let record: DetachedRefreshWire.Record = name == "narrate" ? .narration(text) : .notice(text)
                    // Id 0: the child's service speaking for whatever runs: every caller hears it.
                    let relays = state.withLock { state in
                        id == 0 ? state.waiting.values.map(\.relay) : state.waiting[id].map { [$0.relay] } ?? []
                    }
                    relays.forEach { $0(record) }
                case "end":
                    finish(id, DetachedRefreshWire.outcome(fields.removeValue(forKey: id) ?? [:]))
                default:
                    guard fields[id, default: [:]].count < 16 else { return }
                    fields[id, default: [:]][name] = payload
                }
            }
        }
    }
}
