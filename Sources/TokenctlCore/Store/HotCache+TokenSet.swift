import TokenctlEssentials

extension HotCacheEntry {
    /// What the hot cache keeps of a token set: the access token and its timing, never the
    /// refresh or ID token.
    /// `tokenSet` is what was served for `target` (`TokenSet.served(for:)`).
    public init(_ tokenSet: TokenSet, for identity: SessionIdentity, target: TokenTarget = .session) {
        self.init(
            profile: identity.profile, issuer: identity.issuer, clientID: identity.clientID,
            accessToken: tokenSet.accessToken, tokenType: tokenSet.tokenType, obtainedAt: tokenSet.obtainedAt,
            expiresAt: tokenSet.expiresAt, issuedLifetime: tokenSet.issuedLifetime, target: target,
            statesNoExpiry: target.isSession && tokenSet.statesNoExpiry)
    }
}

extension TokenSet {
    /// The set a hot-cache entry stands for, to serve: its access token and timing (an assumed
    /// expiry written out, since the set has no refresh token to say it is renewable).
    init(cached entry: HotCacheEntry) {
        self.init(
            accessToken: entry.accessToken, tokenType: entry.tokenType, refreshToken: nil,
            expiresAt: entry.statesNoExpiry ? nil : entry.effectiveExpiry, issuedLifetime: entry.issuedLifetime,
            obtainedAt: entry.obtainedAt)
    }
}

extension HotCache {
    /// Cache the access token of a set just read from the Secret Service or just stored.
    /// A DPoP session's tokens are never cached: they are useless without a proof, which only
    /// the engine can sign (the key stays in the Secret Service).
    func remember(_ tokenSet: TokenSet, for identity: SessionIdentity, target: TokenTarget = .session, now: Double) {
        guard tokenSet.dpopKey == nil, tokenSet.tokenType != "DPoP" else { return }
        store(HotCacheEntry(tokenSet, for: identity, target: target), now: now)
    }

    /// Drop whatever is cached for this identity, its own token and every target's (logout,
    /// ended grant, re-pointed login).
    func forget(_ identity: SessionIdentity) {
        invalidate(profile: identity.profile, issuer: identity.issuer, clientID: identity.clientID)
        invalidateAll(profile: identity.profile, issuer: identity.issuer, clientID: identity.clientID)
    }
}
