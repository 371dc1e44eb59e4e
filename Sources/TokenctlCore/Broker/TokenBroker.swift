import TokenctlEssentials

/// A profile ready for token work: its name, configuration and resolved endpoints.
public struct ResolvedProfile: Sendable, Equatable {
    public var name: ProfileName
    public var configuration: ProfileConfiguration
    public var tokenEndpoint: String

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

    let store: any SessionStore
    let locks: any ProfileLocking
    let endpointClient: @Sendable (ResolvedProfile) -> TokenEndpointClient
    let clock: Clock
    let configuration: Configuration
    let events: EventLog?
    /// Called with every set this broker serves (read, found rotated by another process, or
    /// refreshed); a refreshed set right after it is stored, while the profile lock is still held,
    /// so processes waiting for this refresh may be served what it hands over here.
    /// The set is what was handed out for the target (`TokenSet.served(for:)`).
    let didServe: (@Sendable (TokenSet, SessionIdentity, TokenTarget) -> Void)?
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
    let issuerKeys: IssuerKeys?
    /// A profile's client key (private_key_jwt, mTLS): `TokenctlService.clientKey(of:)`. Nil:
    /// none (unit tests).
    public typealias ClientKeyLookup = @Sendable (ProfileName) throws(TokenctlError) -> ClientKey?
    let clientKey: ClientKeyLookup?
    /// The issuers' DPoP nonces and clock offsets (`TokenctlService.dpopState`: kept on disk).
    let dpopState: DPoPIssuerState
    /// Told, in a sentence each, what this broker does and why (`--verbose`): where a set came
    /// from, why it refreshes, how long the lock wait took, a capped min-ttl. Never a token.
    public typealias Narrator = @Sendable (String) -> Void
    let narrate: Narrator?
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
    public internal(set) var refreshRequestCount = 0

    public init(
        store: any SessionStore, locks: any ProfileLocking, clock: Clock,
        configuration: Configuration = Configuration(),
        events: EventLog? = nil, dpopState: DPoPIssuerState = .shared,
        didServe: (@Sendable (TokenSet, SessionIdentity, TokenTarget) -> Void)? = nil,
        cachedToken: CachedToken? = nil, issuerKeys: IssuerKeys? = nil, narrate: Narrator? = nil,
        clientKey: ClientKeyLookup? = nil,
        endpointClient: @escaping @Sendable (ResolvedProfile) -> TokenEndpointClient
    ) {
        self.dpopState = dpopState
        self.issuerKeys = issuerKeys
        self.clientKey = clientKey
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
        let session = try await readSession(profile.identity)
        guard let session else {
            guard profile.configuration.isMachine else { throw Self.notLoggedIn(profile.name) }
            narrate?("no token of machine profile '\(profile.name)' is stored: asking for one")
            return try await sharedRefresh(
                profile, target: target, snapshot: nil, minimumTimeToLive: minimumTimeToLive, force: force,
                capMargin: capMargin)
        }
        // A machine asks for its scopes afresh each time: the stored token's do not bound them.
        if !profile.configuration.isMachine { try Self.checkScopes(target, within: session, profile.name) }
        guard let snapshot = session.served(for: target) else {
            narrate?("no token for \(target) is stored for '\(profile.name)': refreshing to get one")
            return try await sharedRefresh(
                profile, target: target, snapshot: nil, minimumTimeToLive: minimumTimeToLive, force: force,
                capMargin: capMargin)
        }
        narrateRead(profile, snapshot, minimumTimeToLive: minimumTimeToLive, capMargin: capMargin)
        if !force && snapshot.isFresh(at: clock.now(), minimumTimeToLive: minimumTimeToLive, capped: capMargin) {
            didServe?(snapshot, profile.identity, target)
            return snapshot
        }
        narrateRefreshReason(snapshot, force: force, minimumTimeToLive: minimumTimeToLive, capMargin: capMargin)
        return try await sharedRefresh(
            profile, target: target, snapshot: snapshot, minimumTimeToLive: minimumTimeToLive, force: force,
            capMargin: capMargin)
    }

    /// `-v`: where the session of `profile` was read from, and the margin its token is held to.
    private func narrateRead(
        _ profile: ResolvedProfile, _ snapshot: TokenSet, minimumTimeToLive: Double, capMargin: Bool
    ) {
        guard let narrate else { return }
        narrate(
            store.pendingWrite(profile.identity) != nil
                ? "read the session of '\(profile.name)' from the rotation journal in the kernel keyring (its Secret Service write is pending)"
                : "read the session of '\(profile.name)' from the Secret Service")
        narrateMargin(snapshot, minimumTimeToLive: minimumTimeToLive, capped: capMargin)
    }

    /// `-v`: why the stored token is refreshed (forced, expired, or within the margin).
    private func narrateRefreshReason(_ snapshot: TokenSet, force: Bool, minimumTimeToLive: Double, capMargin: Bool) {
        guard let narrate else { return }
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
                    "Ask for a subset of the session's scopes, or sign in with more: '\(tokenctl: profile, .login([.scope(.quoted((granted.sorted() + missing).joined(separator: " ")))]))'."
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
    /// A machine profile's request is made here: it spends no refresh token (RFC 6749 §4.4.3),
    /// so a kill in the middle loses only a token the server issues again on the next call.
    private func exchange(
        _ profile: ResolvedProfile, target: TokenTarget, snapshot: TokenSet?, minimumTimeToLive: Double, force: Bool,
        capMargin: Bool
    ) async throws(TokenctlError) -> TokenSet {
        guard let detached = configuration.detachedRefresh, !profile.configuration.isMachine else {
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
    /// refresh's child runs. The steps: the lock (`RefreshRequest.swift`), the session under it
    /// and the token another process refreshed meanwhile, the request with its credentials and
    /// proof, the checks of the answer (`RefreshAnswerChecks.swift`), and its consequence (the
    /// table in `RefreshConsequence`, carried out in `RefreshStorage.swift`).
    func refreshUnderLock(
        _ profile: ResolvedProfile, target: TokenTarget, snapshot: TokenSet?, minimumTimeToLive: Double, force: Bool,
        capMargin: Bool
    ) async throws(TokenctlError) -> TokenSet {
        if profile.configuration.isMachine {
            return try await acquireUnderLock(
                profile, target: target, snapshot: snapshot, minimumTimeToLive: minimumTimeToLive, force: force,
                capMargin: capMargin)
        }
        let lock = try await takeRefreshLock(profile, snapshot: snapshot)
        defer { withExtendedLifetime(lock) {} }
        let current = try await sessionUnderLock(profile, target: target)
        if let served = servedWithoutRequest(
            current, profile, target: target, snapshot: snapshot, minimumTimeToLive: minimumTimeToLive, force: force,
            capMargin: capMargin)
        {
            return served
        }
        let request = try await refreshRequest(for: current, profile, force: force)
        // From the request until the rotated set is written (or the bounded write gave up with
        // the set safe in the journal), signals wait: a SIGTERM in between would spend the old
        // refresh token and keep nothing. Every step inside is bounded (HTTP by its timeouts,
        // the Secret Service by its per-call bound and the deadline), so SIGTERM always acts.
        SignalDeferral.begin()
        defer { SignalDeferral.end() }
        let (outcome, receivedAt) = try await sendRefresh(request, profile, target: target)
        let answer = await checkAnswer(outcome, dpopKey: request.dpopKey, profile, target: target, current: current)
        let consequence = RefreshConsequence.of(
            answer, profile: profile.name, target: target, sessionScope: current.scope)
        return try await carryOut(
            consequence, profile, target: target, current: current, sent: request.refreshToken,
            receivedAt: receivedAt)
    }

    /// The stored set, read off the broker's executor (see `BlockingCall`).
    func readSession(_ identity: SessionIdentity) async throws(TokenctlError) -> TokenSet? {
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

    func record(_ event: SessionEvent, _ profile: ResolvedProfile, subject: String?, reason: String? = nil) {
        events?.append(
            EventRecord(
                time: clock.now(), event: event, profile: profile.name.rawValue,
                issuer: profile.configuration.issuer.string, subject: subject, reason: reason))
    }

    static func notLoggedIn(_ profile: ProfileName) -> TokenctlError {
        TokenctlError(
            .loginRequired, "profile '\(profile)' is not logged in", hint: "Run '\(tokenctl: profile, .login([]))'.")
    }

}

#if canImport(Glibc)
import Glibc
#endif
