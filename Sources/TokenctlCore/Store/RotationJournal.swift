import TokenctlEssentials

/// The rotation journal: accepted token sets that the Secret Service does not hold yet, kept in
/// memory only, as one `user` key per session in the kernel user keyring.
///
/// The window between "the server rotated the refresh token" and "the keyring holds the new
/// set" is where sessions die: a crash, a SIGKILL, a power cut, or a keyring write that hangs
/// on a keyring program's prompt. A rotated set goes here first, then to the Secret Service, and the
/// entry is removed once the Secret Service holds it. Every reader prefers a pending entry
/// newer than the stored set, and the next refresher (under the profile lock) completes the
/// write, so a rotation accepted here is never lost while the user's keyring lives (until
/// logout or reboot: the kernel keeps it in memory, never on disk, and sets no timeout).
///
/// Keys are readable and writable by this user only (possessor and user permissions, as the
/// hot cache). Not a source of truth once written through: the Secret Service is.
public struct RotationJournal: Sendable {
    /// One pending rotation.
    public struct Entry: Sendable, Equatable {
        public var identity: SessionIdentity
        public var tokenSet: TokenSet
        /// When the entry was written (local clock).
        public var journaledAt: Double
        /// Why the Secret Service does not hold it yet (nil: the write was still running).
        public var pendingReason: String?
        /// Digests (`RotationJournal.digest`) of the refresh tokens this set replaced: the one it
        /// was refreshed from and those the entries before it replaced (at most
        /// `maximumLineage`, the newest last). Empty: a login, or an entry of an older tokenctl.
        public var supersedes: [String] = []

        public init(
            identity: SessionIdentity, tokenSet: TokenSet, journaledAt: Double, pendingReason: String? = nil,
            supersedes: [String] = []
        ) {
            self.identity = identity
            self.tokenSet = tokenSet
            self.journaledAt = journaledAt
            self.pendingReason = pendingReason
            self.supersedes = supersedes
        }

        /// Whether this entry holds a newer rotation than `stored` (or `stored` is missing).
        ///
        /// When the refresh tokens differ, the entry is newer exactly when the stored set's
        /// refresh token is one it supersedes: a stored set it does not know was written after
        /// it (what a killed refresher left behind, then a later refresh stored), whatever the
        /// clocks of the processes said. Timestamps decide only what lineage cannot: the same
        /// refresh token (a server that does not rotate; a narrowed refresh, `token --scope`,
        /// counts by the time of the last refresh, `TokenSet.rotatedAt`), or an entry without a
        /// lineage (a login's, or an older tokenctl's).
        public func isNewer(than stored: TokenSet?) -> Bool {
            guard let stored else { return true }
            if let storedToken = stored.refreshToken, storedToken != tokenSet.refreshToken, !supersedes.isEmpty {
                return supersedes.contains(RotationJournal.digest(storedToken))
            }
            return tokenSet.rotatedAt > stored.rotatedAt
        }
    }

    /// How many superseded refresh tokens an entry remembers (a rotation chain that long with no
    /// Secret Service write in between is not a case to expect).
    public static let maximumLineage = 16

    /// The digest an entry keeps of a superseded refresh token (FNV-1a 64, hex): enough to tell
    /// tokens of one session apart; never the token itself.
    public static func digest(_ refreshToken: String) -> String {
        var hash = FNV1a64()
        hash.update("journal-rt-v1")
        hash.update([0])
        hash.update(refreshToken)
        return hash.hexDigest
    }

    /// What a new entry for `tokenSet` supersedes: the refresh token of `previous` (the set it
    /// was refreshed from) and of `pending` (an entry there now: under the profile lock it is
    /// never newer than what is being written), with what `pending` superseded. A login
    /// (`previous` nil) starts a session whose lineage is not known: none.
    public static func lineage(of tokenSet: TokenSet, replacing previous: TokenSet?, pending: Entry?) -> [String] {
        guard previous != nil else { return [] }
        var chain = pending?.supersedes ?? []
        for token in [pending?.tokenSet.refreshToken, previous?.refreshToken] {
            guard let token, token != tokenSet.refreshToken else { continue }
            let digest = digest(token)
            chain.removeAll { $0 == digest }
            chain.append(digest)
        }
        if let own = tokenSet.refreshToken.map(digest) { chain.removeAll { $0 == own } }
        return Array(chain.suffix(maximumLineage))
    }

    /// The first line of every payload.
    public static let versionLine = "tokenctl-journal-v1"

    /// True when the test switch that simulates an unusable kernel keyring is set (the journal
    /// and the hot cache share it: both live in the kernel keyring).
    public let isDisabled: Bool

    public init(environment: Environment = .process) {
        isDisabled = environment[HotCache.disableVariable] == "1"
    }

    /// Whether rotations can be journaled in this process (the kernel keyring is usable).
    public var isAvailable: Bool { !isDisabled && KernelKeyring.isAvailable() }

    /// Whether an entry of `size` bytes could be journaled now: a probe key of that size (no
    /// secret in it; its own description, so no reader takes it for an entry; a 60-second
    /// timeout, so a killed prober leaves nothing for long) is added, then removed. False where
    /// journaling is unavailable (seccomp, disabled) or the user's key quota has no room for it.
    public func canRecord(bytes size: Int = 4096) -> Bool {
        guard isAvailable else { return false }
        let description = "tokenctl:journal-probe:v1:\(system_getpid())"
        guard
            case .success(let key) = KernelKeyring.replace(
                description,
                payload: [UInt8](repeating: 0x2E, count: max(1, min(size, HotCacheEntry.maximumPayloadSize))),
                permissions: KernelKeyring.userOnlyPermissions, timeout: 60)
        else { return false }
        _ = KernelKeyring.invalidate(key)
        return true
    }

    /// `tokenctl:journal:v1:<profile>:<FNV-1a 64 of profile, issuer, client ID>`.
    public static func keyDescription(_ identity: SessionIdentity) -> String {
        var hash = FNV1a64()
        hash.update("journal-v1")
        for part in [identity.profile.rawValue, identity.issuer, identity.clientID] {
            hash.update([0])
            hash.update(part)
        }
        return "tokenctl:journal:v1:" + identity.profile.rawValue + ":" + hash.hexDigest
    }

    /// Journal `tokenSet` for `identity`, replacing any entry there in one step.
    ///
    /// - Returns: whether the entry is now in the kernel keyring (false: journaling unavailable
    ///   here, e.g. seccomp or the quota; the caller goes on as without a journal).
    @discardableResult
    public func record(
        _ tokenSet: TokenSet, for identity: SessionIdentity, now: Double, pendingReason: String? = nil,
        supersedes: [String] = []
    ) -> Bool {
        recordReporting(tokenSet, for: identity, now: now, pendingReason: pendingReason, supersedes: supersedes) == nil
    }

    /// `record`, saying why the entry could not be written (nil: it was), for messages.
    public func recordReporting(
        _ tokenSet: TokenSet, for identity: SessionIdentity, now: Double, pendingReason: String? = nil,
        supersedes: [String] = []
    ) -> String? {
        guard !isDisabled else { return "the kernel keyring is switched off (\(HotCache.disableVariable)=1)" }
        var payload: [UInt8]
        do {
            payload = try Self.encode(
                Entry(
                    identity: identity, tokenSet: tokenSet, journaledAt: now, pendingReason: pendingReason,
                    supersedes: supersedes))
        } catch {
            return error as? FormatError == .tooLarge
                ? "the session is larger than a journal entry may be (\(HotCacheEntry.maximumPayloadSize) bytes)"
                : "the session cannot be written as a journal entry"
        }
        defer { KernelKeyring.scrub(&payload) }
        let description = Self.keyDescription(identity)
        switch KernelKeyring.replace(
            description, payload: payload, permissions: KernelKeyring.userOnlyPermissions, timeout: 0)
        {
        case .success:
            return nil
        case .failure(let error) where error.isQuotaExceeded:
            // The kernel charges a key its description, a NUL and its payload.
            let needed = Self.quotaCharge(descriptionLength: description.utf8.count, payloadLength: payload.count)
            return
                "this user's kernel key quota is full (\(KernelKeyQuota.current()?.summary ?? "usage unknown"); the entry needs \(needed) bytes)"
        case .failure(let error):
            return "the kernel keyring refused it (\(error))"
        }
    }

    /// The bytes of the user's kernel key quota a journal entry of `tokenSet` takes while it is
    /// written: its description, a NUL and its payload, with the longest pending reason (the
    /// entry is written again with one when the Secret Service refuses it) and lineage.
    public static func quotaCharge(of tokenSet: TokenSet, for identity: SessionIdentity) -> Int? {
        let entry = Entry(
            identity: identity, tokenSet: tokenSet, journaledAt: 0,
            pendingReason: String(repeating: "x", count: maximumPendingReason),
            supersedes: Array(repeating: String(repeating: "0", count: 16), count: maximumLineage))
        guard let payload = try? encode(entry) else { return nil }
        return quotaCharge(descriptionLength: keyDescription(identity).utf8.count, payloadLength: payload.count)
    }

    static func quotaCharge(descriptionLength: Int, payloadLength: Int) -> Int { descriptionLength + 1 + payloadLength }

    /// The longest pending reason an entry keeps.
    static let maximumPendingReason = 300

    /// The pending entry for exactly this identity, if any.
    public func pending(_ identity: SessionIdentity) -> Entry? {
        guard !isDisabled else { return nil }
        guard let (_, entry) = Self.lookup(Self.keyDescription(identity)), entry.identity == identity else {
            return nil
        }
        return entry
    }

    /// Remove the entry of `identity`: always (`holding: nil`), or only while it still holds a
    /// set with this refresh token and time (another process may have journaled a newer one).
    public func clear(_ identity: SessionIdentity, holding tokenSet: TokenSet? = nil) {
        let description = Self.keyDescription(identity)
        // Loop: a concurrent writer could link a new key between search and invalidate.
        for _ in 0..<4 {
            guard case .success(let key?) = KernelKeyring.search(description) else { return }
            if let tokenSet {
                guard case .success(var payload) = KernelKeyring.read(key, limit: HotCacheEntry.maximumPayloadSize)
                else { return }
                defer { KernelKeyring.scrub(&payload) }
                if let entry = try? Self.decode(payload),
                    entry.tokenSet.refreshToken != tokenSet.refreshToken
                        || entry.tokenSet.obtainedAt != tokenSet.obtainedAt
                {
                    return
                }
            }
            _ = KernelKeyring.invalidate(key)
        }
    }

    /// Remove the entry of `identity` only while it holds `refreshToken` (a terminal failure
    /// of that token).
    public func clear(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) {
        guard let entry = pending(identity), entry.tokenSet.refreshToken == refreshToken else { return }
        clear(identity, holding: entry.tokenSet)
    }

    private static func lookup(_ description: String) -> (KernelKeyring.KeyID, Entry)? {
        guard case .success(let key?) = KernelKeyring.search(description),
            case .success(var payload) = KernelKeyring.read(key, limit: HotCacheEntry.maximumPayloadSize)
        else { return nil }
        defer { KernelKeyring.scrub(&payload) }
        guard let entry = try? decode(payload) else { return nil }
        return (key, entry)
    }

    // MARK: Payload: a version line, then key=value lines; the token set's JSON last.

    enum FormatError: Error { case malformed, tooLarge }

    static func encode(_ entry: Entry) throws -> [UInt8] {
        let json = try entry.tokenSet.encoded()
        var fields: [(String, String)] = [
            ("profile", entry.identity.profile.rawValue),
            ("issuer", entry.identity.issuer),
            ("client_id", entry.identity.clientID),
            (
                "journaled_at",
                String(entry.journaledAt.isFinite && abs(entry.journaledAt) < 1e12 ? Int64(entry.journaledAt) : 0)
            ),
        ]
        if let reason = entry.pendingReason {
            fields.append(("pending_reason", String(reason.prefix(maximumPendingReason))))
        }
        if !entry.supersedes.isEmpty {
            fields.append(("supersedes", entry.supersedes.suffix(maximumLineage).joined(separator: ",")))
        }
        var bytes = Array(versionLine.utf8) + [0x0A]
        for (key, value) in fields {
            // One line per field: a line break (or any control character) cannot be represented.
            guard value.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else {
                throw FormatError.malformed
            }
            bytes += Array(key.utf8) + [UInt8(ascii: "=")] + Array(value.utf8) + [0x0A]
        }
        guard !json.contains(0x0A) else { throw FormatError.malformed }
        bytes += Array("token_set=".utf8) + json + [0x0A]
        guard bytes.count <= HotCacheEntry.maximumPayloadSize else { throw FormatError.tooLarge }
        return bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> Entry {
        guard bytes.count <= HotCacheEntry.maximumPayloadSize, bytes.last == 0x0A else { throw FormatError.malformed }
        var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
        lines.removeLast()
        guard let first = lines.first, first.elementsEqual(versionLine.utf8) else { throw FormatError.malformed }
        var values: [String: [UInt8]] = [:]
        for line in lines.dropFirst() {
            guard let equals = line.firstIndex(of: UInt8(ascii: "=")) else { throw FormatError.malformed }
            let key = String(decoding: line[line.startIndex..<equals], as: UTF8.self)
            guard values[key] == nil else { throw FormatError.malformed }
            values[key] = Array(line[line.index(after: equals)...])
        }
        func text(_ key: String) throws -> String {
            guard let bytes = values[key] else { throw FormatError.malformed }
            let string = String(decoding: bytes, as: UTF8.self)
            guard string.utf8.elementsEqual(bytes), !string.isEmpty else { throw FormatError.malformed }
            return string
        }
        guard let profile = ProfileName(rawValue: try text("profile")), let json = values["token_set"],
            let journaledAt = Int64(try text("journaled_at"))
        else { throw FormatError.malformed }
        let tokenSet = try TokenSet.decode(json)
        var supersedes: [String] = []
        if values["supersedes"] != nil {
            supersedes = try text("supersedes").split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard supersedes.count <= maximumLineage,
                supersedes.allSatisfy({
                    $0.utf8.count == 16
                        && $0.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
                })
            else { throw FormatError.malformed }
        }
        return Entry(
            identity: SessionIdentity(profile: profile, issuer: try text("issuer"), clientID: try text("client_id")),
            tokenSet: tokenSet, journaledAt: Double(journaledAt), pendingReason: try? text("pending_reason"),
            supersedes: supersedes)
    }
}
