extension TokenSet {
    /// The token set to store after a successful exchange. A response without a refresh token
    /// keeps the one we had (non-rotating servers, RFC 6749 §6).
    public init(response: TokenResponse, receivedAt: Double, serverDate: Double?, previous: TokenSet?) {
        let offset = ClockSkew.offset(serverDate: serverDate, receivedAt: receivedAt)
        // The access token decoded once, for its exp and sub (nil: an opaque token).
        let accessClaims = UnverifiedJWT.claims(of: response.accessToken)
        let expiry = ClockSkew.expiry(
            expiresIn: response.expiresIn, accessTokenClaims: accessClaims, receivedAt: receivedAt, offset: offset,
            createdAt: response.createdAt)
        let subject =
            response.idToken.flatMap { UnverifiedJWT.claims(of: $0)?["sub"]?.stringValue }
            ?? accessClaims?["sub"]?.stringValue
            ?? previous?.subject
        self.init(
            accessToken: response.accessToken,
            tokenType: response.tokenType,
            refreshToken: response.refreshToken ?? previous?.refreshToken,
            idToken: response.idToken ?? previous?.idToken,
            scope: response.scope ?? previous?.scope,
            expiresAt: expiry,
            // Without expires_in, the lifetime is what the JWT's exp leaves, for the refresh margin.
            issuedLifetime: response.expiresIn ?? expiry.map { max(0, $0 - receivedAt) },
            obtainedAt: receivedAt,
            lastRefreshAt: previous == nil ? nil : receivedAt,
            serverClockOffset: offset,
            subject: subject,
            // The session's other tokens stay while they are valid: still good for their targets.
            targetedTokens: previous?.targetedTokens.filter { $0.effectiveExpiry > receivedAt } ?? [],
            scopeNarrowedAt: previous?.scopeNarrowedAt,
            // The key the response's tokens are bound to stays with them.
            dpopKey: previous?.dpopKey,
            // A new refresh token lives as long as its answer says; a kept one as long as it did.
            refreshTokenExpiresAt: response.refreshToken != nil
                ? response.refreshTokenExpiresIn.map { receivedAt + $0 } : previous?.refreshTokenExpiresAt
        )
        // The bounds a stored set is read back with (`validated()`), applied where the values
        // arrive, so that what is written reads back unchanged (a server Date in year 9790 made
        // an offset that reading clamped: found by the TokenResponse fuzz target).
        clampToStoredBounds()
    }

    /// Times within years 1970 to about 5100, lifetimes up to ten years, clock offsets within
    /// ±1e9 s: the ranges `validated()` allows.
    mutating func clampToStoredBounds() {
        expiresAt = expiresAt?.clamped(to: 0...1e11)
        obtainedAt = obtainedAt.clamped(to: 0...1e11)
        lastRefreshAt = lastRefreshAt?.clamped(to: 0...1e11)
        scopeNarrowedAt = scopeNarrowedAt?.clamped(to: 0...1e11)
        refreshTokenExpiresAt = refreshTokenExpiresAt?.clamped(to: 0...1e11)
        issuedLifetime = issuedLifetime?.clamped(to: 0...TokenResponse.maximumLifetime)
        serverClockOffset = serverClockOffset?.clamped(to: -1e9...1e9)
        for index in targetedTokens.indices {
            targetedTokens[index].expiresAt = targetedTokens[index].expiresAt?.clamped(to: 0...1e11)
            targetedTokens[index].obtainedAt = targetedTokens[index].obtainedAt.clamped(to: 0...1e11)
            targetedTokens[index].issuedLifetime = targetedTokens[index].issuedLifetime?.clamped(
                to: 0...TokenResponse.maximumLifetime)
        }
    }
}
