import Synchronization
import TokenctlEssentials

/// Refused forward requests, summed up per peer (uid and command name) and minute: a peer's
/// first refusal in a minute is written at once (count 1), the rest of that minute's as one
/// `forwardRefused` record with their count and reasons when the minute ends; both in the
/// refusal log of their own (`EventLog.refusals`). A remote that sends thousands of bad
/// requests writes a few lines a minute there, and the hand-outs and the user's own events in
/// the main log stay where they are.
public final class ForwardAudit: Sendable {
    /// How long refusals are summed up before their record is written.
    public static let window: Double = 60
    /// At most this many peers get a record of their own per window; the rest share one.
    public static let maximumPeers = 16

    let log: EventLog?
    private let state = Mutex<State>(State())

    struct Key: Hashable {
        var uid: UInt32?
        var command: String?
    }

    struct Tally {
        var count = 0
        var reasons: [String: Int] = [:]
        var profiles: Set<String> = []
    }

    struct State {
        var windowStart: Double?
        var tallies: [Key: Tally] = [:]
        var order: [Key] = []
    }

    public init(log: EventLog?) { self.log = log }

    /// Count one refusal.
    public func refused(peer: UnixSocket.Peer?, reason: String, profile: String, at now: Double) {
        let records: [EventRecord] = state.withLock { state in
            var written: [EventRecord] = []
            if let start = state.windowStart, now - start >= Self.window { written = Self.drain(&state, at: now) }
            if state.windowStart == nil { state.windowStart = now }
            var key = Key(uid: peer?.uid, command: peer?.command.map(ForwardServer.commandName))
            if state.tallies[key] == nil, state.tallies.count >= Self.maximumPeers {
                key = Key(uid: nil, command: "other peers")
            }
            if state.tallies[key] == nil {
                state.order.append(key)
                state.tallies[key] = Tally()
                written.append(Self.record(key, count: 1, reasons: reason, profiles: [profile], seconds: nil, at: now))
                return written
            }
            state.tallies[key, default: Tally()].count += 1
            state.tallies[key, default: Tally()].reasons[reason, default: 0] += 1
            if state.tallies[key]!.profiles.count < 8 { state.tallies[key]!.profiles.insert(profile) }
            return written
        }
        for record in records { _ = log?.append(record) }
    }

    /// Write the summaries of a window that has ended (or of everything counted, `all`).
    public func flush(at now: Double, all: Bool = false) {
        let records: [EventRecord] = state.withLock { state in
            guard let start = state.windowStart, all || now - start >= Self.window else { return [] }
            return Self.drain(&state, at: now)
        }
        for record in records { _ = log?.append(record) }
    }

    private static func record(
        _ key: Key, count: Int, reasons: String, profiles: Set<String>, seconds: Int?, at now: Double
    ) -> EventRecord {
        let from =
            key.uid.map { "uid \($0)" + (key.command.map { " (\($0))" } ?? "") }
            ?? (key.command ?? "unidentified peers")
        let named = profiles.subtracting(["-"])
        var record = EventRecord(
            time: now, event: .forwardRefused, profile: named.count == 1 ? named.first! : "-",
            reason: seconds.map { "\(count) more refused in \(max($0, 1)) s from \(from): \(reasons)" }
                ?? "refused from \(from): \(reasons)")
        record.count = count
        return record
    }

    private static func drain(_ state: inout State, at now: Double) -> [EventRecord] {
        let seconds = Int((now - (state.windowStart ?? now)).rounded(.up))
        let records = state.order.compactMap { key -> EventRecord? in
            guard let tally = state.tallies[key], tally.count > 0 else { return nil }
            let reasons = tally.reasons.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
                .prefix(6).map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            return record(
                key, count: tally.count, reasons: reasons, profiles: tally.profiles, seconds: seconds, at: now)
        }
        state = State()
        return records
    }
}

/// Remote forced refreshes per profile: one per `interval` across all clients of a serving
/// process. Kept in memory: the serving process is one, and it exits when idle only after
/// `ForwardListener.idleExit` (longer than the interval) with no connection, so an idle restart
/// never shortens it; a stop or crash of the process forgets it (one more refresh at most).
public final class ForcedRefreshLimit: Sendable {
    public let interval: Double
    private let last = Mutex<[String: Double]>([:])

    public init(interval: Double = 30) { self.interval = interval }

    /// A claim on the profile's next forced refresh, or nil while the interval since the last
    /// one runs.
    public struct Claim: Sendable {
        var profile: String
        var previous: Double?
    }

    public func claim(_ profile: String, at now: Double) -> Claim? {
        last.withLock { last in
            let previous = last[profile]
            if let previous, now - previous < interval, now >= previous { return nil }
            last[profile] = now
            return Claim(profile: profile, previous: previous)
        }
    }

    /// Give back a claim whose refresh never reached the server.
    public func release(_ claim: Claim) {
        last.withLock { last in last[claim.profile] = claim.previous }
    }
}
