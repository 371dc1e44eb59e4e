import TokenctlEssentials

/// An access token for a `TokenTarget` other than the session's own (`token --scope …`),
/// obtained from the session's refresh token and kept in the session's token set, so that the
/// refresh token a narrowed refresh rotates and the token it brings are stored in one write.
public struct TargetedToken: Equatable, Sendable {
    public var target: TokenTarget
    public var accessToken: String
    public var tokenType: String
    /// The scope the server says it granted (`scope` of the response), when it said.
    public var grantedScope: String?
    public var expiresAt: Double?
    public var issuedLifetime: Double?
    public var obtainedAt: Double

    public init(
        target: TokenTarget, accessToken: String, tokenType: String, grantedScope: String? = nil,
        expiresAt: Double?, issuedLifetime: Double?, obtainedAt: Double
    ) {
        self.target = target
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.grantedScope = grantedScope
        self.expiresAt = expiresAt
        self.issuedLifetime = issuedLifetime
        self.obtainedAt = obtainedAt
    }

    /// At most this many per session: the oldest-expiring goes when a new one would pass it.
    public static let maximumPerSession = 16

    public func isFresh(at now: Double, minimumTimeToLive: Double, capped: Bool = true) -> Bool {
        AccessTokenLifetime.isFresh(
            expiresAt: expiresAt, issuedLifetime: issuedLifetime, obtainedAt: obtainedAt, at: now,
            minimumTimeToLive: minimumTimeToLive, capped: capped)
    }

    public var effectiveExpiry: Double {
        AccessTokenLifetime.effectiveExpiry(expiresAt: expiresAt, obtainedAt: obtainedAt)
    }

    // MARK: Stored form: flat members `target.N.<field>` of the token set's JSON object

    enum Field: String, CaseIterable {
        case scope, audience, resource
        case accessToken = "access_token"
        case tokenType = "token_type"
        case grantedScope = "granted_scope"
        case expiresAt = "expires_at"
        case issuedLifetime = "issued_lifetime"
        case obtainedAt = "obtained_at"
    }

    static func key(_ index: Int, _ field: Field) -> String { "target.\(index).\(field.rawValue)" }

    /// Whether `key` is one of the members this type writes (the Codable decoding skips the
    /// others, as it skips unknown members).
    static func isStoredKey(_ key: String) -> Bool { key.hasPrefix("target.") }

    /// The members of one token, in the order written (absent optionals left out).
    func members(_ index: Int) -> [(key: String, string: String?, number: Double?)] {
        var result: [(String, String?, Double?)] = []
        func add(_ field: Field, _ string: String?) {
            if let string { result.append((Self.key(index, field), string, nil)) }
        }
        func add(_ field: Field, _ number: Double?) {
            if let number { result.append((Self.key(index, field), nil, number)) }
        }
        add(.scope, target.scopeField)
        add(.audience, target.audience)
        add(.resource, target.resourceField)
        add(.accessToken, accessToken)
        add(.tokenType, tokenType)
        add(.grantedScope, grantedScope)
        add(.expiresAt, expiresAt)
        add(.issuedLifetime, issuedLifetime)
        add(.obtainedAt, obtainedAt)
        return result
    }

    /// The tokens stored as members `target.0.*`, `target.1.*`, … (until the first index without
    /// an access token), read through the caller's typed accessors.
    static func decodeAll(
        string: (String) throws(FlatJSONObjectError) -> String?, number: (String) throws(FlatJSONObjectError) -> Double?
    ) throws(FlatJSONObjectError) -> [TargetedToken] {
        var tokens: [TargetedToken] = []
        for index in 0..<maximumPerSession {
            guard let accessToken = try string(key(index, .accessToken)) else { break }
            guard
                let target = TokenTarget(
                    storedScope: try string(key(index, .scope)), audience: try string(key(index, .audience)),
                    resource: try string(key(index, .resource))),
                !target.isSession
            else { throw .wrongType(key: key(index, .scope), expected: "a token target", offset: 0) }
            guard let tokenType = try string(key(index, .tokenType)) else {
                throw .missing(key: key(index, .tokenType))
            }
            guard let obtainedAt = try number(key(index, .obtainedAt)) else {
                throw .missing(key: key(index, .obtainedAt))
            }
            tokens.append(
                TargetedToken(
                    target: target, accessToken: accessToken, tokenType: tokenType,
                    grantedScope: try string(key(index, .grantedScope)),
                    expiresAt: try number(key(index, .expiresAt)),
                    issuedLifetime: try number(key(index, .issuedLifetime)), obtainedAt: obtainedAt))
        }
        return tokens
    }
}

extension TokenSet {
    /// The stored token for `target`, if any (never the session's own: see `accessToken`).
    public func targetedToken(for target: TokenTarget) -> TargetedToken? {
        targetedTokens.first { $0.target == target }
    }

    /// The largest stored set (its JSON) that targets may grow it to: what the rotation journal
    /// (one kernel `user` key, 32 KiB with its header) can still hold, so a rotated refresh
    /// token always has a place to wait when the Secret Service cannot take it.
    public static let maximumEncodedBytesWithTargets = HotCacheEntry.maximumPayloadSize - 2048

    /// This set with `token` stored for its target: the one it replaces and those expired at
    /// `now` are dropped, and past `TargetedToken.maximumPerSession`, or past
    /// `maximumEncodedBytesWithTargets`, the others expiring first; if the set is still too
    /// large, `token` is not kept either (it is still handed out; the next call refreshes again).
    public func storing(_ token: TargetedToken, now: Double) -> TokenSet {
        var set = self
        var others = targetedTokens.filter { $0.target != token.target && $0.effectiveExpiry > now }
        func fits(_ tokens: [TargetedToken]) -> Bool {
            var candidate = set
            candidate.targetedTokens = tokens
            return ((try? candidate.encoded())?.count ?? .max) <= TokenSet.maximumEncodedBytesWithTargets
        }
        func dropOldest() {
            let oldest = others.indices.min { others[$0].effectiveExpiry < others[$1].effectiveExpiry }!
            others.remove(at: oldest)
        }
        guard fits([token]) else {
            // Too large to keep even alone: keep the others (they fit before it came).
            while !others.isEmpty && !fits(others) { dropOldest() }
            set.targetedTokens = others.sorted { $0.target < $1.target }
            return set
        }
        while !others.isEmpty && (others.count + 1 > TargetedToken.maximumPerSession || !fits(others + [token])) {
            dropOldest()
        }
        set.targetedTokens = (others + [token]).sorted { $0.target < $1.target }
        return set
    }

    /// The token for `target` as a set to hand out (the session's own when `target` is
    /// `.session`): its access token and timing, no refresh or ID token.
    public func served(for target: TokenTarget) -> TokenSet? {
        if target.isSession { return self }
        guard let token = targetedToken(for: target) else { return nil }
        return TokenSet(
            // Its expiry set (assumed when not stated): renewable, though the set has no refresh token.
            accessToken: token.accessToken, tokenType: token.tokenType, refreshToken: nil, scope: token.grantedScope,
            expiresAt: token.effectiveExpiry, issuedLifetime: token.issuedLifetime, obtainedAt: token.obtainedAt,
            subject: subject,
            dpopKey: dpopKey)
    }
}
