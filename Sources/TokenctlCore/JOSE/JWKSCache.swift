import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Issuers' JSON Web Key Sets cached under `$XDG_CACHE_HOME/tokenctl/jwks/`, one file per issuer,
/// so `status` can check signatures offline.
///
/// A JWKS holds public keys only, never a secret. Files are written atomically with mode 0600 in
/// a 0700 directory. Besides the document, an entry records when `status` last asked the server
/// for keys (`refetch_attempted_at`): a token whose `kid` is not cached makes at most one such
/// request per `refetchInterval` and issuer, so a forged `kid` cannot make tokenctl hammer the server.
public struct JWKSCache: Sendable {
    public var directory: String
    public var clock: Clock
    /// The least time between two fetches made because of an unknown (or missing) key.
    public var refetchInterval: Double

    public init(directory: String, clock: Clock = .system, refetchInterval: Double = 60) {
        self.directory = directory
        self.clock = clock
        self.refetchInterval = refetchInterval
    }

    public struct Entry: Codable, Equatable, Sendable {
        public var issuer: String
        public var jwksURI: String?
        /// When `document` was fetched; nil when no fetch has succeeded yet.
        public var fetchedAt: Double?
        /// When `status` last fetched (or tried to) because a key was unknown or none was cached.
        public var refetchAttemptedAt: Double?
        /// The JWKS exactly as served (public keys only).
        public var document: String?

        enum CodingKeys: String, CodingKey {
            case issuer, document
            case jwksURI = "jwks_uri"
            case fetchedAt = "fetched_at"
            case refetchAttemptedAt = "refetch_attempted_at"
        }
    }

    public func file(for issuer: String) -> String {
        directory + "/" + DiscoveryCache.fileName(for: issuer)
    }

    public func load(_ issuer: String) -> Entry? {
        guard let text = try? FileIO.readFile(file(for: issuer)),
            let entry = try? JSONDecoder().decode(Entry.self, from: Data(text.utf8)),
            entry.issuer == issuer
        else { return nil }
        return entry
    }

    /// The cached keys of `issuer`, if a document was ever fetched and still parses.
    public func keys(_ issuer: String) -> JSONWebKeySet? {
        guard let document = load(issuer)?.document else { return nil }
        return try? JSONWebKeySet.parse(Array(document.utf8))
    }

    /// Forget the issuer's keys (`logout --forget` of the last profile using the issuer).
    public func remove(_ issuer: String) {
        try? FileIO.removeFile(file(for: issuer))
    }

    func save(_ entry: Entry) {
        guard let data = try? JSONEncoder().encode(entry) else { return }
        do {
            try FileIO.ensurePrivateDirectory(directory)
            try FileIO.writeAtomically(String(decoding: data, as: UTF8.self), to: file(for: entry.issuer), mode: 0o600)
        } catch {
            // A read-only or full cache directory only costs a fetch (or an unverified verdict) later.
        }
    }

    /// Keep a document that was just fetched and parsed (at login, or by `refetch`).
    public func store(_ issuer: String, jwksURI: String, document: String) {
        var entry = load(issuer) ?? Entry(issuer: issuer)
        entry.jwksURI = jwksURI
        entry.document = document
        entry.fetchedAt = clock.now()
        save(entry)
    }

    /// Whether the rate limit allows a fetch because of an unknown key now.
    public func mayRefetch(_ issuer: String) -> Bool {
        guard let last = load(issuer)?.refetchAttemptedAt else { return true }
        let elapsed = clock.now() - last
        // A clock set back by more than the interval does not lock the issuer out for good.
        return elapsed >= refetchInterval || elapsed < -refetchInterval
    }

    /// Fetch the keys because one was unknown (or none cached), unless the rate limit forbids it.
    /// The attempt is recorded before the request, so a failing server is not retried at once either.
    ///
    /// - Returns: the fresh keys, or nil when not fetched, unreachable, or not a JWKS.
    public func refetch(_ issuer: String, jwksURI: String, http: any HTTPClient, timeout: Double) async
        -> JSONWebKeySet?
    {
        guard mayRefetch(issuer) else { return nil }
        var entry = load(issuer) ?? Entry(issuer: issuer)
        entry.refetchAttemptedAt = clock.now()
        save(entry)
        guard let response = try? await http.send(.getJSON(jwksURI), timeout: timeout),
            response.status == 200, let keys = try? JSONWebKeySet.parse(response.body)
        else { return nil }
        store(issuer, jwksURI: jwksURI, document: String(decoding: response.body, as: UTF8.self))
        return keys
    }
}

extension JWKSCache.Entry {
    init(issuer: String) {
        self.init(issuer: issuer, jwksURI: nil, fetchedAt: nil, refetchAttemptedAt: nil, document: nil)
    }
}

/// What `status` can say about a stored token's signature.
public enum SignatureVerdict: String, Sendable, Equatable, CaseIterable {
    /// The signature verifies against a cached key of the issuer.
    case verified
    /// No cached key has the token's `kid` (or can make its alg), even after the allowed re-fetch.
    case unknownKey = "unverified: unknown key"
    /// No keys of the issuer are cached (and none could be fetched).
    case noKeysCached = "unverified: no keys cached"
    /// A bad signature, a forbidden alg (`none`, HS*), a kid/alg mismatch, or not a JWS at all.
    case invalid
    /// OpenSSL's libcrypto cannot be loaded, so no signature can be checked.
    case cryptoUnavailable = "unverified: libcrypto missing"

    /// The verdict for `token` against `keys` (nil: nothing cached). The alg is judged first, so
    /// `none` and HMAC are `invalid` whether or not keys are cached.
    public static func evaluate(_ token: String, keys: JSONWebKeySet?) -> SignatureVerdict {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let header = UnverifiedJWT.base64URLDecode(String(parts[0])).flatMap(JSONValue.parseObject),
            let algorithm = header["alg"]?.stringValue, JWSAlgorithm(rawValue: algorithm) != nil
        else { return .invalid }
        guard let keys, !keys.keys.isEmpty else { return .noKeysCached }
        do {
            _ = try JWTVerifier.verify(token, keys: keys)
            return .verified
        } catch {
            if case .noMatchingKey = error { return .unknownKey }
            if case .cryptoUnavailable = error { return .cryptoUnavailable }
            return .invalid
        }
    }

    /// Whether asking the server for its current keys could change the verdict.
    var fetchMightHelp: Bool { self == .unknownKey || self == .noKeysCached }
}
