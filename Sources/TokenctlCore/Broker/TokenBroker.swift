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
/// The algorithm (DESIGN.md §3): read without locking; serve a fresh token; otherwise take
/// the profile lock, re-read (another process may have rotated), and refresh once, with
/// signals deferred, persisting the rotated set before returning it.
public actor TokenBroker {
    public struct Configuration: Sendable {
        /// How long to wait for another process's refresh before giving up (exit 75).
        public var lockTimeout: Double
        /// The command's deadline (`Clock` time): the lock wait ends there too.
        public var commandDeadline: Double?
        public init(lockTimeout: Double = 30, commandDeadline: Double? = nil) {
            self.lockTimeout = lockTimeout
            self.commandDeadline = commandDeadline
        }

        /// The lock wait allowed at `now`: the lock timeout, within the deadline.
        func lockWait(at now: Double) -> Double {
            max(0, min(lockTimeout, (commandDeadline ?? .infinity) - now))
        }
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
    private let didServe: (@Sendable (TokenSet, SessionIdentity) -> Void)?
    /// The issuer's keys for checking a refreshed ID token's signature: the cached ones
    /// (`refetch` false), or fetched now because the cache does not know the token's key
    /// (`refetch` true; rate-limited, nil when not fetched). Nil closure: signatures of refreshed
    /// ID tokens are not checked (unit tests).
    public typealias IssuerKeys = @Sendable (_ profile: ResolvedProfile, _ refetch: Bool) async -> JSONWebKeySet?
    private let issuerKeys: IssuerKeys?
    /// Told, in a sentence each, what this broker does and why (`--verbose`): where a set came
    /// from, why it refreshes, how long the lock wait took, a capped min-ttl. Never a token.
    public typealias Narrator = @Sendable (String) -> Void
    private let narrate: Narrator?
    private var inFlight: [ProfileName: (id: UInt64, task: Task<TokenSet, any Error>)] = [:]
    private var nextFlightID: UInt64 = 0
    /// Refreshes this broker sent to a server (for tests and `--verbose`).
    public private(set) var refreshRequestCount = 0

    public init(
        store: any SessionStore, locks: any LockProvider, clock: Clock, configuration: Configuration = Configuration(),
        events: EventLog? = nil, didServe: (@Sendable (TokenSet, SessionIdentity) -> Void)? = nil,
        issuerKeys: IssuerKeys? = nil, narrate: Narrator? = nil,
        endpointClient: @escaping @Sendable (ResolvedProfile) -> TokenEndpointClient
    ) {
        self.issuerKeys = issuerKeys
        self.narrate = narrate
        self.events = events
        self.didServe = didServe
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
    public func validTokenSet(for profile: ResolvedProfile, minimumTimeToLive: Double, force: Bool = false, capMargin: Bool = true) async throws(TokenctlError) -> TokenSet {
        await completePendingWrite(profile)
        let snapshot = try await read(profile.identity)
        guard let snapshot else { throw Self.notLoggedIn(profile.name) }
        if let narrate {
            narrate(store.pendingWrite(profile.identity) != nil
                ? "read the session of '\(profile.name)' from the rotation journal in the kernel keyring (its Secret Service write is pending)"
                : "read the session of '\(profile.name)' from the Secret Service")
            narrateMargin(snapshot, minimumTimeToLive: minimumTimeToLive, capped: capMargin)
        }
        if !force && snapshot.isFresh(at: clock.now(), minimumTimeToLive: minimumTimeToLive, capped: capMargin) {
            didServe?(snapshot, profile.identity)
            return snapshot
        }
        if let narrate {
            let left = snapshot.timeLeft(at: clock.now())
            let margin = snapshot.refreshMargin(minimumTimeToLive: minimumTimeToLive, capped: capMargin)
            narrate(force ? "refreshing: forced"
                : left <= 0 ? "refreshing: the access token expired \(Self.seconds(-left)) ago"
                : "refreshing: the access token has \(Self.seconds(left)) left, not more than the \(Self.seconds(margin)) asked for")
        }
        return try await sharedRefresh(profile, snapshot: snapshot, minimumTimeToLive: minimumTimeToLive, force: force, capMargin: capMargin)
    }

    /// Say when the min-ttl asked for is more than half the token's lifetime, and so capped.
    private func narrateMargin(_ tokenSet: TokenSet, minimumTimeToLive: Double, capped: Bool) {
        let margin = tokenSet.refreshMargin(minimumTimeToLive: minimumTimeToLive, capped: capped)
        if margin < minimumTimeToLive {
            narrate?("min-ttl \(Self.seconds(minimumTimeToLive)) capped at \(Self.seconds(margin)), half the access token's lifetime (a longer one could never be met)")
        }
    }

    static func seconds(_ value: Double) -> String {
        value < 10 && value != value.rounded() ? "\(Double(Int(saturating: value * 10)) / 10) s" : "\(Int(saturating: value.rounded())) s"
    }

    /// When the rotation journal holds a set the Secret Service does not, write it there now,
    /// under the profile lock (a refresher holding it may be journaling a newer one). Best
    /// effort: while the Secret Service cannot take it, reads serve the journal's set.
    public func completePendingWrite(_ profile: ResolvedProfile) async {
        guard store.pendingWrite(profile.identity) != nil,
              let lock = try? await locks.acquire(profile.name, timeout: min(configuration.lockWait(at: clock.now()), 5)) else { return }
        defer { withExtendedLifetime(lock) {} }
        let store = self.store
        let identity = profile.identity
        if let completed = try? await BlockingCall.run({ () throws(StoreError) -> TokenSet? in try store.completePendingWrite(identity) }) {
            record(.pendingWriteCompleted, profile, subject: completed.subject)
            narrate?("wrote the session of '\(profile.name)' held in the rotation journal to the Secret Service")
        }
    }

    /// Whether a refresh for `profile` is in flight in this process.
    public func isRefreshing(_ profile: ProfileName) -> Bool { inFlight[profile] != nil }

    // MARK: Single flight

    private func sharedRefresh(_ profile: ResolvedProfile, snapshot: TokenSet, minimumTimeToLive: Double, force: Bool, capMargin: Bool) async throws(TokenctlError) -> TokenSet {
        let task: Task<TokenSet, any Error>
        if let existing = inFlight[profile.name] {
            task = existing.task
        } else {
            // Set before the first suspension, so every caller arriving later joins this flight.
            nextFlightID += 1
            let id = nextFlightID
            task = Task {
                do {
                    let result = try await self.lockedRefresh(profile, snapshot: snapshot, minimumTimeToLive: minimumTimeToLive, force: force, capMargin: capMargin)
                    self.endFlight(profile.name, id: id)
                    return result
                } catch {
                    self.endFlight(profile.name, id: id)
                    throw error
                }
            }
            inFlight[profile.name] = (id, task)
        }
        // An unstructured task: a caller's cancellation never cancels the shared refresh.
        do { return try await task.value } catch let error as TokenctlError { throw error } catch {
            throw TokenctlError(.unexpected, "refresh failed: \(error)")
        }
    }

    /// Clear the in-flight entry only if it is still this flight.
    private func endFlight(_ profile: ProfileName, id: UInt64) {
        if inFlight[profile]?.id == id { inFlight[profile] = nil }
    }

    // MARK: The refresh under the cross-process lock

    private func lockedRefresh(_ profile: ResolvedProfile, snapshot: TokenSet, minimumTimeToLive: Double, force: Bool, capMargin: Bool) async throws(TokenctlError) -> TokenSet {
        let lock: any HeldLock
        let waitStarted = clock.now()
        do { lock = try await locks.acquire(profile.name, timeout: configuration.lockWait(at: clock.now())) } catch {
            if error.kind == .transient { record(.refreshFailed, profile, subject: snapshot.subject, reason: TransientReason.lockTimeout.className) }
            throw error
        }
        narrate?("took the profile lock of '\(profile.name)' after \(Self.seconds(clock.now() - waitStarted))")
        defer { withExtendedLifetime(lock) {} }

        // Values read before the await are snapshots: re-read under the lock.
        guard let current = try await read(profile.identity) else { throw Self.notLoggedIn(profile.name) }
        let rotatedElsewhere = current.refreshToken != snapshot.refreshToken || current.obtainedAt != snapshot.obtainedAt
        if (rotatedElsewhere || !force) && current.isFresh(at: clock.now(), minimumTimeToLive: minimumTimeToLive, capped: capMargin) {
            narrate?("another process refreshed '\(profile.name)' meanwhile: serving its token, no request sent")
            didServe?(current, profile.identity)
            return current
        }
        guard let refreshToken = current.refreshToken else {
            throw TokenctlError(
                .loginRequired, "the access token of profile '\(profile.name)' has expired and the server issued no refresh token",
                hint: "Run '\(CommandHint.login(profile.name))' again.")
        }

        let credentials = try await clientCredentials(for: profile)
        let client = endpointClient(profile)
        // From the request until the rotated set is written (or the bounded write gave up with
        // the set safe in the journal), signals wait: a SIGTERM in between would spend the old
        // refresh token and keep nothing. Every step inside is bounded (HTTP by its timeouts,
        // the Secret Service by its per-call bound and the deadline), so SIGTERM always acts.
        SignalDeferral.begin()
        defer { SignalDeferral.end() }
        refreshRequestCount += 1
        let (answer, receivedAt) = await client.refresh(
            refreshToken: refreshToken, endpoint: profile.tokenEndpoint, clientID: profile.configuration.clientID,
            credentials: credentials)
        var outcome = answer
        if case .success(let response, _) = outcome, let idToken = response.idToken {
            // OIDC Core §12.2: the same issuer, subject and client, signed by the issuer, or the
            // session is not ours: terminal, and nothing is stored.
            do {
                guard let claims = UnverifiedJWT.claims(of: idToken) else { throw JWTError.claim("the refreshed ID token is not a JWT") }
                try IDTokenValidation.validateRefreshed(
                    claims, previous: current.idToken.flatMap(UnverifiedJWT.claims(of:)), issuer: profile.configuration.issuer.string,
                    clientID: profile.configuration.clientID)
                try await checkSignature(ofRefreshed: idToken, profile)
            } catch {
                outcome = .terminal(.unusableResponse("\(error)"))
            }
        }
        switch outcome {
        case .success(let response, let serverDate):
            let next = TokenSet(response: response, receivedAt: receivedAt, serverDate: serverDate, previous: current)
            narrate?(next.refreshToken != current.refreshToken && response.refreshToken != nil
                ? "the token endpoint answered with a new access token and a rotated refresh token"
                : "the token endpoint answered with a new access token (the refresh token is unchanged)")
            try await persist(next, for: profile.identity)
            narrate?("stored the refreshed session of '\(profile.name)'")
            didServe?(next, profile.identity)
            record(.tokenRefreshed, profile, subject: next.subject)
            return next
        case .terminal(let reason):
            // Another writer may have replaced the item meanwhile: delete only what we sent.
            let (store, identity) = (self.store, profile.identity)
            _ = try? await BlockingCall.run({ () throws(StoreError) -> Bool in try store.delete(identity, ifRefreshTokenIs: refreshToken) })
            record(.sessionEnded, profile, subject: current.subject, reason: reason.className)
            throw TokenctlError(
                .loginRequired, "the server ended the session of profile '\(profile.name)': \(reason)",
                hint: "Run '\(CommandHint.login(profile.name))' to sign in again.")
        case .transient(let reason, _):
            record(.refreshFailed, profile, subject: current.subject, reason: reason.className)
            if reason.requestMayHaveReachedServer {
                throw TokenctlError(
                    .transient, "could not refresh profile '\(profile.name)': \(reason)",
                    hint: "The refresh request was sent but no answer came back in time: if the server rotated the refresh token meanwhile, the session is lost and '\(CommandHint.tokenctl(profile.name, "token"))' will say so; otherwise it is kept. Try again later.")
            }
            throw TokenctlError(
                .transient, "could not refresh profile '\(profile.name)': \(reason)",
                hint: "The session is kept; try again later.")
        }
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
            do { _ = try JWTVerifier.verify(idToken, keys: keys) } catch { throw .claim("the refreshed ID token was rejected: \(error)") }
        }
    }

    /// Persist the rotated set: the journal first, then the Secret Service; a transient store
    /// hiccup gets two more tries when there is no journal, since the old refresh token is
    /// already spent on a rotating server.
    private func persist(_ tokenSet: TokenSet, for identity: SessionIdentity) async throws(TokenctlError) {
        var lastError: StoreError?
        for attempt in 0..<3 {
            do {
                let store = self.store
                let outcome = try await BlockingCall.run({ () throws(StoreError) -> PersistOutcome in try store.persist(tokenSet, for: identity) })
                if case .pending(let error) = outcome {
                    events?.append(EventRecord(
                        time: clock.now(), event: .storeUnavailable, profile: identity.profile.rawValue, issuer: identity.issuer,
                        subject: tokenSet.subject, reason: "write-pending:" + error.reason.rawValue))
                }
                return
            } catch {
                lastError = error
                if [.locked, .timeout, .promptPending, .deadline].contains(error.reason) { break }
                if attempt < 2 { try? await clock.sleep(0.1) }
            }
        }
        events?.append(EventRecord(time: clock.now(), event: .storeUnavailable, profile: identity.profile.rawValue, issuer: identity.issuer, subject: tokenSet.subject, reason: lastError!.reason.rawValue))
        throw TokenctlError(
            .storeUnavailable, "the refreshed session could not be saved: \(lastError!.message)",
            hint: (lastError!.hint.map { $0 + " " } ?? "") + "The server has rotated the refresh token and the kernel keyring could not hold it meanwhile (see 'tokenctl doctor'): you will probably need to log in again.")
    }

    /// A confidential client's credentials (its secret from the Secret Service), or a public client's id.
    private func clientCredentials(for profile: ResolvedProfile) async throws(TokenctlError) -> ClientCredentials {
        guard let method = profile.configuration.tokenEndpointAuthMethod else {
            return ClientCredentials(clientID: profile.configuration.clientID)
        }
        let secret: String?
        let (store, identity) = (self.store, profile.identity)
        do { secret = try await BlockingCall.run({ () throws(StoreError) -> String? in try store.readClientSecret(identity) }) } catch { throw TokenctlError(error) }
        guard let secret else {
            throw TokenctlError(
                .configuration, "profile '\(profile.name)' uses \(method.rawValue) but no client secret is stored",
                hint: "Run '\(CommandHint.tokenctl(profile.name, "login --client-secret-stdin"))' and give the secret on standard input.")
        }
        return ClientCredentials(clientID: profile.configuration.clientID, secret: secret, method: method)
    }

    /// The stored set, read off the broker's executor (see `BlockingCall`).
    private func read(_ identity: SessionIdentity) async throws(TokenctlError) -> TokenSet? {
        let store = self.store
        do { return try await BlockingCall.run({ () throws(StoreError) -> TokenSet? in try store.read(identity) }) } catch {
            let event: SessionEvent = error.reason == .deadline ? .refreshFailed : .storeUnavailable
            events?.append(EventRecord(time: clock.now(), event: event, profile: identity.profile.rawValue, issuer: identity.issuer, reason: error.reason.rawValue))
            throw TokenctlError(error)
        }
    }

    private func record(_ event: SessionEvent, _ profile: ResolvedProfile, subject: String?, reason: String? = nil) {
        events?.append(EventRecord(time: clock.now(), event: event, profile: profile.name.rawValue, issuer: profile.configuration.issuer.string, subject: subject, reason: reason))
    }

    static func notLoggedIn(_ profile: ProfileName) -> TokenctlError {
        TokenctlError(.loginRequired, "profile '\(profile)' is not logged in", hint: "Run '\(CommandHint.login(profile))'.")
    }

}

#if canImport(Glibc)
import Glibc
#endif
