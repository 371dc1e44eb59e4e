import Synchronization
import TokenctlEssentials

/// The records between a caller and its detached refresh: `ID:TAG LENGTH\n` and LENGTH bytes,
/// repeated; ID a request's number. Tags of a request: the refresh's parameters, then `end`; of
/// its report: `narrate`, `notice` (id 0: not tied to one request), then `tokens` (the token
/// set as the Secret Service stores it) or `error-kind`, `error-message` and `error-hint` (the
/// `Suggestion` in JSON, for the caller's command layer to render), then `end`.
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
            if let hint = error.hint, let json = try? JSONEncoder().encode(hint) {
                bytes += record("\(id):error-hint", Array(json))
            }
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
        let hint = fields["error-hint"].flatMap { try? JSONDecoder().decode(Suggestion.self, from: Data($0)) }
        return .failure(TokenctlError(kind, message, hint: hint))
    }
}
