import TokenctlEssentials

extension TokenctlService {
    /// An access token to hand out, and where it came from.
    public struct ServedToken: Sendable {
        /// The token set; served from the hot cache, it has no refresh or ID token.
        public var tokenSet: TokenSet
        /// True when this process waited for another process's refresh and served the token
        /// that refresh cached, without reading the Secret Service.
        public var fromAnotherProcessRefresh: Bool
        /// True when it came from the hot cache without waiting (`consultHotCache`).
        public var fromHotCache = false
        /// The profile's configuration the token was served for (read once per command).
        public var configuration: ProfileConfiguration
    }
}

/// `token` and what hands out a token (`TokenctlService.token`), and `git-credential erase`
/// (`TokenctlService.discardAccessToken`): the hot cache, another process's refresh, the broker.
struct TokenServing {
    let service: TokenctlService

    /// See `TokenctlService.token`.
    func token(
        _ name: ProfileName, target: TokenTarget, minimumTimeToLive: Double, force: Bool, consultHotCache: Bool
    ) async throws(TokenctlError) -> TokenctlService.ServedToken {
        let profile = try service.resolve(name)
        if consultHotCache, !force, let hotCache = service.hotCache,
            let entry = hotCache.lookup(
                profile: name, issuer: profile.identity.issuer, clientID: profile.identity.clientID, target: target),
            entry.isFresh(at: service.clock.now(), minimumTimeToLive: minimumTimeToLive)
        {
            return TokenctlService.ServedToken(
                tokenSet: TokenSet(cached: entry), fromAnotherProcessRefresh: false, fromHotCache: true,
                configuration: profile.configuration)
        }
        if !force,
            let tokenSet = try await servedAfterAnotherRefresh(
                profile, target: target, minimumTimeToLive: minimumTimeToLive)
        {
            return TokenctlService.ServedToken(
                tokenSet: tokenSet, fromAnotherProcessRefresh: true, configuration: profile.configuration)
        }
        let broker = service.broker
        let tokenSet = try await forgettingEndedSession(profile.identity) {
            () async throws(TokenctlError) -> TokenSet in
            try await broker.validTokenSet(
                for: profile, target: target, minimumTimeToLive: minimumTimeToLive, force: force)
        }
        return TokenctlService.ServedToken(
            tokenSet: tokenSet, fromAnotherProcessRefresh: false, configuration: profile.configuration)
    }

    /// The hot cache's token, if another process held the profile lock (was refreshing) and
    /// left one valid for `minimumTimeToLive` when it let go; nil otherwise (nothing to wait
    /// for, no usable hot cache, or that refresh failed).
    private func servedAfterAnotherRefresh(_ profile: ResolvedProfile, target: TokenTarget, minimumTimeToLive: Double)
        async throws(TokenctlError) -> TokenSet?
    {
        // Without a usable kernel keyring the refresher caches nothing: no reason to wait.
        guard let hotCache = service.hotCache, hotCache.state == .kernelKeyring else { return nil }
        do {
            guard try await service.locks.waitWhileHeld(profile.name, until: service.lockDeadline) else { return nil }
        } catch {
            service.events?.append(
                EventRecord(
                    time: service.clock.now(), event: .refreshFailed, profile: profile.name.rawValue,
                    issuer: profile.configuration.issuer.string,
                    reason: TransientReason.lockHeldTooLong.className))
            throw error
        }
        let identity = profile.identity
        guard
            let entry = hotCache.lookup(
                profile: identity.profile, issuer: identity.issuer, clientID: identity.clientID, target: target),
            entry.isFresh(at: service.clock.now(), minimumTimeToLive: minimumTimeToLive)
        else { return nil }
        return TokenSet(cached: entry)
    }

    /// Run a broker call; a session that has ended is dropped from the hot cache (what the
    /// broker serves it caches itself, through `didServe`), and so is the session's access
    /// token after an unusable refresh answer (the broker marked it expired: the next command
    /// refreshes, with the rotated refresh token it kept).
    func forgettingEndedSession(_ identity: SessionIdentity, _ body: () async throws(TokenctlError) -> TokenSet)
        async throws(TokenctlError) -> TokenSet
    {
        do {
            return try await body()
        } catch {
            if error.kind == .loginRequired { service.hotCache?.forget(identity) }
            if error.kind == .protocolError {
                service.hotCache?.invalidate(
                    profile: identity.profile, issuer: identity.issuer, clientID: identity.clientID)
            }
            throw error
        }
    }

    /// See `TokenctlService.discardAccessToken`.
    func discardAccessToken(_ name: ProfileName, target: TokenTarget, ifAccessTokenIs rejected: String?)
        async throws(TokenctlError) -> Bool
    {
        let profile = try service.resolve(name)
        let identity = profile.identity
        let (store, hotCache) = (service.store, service.hotCache)
        let lock = try await service.locks.acquire(name, until: service.lockDeadline)
        defer { withExtendedLifetime(lock) {} }
        let stored: TokenSet?
        do { stored = try store.read(identity) } catch { throw TokenctlError(error) }
        guard var tokenSet = stored, let served = tokenSet.served(for: target) else { return false }
        if let rejected, rejected != served.accessToken {
            return false
        }
        func forget() {
            hotCache?.invalidate(
                profile: identity.profile, issuer: identity.issuer, clientID: identity.clientID, target: target)
        }
        forget()
        let now = service.clock.now()
        if served.expiresAt.map({ $0 > now - 1 }) ?? true {
            if target.isSession {
                tokenSet.expiresAt = now - 1
            } else if let index = tokenSet.targetedTokens.firstIndex(where: { $0.target == target }) {
                tokenSet.targetedTokens[index].expiresAt = now - 1
            }
            do { try store.write(tokenSet, for: identity) } catch { throw TokenctlError(error) }
        }
        forget()
        return true
    }
}
