import TokenctlEssentials

/// The last DPoP nonce (RFC 9449 §8) each authorization server gave, kept on disk beside the
/// discovery cache (`$XDG_CACHE_HOME/tokenctl/dpop-nonce/`, one file per issuer), so that a
/// server demanding nonces (Okta) costs one `use_dpop_nonce` round trip per nonce rotation, not
/// one per process.
///
/// A nonce is not a secret (the server sends it in the clear to anyone who asks). Files are
/// written atomically with mode 0600 in a 0700 directory, read without blocking (a FIFO in a
/// file's place is refused, never waited on) and bounded in size; an entry older than
/// `lifetime` (Okta rotates every 24 h and accepts a nonce for 3 days), for another issuer,
/// unreadable or not a usable nonce (`DPoPHTTPClient.usableNonce`) is ignored: the first proof
/// then goes without it, the server's `use_dpop_nonce` answer costs one retry, and its nonce
/// replaces the file. Nothing here is ever an error.
public struct DPoPNonceCache: Sendable {
    public var directory: String
    public var lifetime: Double
    public var clock: Clock

    /// The most a file may hold: an issuer URL, a nonce of at most 1024 bytes and a time.
    static let maximumFileSize = 8192

    public init(directory: String, lifetime: Double = 86_400, clock: Clock = .system) {
        self.directory = directory
        self.lifetime = lifetime
        self.clock = clock
    }

    /// `<readable prefix>-<FNV-1a hash>.json`, named as the discovery cache names its files.
    public func file(for issuer: String) -> String {
        directory + "/" + DiscoveryCache.fileName(for: issuer)
    }

    /// The nonce kept for `issuer`, if it is usable, for that issuer, and younger than `lifetime`.
    public func load(_ issuer: String) -> String? {
        guard let text = try? FileIO.readFile(file(for: issuer), limit: Self.maximumFileSize),
            let object = JSONValue.parseObject(Array(text.utf8)),
            object["issuer"]?.stringValue == issuer,
            let nonce = object["nonce"]?.stringValue.flatMap(DPoPHTTPClient.usableNonce),
            case .number(let receivedAt)? = object["received_at"]
        else { return nil }
        let age = clock.now() - receivedAt
        guard age >= -300, age < lifetime else { return nil }
        return nonce
    }

    /// Keep `nonce` as `issuer`'s, replacing what was there. A cache that cannot be written
    /// (read-only, full, a directory in the file's place) costs a retry in the next process.
    public func store(_ nonce: String, for issuer: String) {
        guard let nonce = DPoPHTTPClient.usableNonce(nonce) else { return }
        let text =
            "{\"issuer\":\(JSONText.quoted(issuer)),\"nonce\":\(JSONText.quoted(nonce)),\"received_at\":\(Int(saturating: clock.now().rounded(.down)))}\n"
        guard text.utf8.count <= Self.maximumFileSize else { return }
        do {
            try FileIO.ensurePrivateDirectory(directory)
            try FileIO.writeAtomically(text, to: file(for: issuer), mode: 0o600)
        } catch {
            // Only a retry next time.
        }
    }

    /// Forget `issuer`'s nonce (logout of its last profile).
    public func remove(_ issuer: String) {
        try? FileIO.removeFile(file(for: issuer))
    }
}
