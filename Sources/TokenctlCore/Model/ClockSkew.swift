/// The server's clock relative to ours, from the `Date` header of token responses.
///
/// Expiry from `expires_in` is relative and needs no correction. An absolute expiry (a JWT
/// access token's `exp`) is on the server's clock and is mapped to local time with this offset,
/// which is trusted only within `trustedBound`; beyond it the absolute expiry cannot be
/// placed on our clock, so such a token is treated as expiring and refreshed online.
public enum ClockSkew {
    /// ±10 minutes.
    public static let trustedBound: Double = 600

    /// Server minus local seconds, measured when a response arrived.
    public static func offset(serverDate: Double?, receivedAt: Double) -> Double? {
        guard let serverDate else { return nil }
        // Date has one-second resolution and is stamped before the body is sent.
        let offset = serverDate - receivedAt
        return abs(offset) < 1.5 ? 0 : offset
    }

    public static func isTrusted(_ offset: Double?) -> Bool {
        guard let offset else { return true }
        return abs(offset) <= trustedBound
    }

    /// The local expiry of an access token received at `receivedAt`.
    public static func expiry(response: TokenResponse, receivedAt: Double, offset: Double?) -> Double? {
        expiry(
            expiresIn: response.expiresIn, accessTokenClaims: UnverifiedJWT.claims(of: response.accessToken),
            receivedAt: receivedAt, offset: offset,
            createdAt: response.createdAt)
    }

    /// The same, from the access token's claims already decoded (nil: not a JWT).
    ///
    /// - Parameter createdAt: when the server says it issued the token (GitLab's `created_at`),
    ///   on its clock: `created_at + expires_in` mapped to ours, never later than the arrival
    ///   plus `expires_in` (a slow answer, or a token the server handed out again, has less left).
    static func expiry(
        expiresIn: Double?, accessTokenClaims: [String: JSONValue]?, receivedAt: Double, offset: Double?,
        createdAt: Double? = nil
    ) -> Double? {
        var expiry = expiresIn.map { receivedAt + $0 }
        if let createdAt, let expiresIn, isTrusted(offset) {
            let local = (createdAt + expiresIn - (offset ?? 0)).clamped(to: 0...(receivedAt + expiresIn))
            expiry = min(expiry ?? local, local)
        }
        if case .number(let exp)? = accessTokenClaims?["exp"] {
            guard isTrusted(offset) else { return receivedAt }
            // A JWT exp of 2^63 or -2^63 is clamped where it arrives: nothing later traps on it.
            let local = (exp - (offset ?? 0)).clamped(to: 0...(receivedAt + TokenResponse.maximumLifetime))
            expiry = min(expiry ?? local, local)
        }
        return expiry
    }
}
