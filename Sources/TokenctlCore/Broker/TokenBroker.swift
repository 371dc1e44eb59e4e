import TokenctlEssentials

/// A profile ready for token work: its name, configuration and resolved endpoints.
public struct ResolvedProfile: Sendable, Equatable {
    public var name: ProfileName
    public var configuration: ProfileConfiguration
    public var tokenEndpoint: String

    public init(name: ProfileName, configuration: ProfileConfiguration, tokenEndpoint: String) {
        self.name = name
        self.configuration = configuration
        self.tokenEndpoint = tokenEndpoint
    }

    public var identity: SessionIdentity { SessionIdentity(profile: name, configuration: configuration) }
}

/// Serves valid access tokens and performs refreshes, single-flight per profile: inside the
/// process through one shared in-flight task, across processes through the profile lock.
///
/// The algorithm: read without locking; serve a fresh token; otherwise take
/// the profile lock, re-read (another process may have rotated), and refresh once, with
/// signals deferred, persisting the rotated set before returning it.
public actor TokenBroker {
    public struct Configuration: Sendable {
        /// How long, in seconds, to wait for another process's refresh before giving up (exit 75).
        public var lockWait: Double
        /// The command's deadline (`--timeout` from its start), nil for none: the lock wait ends
        /// there too, and a detached refresh is given it.
        public var deadline: Deadline?
        /// Where a refresh runs: nil, in this process (unit tests, and the detached child
        /// itself); otherwise in a child that outlives this process (`DetachedRefresh`).
        public var detachedRefresh: DetachedRefresh?
        public init(lockWait: Double = 30, deadline: Deadline? = nil, detachedRefresh: DetachedRefresh? = nil) {
            self.lockWait = lockWait
            self.deadline = deadline
            self.detachedRefresh = detachedRefresh
        }

        /// When a wait for the lock that starts now ends: `lockWait` from now, or the command's
        /// deadline if that comes first (on `Clock.system`, as the lock waits).
        public func lockDeadline() -> Deadline { Deadline.after(lockWait).earlier(deadline) }
    }

    private let store: any SessionStore
    private let locks: any LockProvider
    private let endpointClient: @Sendable (ResolvedProfile) -> TokenEndpointClient
    private let clock: Clock
    private let configuration: Configuration
    private let events: EventLog?
    /// Called with every set this broker serves (read, found rotated by another process, or
    /// refreshed); a refreshed set right after it is stored, while the profile lock is still held,
    /// so processes waiting for this refresh may be served what it hands over here.
    /// The set is what was handed out for the target (`TokenSet.served(for:)`).
    private let didServe: (@Sendable (TokenSet, SessionIdentity, TokenTarget) -> Void)?
    /// The token the hot cache holds for a target (nil: none, or no hot cache). With a detached
    /// refresh, a due or forced one is the snapshot a refresh starts from without a Secret
    /// Service read here: the refresh process reads the session under the lock anyway.
    public typealias CachedToken = @Sendable (SessionIdentity, TokenTarget) -> TokenSet?
    private let cachedToken: CachedToken?
    /// The issuer's keys for checking a refreshed ID token's signature: the cached ones
    /// (`refetch` false), or fetched now because the cache does not know the token's key
    /// (`refetch` true; rate-limited, nil when not fetched). Nil closure: signatures of refreshed
    /// ID tokens are not checked (unit tests).
    public typealias IssuerKeys = @Sendable (_ profile: ResolvedProfile, _ refetch: Bool) async -> JSONWebKeySet?
    private let issuerKeys: IssuerKeys?
    /// The issuers' DPoP nonces and clock offsets (`TokenctlService.dpopState`: kept on disk).
    private let dpopState: DPoPIssuerState
    /// Told, in a sentence each, what this broker does and why (`--verbose`): where a set came
    /// from, why it refreshes, how long the lock wait took, a capped min-ttl. Never a token.
    public typealias Narrator = @Sendable (String) -> Void
    private let narrate: Narrator?
    /// One flight per profile and target: callers for the same target share it; flights for
    /// different targets of one profile take turns on the profile lock (each spends the
    /// refresh token the previous one stored).
    private struct Flight: Hashable {
        var profile: ProfileName
        var target: TokenTarget
    }
    private var inFlight: [Flight: (id: UInt64, task: Task<TokenSet, any Error>)] = [:]
    private var nextFlightID: UInt64 = 0
    /// Refreshes this broker sent to a server (for tests and `--verbose`).
    public private(set) var refreshRequestCount = 0

    public init(
        store: any SessionStore, locks: any LockProvider, clock: Clock, configuration: Configuration = Configuration(),
        events: EventLog? = nil, dpopState: DPoPIssuerState = .shared,
        didServe: (@Sendable (TokenSet, SessionIdentity, TokenTarget) -> Void)? = nil,
        cachedToken: CachedToken? = nil, issuerKeys: IssuerKeys? = nil, narrate: Narrator? = nil,
        endpointClient: @escaping @Sendable (ResolvedProfile) -> TokenEndpointClient
    ) {
        self.dpopState = dpopState
        self.issuerKeys = issuerKeys
        self.narrate = narrate
        self.events = events
        self.didServe = didServe
        self.cachedToken = cachedToken
        self.store = store
        self.locks = locks
        self.clock = clock
        self.configuration = configuration
        self.endpointClient = endpointClient
    }

    /// An access token valid for at least the refresh margin, refreshing when needed
    /// (or always, with `force`).
    ///
    /// - Throws: `TokenctlError` (login required, store unavailable, transient).
    ///
    /// - Parameter capMargin: cap the margin at half the token's lifetime (see
    ///   `TokenSet.refreshMargin`); `false` for an explicit refresh window.
    /// - Parameter target: another scope, audience or resource than the session's own: the set
    ///   returned is then that target's token (`TokenSet.served(for:)`), obtained with a refresh
    ///   that asks for it; a refresh token that refresh rotates is the session's new one.
    /// - Parameter readFirst: with `force`, `false` skips the read before the lock (`refresh`:
    ///   a forced refresh needs only the read under the lock; one Secret Service read less per
    ///   profile in `refresh --all`, whose floor is the keyring daemon's time).
    public func validTokenSet(
        for profile: ResolvedProfile, target: TokenTarget = .session, minimumTimeToLive: Double, force: Bool = false,
        capMargin: Bool = true,
        readFirst: Bool = true
    ) async throws(TokenctlError) -> TokenSet {
        await completePendingWrite(profile)
        if force && !readFirst {
            narrate?("refreshing: forced")
            return try await sharedRefresh(
                profile, target: target, snapshot: nil, minimumTimeToLive: minimumTimeToLive, force: true,
                capMargin: capMargin)
        }
        if configuration.detachedRefresh != nil, let cached = cachedToken?(profile.identity, target),
            force || !cached.isFresh(at: clock.now(), minimumTimeToLive: minimumTimeToLive, capped: capMargin)
        {
            narrate?(
                force
                    ? "refreshing: forced (the hot cache's token is the one to replace)"
                    : "refreshing: the hot cache's token of '\(profile.name)' is due")
            return try await sharedRefresh(
                profile, target: target, snapshot: cached, minimumTimeToLive: minimumTimeToLive, force: force,
                capMargin: capMargin)
        }
        let session = try await read(profile.identity)
        guard let session else { throw Self.notLoggedIn(profile.name) }
        try Self.checkScopes(target, within: session, profile.name)
        guard let snapshot = session.served(for: target) else {
            narrate?("no token for \(target) is stored for '\(profile.name)': refreshing to get one")
            return try await sharedRefresh(
                profile, target: target, snapshot: nil, minimumTimeToLive: minimumTimeToLive, force: force,
                capMargin: capMargin)
        }
        if let narrate {
            narrate(
                store.pendingWrite(profile.identity) != nil
                    ? "read the session of '\(profile.name)' from the rotation journal in the kernel keyring (its Secret Service write is pending)"
                    : "read the session of '\(profile.name)' from the Secret Service")
            narrateMargin(snapshot, minimumTimeToLive: minimumTimeToLive, capped: capMargin)
        }
        if !force && snapshot.isFresh(at: clock.now(), minimumTimeToLive: minimumTimeToLive, capped: capMargin) {
            didServe?(snapshot, profile.identity, target)
            return snapshot
        }
        if let narrate {
            let left = snapshot.timeLeft(at: clock.now())
            let margin = snapshot.refreshMargin(minimumTimeToLive: minimumTimeToLive, capped: capMargin)
            narrate(
                force
                    ? "refreshing: forced"
                    : left <= 0
                        ? "refreshing: the access token expired \(Self.seconds(-left)) ago"
                        : "refreshing: the access token has \(Self.seconds(left)) left, not more than the \(Self.seconds(margin)) asked for"
            )
        }
        return try await sharedRefresh(
            profile, target: target, snapshot: snapshot, minimumTimeToLive: minimumTimeToLive, force: force,
            capMargin: capMargin)
    }

    /// A narrowed refresh may only ask for scopes the session was granted (RFC 6749 §6): asking
    /// for others is refused here, before a request, when the session's scope is known.
    static func checkScopes(_ target: TokenTarget, within session: TokenSet, _ profile: ProfileName)
        throws(TokenctlError)
    {
        guard !target.scopes.isEmpty, let granted = session.scope.map({ Set(ScopeWords.words($0)) }) else { return }
        let missing = target.scopes.filter { !granted.contains($0) }
        guard missing.isEmpty else {
            throw TokenctlError(
                .invalidInput,
                "profile '\(profile)' was not granted the scope\(missing.count == 1 ? "" : "s") '\(missing.joined(separator: " "))': its session has '\(session.scope ?? "")', and a refresh can only narrow it (RFC 6749 §6)",
                hint:
                    "Ask for a subset of the session's scopes, or sign in with more: '\(CommandHint.tokenctl(profile, "login --scope \"\((granted.sorted() + missing).joined(separator: " "))\""))'."
            )
        }
    }

    /// Say when the min-ttl asked for is more than half the token's lifetime, and so capped.
    private func narrateMargin(_ tokenSet: TokenSet, minimumTimeToLive: Double, capped: Bool) {
        let margin = tokenSet.refreshMargin(minimumTimeToLive: minimumTimeToLive, capped: capped)
        if margin < minimumTimeToLive {
            narrate?(
                "min-ttl \(Self.seconds(minimumTimeToLive)) capped at \(Self.seconds(margin)), half the access token's lifetime (a longer one could never be met)"
            )
        }
    }

    static func seconds(_ value: Double) -> String {
        value < 10 && value != value.rounded()
            ? "\(Double(Int(saturating: value * 10)) / 10) s" : "\(Int(saturating: value.rounded())) s"
    }

    /// When the rotation journal holds a set the Secret Service does not, write it there now,
    /// under the profile lock (a refresher holding it may be journaling a newer one). Best
    /// effort: while the Secret Service cannot take it, reads serve the journal's set.
    public func completePendingWrite(_ profile: ResolvedProfile) async {
        guard store.pendingWrite(profile.identity) != nil,
            let lock = try? await locks.acquire(profile.name, until: configuration.lockDeadline().earlier(.after(5)))
        else { return }
        defer { withExtendedLifetime(lock) {} }
        let store = self.store
        let identity = profile.identity
        if let completed = try? await BlockingCall.run({ () throws(StoreError) -> TokenSet? in
            try store.completePendingWrite(identity)
        }) {
            record(.pendingWriteCompleted, profile, subject: completed.subject)
            narrate?("wrote the session of '\(profile.name)' held in the rotation journal to the Secret Service")
        }
    }

    /// Whether a refresh for `profile` (any target) is in flight in this process.
    public func isRefreshing(_ profile: ProfileName) -> Bool { inFlight.keys.contains { $0.profile == profile } }

    // MARK: Single flight

    private func sharedRefresh(
        _ profile: ResolvedProfile, target: TokenTarget, snapshot: TokenSet?, minimumTimeToLive: Double, force: Bool,
        capMargin: Bool
    ) async throws(TokenctlError) -> TokenSet {
        let task: Task<TokenSet, any Error>
        let flight = Flight(profile: profile.name, target: target)
        if let existing = inFlight[flight] {
            task = existing.task
        } else {
            // Set before the first suspension, so every caller arriving later joins this flight.
            nextFlightID += 1
            let id = nextFlightID
            task = Task {
                do {
                    let result = try await self.exchange(
                        profile, target: target, snapshot: snapshot, minimumTimeToLive: minimumTimeToLive, force: force,
                        capMargin: capMargin)
                    self.endFlight(flight, id: id)
                    return result
                } catch {
                    self.endFlight(flight, id: id)
                    throw error
                }
            }
            inFlight[flight] = (id, task)
        }
        // An unstructured task: a caller's cancellation never cancels the shared refresh.
        do { return try await task.value } catch let error as TokenctlError { throw error } catch {
            throw TokenctlError(.unexpected, "refresh failed: \(error)")
        }
    }

    /// Clear the in-flight entry only if it is still this flight.
    private func endFlight(_ flight: Flight, id: UInt64) {
        if inFlight[flight]?.id == id { inFlight[flight] = nil }
    }

    // MARK: The refresh under the cross-process lock

    /// The refresh under the lock, in a detached child when the configuration says so (see
    /// `DetachedRefresh`: a kill of this process must not lose a refresh the server answers).
    private func exchange(
        _ profile: ResolvedProfile, target: TokenTarget, snapshot: TokenSet?, minimumTimeToLive: Double, force: Bool,
        capMargin: Bool
    ) async throws(TokenctlError) -> TokenSet {
        guard let detached = configuration.detachedRefresh else {
            return try await refreshUnderLock(
                profile, target: target, snapshot: snapshot, minimumTimeToLive: minimumTimeToLive, force: force,
                capMargin: capMargin)
        }
        let request = DetachedRefresh.Request(
            profile: profile.name, target: target, snapshot: snapshot, minimumTimeToLive: minimumTimeToLive,
            force: force, capMargin: capMargin, deadline: configuration.deadline,
            settings: detached.settings)
        // The child put what it served in the hot cache (the user's kernel keyring is this
        // process's too); doing it again here could bring back a token a logout just removed.
        return try await detached.run(request, narrate: narrate)
    }

    /// Take the profile lock, re-read, and refresh once in this process: what a detached
    /// refresh's child runs.
    func refreshUnderLock(
        _ profile: ResolvedProfile, target: TokenTarget, snapshot: TokenSet?, minimumTimeToLive: Double, force: Bool,
        capMargin: Bool
    ) async throws(TokenctlError) -> TokenSet {
        try await lockedRefresh(
            profile, target: target, snapshot: snapshot, minimumTimeToLive: minimumTimeToLive, force: force,
            capMargin: capMargin)
    }

    private func lockedRefresh(
        _ profile: ResolvedProfile, target: TokenTarget, snapshot: TokenSet?, minimumTimeToLive: Double, force: Bool,
        capMargin: Bool
    ) async throws(TokenctlError) -> TokenSet {
        let lock: any HeldLock
        let waitStarted = clock.now()
        do { lock = try await locks.acquire(profile.name, until: configuration.lockDeadline()) } catch {
            if error.kind == .transient {
                record(
                    .refreshFailed, profile, subject: snapshot?.subject,
                    reason: TransientReason.lockHeldTooLong.className)
            }
            throw error
        }
        narrate?("took the profile lock of '\(profile.name)' after \(Self.seconds(clock.now() - waitStarted))")
        defer { withExtendedLifetime(lock) {} }

        // Values read before the await are snapshots: re-read under the lock.
        guard let current = try await read(profile.identity) else { throw Self.notLoggedIn(profile.name) }
        narrate?(
            store.pendingWrite(profile.identity) != nil
                ? "read the session of '\(profile.name)' from the rotation journal in the kernel keyring under the lock (its Secret Service write is pending)"
                : "read the session of '\(profile.name)' from the Secret Service under the lock")
        try Self.checkScopes(target, within: current, profile.name)
        if let served = current.served(for: target) {
            // Without a snapshot there is nothing to compare: a forced refresh refreshes. A
            // snapshot from the hot cache keeps its time to the millisecond.
            let rotatedElsewhere =
                snapshot.map {
                    served.accessToken != $0.accessToken || abs(served.obtainedAt - $0.obtainedAt) > 0.002
                } ?? false
            if (rotatedElsewhere || !force)
                && served.isFresh(at: clock.now(), minimumTimeToLive: minimumTimeToLive, capped: capMargin)
            {
                narrate?("another process refreshed '\(profile.name)' meanwhile: serving its token, no request sent")
                didServe?(served, profile.identity, target)
                return served
            }
        }
        guard let refreshToken = current.refreshToken else {
            throw noRefreshToken(profile, current: current, force: force)
        }
        if let end = current.refreshTokenExpiresAt, clock.now() >= end {
            // The server said when the refresh token dies (GitHub App tokens, about six months):
            // a request now can only be refused. The session stays for `status` to show.
            narrate?("the refresh token of '\(profile.name)' expired by the server's own statement: no request sent")
            throw TokenctlError(
                .loginRequired,
                "the refresh token of profile '\(profile.name)' has expired (the server stated its lifetime): re-login needed",
                hint: "Run '\(CommandHint.login(profile.name))' to sign in again. Nothing was sent to the server.")
        }

        let credentials = try await clientCredentials(for: profile)
        var client = endpointClient(profile)
        client.narrate = narrate
        // Never in a message: what the session holds besides the refresh token the request carries.
        client.knownSecrets =
            [current.accessToken, current.idToken, current.dpopKey, credentials.secret]
            + current.targetedTokens.map { Optional($0.accessToken) }
        // A DPoP session signs its refresh with its key (RFC 9449 §5): the refresh token is bound to it.
        let dpopKey = try current.dpopSigningKey(of: profile.name, checked: true)
        if let dpopKey {
            client.http = DPoPHTTPClient(
                client.http, key: dpopKey, issuer: profile.configuration.issuer.string,
                endpoints: [profile.tokenEndpoint], clock: clock,
                serverClockOffset: current.serverClockOffset, issuerState: dpopState)
        }
        // From the request until the rotated set is written (or the bounded write gave up with
        // the set safe in the journal), signals wait: a SIGTERM in between would spend the old
        // refresh token and keep nothing. Every step inside is bounded (HTTP by its timeouts,
        // the Secret Service by its per-call bound and the deadline), so SIGTERM always acts.
        SignalDeferral.begin()
        defer { SignalDeferral.end() }
        refreshRequestCount += 1
        let (answer, receivedAt) = await client.refresh(
            refreshToken: refreshToken, endpoint: profile.tokenEndpoint, clientID: profile.configuration.clientID,
            scope: target.scopeField, audience: target.audience, resources: target.resources, credentials: credentials)
        var outcome = answer
        if case .success(let response, _) = outcome {
            do {
                try DPoPBinding.check(response, key: dpopKey, allowBearer: profile.configuration.dpopAllowBearer)
            } catch {
                // Not stored: a token the profile cannot use safely must not replace the session.
                record(.dpopDowngradeRefused, profile, subject: current.subject, reason: error.eventReason)
                throw TokenctlError(
                    .configuration, "refused the refreshed tokens of profile '\(profile.name)': \(error)",
                    hint: Hint.sentences(
                        "The stored session was not replaced, but the server may count its refresh token as used.",
                        DPoPBinding.hint(profile.name, error)))
            }
        }
        if case .terminal(let reason) = outcome, Self.refusesProof(reason) {
            // The server refused the proof, not the grant: nothing was spent.
            record(.refreshFailed, profile, subject: current.subject, reason: reason.className)
            throw TokenctlError(
                .unexpected, "the server refused the DPoP proof of profile '\(profile.name)': \(reason)",
                hint: "The session is kept. A proof carries the time: check the system clock, then try again.")
        }
        var idTokenRefused = false
        // The ID token of a usable answer, or of one whose rotated refresh token is kept.
        let answeredIDToken: String? =
            switch outcome {
            case .success(let response, _): response.idToken
            case .unusableTokens(let answer): answer.idToken
            default: nil
            }
        if let idToken = answeredIDToken {
            // OIDC Core §12.2: the same issuer, subject and client, signed by the issuer, or the
            // session is not ours: terminal, and nothing is stored.
            do {
                guard let claims = UnverifiedJWT.claims(of: idToken) else {
                    throw JWTError.claim("the refreshed ID token is not a JWT")
                }
                try IDTokenValidation.validateRefreshed(
                    claims, previous: current.idToken.flatMap(UnverifiedJWT.claims(of:)),
                    issuer: profile.configuration.issuer.string,
                    clientID: profile.configuration.clientID,
                    issuerRule: profile.configuration.preset?.issuerRule ?? .exact)
                try await checkSignature(ofRefreshed: idToken, profile)
            } catch {
                outcome = .terminal(.unusableResponse("\(error)"))
                idTokenRefused = true
            }
        }
        if !target.isSession, case .terminal(let reason) = outcome, !idTokenRefused, !Self.endsSession(reason) {
            // The server refused this target (invalid_scope, invalid_target, …), not the grant:
            // the session stays, and the refresh token was not spent.
            record(.refreshFailed, profile, subject: current.subject, reason: reason.className)
            let (refusedTarget, why) = ProviderErrorClasses.refusesTarget(reason)
            throw TokenctlError(
                refusedTarget ? .invalidInput : .unexpected,
                "the server refused a token for \(target) on profile '\(profile.name)': \(reason)",
                hint: Hint.sentences(
                    why,
                    "The session is kept; '\(CommandHint.tokenctl(profile.name, "token"))' still serves its own token.")
            )
        }
        switch outcome {
        case .success(let response, let serverDate) where !target.isSession:
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
        case .success(let response, let serverDate):
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
        case .unusableTokens(let answer):
            throw try await keepingSession(
                after: answer, profile, target: target, current: current, receivedAt: receivedAt)
        case .clientRefused(let reason):
            // The client or its registration is refused, not the grant: nothing was spent, the
            // session stays, and no login is asked for (it would be refused the same way).
            record(.refreshFailed, profile, subject: current.subject, reason: reason.className)
            let row = ProviderErrorClasses.row(reason)
            throw TokenctlError(
                .configuration, "the server refused the client of profile '\(profile.name)': \(reason)",
                hint: Hint.sentences(
                    "The session is kept.", row?.hint,
                    ProviderErrorClasses.followUp(row.map(\.followUp) ?? .newSecret, for: profile.name)))
        case .terminal(let reason) where ProviderErrorClasses.row(reason)?.errorClass == .blockedByPolicy:
            // A policy refuses the refresh (Entra's Conditional Access), not the grant: a new
            // login would be refused too, so the session stays for when the policy allows it.
            record(.refreshFailed, profile, subject: current.subject, reason: reason.className)
            throw TokenctlError(
                .loginRequired, "the server refused to refresh the session of profile '\(profile.name)': \(reason)",
                hint: Hint.sentences(ProviderErrorClasses.row(reason)?.hint, "The session is kept."))
        case .terminal(let reason):
            // Another writer may have replaced the item meanwhile: delete only what we sent.
            let (store, identity) = (self.store, profile.identity)
            _ = try? await BlockingCall.run({ () throws(StoreError) -> Bool in
                try store.delete(identity, ifRefreshTokenIs: refreshToken)
            })
            record(.sessionEnded, profile, subject: current.subject, reason: reason.className)
            let row = ProviderErrorClasses.row(reason)
            throw TokenctlError(
                .loginRequired, "the server ended the session of profile '\(profile.name)': \(reason)",
                hint: Hint.sentences(
                    ProviderErrorClasses.hint(row, sessionScope: current.scope),
                    ProviderErrorClasses.followUp(row.map(\.followUp) ?? .signIn, for: profile.name)))
        case .notTheServersVerdict(let answer):
            // Something in the path answered, not the token endpoint: nothing says the grant
            // is dead, so the session stays (see `RefreshOutcome`).
            record(.refreshFailed, profile, subject: current.subject, reason: answer.className)
            throw TokenctlError(
                answer.mayPass ? .transient : .protocolError,
                "the refresh of profile '\(profile.name)' was not answered by the token endpoint: \(answer)",
                hint: Hint.sentences("The session is kept.", answer.advice))
        case .transient(.oauthError(let reason), _):
            // The server answered that it cannot now: it spent nothing.
            record(.refreshFailed, profile, subject: current.subject, reason: reason.className)
            throw TokenctlError(
                .transient, "could not refresh profile '\(profile.name)': \(reason)",
                hint: Hint.sentences(ProviderErrorClasses.row(reason)?.hint, "The session is kept; try again later."))
        case .transient(let reason, _):
            record(.refreshFailed, profile, subject: current.subject, reason: reason.className)
            if reason.requestMayHaveReachedServer {
                throw TokenctlError(
                    .transient, "could not refresh profile '\(profile.name)': \(reason)",
                    hint:
                        "The refresh request was sent but no answer came back in time: if the server rotated the refresh token meanwhile, the session is lost and '\(CommandHint.tokenctl(profile.name, "token"))' will say so; otherwise it is kept. Try again later."
                )
            }
            throw TokenctlError(
                .transient, "could not refresh profile '\(profile.name)': \(reason)",
                hint: "The session is kept; try again later.")
        }
    }

    /// Why a session without a refresh token cannot give what was asked (exit 77). The stored
    /// session is left as it was, whatever was asked: only a server's verdict on a grant ends a
    /// session (RFC 6749 §5.2), and a forced refresh is no verdict (nor a remote client's
    /// `force`). Such a session's token is served until its stated expiry, or for good when the
    /// server stated none (GitHub OAuth App tokens never expire on their own).
    private func noRefreshToken(_ profile: ResolvedProfile, current: TokenSet, force: Bool) -> TokenctlError {
        let now = clock.now()
        if force && current.timeLeft(at: now) > 0 {
            narrate?(
                "--force: '\(profile.name)' has no refresh token, so no new access token can be had; the session is left as it was"
            )
            return TokenctlError(
                .loginRequired,
                "profile '\(profile.name)' has no refresh token (the server issued none), so a forced refresh cannot get a new access token; the stored session is kept as it was",
                hint:
                    "If a server rejected the access token, sign in again: '\(CommandHint.login(profile.name))'. Without --force, '\(CommandHint.tokenctl(profile.name, "token"))' still serves the stored one."
            )
        }
        if current.timeLeft(at: now) > 0 {
            return TokenctlError(
                .loginRequired,
                "profile '\(profile.name)' has no refresh token (the server issued none), so its access token cannot be renewed; it stays in use until the server rejects it",
                hint: "For a new access token, sign in again: '\(CommandHint.login(profile.name))'.")
        }
        return TokenctlError(
            .loginRequired,
            "the access token of profile '\(profile.name)' has expired and the server issued no refresh token",
            hint: "Run '\(CommandHint.login(profile.name))' again.")
    }

    /// A 200 answer whose access or refresh token cannot be used: the server accepted the grant,
    /// so the session is not ended. A usable rotated refresh token is kept (journal first, then
    /// the Secret Service, like any rotation: on a rotating server the one sent is spent) with
    /// the session's access token marked expired, so the next command refreshes with it; without
    /// one, the stored session is left as it is. Either way the answer is reported (EX_PROTOCOL).
    ///
    /// - Returns: the error to throw (`.protocolError`), once what can be kept is stored.
    /// - Throws: when the rotated refresh token could not be kept (see `persist`).
    private func keepingSession(
        after answer: UnusableTokens, _ profile: ResolvedProfile, target: TokenTarget, current: TokenSet,
        receivedAt: Double
    ) async throws(TokenctlError) -> TokenctlError {
        record(.refreshFailed, profile, subject: current.subject, reason: answer.className)
        let message = "the server's answer to the refresh of profile '\(profile.name)' is unusable: \(answer)"
        switch answer.refreshToken {
        case .rotated(let refreshToken):
            var next = current
            next.refreshToken = refreshToken
            next.lastRefreshAt = receivedAt
            // Checked above, like a usable answer's.
            if let idToken = answer.idToken { next.idToken = idToken }
            if target.isSession {
                // Never served again: the server may have revoked it with the rotation.
                next.expiresAt = min(current.expiresAt ?? receivedAt, receivedAt)
            }
            narrate?(
                "the token endpoint answered with a rotated refresh token but an unusable access token: keeping the refresh token"
            )
            let outcome = try await persist(next, for: profile.identity, replacing: current)
            let whereKept =
                if case .pending(let error) = outcome {
                    " (in the kernel keyring's rotation journal for now: the Secret Service could not take it, \(error.message); the next tokenctl command that can writes it there)"
                } else { "" }
            return TokenctlError(
                .protocolError, message,
                hint:
                    "The server rotated the refresh token, and tokenctl kept the new one without this answer's access token\(whereKept): the session is kept, and the next command refreshes again."
            )
        case .absent:
            return TokenctlError(
                .protocolError, message,
                hint:
                    "The answer carried no new refresh token, so the stored one is kept (RFC 6749 §6): the session is kept, and the next command refreshes with it again."
            )
        case .unusable:
            return TokenctlError(
                .protocolError, message,
                hint:
                    "tokenctl cannot keep that refresh token, so the stored session is left as it was: if the server rotated its refresh token, the session is lost and the next command will say so."
            )
        }
    }

    /// Whether the scopes `after` are a strict subset of `before` (split on spaces and commas).
    static func isNarrower(_ after: String, than before: String) -> Bool {
        let (old, new) = (Set(ScopeWords.words(before)), Set(ScopeWords.words(after)))
        return new.isSubset(of: old) && new != old
    }

    /// Whether a server refused a refresh's DPoP proof (RFC 9449 §7.1, §8), not its grant: the
    /// refresh token was not spent, and the session stays whatever the target.
    static func refusesProof(_ reason: TerminalReason) -> Bool {
        if case .oauthError(_, let code, _, _) = reason {
            return code == "invalid_dpop_proof" || code == "use_dpop_nonce"
        }
        return false
    }

    /// Whether a server's refusal of a refresh means the grant is dead (the session ends), as
    /// opposed to a refusal of what a narrowed refresh asked for.
    static func endsSession(_ reason: TerminalReason) -> Bool { ProviderErrorClasses.endsGrant(reason) }

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

    /// The signature of an ID token that came with a refresh, as at login: against the issuer's
    /// cached keys (those that verified the login's ID token), fetched again once when they do
    /// not know its key (an issuer that rotated its keys). It fails when a check was possible and
    /// failed: a forbidden algorithm, a bad signature, a key that cannot make it, or a key the
    /// issuer's current JWKS does not have. When no keys can be had (no JWKS URI, the fetch
    /// failed or is rate-limited) or libcrypto is missing, the claims checks stand alone: the
    /// token came straight from the token endpoint over TLS (OIDC Core §3.1.3.7 item 6), and the
    /// refresh token it came with is already spent.
    private func checkSignature(ofRefreshed idToken: String, _ profile: ResolvedProfile) async throws(JWTError) {
        guard let issuerKeys else { return }
        var keys = await issuerKeys(profile, false)
        var fetched = false
        if SignatureVerdict.evaluate(idToken, keys: keys).fetchMightHelp, let fresh = await issuerKeys(profile, true) {
            keys = fresh
            fetched = true
        }
        switch SignatureVerdict.evaluate(idToken, keys: keys) {
        case .verified, .noKeysCached, .cryptoUnavailable:
            return
        case .unknownKey:
            if fetched { throw .claim("the refreshed ID token is signed with a key the issuer's JWKS does not have") }
        case .invalid:
            guard let keys else { throw .claim("the refreshed ID token is not signed with an accepted algorithm") }
            do { _ = try JWTVerifier.verify(idToken, keys: keys) } catch {
                throw .claim("the refreshed ID token was rejected: \(error)")
            }
        }
    }

    /// Persist the rotated set: the journal first, then the Secret Service; a transient store
    /// hiccup gets two more tries when there is no journal, since the old refresh token is
    /// already spent on a rotating server.
    ///
    /// - Throws: when nothing holds the set (the Secret Service write failed, and the journal
    ///   could not take it either), saying whether the session is lost: it is when the set
    ///   carries another refresh token than `current` (the server rotated).
    @discardableResult
    private func persist(_ tokenSet: TokenSet, for identity: SessionIdentity, replacing current: TokenSet)
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
        let error = lastError!
        events?.append(
            EventRecord(
                time: clock.now(), event: .storeUnavailable, profile: identity.profile.rawValue,
                issuer: identity.issuer, subject: tokenSet.subject, reason: error.reason.rawValue))
        let journal =
            error.journalFailure.map { "the rotation journal (kernel keyring) could not hold it either: \($0)" }
            ?? "no rotation journal holds it"
        let storeHint = error.hint?.replacingSessionKept()
        let consequence =
            tokenSet.refreshToken != current.refreshToken
            ? "The server rotated the refresh token and nothing could hold the new one, so the session is lost, unless the server accepts the previous one again for a grace period: if the next command exits 77, run '\(CommandHint.login(identity.profile))' once the Secret Service works (see 'tokenctl doctor')."
            : "The server did not rotate the refresh token, so the stored one still works: the session is kept, and the next command refreshes again."
        throw TokenctlError(
            .storeUnavailable, "the refreshed session could not be saved: \(error.message); \(journal)",
            hint: Hint.sentences(storeHint, consequence))
    }

    /// A confidential client's credentials (its secret from the Secret Service), or a public client's id.
    private func clientCredentials(for profile: ResolvedProfile) async throws(TokenctlError) -> ClientCredentials {
        guard let method = profile.configuration.tokenEndpointAuthMethod else {
            return ClientCredentials(clientID: profile.configuration.clientID)
        }
        let secret: String?
        let (store, identity) = (self.store, profile.identity)
        do {
            secret = try await BlockingCall.run({ () throws(StoreError) -> String? in
                try store.readClientSecret(identity)
            })
        } catch { throw TokenctlError(error) }
        guard let secret else {
            throw TokenctlError(
                .configuration, "profile '\(profile.name)' uses \(method.rawValue) but no client secret is stored",
                hint:
                    "Run '\(CommandHint.tokenctl(profile.name, "login --client-secret-stdin"))' and give the secret on standard input."
            )
        }
        return ClientCredentials(clientID: profile.configuration.clientID, secret: secret, method: method)
    }

    /// The stored set, read off the broker's executor (see `BlockingCall`).
    private func read(_ identity: SessionIdentity) async throws(TokenctlError) -> TokenSet? {
        let store = self.store
        do {
            return try await BlockingCall.run({ () throws(StoreError) -> TokenSet? in try store.read(identity) })
        } catch {
            let event: SessionEvent = error.reason == .deadline ? .refreshFailed : .storeUnavailable
            events?.append(
                EventRecord(
                    time: clock.now(), event: event, profile: identity.profile.rawValue, issuer: identity.issuer,
                    reason: error.reason.rawValue))
            throw TokenctlError(error)
        }
    }

    private func record(_ event: SessionEvent, _ profile: ResolvedProfile, subject: String?, reason: String? = nil) {
        events?.append(
            EventRecord(
                time: clock.now(), event: event, profile: profile.name.rawValue,
                issuer: profile.configuration.issuer.string, subject: subject, reason: reason))
    }

    static func notLoggedIn(_ profile: ProfileName) -> TokenctlError {
        TokenctlError(
            .loginRequired, "profile '\(profile)' is not logged in", hint: "Run '\(CommandHint.login(profile))'.")
    }

}

#if canImport(Glibc)
import Glibc
#endif
