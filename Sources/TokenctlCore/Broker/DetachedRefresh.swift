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
                    "It goes on by itself and stores what the server answers; the session is kept. Run '\(CommandHint.tokenctl(request.profile, "token"))' again in a moment."
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

/// The records between a caller and its detached refresh: `ID:TAG LENGTH\n` and LENGTH bytes,
/// repeated; ID a request's number. Tags of a request: the refresh's parameters, then `end`; of
/// its report: `narrate`, `notice` (id 0: not tied to one request), then `tokens` (the token
/// set as the Secret Service stores it) or `error-kind`, `error-message` and `error-hint`,
/// then `end`.
enum DetachedRefreshWire {
    /// At most this many bytes in a record: a token set is a few KiB (targets, a DPoP key).
    static let maximumSize = 1 << 20

    struct WireError: Error, CustomStringConvertible {
        var description: String
    }

    enum Record {
        case narration(String)
        case notice(String)
    }

    typealias Relay = @Sendable (Record) -> Void

    enum Outcome: Sendable {
        case tokens(TokenSet)
        case failure(TokenctlError)
        case noAnswer(String)
    }

    static func record(_ tag: String, _ payload: some Collection<UInt8>) -> [UInt8] {
        Array("\(tag) \(payload.count)\n".utf8) + payload
    }

    static func record(_ tag: String, _ text: String) -> [UInt8] { record(tag, Array(text.utf8)) }

    /// A tag's request id and name (`7:profile`).
    static func split(_ tag: String) -> (UInt64, String)? {
        guard let colon = tag.firstIndex(of: ":"), let id = UInt64(tag[..<colon]) else { return nil }
        return (id, String(tag[tag.index(after: colon)...]))
    }

    /// The records in `bytes` in order, and how many bytes they took (a partial record is left).
    static func records(_ bytes: ArraySlice<UInt8>) throws(WireError) -> (records: [(String, [UInt8])], used: Int) {
        var result: [(String, [UInt8])] = []
        var index = bytes.startIndex
        while let newline = bytes[index...].prefix(96).firstIndex(of: UInt8(ascii: "\n")) {
            let header = bytes[index..<newline]
            guard let space = header.firstIndex(of: UInt8(ascii: " ")),
                let length = Int(String(decoding: header[(space + 1)...], as: UTF8.self)), length >= 0,
                length <= maximumSize
            else { throw WireError(description: "a malformed record header") }
            let start = newline + 1
            guard bytes.endIndex - start >= length else { break }
            result.append((String(decoding: header[..<space], as: UTF8.self), Array(bytes[start..<(start + length)])))
            index = start + length
        }
        if bytes.endIndex - index >= 96 && !bytes[index...].prefix(96).contains(UInt8(ascii: "\n")) {
            throw WireError(description: "a record header over 96 bytes")
        }
        return (result, index - bytes.startIndex)
    }

    // MARK: Request

    static func encode(_ request: DetachedRefresh.Request, id: UInt64) throws -> [UInt8] {
        var bytes: [UInt8] = []
        func add(_ tag: String, _ text: String) { bytes += record("\(id):\(tag)", text) }
        func add(_ tag: String, _ number: Double) { add(tag, "\(number)") }
        func add(_ tag: String, _ flag: Bool) { add(tag, flag ? "1" : "0") }
        add("profile", request.profile.rawValue)
        if let scope = request.target.scopeField { add("scope", scope) }
        if let audience = request.target.audience { add("audience", audience) }
        if let resource = request.target.resourceField { add("resource", resource) }
        if let snapshot = request.snapshot { bytes += record("\(id):snapshot", try snapshot.encoded()) }
        add("min-ttl", request.minimumTimeToLive)
        add("force", request.force)
        add("cap-margin", request.capMargin)
        if let deadline = request.deadline { add("deadline", deadline.time) }
        let settings = request.settings
        add("timeout", settings.timeout)
        add("store-call-timeout", settings.storeCallTimeout)
        add("interactive", settings.interactive)
        add("verbose", settings.verbose)
        add("user-agent", settings.userAgent)
        add("end", "")
        return bytes
    }

    /// A request from its fields (its records up to `end`, without the id).
    static func decodeRequest(_ records: [(String, [UInt8])]) throws -> DetachedRefresh.Request {
        var fields: [String: [UInt8]] = [:]
        for (tag, payload) in records {
            guard fields.updateValue(payload, forKey: tag) == nil else {
                throw WireError(description: "'\(tag)' given twice")
            }
        }
        func text(_ tag: String) -> String? { fields[tag].map { String(decoding: $0, as: UTF8.self) } }
        func number(_ tag: String) throws -> Double {
            guard let value = text(tag).flatMap(Double.init), value.isFinite else {
                throw WireError(description: "no number '\(tag)'")
            }
            return value
        }
        func flag(_ tag: String) throws -> Bool {
            switch text(tag) {
            case "1": return true
            case "0": return false
            default: throw WireError(description: "no flag '\(tag)'")
            }
        }
        guard let profile = text("profile").flatMap(ProfileName.init(rawValue:)) else {
            throw WireError(description: "no valid profile")
        }
        let target = try TokenTarget(scope: text("scope"), audience: text("audience"), resource: text("resource"))
        return DetachedRefresh.Request(
            profile: profile, target: target, snapshot: try fields["snapshot"].map { try TokenSet.decode($0) },
            minimumTimeToLive: try number("min-ttl"), force: try flag("force"), capMargin: try flag("cap-margin"),
            deadline: fields["deadline"] == nil ? nil : Deadline(try number("deadline")),
            settings: DetachedRefresh.Settings(
                timeout: try number("timeout"), storeCallTimeout: try number("store-call-timeout"),
                interactive: try flag("interactive"), verbose: try flag("verbose"),
                userAgent: text("user-agent") ?? "tokenctl"))
    }

    /// Read requests from `descriptor` until its end, handing each to `deliver` with its id as
    /// soon as its `end` arrives. A malformed stream ends the reading (what was delivered runs).
    static func readRequests(
        from descriptor: Int32, _ deliver: ((UInt64, Result<DetachedRefresh.Request, WireError>)) -> Void
    ) {
        var pending: [UInt8] = []
        var fields: [UInt64: [(String, [UInt8])]] = [:]
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = Descriptor.retryingInterrupted {
                buffer.withUnsafeMutableBytes { system_read(descriptor, $0.baseAddress, $0.count) }
            }
            if count <= 0 { return }
            pending += buffer[0..<count]
            guard let parsed = try? records(pending[...]) else { return }
            pending.removeFirst(parsed.used)
            for (tag, payload) in parsed.records {
                guard let (id, name) = split(tag), id != 0 else { return }
                if name == "end" {
                    let request: Result<DetachedRefresh.Request, WireError>
                    do { request = .success(try decodeRequest(fields.removeValue(forKey: id) ?? [])) } catch {
                        request = .failure((error as? WireError) ?? WireError(description: "\(error)"))
                    }
                    deliver((id, request))
                } else {
                    guard fields[id, default: []].count < 32, fields.count < 64 else { return }
                    fields[id, default: []].append((name, payload))
                }
            }
        }
    }

    // MARK: Report

    /// The child's report writer, shared by its concurrent requests: each write of records is
    /// whole (a lock), so records of two requests never interleave. A write to a caller that is
    /// gone fails with EPIPE (the engine ignores SIGPIPE) and changes nothing: by then the answer
    /// is stored.
    final class Writer: Sendable {
        let descriptor: Int32
        private let lock = Mutex(())

        init(descriptor: Int32) { self.descriptor = descriptor }

        private func emit(_ bytes: [UInt8]) { lock.withLock { _ in _ = Descriptor.writeAll(descriptor, bytes) } }

        func narration(_ line: String) { emit(record("0:narrate", line)) }
        func notice(_ line: String) { emit(record("0:notice", line)) }

        func tokens(_ id: UInt64, _ tokenSet: TokenSet) {
            guard let bytes = try? tokenSet.encoded() else {
                failure(id, TokenctlError(.unexpected, "the refreshed token set could not be handed back"))
                return
            }
            emit(record("\(id):tokens", bytes) + record("\(id):end", ""))
        }

        func failure(_ id: UInt64, _ error: TokenctlError) {
            var bytes =
                record("\(id):error-kind", kindName(error.kind)) + record("\(id):error-message", error.message)
            if let hint = error.hint { bytes += record("\(id):error-hint", hint) }
            emit(bytes + record("\(id):end", ""))
        }
    }

    static let kinds: [(TokenctlError.Kind, String)] = [
        (.invalidInput, "invalid-input"), (.configuration, "configuration"), (.loginRequired, "login-required"),
        (.storeUnavailable, "store-unavailable"), (.serviceUnavailable, "service-unavailable"),
        (.transient, "transient"), (.protocolError, "protocol-error"), (.unexpected, "unexpected"),
    ]

    static func kindName(_ kind: TokenctlError.Kind) -> String { kinds.first { $0.0 == kind }!.1 }

    /// A report's outcome from its fields (without the id).
    static func outcome(_ fields: [String: [UInt8]]) -> Outcome {
        if let bytes = fields["tokens"] {
            guard let tokenSet = try? TokenSet.decode(bytes) else {
                return .noAnswer("reported a token set that cannot be read")
            }
            return .tokens(tokenSet)
        }
        func text(_ tag: String) -> String? { fields[tag].map { String(decoding: $0, as: UTF8.self) } }
        guard let name = text("error-kind"), let kind = kinds.first(where: { $0.1 == name })?.0,
            let message = text("error-message")
        else { return .noAnswer("reported neither tokens nor an error") }
        return .failure(TokenctlError(kind, message, hint: text("error-hint")))
    }
}
