import TokenctlEssentials

/// What `tokenctl status` reports for one profile. Never holds a token.
public struct SessionStatus: Sendable, Equatable {
    public enum State: String, Sendable, Equatable, CaseIterable {
        /// An access token is valid now.
        case authenticated
        /// The access token has expired but a refresh token is held: the next `token` refreshes.
        case expiredRefreshable = "expired-refreshable"
        /// No session is stored for this profile's issuer and client.
        case signedOut = "signed-out"
        /// The server ended the session (a terminal refresh failure); log in again.
        case ended
        /// The Secret Service could not be read.
        case storeUnavailable = "store-unavailable"
    }

    public var profile: ProfileName
    public var issuer: String
    public var clientID: String
    public var state: State
    public var subject: String?
    public var scope: String?
    /// Identity claims of the ID token (or of a JWT access token), as shown: never a token.
    public var claims: [(name: String, value: JSONValue)] = []
    /// Which token the claims come from: "id_token" or "access_token".
    public var claimsSource: String?
    /// "jwt" or "opaque".
    public var accessTokenFormat: String?
    /// The signature verdict for the token the claims come from (the ID token, else a JWT access
    /// token); nil when there is nothing to verify (no session, or only an opaque access token).
    public var signature: SignatureVerdict?
    /// Which token `signature` is about: "id_token" whenever one is stored, else "access_token".
    public var signatureSource: String?
    /// Seconds of access-token validity left (negative once expired), skew-corrected.
    public var accessTokenTimeLeft: Double?
    public var hasRefreshToken: Bool
    /// Seconds until the refresh token dies by the server's statement (`refresh_token_expires_in`),
    /// negative once it has; nil when the server stated no end.
    public var refreshTokenTimeLeft: Double?
    /// The session's tokens for other targets (`token --scope …`): each target and the seconds
    /// its token has left (negative: expired, refreshed on next use).
    public var targetedTokens: [(target: TokenTarget, timeLeft: Double)] = []
    /// The server narrowed the session's scope on a refresh since the last login (the stored
    /// set's `scopeNarrowedAt`; the event log has `scopeNarrowed`).
    public var scopeNarrowedByServer = false
    /// How the session's tokens are held: `bound` (DPoP tokens bound to the session's key),
    /// `bearer`, or `bearer-accepted` (a DPoP key, but the server issued Bearer tokens and the
    /// profile accepts them: `dpop_allow_bearer`). Nil without a session.
    public var dpop: String?
    /// The DPoP key's RFC 7638 thumbprint (what the server's `cnf.jkt` names), when there is a key.
    public var dpopThumbprint: String?
    public var obtainedAt: Double?
    public var lastRefreshAt: Double?
    /// Why the server ended the session (state `ended`).
    public var endedReason: String?
    /// The store problem, when `state` is `storeUnavailable`.
    public var storeProblem: String?
    /// What to do about `storeProblem` (a separate sentence, a separate JSON field).
    public var storeHint: Suggestion?
    /// A rotation the rotation journal holds and the Secret Service does not yet: since when.
    public var pendingWriteSince: Double?
    /// Why that write is pending (the last Secret Service error), when known.
    public var pendingWriteReason: String?
    /// Where the session lives: `secret-service`, or `none` for a machine profile whose key is
    /// in the TPM (its token cached in the kernel keyring only: `SessionStoreRouter`).
    public var store = "secret-service"
    /// A machine profile's grant (`client-credentials`); nil for a person's session.
    public var grant: String?
    /// How the client authenticates (`token_endpoint_auth_method`); nil for a public client.
    public var clientAuth: String?
    /// Which cache serves `token` hits: `kernel-keyring`, or `none` (the Secret Service every time).
    public var cache: String = "none"

    public static func == (lhs: SessionStatus, rhs: SessionStatus) -> Bool {
        lhs.profile == rhs.profile && lhs.issuer == rhs.issuer && lhs.clientID == rhs.clientID && lhs.state == rhs.state
            && lhs.subject == rhs.subject && lhs.obtainedAt == rhs.obtainedAt
            && lhs.hasRefreshToken == rhs.hasRefreshToken
            && lhs.endedReason == rhs.endedReason && lhs.storeProblem == rhs.storeProblem
    }

    public var exitStatus: ExitStatus {
        switch state {
        case .authenticated, .expiredRefreshable: .success
        case .signedOut, .ended: .loginRequired
        case .storeUnavailable: .unavailable
        }
    }

    /// The claims `status` shows, in this order, when present.
    public static let shownClaims = [
        "sub", "sid", "iss", "aud", "azp", "org_id", "role", "roles", "permissions", "email", "name",
    ]
}

extension SessionStatus {
    /// What a stored session says: its subject, scope, lifetimes, DPoP binding, claims (from the
    /// ID token, else a JWT access token), and the state `now`.
    mutating func describe(_ stored: TokenSet, now: Double) {
        subject = stored.subject
        scope = stored.scope
        accessTokenTimeLeft = stored.timeLeft(at: now)
        hasRefreshToken = stored.hasRefreshToken
        refreshTokenTimeLeft = stored.refreshToken == nil ? nil : stored.refreshTokenExpiresAt.map { $0 - now }
        targetedTokens = stored.targetedTokens.map { ($0.target, $0.effectiveExpiry - now) }
        scopeNarrowedByServer = stored.scopeNarrowedAt != nil
        dpop = stored.dpopKey == nil ? "bearer" : stored.tokenType == "DPoP" ? "bound" : "bearer-accepted"
        dpopThumbprint = stored.dpopKey.flatMap { try? DPoPKey(stored: $0) }?.thumbprint
        obtainedAt = stored.obtainedAt
        lastRefreshAt = stored.lastRefreshAt
        let accessClaims = UnverifiedJWT.claims(of: stored.accessToken)
        accessTokenFormat = accessClaims == nil ? "opaque" : "jwt"
        if let idClaims = stored.idToken.flatMap(UnverifiedJWT.claims(of:)) {
            claimsSource = "id_token"
            claims = Self.shown(idClaims)
        } else if let accessClaims {
            claimsSource = "access_token"
            claims = Self.shown(accessClaims)
        }
        if stored.timeLeft(at: now) > 0 {
            state = .authenticated
        } else if grant != nil {
            // A machine gets a new access token with its client's credentials.
            state = .expiredRefreshable
        } else {
            // A refresh token past its stated end cannot renew anything: sign in again.
            let renewable = stored.hasRefreshToken && (refreshTokenTimeLeft ?? 1) > 0
            state = renewable ? .expiredRefreshable : .signedOut
        }
    }

    static func shown(_ claims: [String: JSONValue]) -> [(name: String, value: JSONValue)] {
        shownClaims.compactMap { name in claims[name].map { (name, $0) } }
    }
}

extension TokenctlService {
    var jwksCache: JWKSCache { JWKSCache(directory: profiles.paths.jwksCacheDirectory, clock: clock) }

    /// The state of one profile's session with a signature verdict: from the cached keys, and when
    /// they do not know the token's key (or none are cached) and `offline` is false, after one
    /// rate-limited fetch of the issuer's JWKS. An unreachable server leaves the cached verdict.
    public func status(_ name: ProfileName, offline: Bool) async throws(TokenctlError) -> SessionStatus {
        // The keyring read blocks: on Dispatch's threads, so that `statuses` overlaps profiles.
        let (status, token) = try await BlockingCall.run { () throws(TokenctlError) -> (SessionStatus, String?) in
            try self.statusAndSignedToken(name)
        }
        guard !offline, let token, let verdict = status.signature, verdict.fetchMightHelp else { return status }
        let configuration = try profiles.require(name)
        let issuer = configuration.issuer.string
        let cache = jwksCache
        guard cache.mayRefetch(issuer) else { return status }
        let http = httpClient(configuration.network(of: name))
        var jwksURI = configuration.jwksURI?.string
        if jwksURI == nil {
            let discovery = DiscoveryCache(directory: profiles.paths.discoveryCacheDirectory, clock: clock)
            jwksURI =
                (try? await ServerMetadata.discover(
                    configuration.issuer, http: http, timeout: retry.attemptTimeout, cache: discovery,
                    issuerRule: configuration.preset?.issuerRule ?? .exact))?.jwksURI?.string
        }
        guard let jwksURI,
            let keys = await cache.refetch(issuer, jwksURI: jwksURI, http: http, timeout: retry.attemptTimeout)
        else {
            return status
        }
        var updated = status
        updated.signature = SignatureVerdict.evaluate(token, keys: keys)
        return updated
    }

    /// The states of several profiles (`status --all`), in the order given, up to
    /// `refreshAllConcurrency` at a time (`BoundedConcurrency`); each completes a pending journal
    /// write first. The first error, in that order, is thrown.
    public func statuses(_ names: [ProfileName], offline: Bool) async throws(TokenctlError) -> [SessionStatus] {
        let results = await BoundedConcurrency.map(names, limit: Self.refreshAllConcurrency) { name in
            await self.statusOrError(name, offline: offline)
        }
        return try results.map { result throws(TokenctlError) in try result.get() }
    }

    /// One profile's state for `statuses`, after completing its pending journal write; an error
    /// as a value.
    private func statusOrError(_ name: ProfileName, offline: Bool) async -> Result<SessionStatus, TokenctlError> {
        await completePendingWrite(name)
        do { return .success(try await status(name, offline: offline)) } catch { return .failure(error) }
    }

    /// The state of one profile's session, from the keyring (and the event log for `ended`); the
    /// signature verdict from cached keys only (never a network request).
    public func status(_ name: ProfileName) throws(TokenctlError) -> SessionStatus {
        try statusAndSignedToken(name).status
    }

    /// The status, and the token its signature verdict is about (never shown).
    private func statusAndSignedToken(_ name: ProfileName) throws(TokenctlError) -> (
        status: SessionStatus, token: String?
    ) {
        let configuration = try profiles.require(name)
        let identity = SessionIdentity(profile: name, configuration: configuration)
        var status = SessionStatus(
            profile: name, issuer: configuration.issuer.string, clientID: configuration.clientID, state: .signedOut,
            hasRefreshToken: false)
        status.cache = (hotCache?.state ?? .none).rawValue
        status.grant = configuration.grant?.rawValue
        status.clientAuth = configuration.tokenEndpointAuthMethod?.rawValue
        if store.tokensInKernelKeyringOnly(name) { status.store = "kernel-keyring" }
        let stored: TokenSet?
        if let pending = store.pendingWrite(identity) {
            status.pendingWriteSince = pending.journaledAt
            status.pendingWriteReason = pending.pendingReason
        }
        do { stored = try store.read(identity) } catch {
            status.state = .storeUnavailable
            status.storeProblem = error.message
            status.storeHint = error.hint
            return (status, nil)
        }
        guard let stored else {
            // A machine with no token cached gets one on the next `token`.
            if configuration.isMachine {
                status.state = .expiredRefreshable
                return (status, nil)
            }
            // Signed out, or ended by the server: the log says which happened last.
            let last = events?.records(minimumSignificance: .high, profile: name.rawValue)
                .last { $0.issuer == configuration.issuer.string }
            if let last, last.event == .sessionEnded {
                status.state = .ended
                status.endedReason = last.reason
                status.subject = last.subject
            }
            return (status, nil)
        }
        status.describe(stored, now: clock.now())
        // The ID token's signature; without one, a JWT access token's. An opaque access token has none.
        let signed = stored.idToken ?? (status.accessTokenFormat == "jwt" ? stored.accessToken : nil)
        if let signed {
            status.signatureSource = stored.idToken == nil ? "access_token" : "id_token"
            status.signature = SignatureVerdict.evaluate(signed, keys: jwksCache.keys(configuration.issuer.string))
        }
        return (status, signed)
    }

    /// The profile's state now, then again each time it changes: after a login, refresh or
    /// logout by any process (woken by the event log), and when the access token expires
    /// (woken by a timer). The keyring is read only when one of those happens.
    public func watch(_ name: ProfileName, pollInterval: Double = 0.2) -> AsyncStream<SessionStatus> {
        AsyncStream { continuation in
            let task = Task {
                var last: SessionStatus?
                var fingerprint = events?.fingerprint()
                var wakeAt: Double?
                while !Task.isCancelled {
                    let current: SessionStatus
                    do { current = try status(name) } catch {
                        continuation.finish()
                        return
                    }
                    if current != last {
                        continuation.yield(current)
                        last = current
                    }
                    wakeAt =
                        current.state == .authenticated
                        ? current.accessTokenTimeLeft.map { clock.now() + $0 + 0.05 } : nil
                    // Sleep until the log changes or the token expires.
                    while !Task.isCancelled {
                        try? await clock.sleep(pollInterval)
                        let now = events?.fingerprint()
                        if now?.size != fingerprint?.size || now?.inode != fingerprint?.inode {
                            fingerprint = now
                            break
                        }
                        if let wakeAt, clock.now() >= wakeAt { break }
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
