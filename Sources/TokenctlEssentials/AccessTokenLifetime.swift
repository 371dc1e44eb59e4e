/// When an access token may still be served: the one rule shared by the refresh engine
/// (`TokenSet`) and the hot-cache front (`HotCacheEntry`), so both decide alike.
public enum AccessTokenLifetime {
    /// Lifetime assumed when the server gives none (`expires_in` is only RECOMMENDED, RFC 6749 §5.1).
    public static let assumedLifetime: Double = 300

    /// `token`'s default `--min-ttl`, and the margin the hot cache's kernel timeout is cut by.
    public static let defaultMinimumTimeToLive: Double = 60

    /// The margin that must remain before expiry: min(min-ttl, half the issued lifetime), so a
    /// server issuing 30-second tokens does not make every call refresh. With `capped: false`
    /// the margin is min-ttl itself: `refresh --if-expiring-within` asks exactly that question.
    public static func refreshMargin(issuedLifetime: Double?, minimumTimeToLive: Double, capped: Bool = true) -> Double {
        guard capped else { return max(0, minimumTimeToLive) }
        let lifetime = issuedLifetime ?? assumedLifetime
        return max(0, min(minimumTimeToLive, lifetime / 2))
    }

    /// The expiry to act on: the server's, else the assumed lifetime from when the set arrived.
    public static func effectiveExpiry(expiresAt: Double?, obtainedAt: Double) -> Double {
        expiresAt ?? (obtainedAt + assumedLifetime)
    }

    /// Whether a token is still valid for at least the refresh margin at `now`.
    public static func isFresh(expiresAt: Double?, issuedLifetime: Double?, obtainedAt: Double, at now: Double, minimumTimeToLive: Double, capped: Bool = true) -> Bool {
        now + refreshMargin(issuedLifetime: issuedLifetime, minimumTimeToLive: minimumTimeToLive, capped: capped)
            < effectiveExpiry(expiresAt: expiresAt, obtainedAt: obtainedAt)
    }
}
