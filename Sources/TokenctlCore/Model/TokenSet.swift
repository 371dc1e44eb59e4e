import TokenctlEssentials

/// Everything tokenctl keeps for one signed-in profile, stored as one Secret Service secret
/// so that a rotation replaces the access and refresh tokens together in one write.
public struct TokenSet: Codable, Equatable, Sendable {
    public var accessToken: String
    public var tokenType: String
    public var refreshToken: String?
    public var idToken: String?
    public var scope: String?
    /// When the access token stops being usable, in local epoch seconds (skew-corrected).
    public var expiresAt: Double?
    /// `expires_in` as issued, for the refresh margin.
    public var issuedLifetime: Double?
    /// When this set was received (local clock).
    public var obtainedAt: Double
    /// When a refresh last succeeded (nil right after login).
    public var lastRefreshAt: Double?
    /// Server clock minus local clock, from the token response's `Date` header.
    public var serverClockOffset: Double?
    /// The `sub` claim of the ID token or JWT access token, when one was seen.
    public var subject: String?
    /// Access tokens for narrower or other targets (`token --scope …`), from this session's
    /// refresh token; stored as members `target.N.*` (see `TargetedToken`).
    public var targetedTokens: [TargetedToken] = []
    /// When a refresh of the session's own token was first granted fewer scopes than the
    /// session had (the server narrowed the grant; `status` warns until the next login).
    public var scopeNarrowedAt: Double?
    /// The session's DPoP key (RFC 9449) in `DPoPKey.stored` form, when the session is bound
    /// to one: kept in the same item as the tokens it binds (and in the rotation journal with
    /// them), never on disk or in the hot cache. Nil: a bearer session.
    public var dpopKey: String?
    /// When the refresh token dies, in local epoch seconds, when the server said how long it
    /// lives (`refresh_token_expires_in`): past it a refresh needs a new login, and no request
    /// is sent. Nil: no stated end (most servers).
    public var refreshTokenExpiresAt: Double?

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case refreshToken = "refresh_token"
        case idToken = "id_token"
        case scope
        case expiresAt = "expires_at"
        case issuedLifetime = "issued_lifetime"
        case obtainedAt = "obtained_at"
        case lastRefreshAt = "last_refresh_at"
        case serverClockOffset = "server_clock_offset"
        case subject
        case scopeNarrowedAt = "scope_narrowed_at"
        case dpopKey = "dpop_key"
        case refreshTokenExpiresAt = "refresh_token_expires_at"
    }

    public init(
        accessToken: String, tokenType: String = "Bearer", refreshToken: String?, idToken: String? = nil,
        scope: String? = nil, expiresAt: Double?, issuedLifetime: Double?, obtainedAt: Double,
        lastRefreshAt: Double? = nil, serverClockOffset: Double? = nil, subject: String? = nil,
        targetedTokens: [TargetedToken] = [],
        scopeNarrowedAt: Double? = nil, dpopKey: String? = nil, refreshTokenExpiresAt: Double? = nil
    ) {
        self.dpopKey = dpopKey
        self.refreshTokenExpiresAt = refreshTokenExpiresAt
        self.targetedTokens = targetedTokens
        self.scopeNarrowedAt = scopeNarrowedAt
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.scope = scope
        self.expiresAt = expiresAt
        self.issuedLifetime = issuedLifetime
        self.obtainedAt = obtainedAt
        self.lastRefreshAt = lastRefreshAt
        self.serverClockOffset = serverClockOffset
        self.subject = subject
    }

    /// Lifetime assumed when the server gives none (`expires_in` is only RECOMMENDED, RFC 6749 §5.1).
    public static let assumedLifetime: Double = AccessTokenLifetime.assumedLifetime

    /// The margin that must remain before expiry for the access token to be served:
    /// min(min-ttl, half the issued lifetime), so a server issuing 30-second tokens does not
    /// make every call refresh.
    ///
    /// With `capped: false` the margin is min-ttl itself (see `AccessTokenLifetime`).
    public func refreshMargin(minimumTimeToLive: Double, capped: Bool = true) -> Double {
        AccessTokenLifetime.refreshMargin(
            issuedLifetime: issuedLifetime, minimumTimeToLive: minimumTimeToLive, capped: capped)
    }

    /// Whether the server stated no expiry for the access token and nothing can renew it (no
    /// `expires_in`, no JWT `exp`, no refresh token: GitHub OAuth App tokens): it is served until
    /// a server rejects it (see `AccessTokenLifetime`). A set made for one target's token sets
    /// its expiry (`served(for:)`), so this is about the session's own token only.
    public var statesNoExpiry: Bool { expiresAt == nil && refreshToken == nil }

    /// Whether the access token is still valid for at least the refresh margin at `now`.
    public func isFresh(at now: Double, minimumTimeToLive: Double, capped: Bool = true) -> Bool {
        AccessTokenLifetime.isFresh(
            expiresAt: expiresAt, issuedLifetime: issuedLifetime, obtainedAt: obtainedAt, at: now,
            minimumTimeToLive: minimumTimeToLive, capped: capped,
            renewable: !statesNoExpiry)
    }

    /// Seconds of validity left at `now` (negative once expired; `.infinity` with no stated expiry).
    public func timeLeft(at now: Double) -> Double {
        AccessTokenLifetime.effectiveExpiry(expiresAt: expiresAt, obtainedAt: obtainedAt, renewable: !statesNoExpiry)
            - now
    }

    public var hasRefreshToken: Bool { refreshToken != nil }

    /// When this set's refresh token was last issued: its login or its last refresh, whether
    /// that refresh brought the session's own access token or a target's.
    public var rotatedAt: Double { max(obtainedAt, lastRefreshAt ?? obtainedAt) }

    /// Any key: the fixed members and the targeted tokens' `target.N.*`.
    struct StoredKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: StoredKey.self)
        // The texts, then the numbers; a member that is nil is not written (sorted keys: `encoded()`).
        let texts: [(CodingKeys, String?)] = [
            (.accessToken, accessToken), (.tokenType, tokenType), (.refreshToken, refreshToken),
            (.idToken, idToken), (.scope, scope), (.subject, subject), (.dpopKey, dpopKey),
        ]
        let numbers: [(CodingKeys, Double?)] = [
            (.expiresAt, expiresAt), (.issuedLifetime, issuedLifetime), (.obtainedAt, obtainedAt),
            (.lastRefreshAt, lastRefreshAt), (.serverClockOffset, serverClockOffset),
            (.scopeNarrowedAt, scopeNarrowedAt), (.refreshTokenExpiresAt, refreshTokenExpiresAt),
        ]
        for (key, text) in texts { try container.encodeIfPresent(text, forKey: StoredKey(key.rawValue)) }
        for (key, number) in numbers { try container.encodeIfPresent(number, forKey: StoredKey(key.rawValue)) }
        for (index, token) in targetedTokens.prefix(TargetedToken.maximumPerSession).enumerated() {
            for member in token.members(index) {
                if let string = member.string { try container.encode(string, forKey: StoredKey(member.key)) }
                if let number = member.number { try container.encode(number, forKey: StoredKey(member.key)) }
            }
        }
    }

    /// The Codable reading (the reference `decode` is held to, see TokenSetDecodingTests).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: StoredKey.self)
        func string(_ key: CodingKeys) throws -> String? {
            try container.decodeIfPresent(String.self, forKey: StoredKey(key.rawValue))
        }
        func number(_ key: CodingKeys) throws -> Double? {
            try container.decodeIfPresent(Double.self, forKey: StoredKey(key.rawValue))
        }
        self.init(
            accessToken: try container.decode(String.self, forKey: StoredKey(CodingKeys.accessToken.rawValue)),
            tokenType: try container.decode(String.self, forKey: StoredKey(CodingKeys.tokenType.rawValue)),
            refreshToken: try string(.refreshToken), idToken: try string(.idToken), scope: try string(.scope),
            expiresAt: try number(.expiresAt), issuedLifetime: try number(.issuedLifetime),
            obtainedAt: try container.decode(Double.self, forKey: StoredKey(CodingKeys.obtainedAt.rawValue)),
            lastRefreshAt: try number(.lastRefreshAt), serverClockOffset: try number(.serverClockOffset),
            subject: try string(.subject))
        scopeNarrowedAt = try number(.scopeNarrowedAt)
        dpopKey = try string(.dpopKey)
        refreshTokenExpiresAt = try number(.refreshTokenExpiresAt)
        var failure: (any Error)?
        do {
            targetedTokens = try TargetedToken.decodeAll(
                string: { (key: String) throws(FlatJSONObjectError) -> String? in
                    do { return try container.decodeIfPresent(String.self, forKey: StoredKey(key)) } catch {
                        failure = error
                        throw .missing(key: key)
                    }
                },
                number: { (key: String) throws(FlatJSONObjectError) -> Double? in
                    do { return try container.decodeIfPresent(Double.self, forKey: StoredKey(key)) } catch {
                        failure = error
                        throw .missing(key: key)
                    }
                })
        } catch {
            throw failure ?? error
        }
    }

    /// The secret as stored: compact JSON.
    public func encoded() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(self))
    }

    /// The stored secret back into a token set, checked as a server's response is: tokens are
    /// visible ASCII and not empty (an empty refresh or ID token counts as none), the token type
    /// is visible ASCII, and times far outside any real session are clamped (see `validated()`).
    ///
    /// - Throws: `FlatJSONObjectError` for anything that is not such a token set.
    public static func decode(_ bytes: [UInt8]) throws(FlatJSONObjectError) -> TokenSet {
        try decodeUnvalidated(bytes).validated()
    }

    /// The stored secret back into a token set, with the Codable decoding's rules (the three
    /// non-optional members required and not null, the others optional or null, unknown members
    /// ignored, a number where a string belongs an error) but without `JSONDecoder`: its first
    /// decode in a process costs ~0.4–0.5 ms, paid by every Secret Service read.
    ///
    /// Stricter than `JSONDecoder` in what it accepts as JSON (see `FlatJSONObject`): a key
    /// given twice, a byte-order mark or a comma before the closing brace is an error, and so
    /// is nesting deeper than 32 levels. `encoded()` writes none of them.
    static func decodeUnvalidated(_ bytes: [UInt8]) throws(FlatJSONObjectError) -> TokenSet {
        let object = try FlatJSONObject(parsing: bytes)
        return TokenSet(
            accessToken: try object.requiredString(CodingKeys.accessToken.rawValue),
            tokenType: try object.requiredString(CodingKeys.tokenType.rawValue),
            refreshToken: try object.string(CodingKeys.refreshToken.rawValue),
            idToken: try object.string(CodingKeys.idToken.rawValue),
            scope: try object.string(CodingKeys.scope.rawValue),
            expiresAt: try object.number(CodingKeys.expiresAt.rawValue),
            issuedLifetime: try object.number(CodingKeys.issuedLifetime.rawValue),
            obtainedAt: try object.requiredNumber(CodingKeys.obtainedAt.rawValue),
            lastRefreshAt: try object.number(CodingKeys.lastRefreshAt.rawValue),
            serverClockOffset: try object.number(CodingKeys.serverClockOffset.rawValue),
            subject: try object.string(CodingKeys.subject.rawValue),
            targetedTokens: try TargetedToken.decodeAll(string: object.string, number: object.number),
            scopeNarrowedAt: try object.number(CodingKeys.scopeNarrowedAt.rawValue),
            dpopKey: try object.string(CodingKeys.dpopKey.rawValue),
            refreshTokenExpiresAt: try object.number(CodingKeys.refreshTokenExpiresAt.rawValue))
    }

    /// This set as tokenctl may use it: a hand-edited or foreign item must not put a line break
    /// into an `Authorization` header or an empty line on stdout, and no time in it may make
    /// anything later trap (years 1970 to about 5100; lifetimes up to ten years).
    public func validated() throws(FlatJSONObjectError) -> TokenSet {
        func token(_ value: String?, _ key: CodingKeys) throws(FlatJSONObjectError) -> String? {
            guard let value else { return nil }
            do { try TokenResponse.validateToken(value, field: key.rawValue) } catch {
                throw .wrongType(key: key.rawValue, expected: "a token (visible ASCII, not empty)", offset: 0)
            }
            return value
        }
        var set = self
        set.accessToken = try token(accessToken, .accessToken)!
        guard !tokenType.isEmpty, tokenType.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .wrongType(key: CodingKeys.tokenType.rawValue, expected: "a token type (visible ASCII)", offset: 0)
        }
        set.refreshToken = try token(refreshToken.flatMap { $0.isEmpty ? nil : $0 }, .refreshToken)
        set.idToken = try token(idToken.flatMap { $0.isEmpty ? nil : $0 }, .idToken)
        // The key's form only (three base64url parts); OpenSSL checks the key when it signs.
        if let dpopKey, !DPoPKey.isStoredForm(dpopKey) {
            throw .wrongType(key: CodingKeys.dpopKey.rawValue, expected: "a DPoP key (d.x.y, base64url)", offset: 0)
        }
        for (index, targeted) in targetedTokens.enumerated() {
            guard (try? TokenResponse.validateToken(targeted.accessToken, field: "access_token")) != nil,
                !targeted.tokenType.isEmpty, targeted.tokenType.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
            else {
                throw .wrongType(
                    key: TargetedToken.key(index, .accessToken), expected: "a token (visible ASCII, not empty)",
                    offset: 0)
            }
        }
        set.clampToStoredBounds()
        return set
    }
}
