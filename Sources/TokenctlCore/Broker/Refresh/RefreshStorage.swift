import TokenctlEssentials

extension TokenBroker {
    /// Do what `consequence` says for a refresh of `target` that sent `current`'s
    /// `refreshToken` and was answered at `receivedAt`: store, keep or end the session, record
    /// the event, and return the set to hand out or throw the row's error.
    func carryOut(
        _ consequence: RefreshConsequence, _ profile: ResolvedProfile, target: TokenTarget, current: TokenSet,
        sent refreshToken: String, receivedAt: Double
    ) async throws(TokenctlError) -> TokenSet {
        // Every row but a stored answer carries its error (RefreshConsequenceTests); this
        // default is only a backstop.
        let failure = consequence.error ?? TokenctlError(.unexpected, "the refresh of '\(profile.name)' failed")
        switch consequence.action {
        case .storeRefreshed(let response, let serverDate) where !target.isSession:
            return try await storeRefreshed(
                response, for: target, serverDate: serverDate, profile, current: current, receivedAt: receivedAt)
        case .storeRefreshed(let response, let serverDate):
            return try await storeRefreshed(
                response, serverDate: serverDate, profile, current: current, receivedAt: receivedAt)
        case .keepRotatedRefreshToken(let rotated, let idToken):
            record(consequence.event, profile, subject: current.subject, reason: consequence.reason)
            throw try await keep(
                rotated, idToken: idToken, failure, profile, target: target, current: current, receivedAt: receivedAt)
        case .keepSession:
            record(consequence.event, profile, subject: current.subject, reason: consequence.reason)
            throw failure
        case .endSession:
            let (store, identity) = (self.store, profile.identity)
            _ = try? await BlockingCall.run({ () throws(StoreError) -> Bool in
                try store.delete(identity, ifRefreshTokenIs: refreshToken)
            })
            record(consequence.event, profile, subject: current.subject, reason: consequence.reason)
            throw failure
        }
    }

    /// Store a narrowed refresh's answer: the session keeps its own access token, scope and
    /// expiry, takes the refresh token (and ID token) the answer rotated, and stores the
    /// target's token; that token is returned as received.
    private func storeRefreshed(
        _ response: TokenResponse, for target: TokenTarget, serverDate: Double?, _ profile: ResolvedProfile,
        current: TokenSet, receivedAt: Double
    ) async throws(TokenctlError) -> TokenSet {
        let (next, token) = Self.storingTargeted(
            response, target: target, receivedAt: receivedAt, serverDate: serverDate, in: current)
        narrate?(
            next.refreshToken != current.refreshToken
                ? "the token endpoint answered with a token for \(target) and a rotated refresh token"
                : "the token endpoint answered with a token for \(target) (the refresh token is unchanged)")
        try await persist(next, for: profile.identity, replacing: current)
        narrate?("stored the refreshed session of '\(profile.name)'")
        // The token as received (`next` may not keep it: see `TokenSet.storing`).
        let served = TokenSet(
            accessToken: token.accessToken, tokenType: token.tokenType, refreshToken: nil,
            scope: token.grantedScope,
            expiresAt: token.effectiveExpiry, issuedLifetime: token.issuedLifetime, obtainedAt: token.obtainedAt,
            subject: next.subject,
            dpopKey: next.dpopKey)
        didServe?(served, profile.identity, target)
        if next.refreshToken != current.refreshToken {
            // The session's own token is unchanged, but the hot cache may hold it: still valid.
            didServe?(next, profile.identity, .session)
        }
        record(.tokenRefreshed, profile, subject: next.subject)
        return served
    }

    /// Store the session's refreshed set.
    private func storeRefreshed(
        _ response: TokenResponse, serverDate: Double?, _ profile: ResolvedProfile, current: TokenSet,
        receivedAt: Double
    ) async throws(TokenctlError) -> TokenSet {
        var next = TokenSet(response: response, receivedAt: receivedAt, serverDate: serverDate, previous: current)
        // Against RFC 6749 §6, some servers tie the refresh token a narrowed refresh rotated
        // to the narrowed scope (django-oauth-toolkit does): it shows here, as fewer scopes.
        let narrowed =
            current.scope.flatMap { before in response.scope.map { Self.isNarrower($0, than: before) } } ?? false
        if narrowed && next.scopeNarrowedAt == nil { next.scopeNarrowedAt = receivedAt }
        narrate?(
            next.refreshToken != current.refreshToken && response.refreshToken != nil
                ? "the token endpoint answered with a new access token and a rotated refresh token"
                : "the token endpoint answered with a new access token (the refresh token is unchanged)")
        try await persist(next, for: profile.identity, replacing: current)
        narrate?("stored the refreshed session of '\(profile.name)'")
        if narrowed {
            record(.scopeNarrowed, profile, subject: next.subject, reason: "server-narrowed")
            narrate?(
                "the server granted this refresh fewer scopes than the session had ('\(response.scope ?? "")' of '\(current.scope ?? "")'): it narrowed the session"
            )
        }
        didServe?(next, profile.identity, .session)
        record(.tokenRefreshed, profile, subject: next.subject)
        return next
    }

    /// Keep the rotated refresh token of an answer whose access token cannot be used (journal
    /// first, then the Secret Service, like any rotation: on a rotating server the one sent is
    /// spent), with the session's access token marked expired, so the next command refreshes.
    ///
    /// - Returns: `failure`, saying where the refresh token is kept.
    /// - Throws: when the rotated refresh token could not be kept (see `persist`).
    private func keep(
        _ refreshToken: String, idToken: String?, _ failure: TokenctlError, _ profile: ResolvedProfile,
        target: TokenTarget, current: TokenSet, receivedAt: Double
    ) async throws(TokenctlError) -> TokenctlError {
        var next = current
        next.refreshToken = refreshToken
        next.lastRefreshAt = receivedAt
        // Checked with the answer, like a usable answer's.
        if let idToken { next.idToken = idToken }
        if target.isSession {
            // Never served again: the server may have revoked it with the rotation.
            next.expiresAt = min(current.expiresAt ?? receivedAt, receivedAt)
        }
        narrate?(
            "the token endpoint answered with a rotated refresh token but an unusable access token: keeping the refresh token"
        )
        var failure = failure
        if case .pending(let error) = try await persist(next, for: profile.identity, replacing: current) {
            failure.hint = RefreshConsequence.keptRotatedHint(pending: error)
        }
        return failure
    }

    /// Persist the rotated set: the journal first, then the Secret Service; a transient store
    /// hiccup gets two more tries when there is no journal, since the old refresh token is
    /// already spent on a rotating server.
    ///
    /// - Throws: when nothing holds the set (the Secret Service write failed, and the journal
    ///   could not take it either), saying whether the session is lost: it is when the set
    ///   carries another refresh token than `current` (the server rotated).
    @discardableResult
    func persist(_ tokenSet: TokenSet, for identity: SessionIdentity, replacing current: TokenSet?)
        async throws(TokenctlError) -> PersistOutcome
    {
        var lastError: StoreError?
        for attempt in 0..<3 {
            do {
                let store = self.store
                let outcome = try await BlockingCall.run({ () throws(StoreError) -> PersistOutcome in
                    try store.persist(tokenSet, for: identity, replacing: current)
                })
                if case .pending(let error) = outcome {
                    events?.append(
                        EventRecord(
                            time: clock.now(), event: .storeUnavailable, profile: identity.profile.rawValue,
                            issuer: identity.issuer,
                            subject: tokenSet.subject, reason: "write-pending:" + error.reason.rawValue))
                }
                return outcome
            } catch {
                lastError = error
                if [.locked, .timeout, .promptPending, .deadline].contains(error.reason) { break }
                if attempt < 2 { try? await clock.sleep(0.1) }
            }
        }
        throw unsaved(tokenSet, for: identity, replacing: current, lastError!)
    }

    /// The error of a refreshed set nothing could hold (recorded as `storeUnavailable`).
    private func unsaved(
        _ tokenSet: TokenSet, for identity: SessionIdentity, replacing current: TokenSet?, _ error: StoreError
    ) -> TokenctlError {
        events?.append(
            EventRecord(
                time: clock.now(), event: .storeUnavailable, profile: identity.profile.rawValue,
                issuer: identity.issuer, subject: tokenSet.subject, reason: error.reason.rawValue))
        let journal =
            error.journalFailure.map { "the rotation journal (kernel keyring) could not hold it either: \($0)" }
            ?? "no rotation journal holds it"
        let storeHint = error.hint?.replacingSessionKept()
        let consequence: Suggestion =
            tokenSet.refreshToken != current?.refreshToken
            ? "The server rotated the refresh token and nothing could hold the new one, so the session is lost, unless the server accepts the previous one again for a grace period: if the next command exits 77, run '\(tokenctl: identity.profile, .login([]))' once the Secret Service works (see '\(tokenctl: .default, .doctor([]))')."
            : "The server did not rotate the refresh token, so the stored one still works: the session is kept, and the next command refreshes again."
        return TokenctlError(
            .storeUnavailable, "the refreshed session could not be saved: \(error.message); \(journal)",
            hint: Suggestion.sentences(storeHint, consequence))
    }

    /// Whether the scopes `after` are a strict subset of `before` (split on spaces and commas).
    static func isNarrower(_ after: String, than before: String) -> Bool {
        let (old, new) = (Set(ScopeWords.words(before)), Set(ScopeWords.words(after)))
        return new.isSubset(of: old) && new != old
    }

    /// The session after a narrowed refresh: its own access token, scope and expiry unchanged;
    /// the refresh token (and ID token) the response rotated; the target's token stored.
    static func storingTargeted(
        _ response: TokenResponse, target: TokenTarget, receivedAt: Double, serverDate: Double?, in current: TokenSet
    ) -> (set: TokenSet, token: TargetedToken) {
        let fresh = TokenSet(response: response, receivedAt: receivedAt, serverDate: serverDate, previous: current)
        var next = current
        next.refreshToken = fresh.refreshToken
        next.refreshTokenExpiresAt = fresh.refreshTokenExpiresAt
        next.idToken = fresh.idToken
        next.lastRefreshAt = receivedAt
        next.serverClockOffset = fresh.serverClockOffset
        let token = TargetedToken(
            target: target, accessToken: fresh.accessToken, tokenType: fresh.tokenType, grantedScope: response.scope,
            expiresAt: fresh.expiresAt, issuedLifetime: fresh.issuedLifetime, obtainedAt: receivedAt)
        return (next.storing(token, now: receivedAt), token)
    }
}
