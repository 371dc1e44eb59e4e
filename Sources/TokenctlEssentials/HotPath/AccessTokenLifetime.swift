/// When an access token may still be served: the one rule shared by the refresh engine
/// (`TokenSet`), the engine's hot-cache reads (`HotCacheEntry`) and the front's hit
/// (`HotPath.render`), so all decide alike. The rule is written once, generically, below
/// (`Rule`): the engine applies it to seconds as `Double`, the front to exact integer
/// nanoseconds relative to now (no floating point on the hit path).
///
/// Lifetimes are what the server states: `expires_in` (or a JWT's `exp`). A token the server
/// gave neither for has "no stated expiry" when nothing could renew it (no refresh token:
/// GitHub OAuth App tokens never expire on their own) and is served until the server rejects
/// it (git-credential `erase`, `token --force`); the assumed lifetime applies only where a
/// refresh token can renew the token (`renewable`).
public enum AccessTokenLifetime {
    /// Lifetime assumed when the server gives none and a refresh token can renew the token
    /// (`expires_in` is only RECOMMENDED, RFC 6749 §5.1).
    public static let assumedLifetime: Double = 300

    /// `token`'s default `--min-ttl`, and the margin the hot cache's kernel timeout is cut by.
    public static let defaultMinimumTimeToLive: Double = 60

    /// The margin that must remain before expiry: min(min-ttl, half the issued lifetime), so a
    /// server issuing 30-second tokens does not make every call refresh. With `capped: false`
    /// the margin is min-ttl itself: `refresh --if-expiring-within` asks exactly that question.
    public static func refreshMargin(issuedLifetime: Double?, minimumTimeToLive: Double, capped: Bool = true) -> Double
    {
        Rule.margin(
            lifetime: issuedLifetime ?? assumedLifetime, minimumTimeToLive: minimumTimeToLive, capped: capped,
            half: { $0 / 2 })
    }

    /// The expiry to act on: the server's, else the assumed lifetime from when the set arrived
    /// when it is `renewable`, else none (`.infinity`: no stated expiry).
    public static func effectiveExpiry(expiresAt: Double?, obtainedAt: Double, renewable: Bool = true) -> Double {
        Rule.effectiveExpiry(
            expiresAt: expiresAt, obtainedAt: obtainedAt, assumedLifetime: assumedLifetime, renewable: renewable)
            ?? .infinity
    }

    /// Whether a token is still valid for at least the refresh margin at `now`.
    public static func isFresh(
        expiresAt: Double?, issuedLifetime: Double?, obtainedAt: Double, at now: Double, minimumTimeToLive: Double,
        capped: Bool = true,
        renewable: Bool = true
    ) -> Bool {
        Rule.isFresh(
            now: now,
            margin: refreshMargin(issuedLifetime: issuedLifetime, minimumTimeToLive: minimumTimeToLive, capped: capped),
            expiry: Rule.effectiveExpiry(
                expiresAt: expiresAt, obtainedAt: obtainedAt, assumedLifetime: assumedLifetime, renewable: renewable))
    }

    /// The rule itself, for any number type (inlined and specialized where it is used).
    public enum Rule {
        /// min(min-ttl, half the lifetime), never negative; min-ttl alone when not `capped`.
        @inline(__always)
        public static func margin<T: Comparable & AdditiveArithmetic>(
            lifetime: T, minimumTimeToLive: T, capped: Bool = true, half: (T) -> T
        ) -> T {
            max(.zero, capped ? min(minimumTimeToLive, half(lifetime)) : minimumTimeToLive)
        }

        /// The server's expiry, else the assumed lifetime from when the token arrived when a
        /// refresh token can renew it (`renewable`), else nil: no stated expiry.
        @inline(__always)
        public static func effectiveExpiry<T: AdditiveArithmetic>(
            expiresAt: T?, obtainedAt: T, assumedLifetime: T, renewable: Bool = true
        ) -> T? {
            if let expiresAt { return expiresAt }
            return renewable ? obtainedAt + assumedLifetime : nil
        }

        /// Fresh: still valid for the whole margin at `now` (strictly before the expiry); a token
        /// with no stated expiry (nil) always is.
        @inline(__always)
        public static func isFresh<T: Comparable & AdditiveArithmetic>(now: T, margin: T, expiry: T?) -> Bool {
            guard let expiry else { return true }
            return now + margin < expiry
        }
    }
}
