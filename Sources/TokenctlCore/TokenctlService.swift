import TokenctlEssentials

/// The core's entry point for the command-line layer: one method per user-visible action.
public final class TokenctlService: Sendable {
    public let profiles: ProfileRepository
    public let store: any SessionStore
    public let clock: Clock
    public let retry: RetryPolicy
    public let broker: TokenBroker
    let httpClient: @Sendable (_ caBundle: String?) -> any HTTPClient

    public init(
        paths: Paths, store: any SessionStore, locks: any LockProvider, clock: Clock = .system,
        retry: RetryPolicy = RetryPolicy(), lockTimeout: Double = 30,
        httpClient: @escaping @Sendable (_ caBundle: String?) -> any HTTPClient
    ) {
        self.profiles = ProfileRepository(paths: paths)
        self.store = store
        self.clock = clock
        self.retry = retry
        self.httpClient = httpClient
        self.broker = TokenBroker(
            store: store, locks: locks, clock: clock, configuration: .init(lockTimeout: lockTimeout),
            endpointClient: { profile in
                TokenEndpointClient(http: httpClient(profile.configuration.caBundle), clock: clock, retry: retry)
            })
        self.locks = locks
    }

    let locks: any LockProvider

    /// The real thing: configuration under XDG paths, the Secret Service, libcurl, flock.
    public static func live(paths: Paths, retry: RetryPolicy, userAgent: String, lockTimeout: Double = 30) -> TokenctlService {
        TokenctlService(
            paths: paths, store: SecretServiceStore(), locks: FileLockProvider(directory: paths.lockDirectory),
            retry: retry, lockTimeout: lockTimeout,
            httpClient: { caBundle in CurlHTTPClient(caBundle: caBundle, userAgent: userAgent) })
    }

    // MARK: Profiles

    public func resolve(_ name: ProfileName) throws(TokenctlError) -> ResolvedProfile {
        let configuration = try profiles.require(name)
        guard let tokenEndpoint = configuration.tokenEndpoint else {
            throw TokenctlError(
                .configuration, "profile '\(name)' has no token_endpoint in \(profiles.paths.profileFile(name))",
                hint: "Run 'tokenctl login' again, or add 'token_endpoint = URL' to the file.")
        }
        return ResolvedProfile(name: name, configuration: configuration, tokenEndpoint: tokenEndpoint.string)
    }

    // MARK: token / refresh

    /// A token set whose access token is valid for at least `minimumTimeToLive` (see
    /// `TokenSet.refreshMargin`), refreshing when needed.
    public func token(_ name: ProfileName, minimumTimeToLive: Double, force: Bool) async throws(TokenctlError) -> TokenSet {
        try await broker.validTokenSet(for: try resolve(name), minimumTimeToLive: minimumTimeToLive, force: force)
    }

    /// The outcome of refreshing one profile (for `refresh --all`).
    public struct RefreshReport: Sendable {
        public var profile: ProfileName
        public var result: Result<TokenSet, TokenctlError>
        /// True when the profile was not due and was left alone.
        public var skipped: Bool
    }

    /// Refresh now; with `ifExpiringWithin`, only when the access token expires within that many seconds.
    public func refresh(_ name: ProfileName, ifExpiringWithin window: Double?) async -> RefreshReport {
        do {
            let profile = try resolve(name)
            if let window {
                let tokenSet = try await broker.validTokenSet(for: profile, minimumTimeToLive: window, force: false)
                let refreshed = tokenSet.lastRefreshAt.map { $0 >= clock.now() - 60 } ?? false
                return RefreshReport(profile: name, result: .success(tokenSet), skipped: !refreshed)
            }
            return RefreshReport(profile: name, result: .success(try await broker.validTokenSet(for: profile, minimumTimeToLive: 0, force: true)), skipped: false)
        } catch {
            return RefreshReport(profile: name, result: .failure(error), skipped: false)
        }
    }

    /// Refresh every configured profile concurrently (each single-flight).
    public func refreshAll(ifExpiringWithin window: Double?) async throws(TokenctlError) -> [RefreshReport] {
        let names = try profiles.all()
        return await withTaskGroup(of: RefreshReport.self) { group in
            for name in names {
                group.addTask { await self.refresh(name, ifExpiringWithin: window) }
            }
            var reports: [RefreshReport] = []
            for await report in group { reports.append(report) }
            return reports.sorted { $0.profile < $1.profile }
        }
    }

    // MARK: logout

    public struct LogoutReport: Sendable {
        public var profile: ProfileName
        /// Whether a stored session was removed.
        public var removed: Bool
        /// `nil`: not attempted (no endpoint, --no-revoke, nothing stored). Otherwise the revocation result.
        public var revocation: Result<Void, TokenctlError>?
    }

    /// Revoke the refresh token (RFC 7009) when asked and possible, then remove this
    /// profile's item only. A failed revocation is reported; the local session is removed anyway.
    public func logout(_ name: ProfileName, revoke: Bool) async throws(TokenctlError) -> LogoutReport {
        let configuration = try profiles.require(name)
        let identity = SessionIdentity(profile: name, configuration: configuration)
        let lock = try await locks.acquire(name, timeout: 30)
        defer { withExtendedLifetime(lock) {} }
        let stored: TokenSet?
        do { stored = try store.read(identity) } catch { throw TokenctlError(error) }
        var revocation: Result<Void, TokenctlError>?
        if revoke, let stored, let endpoint = configuration.revocationEndpoint {
            let token = stored.refreshToken ?? stored.accessToken
            let hint = stored.refreshToken == nil ? "access_token" : "refresh_token"
            var credentials = ClientCredentials(clientID: configuration.clientID)
            if let method = configuration.tokenEndpointAuthMethod, let secret = try? store.readClientSecret(identity) {
                credentials = ClientCredentials(clientID: configuration.clientID, secret: secret, method: method)
            }
            revocation = await self.revoke(token: token, hint: hint, endpoint: endpoint.string, credentials: credentials, caBundle: configuration.caBundle)
        }
        let removed: Bool
        do { removed = try store.delete(identity) } catch { throw TokenctlError(error) }
        return LogoutReport(profile: name, removed: removed, revocation: revocation)
    }

    private func revoke(token: String, hint: String, endpoint: String, credentials: ClientCredentials, caBundle: String?) async -> Result<Void, TokenctlError> {
        // RFC 7009 §2.1: confidential clients authenticate as at the token endpoint.
        let request = credentials.formRequest(endpoint, [("token", token), ("token_type_hint", hint)])
        do {
            let response = try await httpClient(caBundle).send(request, timeout: retry.attemptTimeout)
            // RFC 7009 §2.2: 200 whether or not the token was valid.
            if response.status == 200 { return .success(()) }
            let kind: TokenctlError.Kind = [429, 500, 502, 503, 504].contains(response.status) ? .transient : .unexpected
            return .failure(TokenctlError(kind, "the server refused to revoke the token (HTTP \(response.status))"))
        } catch {
            return .failure(TokenctlError(.transient, "could not reach the revocation endpoint: \(error)"))
        }
    }

    // MARK: status

    public func status(_ name: ProfileName) throws(TokenctlError) -> SessionStatus {
        let configuration = try profiles.require(name)
        let identity = SessionIdentity(profile: name, configuration: configuration)
        var status = SessionStatus(
            profile: name, issuer: configuration.issuer.string, clientID: configuration.clientID, state: .signedOut,
            hasRefreshToken: false)
        let stored: TokenSet?
        do { stored = try store.read(identity) } catch {
            status.state = .storeUnavailable
            status.storeProblem = error.message + (error.hint.map { " " + $0 } ?? "")
            return status
        }
        guard let stored else { return status }
        let now = clock.now()
        status.subject = stored.subject
        status.scope = stored.scope
        status.accessTokenTimeLeft = stored.timeLeft(at: now)
        status.hasRefreshToken = stored.hasRefreshToken
        status.obtainedAt = stored.obtainedAt
        status.lastRefreshAt = stored.lastRefreshAt
        if stored.timeLeft(at: now) > 0 {
            status.state = .authenticated
        } else {
            status.state = stored.hasRefreshToken ? .expiredRefreshable : .signedOut
        }
        return status
    }
}
