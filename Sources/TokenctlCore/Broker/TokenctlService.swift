import TokenctlEssentials

/// The core's entry point for the command-line layer: one method per user-visible action.
public final class TokenctlService: Sendable {
    public let profiles: ProfileRepository
    public let store: any SessionStore
    public let clock: Clock
    public let retry: RetryPolicy
    public let broker: TokenBroker
    /// The audit event log (nil in unit tests).
    public let events: EventLog?
    /// The kernel keyring hot cache the front reads `token` hits from; `nil` in unit tests.
    public let hotCache: HotCache?
    let httpClient: @Sendable (_ network: NetworkSettings) -> any HTTPClient
    /// Where the HTTP client reads the proxy and CA variables (`NetworkRoute`): what `doctor`
    /// shows.
    public let networkEnvironment: Environment
    /// The DPoP nonces and clock offsets of the issuers, the nonces kept on disk for the next
    /// command (`DPoPNonceCache`): login, refresh and revocation share it.
    public let dpopState: DPoPIssuerState

    public init(
        paths: Paths, store: any SessionStore, locks: any ProfileLocking, clock: Clock = .system,
        retry: RetryPolicy = RetryPolicy(), lockWait: Double = 30, deadline: Deadline? = nil,
        events: EventLog? = nil, hotCache: HotCache? = nil,
        narrate: TokenBroker.Narrator? = nil, detachedRefresh: DetachedRefresh? = nil,
        networkEnvironment: Environment = .process,
        httpClient: @escaping @Sendable (_ network: NetworkSettings) -> any HTTPClient
    ) {
        self.networkEnvironment = networkEnvironment
        self.events = events
        self.hotCache = hotCache
        self.profiles = ProfileRepository(paths: paths)
        self.store = store
        self.clock = clock
        self.retry = retry
        self.httpClient = httpClient
        let dpopState = DPoPIssuerState(
            persisted: DPoPNonceCache(directory: paths.dpopNonceCacheDirectory, clock: clock))
        self.dpopState = dpopState
        let reference = ServiceReference()
        self.broker = TokenBroker(
            store: store, locks: locks, clock: clock,
            configuration: .init(lockWait: lockWait, deadline: deadline, detachedRefresh: detachedRefresh),
            events: events,
            dpopState: dpopState,
            didServe: { tokenSet, identity, target in
                hotCache?.remember(tokenSet, for: identity, target: target, now: clock.now())
            },
            cachedToken: { identity, target in
                hotCache?.lookup(
                    profile: identity.profile, issuer: identity.issuer, clientID: identity.clientID, target: target
                ).map(TokenSet.init(cached:))
            },
            issuerKeys: { profile, refetch in
                let cache = JWKSCache(directory: paths.jwksCacheDirectory, clock: clock)
                let issuer = profile.configuration.issuer.string
                guard refetch else { return cache.keys(issuer) }
                guard let jwksURI = profile.configuration.jwksURI?.string ?? cache.load(issuer)?.jwksURI else {
                    return nil
                }
                // Bounded and rate-limited: it runs while the rotated set waits to be stored.
                return await cache.refetch(
                    issuer, jwksURI: jwksURI, http: httpClient(profile.configuration.network(of: profile.name)),
                    timeout: min(retry.attemptTimeout, 5))
            },
            narrate: narrate,
            clientKey: { profile throws(TokenctlError) in try reference.service?.clientKey(of: profile) },
            endpointClient: { profile in
                TokenEndpointClient(
                    http: httpClient(profile.configuration.network(of: profile.name)), clock: clock, retry: retry,
                    deadline: deadline)
            })
        self.locks = locks
        self.deadline = deadline
        reference.service = self
    }

    /// The service, for the broker's closures that need what only the service knows (a
    /// profile's client key, `clientKey(of:)`); weak, so the two do not keep each other.
    private final class ServiceReference: @unchecked Sendable {
        weak var service: TokenctlService?
    }

    let locks: any ProfileLocking
    /// The command's deadline (`--timeout` from its start), nil for none (`login`): the lock
    /// waits, the refresh requests and their retries, and the Secret Service calls end by then.
    public let deadline: Deadline?
    /// When a wait for a profile lock that starts now ends: the broker's lock wait from now, or
    /// the command's deadline if that comes first (`TokenBroker.Configuration.lockDeadline`).
    var lockDeadline: Deadline { broker.configuration.lockDeadline() }

    /// The real thing: configuration under XDG paths, the Secret Service behind the rotation
    /// journal, libcurl, flock, and the kernel keyring hot cache.
    ///
    /// - Parameters:
    ///   - timeout: `--timeout`, in seconds: the bound of one exchange with its retries, of one
    ///     lock wait, and (at most 15) of one request.
    ///   - deadline: the command's (`--timeout` from its start), nil for none: the one value
    ///     that bounds the HTTP retries, the lock wait and the Secret Service calls.
    ///   - storeOptions: the Secret Service's other bounds (its `deadline` is `deadline`).
    ///   - detachedRefreshEngine: the engine executable to run refreshes in, each in a child
    ///     that outlives this process (`DetachedRefresh`); nil to refresh in this process.
    ///   - environment: where the proxy and CA variables are read (`NetworkRoute`).
    public static func live(
        paths: Paths, timeout: Double, deadline: Deadline?, userAgent: String,
        storeOptions: SecretServiceStore.Options = .init(), narrate: TokenBroker.Narrator? = nil,
        detachedRefreshEngine: String? = nil, environment: Environment = .process
    ) -> TokenctlService {
        let retry = RetryPolicy(timeout: timeout, attemptTimeout: min(15, timeout))
        var options = storeOptions
        options.deadline = deadline
        let hotCache = HotCache()
        // A machine profile whose key is in the TPM keeps its token in the kernel keyring only.
        // An unattended keyring's locked collection is unlocked again by restarting its unit.
        let secretServiceStore = SecretServiceStore(options: options)
        let secretService = UnattendedRelockStore.wrapping(
            secretServiceStore, installed: UnattendedKeyring.isInstalled(environment),
            interactive: options.interactive, deadline: deadline, narrate: narrate,
            reconnect: { secretServiceStore.reconnect() })
        let store = SessionStoreRouter(
            keyring: JournaledSessionStore(secretService, journal: RotationJournal()),
            kernelOnly: KernelKeyringTokenStore(hotCache: hotCache), paths: paths)
        let proxyPasswords = ProxyPasswords { account throws(StoreError) in try store.readProxyPassword(account) }
        return TokenctlService(
            paths: paths, store: store, locks: FileProfileLocks(directory: paths.lockDirectory),
            retry: retry, lockWait: timeout, deadline: deadline,
            events: EventLog(stateDirectory: paths.stateDirectory), hotCache: hotCache, narrate: narrate,
            detachedRefresh: detachedRefreshEngine.map { engine in
                DetachedRefresh(
                    enginePath: engine,
                    settings: DetachedRefresh.Settings(
                        timeout: timeout, storeCallTimeout: storeOptions.callTimeout,
                        interactive: storeOptions.interactive, verbose: narrate != nil, userAgent: userAgent),
                    notice: storeOptions.promptNotice)
            },
            networkEnvironment: environment,
            httpClient: { network in
                CurlHTTPClient(
                    network: network, environment: environment, narrate: narrate, proxyPasswords: proxyPasswords,
                    userAgent: userAgent)
            })
    }

    // MARK: Profiles

    public func resolve(_ name: ProfileName) throws(TokenctlError) -> ResolvedProfile {
        let configuration = try profiles.require(name)
        guard let tokenEndpoint = configuration.tokenEndpoint else {
            throw TokenctlError(
                .configuration, "profile '\(name)' has no token_endpoint in \(profiles.paths.profileFile(name))",
                hint: "Run '\(tokenctl: name, .login([]))' again, or add 'token_endpoint = URL' to the file.")
        }
        return ResolvedProfile(name: name, configuration: configuration, tokenEndpoint: tokenEndpoint.string)
    }

    /// Write a rotation the journal holds to the Secret Service, under the profile lock (see
    /// `TokenBroker.completePendingWrite`); nothing to do in the usual case.
    public func completePendingWrite(_ name: ProfileName) async {
        guard let profile = try? resolve(name) else { return }
        await broker.completePendingWrite(profile)
    }

    // MARK: The commands (one type each)

    /// A token set whose access token is valid for at least `minimumTimeToLive` (see
    /// `TokenSet.refreshMargin`), refreshing when needed (`TokenServing`).
    ///
    /// The set served is cached in the hot cache (after a store read as after a refresh); a
    /// session that has ended (login required) is dropped from it.
    ///
    /// The engine runs `token` after the front found no fresh token in the hot cache. When
    /// another process is refreshing (it holds the profile lock), this one waits for it first,
    /// then serves what that refresh cached: in a wave of calls on an expired token, only the
    /// first few read the Secret Service.
    ///
    /// - Parameter consultHotCache: look in the hot cache first, as the front does for `token`
    ///   (for the engine's own ways of handing out a token: git-credential, exec, exec-credential).
    /// - Parameter target: a narrower scope, an audience or resources (`token --scope …`): that
    ///   target's own token, refreshed from the session's refresh token when needed.
    public func token(
        _ name: ProfileName, target: TokenTarget = .session, minimumTimeToLive: Double, force: Bool,
        consultHotCache: Bool = false
    ) async throws(TokenctlError) -> ServedToken {
        try await TokenServing(service: self).token(
            name, target: target, minimumTimeToLive: minimumTimeToLive, force: force, consultHotCache: consultHotCache)
    }

    /// A resource server rejected `rejected` (git's `erase`): mark the stored access token
    /// expired and drop it from the hot cache, so the next request refreshes. Nothing happens
    /// when the session already holds another access token (another process refreshed), and
    /// the session itself is never removed. Returns whether the token was discarded.
    public func discardAccessToken(
        _ name: ProfileName, target: TokenTarget = .session, ifAccessTokenIs rejected: String?
    ) async throws(TokenctlError) -> Bool {
        try await TokenServing(service: self).discardAccessToken(name, target: target, ifAccessTokenIs: rejected)
    }

    /// Refresh now; with `ifExpiringWithin`, only when the access token expires within that many
    /// seconds (`ProfileRefresh`).
    public func refresh(_ name: ProfileName, ifExpiringWithin window: Double?) async -> RefreshReport {
        await ProfileRefresh(service: self).refresh(name, ifExpiringWithin: window)
    }

    /// How many profiles `refresh --all` works on at once: enough to overlap the server's and
    /// the keyring's round trips, few enough not to flood either.
    public static let refreshAllConcurrency = 8

    /// Refresh every configured profile, `refreshAllConcurrency` at a time (each single-flight).
    public func refreshAll(ifExpiringWithin window: Double?) async throws(TokenctlError) -> [RefreshReport] {
        try await ProfileRefresh(service: self).refreshAll(ifExpiringWithin: window)
    }

    /// Revoke the refresh token (RFC 7009) when asked and possible, then remove this
    /// profile's item only (`Logout`). A failed revocation is reported and recorded
    /// (`revocationFailed`); the local session is removed anyway.
    ///
    /// - Parameter forget: also remove the profile: its file, its client secret item, its
    ///   rotation journal entry and cached access token, and the issuer's discovery and JWKS
    ///   caches unless another profile uses the same issuer. A profile file that no longer
    ///   parses is removed too (its keyring items are then left to `logout --orphans`).
    public func logout(_ name: ProfileName, revoke: Bool, forget: Bool = false) async throws(TokenctlError)
        -> LogoutReport
    {
        try await Logout(service: self).run(name, revoke: revoke, forget: forget)
    }

    /// Session items no configured profile uses: their profile is gone, or its issuer or client
    /// changed. They are never used for tokens; `logout --orphans` removes them.
    public func orphanedSessions() throws(TokenctlError) -> [SessionIdentity] {
        try OrphanedSessions(service: self).list()
    }

    /// Remove every orphaned session item (without revocation: its server is no longer configured).
    public func removeOrphanedSessions() throws(TokenctlError) -> [SessionIdentity] {
        try OrphanedSessions(service: self).removeAll()
    }

    // MARK: Revocation

    /// What a logout's revocation came to.
    struct RevocationAttempt {
        /// Nil: not attempted (no endpoint, or a provider that cannot revoke here).
        var result: Result<Void, RevocationFailure>?
        /// The server said the token was already gone, which its provider counts as revoked.
        var alreadyRevoked = false
        /// What stays valid at the server because its provider cannot revoke it here.
        var serverNotice: String?
    }

    /// Revoke the token of the stored session `stored` as its provider does: RFC 7009 at the
    /// profile's revocation endpoint, or GitHub's own API with the app's `secret`.
    ///
    /// - Parameter profile: the profile, for a client that authenticates with an assertion or
    ///   a certificate (its key is the profile's).
    func revoke(_ stored: TokenSet, _ configuration: ProfileConfiguration, secret: String?, profile: ProfileName? = nil)
        async -> RevocationAttempt
    {
        var revocation: Result<Void, RevocationFailure>?
        var alreadyRevoked = false
        let method = configuration.preset?.revocation ?? .standard
        switch method {
        // Entra's discovery document is not documented to list a revocation_endpoint
        // (https://learn.microsoft.com/en-us/entra/identity-platform/v2-protocols-oidc): one
        // the profile has is used, as for any server.
        case .standard, .standardTreatingInvalidTokenAsGone,
            .none where configuration.revocationEndpoint != nil:
            guard let endpoint = configuration.revocationEndpoint else { break }
            let token = stored.refreshToken ?? stored.accessToken
            let hint = stored.refreshToken == nil ? "access_token" : "refresh_token"
            let credentials = await revocationCredentials(stored, configuration, secret: secret, profile: profile)
            // A DPoP session's tokens are bound to its key: the revocation carries a proof too.
            let dpopKey = stored.dpopKey.flatMap { try? DPoPKey(stored: $0) }
            revocation = await self.revoke(
                token: token, hint: hint, endpoint: endpoint.string, credentials: credentials,
                network: configuration.network(of: profile),
                dpop: dpopKey.map { ($0, configuration.issuer.string, stored.serverClockOffset) })
            if case .failure(let failure)? = revocation, failure.alreadyGone,
                method == .standardTreatingInvalidTokenAsGone
            {
                revocation = .success(())
                alreadyRevoked = true
            }
        case .gitHubApplicationToken(let api):
            if let secret {
                revocation = await GitHub.revoke(
                    api: api, clientID: configuration.clientID, secret: secret, accessToken: stored.accessToken,
                    http: httpClient(configuration.network(of: profile)), timeout: retry.attemptTimeout)
                if case .failure(let failure)? = revocation, failure.alreadyGone {
                    revocation = .success(())
                    alreadyRevoked = true
                }
            }
        case .none:
            break
        }
        var serverNotice: String?
        if revocation == nil, let provider = configuration.provider {
            serverNotice = method.unrevokedNotice(provider, issuer: configuration.issuer, hasSecret: secret != nil)
        }
        return RevocationAttempt(result: revocation, alreadyRevoked: alreadyRevoked, serverNotice: serverNotice)
    }

    /// How the client authenticates at the revocation endpoint: as at the token endpoint
    /// (RFC 7009 §2.1), with its secret, an assertion or its certificate; public without a secret.
    private func revocationCredentials(
        _ stored: TokenSet, _ configuration: ProfileConfiguration, secret: String?, profile: ProfileName?
    ) async -> ClientCredentials {
        if let authMethod = configuration.tokenEndpointAuthMethod,
            authMethod.usesAssertion || authMethod.usesCertificate, let profile,
            let tokenEndpoint = configuration.tokenEndpoint,
            let full = try? await broker.clientCredentials(
                for: ResolvedProfile(
                    name: profile, configuration: configuration, tokenEndpoint: tokenEndpoint.string),
                serverClockOffset: stored.serverClockOffset)
        {
            return full
        }
        if let authMethod = configuration.tokenEndpointAuthMethod, let secret {
            return ClientCredentials(clientID: configuration.clientID, secret: secret, method: authMethod)
        }
        return ClientCredentials(clientID: configuration.clientID)
    }

    /// A revocation the server did not confirm: the error to show, and its class for the event log.
    struct RevocationFailure: Error {
        var error: TokenctlError
        /// `http-STATUS` or `unreachable`.
        var reason: String
        /// The server says the token is not valid (any more): 400 `invalid_token` (Google),
        /// 404 (GitHub). Only a provider that is known to answer so counts it as revoked.
        var alreadyGone = false
    }

    private func revoke(
        token: String, hint: String, endpoint: String, credentials: ClientCredentials, network: NetworkSettings,
        dpop: (key: DPoPKey, issuer: String, serverClockOffset: Double?)?
    ) async -> Result<Void, RevocationFailure> {
        // RFC 7009 §2.1: confidential clients authenticate as at the token endpoint.
        let request: HTTPRequest
        do { request = try credentials.formRequest(endpoint, [("token", token), ("token_type_hint", hint)]) } catch {
            return .failure(RevocationFailure(error: error, reason: "client-authentication"))
        }
        var http = httpClient(network)
        if let dpop {
            http = DPoPHTTPClient(
                http, key: dpop.key, issuer: dpop.issuer, endpoints: [endpoint], clock: clock,
                serverClockOffset: dpop.serverClockOffset, issuerState: dpopState)
        }
        do {
            let response = try await http.send(request, timeout: retry.attemptTimeout)
            // RFC 7009 §2.2: 200 whether or not the token was valid.
            if response.status == 200 { return .success(()) }
            let kind: TokenctlError.Kind = response.isTransientFailure ? .transient : .unexpected
            var failure = RevocationFailure(
                error: TokenctlError(kind, "the server refused to revoke the token (HTTP \(response.status))"),
                reason: "http-\(response.status)")
            failure.alreadyGone =
                response.status == 400
                && EndpointAnswer.error(in: EndpointAnswer.object(response))?.0 == "invalid_token"
            return .failure(failure)
        } catch {
            return .failure(
                RevocationFailure(
                    error: error.tokenctlError("could not reach the revocation endpoint", hint: nil),
                    reason: "unreachable"))
        }
    }
}
