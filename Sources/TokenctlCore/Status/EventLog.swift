import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The lifecycle events of sessions, each tagged with an audit significance.
public enum SessionEvent: String, Sendable, CaseIterable {
    case signedIn, signedOut, tokenRefreshed, sessionEnded, refreshFailed, sessionRevoked, storeUnavailable
    /// A rotation held in the rotation journal reached the Secret Service.
    case pendingWriteCompleted
    /// A logout removed the session here, but the server did not revoke its token (the reason
    /// says why): the refresh token may stay valid at the server until it expires.
    case revocationFailed
    /// A refresh of the session's own token was granted fewer scopes than the session had:
    /// the server narrowed the grant (some do after a narrowed refresh, `token --scope`).
    case scopeNarrowed
    /// A login bound the new session to its DPoP key (the reason is the key's thumbprint, `jkt:…`).
    case dpopBound
    /// A token response to a DPoP request was refused: a Bearer token or one bound to another
    /// key (the reason says which); the session was not replaced.
    case dpopDowngradeRefused
    /// An access token was handed out over the forward socket (`tokenctl forward`); the reason
    /// names the peer process, the target and the client's command. Never the token.
    case tokenForwarded
    /// Forwarded requests were refused (a profile not forwarded, a target beyond its limits,
    /// another user, a malformed request): one record per peer and minute, its `count` the
    /// number refused and its reason the reasons, written to the refusal log of its own.
    case forwardRefused

    public var significance: EventSignificance {
        switch self {
        case .signedIn, .signedOut, .sessionEnded, .sessionRevoked, .revocationFailed, .dpopDowngradeRefused: .high
        case .dpopBound, .tokenForwarded, .forwardRefused: .medium
        case .storeUnavailable, .refreshFailed, .pendingWriteCompleted, .scopeNarrowed: .medium
        case .tokenRefreshed: .low
        }
    }
}

public enum EventSignificance: String, Sendable, Comparable, CaseIterable {
    case low, medium, high

    private var rank: Int { self == .low ? 0 : self == .medium ? 1 : 2 }
    public static func < (lhs: EventSignificance, rhs: EventSignificance) -> Bool { lhs.rank < rhs.rank }
}

/// One line of the event log. Holds identities and classes, never a token.
public struct EventRecord: Sendable, Equatable {
    public var time: Double
    public var event: SessionEvent
    public var profile: String
    public var issuer: String?
    public var subject: String?
    /// For sessionEnded / refreshFailed / storeUnavailable: the failure class.
    public var reason: String?
    /// For a summary (forwardRefused): how many it stands for.
    public var count: Int?

    public init(
        time: Double, event: SessionEvent, profile: String, issuer: String? = nil, subject: String? = nil,
        reason: String? = nil
    ) {
        self.time = time
        self.event = event
        self.profile = profile
        self.issuer = issuer
        self.subject = subject
        self.reason = reason
    }

    /// One JSON line, short enough (< PIPE_BUF) to be appended with one atomic write.
    public func jsonLine() -> String {
        // At most 400 bytes of escaped JSON per field (a control character escapes to 6 bytes),
        // so a whole line stays under PIPE_BUF and one write() appends it atomically.
        func short(_ text: String?) -> JSONText.Value {
            guard let text else { return .null }
            var kept = String.UnicodeScalarView()
            var length = 0
            for scalar in text.unicodeScalars {
                let escaped = JSONText.quoted(String(scalar)).utf8.count - 2
                if length + escaped > 400 { break }
                length += escaped
                kept.append(scalar)
            }
            return .string(String(kept))
        }
        var fields: [(String, JSONText.Value)] = [
            ("time", .string(Timestamp.iso8601(time))),
            ("unix_time", JSONText.Value(raw: String(format3(time)))),
            ("event", .string(event.rawValue)),
            ("significance", .string(event.significance.rawValue)),
            ("profile", short(profile)),
            ("issuer", short(issuer)),
            ("subject", short(subject)),
            ("reason", short(reason)),
        ]
        if let count { fields.append(("count", JSONText.Value(raw: String(count)))) }
        return JSONText.object(fields) + "\n"
    }

    private func format3(_ value: Double) -> String {
        // Epoch seconds are never negative; a negative one would print as "-1.-644".
        let milliseconds = Int64(saturating: (value.clamped(to: 0...1e11) * 1000).rounded())
        let fraction = milliseconds % 1000
        return "\(milliseconds / 1000).\(fraction < 10 ? "00" : fraction < 100 ? "0" : "")\(fraction)"
    }

    public static func parse(_ line: Substring) -> EventRecord? {
        guard let object = JSONValue.parseObject(Array(line.utf8)),
            case .number(let time)? = object["unix_time"],
            let event = object["event"]?.stringValue.flatMap(SessionEvent.init(rawValue:)),
            let profile = object["profile"]?.stringValue
        else { return nil }
        var record = EventRecord(
            time: time, event: event, profile: profile, issuer: object["issuer"]?.stringValue,
            subject: object["subject"]?.stringValue, reason: object["reason"]?.stringValue)
        if case .number(let count)? = object["count"], count >= 1, count < 1e12 { record.count = Int(count) }
        return record
    }
}

/// `$XDG_STATE_HOME/tokenctl/events.jsonl`: appended by every tokenctl process (one `write`
/// under O_APPEND per line, so concurrent lines never interleave), private (0600), rotated to
/// `events.jsonl.1` past a size bound. Nothing is sent anywhere.
public struct EventLog: Sendable {
    public let path: String
    public let maximumBytes: Int

    public init(stateDirectory: String, maximumBytes: Int = 1 << 20) {
        self.path = stateDirectory + "/events.jsonl"
        self.maximumBytes = maximumBytes
    }

    init(path: String, maximumBytes: Int) {
        self.path = path
        self.maximumBytes = maximumBytes
    }

    public var rotatedPath: String { path + ".1" }

    /// The refusal log beside the event log (`forward-refusals.jsonl`, rotated on its own): the
    /// forward's refusal summaries, which a hostile remote drives, never push the hand-outs and
    /// the user's own events out of this one. `records` reads both.
    public var refusals: EventLog? {
        guard path.hasSuffix("/events.jsonl") else { return nil }
        return EventLog(
            path: String(path.dropLast("events.jsonl".count)) + "forward-refusals.jsonl", maximumBytes: 256 << 10)
    }

    /// Append one record. Best effort: an unwritable log never fails a token operation.
    @discardableResult
    public func append(_ record: EventRecord) -> Bool {
        let directory = String(path[..<path.lastIndex(of: "/")!])
        guard (try? FileIO.ensurePrivateDirectory(directory)) != nil else { return false }
        // Without blocking, regular files only: a FIFO in place of the log must not hang a
        // refresh that holds the profile lock.
        var descriptor = system_open(
            path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0o600)
        guard descriptor >= 0 else { return false }
        defer { system_close(descriptor) }
        guard (try? FileIO.requireRegularFile(descriptor, path: path)) != nil else { return false }
        var info = stat()
        if system_fstat(descriptor, &info) == 0, Int(info.st_size) >= maximumBytes {
            // Rotate under the log's own lock; whoever gets it first renames, the others reopen.
            if system_flock(descriptor, LOCK_EX) == 0 {
                var current = stat()
                if system_stat(path, &current) == 0, current.st_ino == info.st_ino {
                    system_rename(path, rotatedPath)
                }
                system_flock(descriptor, LOCK_UN)
                system_close(descriptor)
                descriptor = system_open(
                    path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0o600)
                guard descriptor >= 0, (try? FileIO.requireRegularFile(descriptor, path: path)) != nil else {
                    return false
                }
            }
        }
        let bytes = Array(record.jsonLine().utf8)
        let written = bytes.withUnsafeBytes { system_write(descriptor, $0.baseAddress, $0.count) }
        return written == bytes.count
    }

    /// A filter over records.
    public struct Filter: Sendable {
        public var since: Double?
        public var minimumSignificance: EventSignificance
        public var profile: String?

        public init(since: Double? = nil, minimumSignificance: EventSignificance = .low, profile: String? = nil) {
            self.since = since
            self.minimumSignificance = minimumSignificance
            self.profile = profile
        }

        public func matches(_ record: EventRecord) -> Bool {
            if let since, record.time < since { return false }
            if record.event.significance < minimumSignificance { return false }
            if let profile, record.profile != profile { return false }
            return true
        }
    }

    /// Every record (the rotated file first), filtered.
    public func records(since: Double? = nil, minimumSignificance: EventSignificance = .low, profile: String? = nil)
        -> [EventRecord]
    {
        let filter = Filter(since: since, minimumSignificance: minimumSignificance, profile: profile)
        let own = (completeLines(of: rotatedPath) + completeLines(of: path)).compactMap(EventRecord.parse)
        guard let refusals else { return own.filter(filter.matches) }
        let summaries = (refusals.completeLines(of: refusals.rotatedPath) + refusals.completeLines(of: refusals.path))
            .compactMap(EventRecord.parse)
        guard !summaries.isEmpty else { return own.filter(filter.matches) }
        // Both in time order (a stable merge: equal times keep the event log first).
        var merged: [EventRecord] = []
        merged.reserveCapacity(own.count + summaries.count)
        var (left, right) = (own[...], summaries[...])
        while let first = left.first, let second = right.first {
            if second.time < first.time {
                merged.append(second)
                right = right.dropFirst()
            } else {
                merged.append(first)
                left = left.dropFirst()
            }
        }
        return (merged + left + right).filter(filter.matches)
    }

    /// The complete lines of one file (a line still being written is left out).
    public func completeLines(of file: String) -> [Substring] {
        guard let text = try? FileIO.readFile(file, limit: 4 * maximumBytes) else { return [] }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        lines.removeLast() // after the final newline: empty, or a partial line
        return lines.filter { !$0.isEmpty }
    }

    /// The size and inode of the live file, to notice appends and rotations cheaply.
    public func fingerprint() -> (size: Int, inode: UInt64)? {
        var info = stat()
        guard system_stat(path, &info) == 0 else { return nil }
        return (Int(info.st_size), UInt64(info.st_ino))
    }
}
