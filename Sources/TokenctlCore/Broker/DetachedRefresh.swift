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
/// The caller waits on a pipe for what the child reports (its narration, then the token set or
/// the error) and hands it out as if it had refreshed itself. Only a kill of everything (the
/// cgroup, the machine) can still lose the refresh in flight.
///
/// The price is one process start, paid only on a refresh; the hot path never comes here.
/// Nothing secret crosses argv or the environment: the request goes on the child's standard
/// input, the answer comes back on its standard output: one socket pair of this process's own.
public struct DetachedRefresh: Sendable {
    /// The engine executable the child runs (this very engine).
    public var enginePath: String
    /// What the child needs to build the same service as the caller.
    public var settings: Settings
    /// Told what a store prompt asks a person (printed even without `--verbose`).
    public var notice: (@Sendable (String) -> Void)?

    /// The caller's service settings, so the child's bounds are the caller's.
    public struct Settings: Sendable, Equatable {
        public var retryDeadline: Double
        public var attemptTimeout: Double
        public var lockTimeout: Double
        public var storeCallTimeout: Double
        public var interactive: Bool
        public var verbose: Bool
        public var userAgent: String

        public init(
            retryDeadline: Double, attemptTimeout: Double, lockTimeout: Double, storeCallTimeout: Double,
            interactive: Bool, verbose: Bool, userAgent: String
        ) {
            self.retryDeadline = retryDeadline
            self.attemptTimeout = attemptTimeout
            self.lockTimeout = lockTimeout
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

    /// Run `request` in a detached child and return what it reports.
    ///
    /// - Throws: the child's error as it reported it; `.transient` when the child cannot be
    ///   started (nothing was sent) or has not answered by the time the caller gives up (the
    ///   child goes on and stores what the server answers).
    func run(_ request: Request, narrate: TokenBroker.Narrator?) async throws(TokenctlError) -> TokenSet {
        let bytes: [UInt8]
        do { bytes = try DetachedRefreshWire.encode(request) } catch {
            throw TokenctlError(.unexpected, "could not prepare the refresh of profile '\(request.profile)': \(error)")
        }
        guard let child = Subprocess.detach([enginePath, Self.childArgument]) else {
            throw TokenctlError(
                .transient,
                "could not start the refresh process for profile '\(request.profile)' (\(enginePath))",
                hint: "Nothing was sent; the session is kept. Try again later.")
        }
        narrate?(
            "refreshing in a detached process (pid \(child.pid)) that finishes the exchange even if this one is killed")
        let limit = Self.waitLimit(request, now: Clock.system.now())
        let notice = self.notice
        let result = await BlockingCall.run({ () -> DetachedRefreshWire.Outcome in
            _ = Descriptor.writeAll(child.socket, bytes)
            child.finishSending()
            return DetachedRefreshWire.read(from: child, until: limit) { record in
                switch record {
                case .narration(let line): narrate?(line)
                case .notice(let line): notice?(line)
                }
            }
        })
        switch result {
        case .tokens(let tokenSet):
            return tokenSet
        case .failure(let error):
            throw error
        case .noAnswer(let why):
            throw TokenctlError(
                .transient,
                "the refresh process of profile '\(request.profile)' (pid \(child.pid)) \(why)",
                hint:
                    "It goes on by itself and stores what the server answers; the session is kept. Run '\(CommandHint.tokenctl(request.profile, "token"))' again in a moment."
            )
        }
    }

    /// How long the caller waits: past the deadline by as much as the child may take past it (a
    /// sent refresh gets `RetryPolicy.sentRefreshMinimum`, the write of its answer
    /// `SecretServiceStore.minimumWriteTime`), with room to spare.
    static func waitLimit(_ request: Request, now: Double) -> Double {
        let end =
            request.deadline?.time
            ?? now + request.settings.lockTimeout + request.settings.retryDeadline
        return end + 15
    }

    // MARK: The child's side

    /// The child: read one request from standard input, refresh in this process, report on
    /// standard output, exit. Returns the exit status (0 once a report was written; the report
    /// carries the outcome).
    public static func serveChild(standardInput: Int32 = 0, standardOutput: Int32 = 1) async -> Int32 {
        let output = DetachedRefreshWire.Writer(descriptor: standardOutput)
        let request: Request
        do { request = try DetachedRefreshWire.decodeRequest(DetachedRefreshWire.readAll(standardInput)) } catch {
            output.failure(TokenctlError(.unexpected, "the detached refresh got an unreadable request: \(error)"))
            return 64
        }
        let settings = request.settings
        var retry = RetryPolicy(deadline: settings.retryDeadline, attemptTimeout: settings.attemptTimeout)
        retry.commandDeadline = request.deadline
        let paths: Paths
        do { paths = try Paths.resolve() } catch {
            output.failure(TokenctlError(.configuration, error.description))
            return 0
        }
        let notice: (@Sendable (String) -> Void)? =
            settings.interactive ? { @Sendable (line: String) in output.notice(line) } : nil
        let narrate: TokenBroker.Narrator? =
            settings.verbose ? { @Sendable (line: String) in output.narration(line) } : nil
        let storeOptions = SecretServiceStore.Options(
            callTimeout: settings.storeCallTimeout, interactive: settings.interactive, promptNotice: notice)
        let service = TokenctlService.live(
            paths: paths, retry: retry, userAgent: settings.userAgent, lockTimeout: settings.lockTimeout,
            deadline: request.deadline, storeOptions: storeOptions, narrate: narrate)
        do throws(TokenctlError) {
            let profile = try service.resolve(request.profile)
            let tokenSet = try await service.broker.refreshUnderLock(
                profile, target: request.target, snapshot: request.snapshot,
                minimumTimeToLive: request.minimumTimeToLive, force: request.force, capMargin: request.capMargin)
            output.tokens(tokenSet)
        } catch {
            output.failure(error)
        }
        return 0
    }
}

/// The records between a caller and its detached refresh: `TAG LENGTH\n` and LENGTH bytes,
/// repeated. Tags of the request: the refresh's parameters; of the report: `narrate`, `notice`,
/// then `tokens` (the token set as the Secret Service stores it) or `error-kind`, `error-message`
/// and `error-hint`, then `end`.
enum DetachedRefreshWire {
    /// At most this many bytes either way: a token set is a few KiB (targets, a DPoP key).
    static let maximumSize = 1 << 20

    struct WireError: Error, CustomStringConvertible {
        var description: String
    }

    enum Record {
        case narration(String)
        case notice(String)
    }

    enum Outcome {
        case tokens(TokenSet)
        case failure(TokenctlError)
        case noAnswer(String)
    }

    static func record(_ tag: String, _ payload: some Collection<UInt8>) -> [UInt8] {
        Array("\(tag) \(payload.count)\n".utf8) + payload
    }

    static func record(_ tag: String, _ text: String) -> [UInt8] { record(tag, Array(text.utf8)) }

    /// The records in `bytes` in order, and how many bytes they took (a partial record is left).
    static func records(_ bytes: ArraySlice<UInt8>) throws(WireError) -> (records: [(String, [UInt8])], used: Int) {
        var result: [(String, [UInt8])] = []
        var index = bytes.startIndex
        while let newline = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) {
            let header = bytes[index..<newline]
            guard let space = header.firstIndex(of: UInt8(ascii: " ")), header.count <= 64,
                let length = Int(String(decoding: header[(space + 1)...], as: UTF8.self)), length >= 0,
                length <= maximumSize
            else { throw WireError(description: "a malformed record header") }
            let start = newline + 1
            guard bytes.endIndex - start >= length else { break }
            result.append((String(decoding: header[..<space], as: UTF8.self), Array(bytes[start..<(start + length)])))
            index = start + length
        }
        return (result, index - bytes.startIndex)
    }

    // MARK: Request

    static func encode(_ request: DetachedRefresh.Request) throws -> [UInt8] {
        var bytes: [UInt8] = []
        func add(_ tag: String, _ text: String) { bytes += record(tag, text) }
        func add(_ tag: String, _ number: Double) { add(tag, "\(number)") }
        func add(_ tag: String, _ flag: Bool) { add(tag, flag ? "1" : "0") }
        add("profile", request.profile.rawValue)
        if let scope = request.target.scopeField { add("scope", scope) }
        if let audience = request.target.audience { add("audience", audience) }
        if let resource = request.target.resourceField { add("resource", resource) }
        if let snapshot = request.snapshot { bytes += record("snapshot", try snapshot.encoded()) }
        add("min-ttl", request.minimumTimeToLive)
        add("force", request.force)
        add("cap-margin", request.capMargin)
        if let deadline = request.deadline { add("deadline", deadline.time) }
        let settings = request.settings
        add("retry-deadline", settings.retryDeadline)
        add("attempt-timeout", settings.attemptTimeout)
        add("lock-timeout", settings.lockTimeout)
        add("store-call-timeout", settings.storeCallTimeout)
        add("interactive", settings.interactive)
        add("verbose", settings.verbose)
        add("user-agent", settings.userAgent)
        bytes += record("end", "")
        return bytes
    }

    static func decodeRequest(_ bytes: [UInt8]) throws -> DetachedRefresh.Request {
        let (records, used) = try records(bytes[...])
        guard used == bytes.count, records.last?.0 == "end" else {
            throw WireError(description: "an incomplete request")
        }
        var fields: [String: [UInt8]] = [:]
        for (tag, payload) in records.dropLast() {
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
                retryDeadline: try number("retry-deadline"), attemptTimeout: try number("attempt-timeout"),
                lockTimeout: try number("lock-timeout"), storeCallTimeout: try number("store-call-timeout"),
                interactive: try flag("interactive"), verbose: try flag("verbose"),
                userAgent: text("user-agent") ?? "tokenctl"))
    }

    /// Standard input to its end, at most `maximumSize` bytes.
    static func readAll(_ descriptor: Int32) throws(WireError) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = Descriptor.retryingInterrupted {
                buffer.withUnsafeMutableBytes { system_read(descriptor, $0.baseAddress, $0.count) }
            }
            if count < 0 { throw WireError(description: "read: \(system_strerror(system_errno))") }
            if count == 0 { return bytes }
            bytes += buffer[0..<count]
            if bytes.count > maximumSize { throw WireError(description: "a request over \(maximumSize) bytes") }
        }
    }

    // MARK: Report

    /// The child's report writer. A write to a caller that is gone fails with EPIPE (the engine
    /// ignores SIGPIPE) and changes nothing: by then the answer is stored.
    struct Writer: Sendable {
        var descriptor: Int32

        func narration(_ line: String) { _ = Descriptor.writeAll(descriptor, record("narrate", line)) }
        func notice(_ line: String) { _ = Descriptor.writeAll(descriptor, record("notice", line)) }

        func tokens(_ tokenSet: TokenSet) {
            guard let bytes = try? tokenSet.encoded() else {
                failure(TokenctlError(.unexpected, "the refreshed token set could not be handed back"))
                return
            }
            _ = Descriptor.writeAll(descriptor, record("tokens", bytes) + record("end", ""))
        }

        func failure(_ error: TokenctlError) {
            var bytes = record("error-kind", kindName(error.kind)) + record("error-message", error.message)
            if let hint = error.hint { bytes += record("error-hint", hint) }
            _ = Descriptor.writeAll(descriptor, bytes + record("end", ""))
        }
    }

    static let kinds: [(TokenctlError.Kind, String)] = [
        (.invalidInput, "invalid-input"), (.configuration, "configuration"), (.loginRequired, "login-required"),
        (.storeUnavailable, "store-unavailable"), (.serviceUnavailable, "service-unavailable"),
        (.transient, "transient"), (.protocolError, "protocol-error"), (.unexpected, "unexpected"),
    ]

    static func kindName(_ kind: TokenctlError.Kind) -> String { kinds.first { $0.0 == kind }!.1 }

    /// Read the child's report until its `end`, its exit, or `limit` (a `Clock` time), passing
    /// narration and notices to `relay` as they come; then reap the child if it has ended.
    static func read(from child: Subprocess.DetachedChild, until limit: Double, relay: (Record) -> Void) -> Outcome {
        var pending: [UInt8] = []
        var fields: [String: [UInt8]] = [:]
        var buffer = [UInt8](repeating: 0, count: 16384)
        defer { child.close() }
        while true {
            let left = limit - Clock.system.now()
            guard left > 0 else { return .noAnswer("has not answered in time") }
            guard child.waitReadable(timeout: left) else { continue }
            let count = Descriptor.retryingInterrupted {
                buffer.withUnsafeMutableBytes { system_read(child.socket, $0.baseAddress, $0.count) }
            }
            if count <= 0 {
                child.reap()
                return .noAnswer("ended without a report")
            }
            pending += buffer[0..<count]
            guard pending.count <= 2 * maximumSize else { return .noAnswer("sent more than a report can hold") }
            let parsed: (records: [(String, [UInt8])], used: Int)
            do { parsed = try records(pending[...]) } catch { return .noAnswer("sent \(error)") }
            pending.removeFirst(parsed.used)
            for (tag, payload) in parsed.records {
                let text = String(decoding: payload, as: UTF8.self)
                switch tag {
                case "narrate": relay(.narration(text))
                case "notice": relay(.notice(text))
                case "end":
                    child.reap()
                    return outcome(fields)
                default: fields[tag] = payload
                }
            }
        }
    }

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
