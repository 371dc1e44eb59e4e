import TokenctlEssentials

/// What the command-line layer shows during an interactive login. The core decides what
/// happens; the presenter only prints (stderr), draws the QR code, and opens the browser.
public protocol LoginPresenter: Sendable {
    /// The device flow's codes are ready: show them until `deviceFlowEnded()`.
    func showDeviceAuthorization(_ authorization: DeviceAuthorization, expiresAt: Double)
    /// Polling ended (approved, denied, expired or failed).
    func deviceFlowEnded()
    /// The server asked us to poll more slowly.
    func deviceFlowSlowedDown(interval: Double)
    /// The authorization URL is ready; `openBrowser` says whether to launch a browser.
    /// Returns whether a browser was launched.
    func showAuthorizationURL(_ url: String, openBrowser: Bool) -> Bool
}

/// How a login obtains its first token set.
public enum LoginMethod: Sendable, Equatable {
    /// Import a refresh token (exchanged once to prove it works).
    case refreshToken(String)
    /// RFC 8628 device authorization grant.
    case device
    /// Authorization code with PKCE and a loopback redirect (RFC 7636, RFC 8252).
    case browser(port: UInt16?, openBrowser: Bool, timeout: Double)
}

/// Endpoints given on the command line; they win over discovery.
public struct ExplicitEndpoints: Sendable, Equatable {
    public var token: EndpointURL?
    public var revocation: EndpointURL?
    public var deviceAuthorization: EndpointURL?
    public var authorization: EndpointURL?
    public var jwks: EndpointURL?

    public init(
        token: EndpointURL? = nil, revocation: EndpointURL? = nil, deviceAuthorization: EndpointURL? = nil,
        authorization: EndpointURL? = nil, jwks: EndpointURL? = nil
    ) {
        self.token = token
        self.revocation = revocation
        self.deviceAuthorization = deviceAuthorization
        self.authorization = authorization
        self.jwks = jwks
    }
}

/// The outcome of a login, for the command-line layer's summary.
public struct LoginResult: Sendable {
    public var tokenSet: TokenSet
    /// Whether an ID token came back and passed every check, including its signature.
    public var idTokenSignatureVerified: Bool
    /// Whether the ID token's `nonce` was checked against one this login sent (browser logins).
    public var idTokenNonceChecked = false
    /// The scope requested (after defaults), or nil when the server's default was used.
    public var requestedScope: String?
}

extension TokenctlService {
    public struct LoginRequest: Sendable {
        public var profile: ProfileName
        public var issuer: EndpointURL
        public var clientID: String
        /// `nil`: `openid offline_access`, as far as the server advertises them.
        public var scope: String?
        public var method: LoginMethod
        public var endpoints: ExplicitEndpoints
        public var caBundle: String?
        /// A confidential client's secret (stored in its own Secret Service item on success).
        public var clientSecret: String?
        /// `audience` (e.g. Auth0) and RFC 8707 `resource` indicators, passed through.
        public var audience: String?
        public var resources: [String]
        /// Bind the session to a new DPoP key (RFC 9449): true `--dpop`, false `--no-dpop`,
        /// nil what the profile saved (a new profile: no).
        public var dpop: Bool?
        /// The provider preset (`--provider`); nil: what the profile saved for this issuer.
        public var provider: Provider?

        public init(
            profile: ProfileName, issuer: EndpointURL, clientID: String, scope: String?, method: LoginMethod,
            endpoints: ExplicitEndpoints = ExplicitEndpoints(), caBundle: String? = nil, clientSecret: String? = nil,
            audience: String? = nil, resources: [String] = [], dpop: Bool? = nil, provider: Provider? = nil
        ) {
            self.dpop = dpop
            self.provider = provider
            self.profile = profile
            self.issuer = issuer
            self.clientID = clientID
            self.scope = scope
            self.method = method
            self.endpoints = endpoints
            self.caBundle = caBundle
            self.clientSecret = clientSecret
            self.audience = audience
            self.resources = resources
        }
    }

    /// Sign a profile in: resolve endpoints, run the chosen flow, check the ID token, then store
    /// the token set (and the client secret) and write the profile. Nothing is stored on failure.
    public func login(_ request: LoginRequest, presenter: any LoginPresenter) async throws(TokenctlError) -> LoginResult
    {
        var request = request
        // --timeout bounds the store calls up to the check below (a person's wait is not
        // bounded by it; `persistLogin` gives the writes after it a bound of their own).
        let checksDeadline = Deadline.after(retry.timeout, clock: clock)
        let store = self.store.bounded(until: checksDeadline)
        let previous = try? profiles.load(request.profile)
        // Logging in again at the same issuer sends what the first login sent: the saved scope,
        // audience, resources and CA bundle apply unless options replace them. Saved endpoints
        // (discovered then, given once, or hand-edited for a server whose discovery is
        // incomplete) win over discovery, which still runs (cached for a day) for what only it
        // knows: the scopes, PKCE methods and client authentication the server supports.
        var saved = ExplicitEndpoints()
        var allowBearer = false
        if let configured = previous, configured.issuer == request.issuer {
            saved = ExplicitEndpoints(
                token: configured.tokenEndpoint, revocation: configured.revocationEndpoint,
                deviceAuthorization: configured.deviceAuthorizationEndpoint,
                authorization: configured.authorizationEndpoint,
                jwks: configured.jwksURI)
            if case .refreshToken = request.method {} else { request.scope = request.scope ?? configured.scope }
            request.audience = request.audience ?? configured.audience
            if request.resources.isEmpty { request.resources = configured.resources }
            request.caBundle = request.caBundle ?? configured.caBundle
            request.dpop = request.dpop ?? configured.dpop
            request.provider = request.provider ?? configured.provider
            allowBearer = configured.dpopAllowBearer // hand-set: no option changes it
        }
        let dpop = request.dpop ?? false
        // What the provider needs beyond the standards (`ProviderPreset`): fixed endpoints where
        // there is no discovery, default scopes, authorization parameters, the issuer rule.
        let preset = request.provider.map { ProviderPreset($0, issuer: request.issuer) }
        try Self.checkScope(request.scope, against: preset)
        let plainHTTP = httpClient(request.caBundle)
        let metadata =
            preset?.discovers == false
            ? nil : try await discoverForLogin(request, saved: saved, http: plainHTTP, dpop: dpop, preset: preset)
        let endpoints = try resolveEndpoints(
            request, saved: saved, metadata: metadata, fallback: preset?.fallbackEndpoints ?? ExplicitEndpoints())
        // DPoP: a new key for the new session; every request to the token endpoint carries a
        // proof signed with it (device polls, the code exchange, the import's refresh).
        let dpopKey = dpop ? try Self.newDPoPKey(for: request.issuer, metadata: metadata) : nil
        var http = plainHTTP
        if let dpopKey {
            http = DPoPHTTPClient(
                plainHTTP, key: dpopKey, issuer: request.issuer.string, endpoints: [endpoints.token.string],
                clock: clock, issuerState: dpopState)
        }

        var credentials = ClientCredentials(clientID: request.clientID)
        var authMethod: ClientAuthenticationMethod?
        var secret = request.clientSecret
        let identity = SessionIdentity(
            profile: request.profile, issuer: request.issuer.string, clientID: request.clientID)
        if secret == nil, previous?.tokenEndpointAuthMethod != nil, previous?.issuer == request.issuer,
            previous?.clientID == request.clientID
        {
            // A confidential client logging in again: the secret stored last time still applies.
            secret = try? store.readClientSecret(identity)
        }
        if let secret {
            // Keep the method used before while the server still advertises it; else pick one.
            if let method = previous?.tokenEndpointAuthMethod,
                metadata?.tokenEndpointAuthMethods?.contains(method.rawValue) ?? true
            {
                authMethod = method
            } else if metadata?.tokenEndpointAuthMethods == nil, let preferred = preset?.preferredAuthMethod {
                authMethod = preferred
            } else {
                authMethod = try ClientCredentials.preferredMethod(supported: metadata?.tokenEndpointAuthMethods)
            }
            credentials = ClientCredentials(clientID: request.clientID, secret: secret, method: authMethod)
        }

        let browser: Bool
        if case .browser = request.method { browser = true } else { browser = false }
        if let preset, preset.provider.requiresClientSecret || (browser && preset.provider.codeExchangeNeedsSecret),
            secret == nil
        {
            throw TokenctlError(
                .invalidInput,
                "\(preset.provider.displayName) needs the client's secret\(preset.provider.requiresClientSecret ? "" : " to sign in by browser (the code exchange)"), and profile '\(request.profile)' has none stored",
                hint: Self.secretNeededHint(request, preset: preset))
        }
        // The import asks for no scope unless told to; interactive logins default to the
        // preset's scopes, else openid offline_access as far as the server advertises them.
        let scope: String?
        if case .refreshToken = request.method {
            scope = request.scope
        } else {
            scope = request.scope ?? preset?.defaultScope ?? Self.defaultScope(supported: metadata?.scopesSupported)
        }
        // Find out before anything is sent to the token endpoint (which spends an imported
        // refresh token on a rotating server) or approved by the user that the tokens could
        // not be kept.
        let interactive: Bool
        if case .refreshToken = request.method { interactive = false } else { interactive = true }
        let journalUsable = try await checkLoginCanBeKept(identity, takingTheLock: interactive, until: checksDeadline)
        var extra: [(String, String)] = []
        if let audience = request.audience { extra.append(("audience", audience)) }
        for resource in request.resources { extra.append(("resource", resource)) }

        let client = TokenEndpointClient(http: http, clock: clock, retry: retry)
        // The import exchanges a possibly rotating refresh token: hold the profile lock from
        // the exchange to the store, like a refresh. Interactive flows take it only to store.
        var importLock: (any HeldLock)?
        if case .refreshToken = request.method {
            importLock = try await locks.acquire(request.profile, until: lockDeadline)
            SignalDeferral.begin()
        }
        defer {
            if importLock != nil { SignalDeferral.end() }
            withExtendedLifetime(importLock) {}
        }
        let exchanged: (response: TokenResponse, receivedAt: Double, serverDate: Double?, nonce: String?)
        var seed: TokenSet?
        switch request.method {
        case .refreshToken(let refreshToken):
            do { try TokenResponse.validateToken(refreshToken, field: "refresh token") } catch {
                throw TokenctlError(
                    .invalidInput,
                    "the refresh token on standard input is empty or contains whitespace or control characters")
            }
            let (outcome, receivedAt) = await client.refresh(
                refreshToken: refreshToken, endpoint: endpoints.token.string, clientID: request.clientID,
                scope: request.scope,
                credentials: credentials)
            let (response, serverDate) = try Self.successOrThrow(
                outcome, what: "the refresh token", profile: request.profile)
            seed = TokenSet(
                accessToken: "-", refreshToken: refreshToken, expiresAt: nil, issuedLifetime: nil,
                obtainedAt: receivedAt)
            exchanged = (response, receivedAt, serverDate, nil)
        case .device:
            guard let deviceEndpoint = endpoints.deviceAuthorization else {
                throw TokenctlError(
                    .configuration, "the server at \(request.issuer) advertises no device_authorization_endpoint",
                    hint: "Give it with --device-authorization-endpoint, or use --browser.")
            }
            let flow = DeviceFlow(
                http: http, clock: clock, retry: retry, credentials: credentials, presenter: presenter,
                browserCommand: request.browserLoginCommand(secretStored: secret != nil), profile: request.profile,
                provider: request.provider)
            let (response, receivedAt, serverDate) = try await flow.run(
                deviceEndpoint: deviceEndpoint.string, tokenEndpoint: endpoints.token.string, scope: scope, extra: extra
            )
            exchanged = (response, receivedAt, serverDate, nil)
        case .browser(let port, let openBrowser, let timeout):
            extra += preset?.authorizationParameters ?? []
            guard let authorizationEndpoint = endpoints.authorization else {
                throw TokenctlError(
                    .configuration, "the server at \(request.issuer) advertises no authorization_endpoint",
                    hint: "Give it with --authorization-endpoint, or use --device.")
            }
            if let methods = metadata?.codeChallengeMethods, !methods.contains("S256") {
                throw TokenctlError(
                    .configuration,
                    "the server does not support PKCE with S256 (it advertises: \(methods.map(TerminalText.short).joined(separator: ", ")))"
                )
            }
            let flow = BrowserFlow(
                http: http, clock: clock, retry: retry, credentials: credentials, presenter: presenter,
                profile: request.profile)
            let result = try await flow.run(
                issuer: request.issuer.string, authorizationEndpoint: authorizationEndpoint.string,
                tokenEndpoint: endpoints.token.string,
                scope: scope, extra: extra, port: port, openBrowser: openBrowser, timeout: timeout,
                checksIssuerParameter: metadata != nil, dpopThumbprint: dpopKey?.thumbprint)
            exchanged = (result.response, result.receivedAt, result.serverDate, result.nonce)
        }

        // RFC 9449 §5: tokens bound to our key, or (dpop_allow_bearer) Bearer ones; else nothing is stored.
        do { try DPoPBinding.check(exchanged.response, key: dpopKey, allowBearer: allowBearer) } catch {
            events?.append(
                EventRecord(
                    time: clock.now(), event: .dpopDowngradeRefused, profile: request.profile.rawValue,
                    issuer: request.issuer.string,
                    reason: error.eventReason))
            throw TokenctlError(
                .configuration, "refused the tokens the server issued: \(error)",
                hint: Hint.sentences("Nothing was stored.", DPoPBinding.hint(request.profile, error)))
        }
        // OIDC Core §3.1.3.7: check the ID token before anything is stored.
        var verified = false
        if let idToken = exchanged.response.idToken {
            verified = try await checkIDToken(
                idToken, issuer: request.issuer.string, clientID: request.clientID, nonce: exchanged.nonce,
                jwksURI: endpoints.jwks, http: http, receivedAt: exchanged.receivedAt, serverDate: exchanged.serverDate,
                refusesUnsolicitedNonce: { if case .device = request.method { true } else { false } }(),
                issuerRule: preset?.issuerRule ?? .exact)
        }

        var tokenSet = TokenSet(
            response: exchanged.response, receivedAt: exchanged.receivedAt, serverDate: exchanged.serverDate,
            previous: seed)
        tokenSet.lastRefreshAt = nil
        tokenSet.targetedTokens = [] // a new session: no token of the previous one stays
        tokenSet.scopeNarrowedAt = nil
        tokenSet.dpopKey = dpopKey?.stored
        var configuration = ProfileConfiguration(
            issuer: request.issuer, clientID: request.clientID, scope: scope,
            tokenEndpoint: endpoints.token, revocationEndpoint: endpoints.revocation, caBundle: request.caBundle,
            deviceAuthorizationEndpoint: endpoints.deviceAuthorization, authorizationEndpoint: endpoints.authorization,
            jwksURI: endpoints.jwks, tokenEndpointAuthMethod: authMethod)
        configuration.audience = request.audience
        // Hand-set keys a login has no option for survive it.
        configuration.gitUsername = previous?.gitUsername
        // So does sharing (`forward enable`), for a new login of the same server and client only:
        // a profile pointed at another server is not shared until its user says so again.
        if let previous, previous.issuer == request.issuer, previous.clientID == request.clientID {
            configuration.forward = previous.forward
            configuration.forwardScope = previous.forwardScope
            configuration.forwardAudience = previous.forwardAudience
        }
        configuration.resources = request.resources
        configuration.dpop = dpop
        configuration.dpopAllowBearer = allowBearer
        configuration.provider = request.provider
        try await persistLogin(
            tokenSet, configuration: configuration, profile: request.profile, clientSecret: request.clientSecret,
            previous: previous,
            alreadyLocked: importLock != nil, journalUsable: journalUsable)
        return LoginResult(
            tokenSet: tokenSet, idTokenSignatureVerified: verified,
            idTokenNonceChecked: exchanged.response.idToken != nil && exchanged.nonce != nil,
            requestedScope: scope)
    }

    /// "Give the secret": the login asked for, with `--client-secret-stdin`, when it can be
    /// printed (`browserLoginCommand`), else the preset and client alone.
    static func secretNeededHint(_ request: LoginRequest, preset: ProviderPreset) -> String {
        var printable = request
        printable.clientSecret = nil
        let command: String
        if case .browser = request.method, let browser = printable.browserLoginCommand(secretStored: false) {
            command = browser
        } else {
            command = CommandHint.tokenctl(
                request.profile,
                "login --provider \(preset.provider.rawValue) --client-id \(TerminalText.short(request.clientID)) --client-secret-stdin"
            )
        }
        return "Nothing was sent. Give it once on standard input: '\(command)'."
    }

    /// Everything a login writes, proved writable before anything goes to the token endpoint:
    /// the profile (directories made, a probe file written and removed), the Secret Service
    /// (the search a write begins with, in the collection it writes to: a service that answers
    /// the session set-up and then hangs fails here), the profile lock's directory (for the
    /// flows that take it only to store), and the rotation journal (a probe key). Every store
    /// call ends by `deadline` (`--timeout` from the login's start).
    ///
    /// The journal is not required: where the kernel keyring is unusable (a container's
    /// seccomp, a full key quota) login goes on as it always has there, and a Secret Service
    /// write that fails after the exchange then cannot keep the new session (the message says
    /// so). With it, such a failure leaves the session pending in the journal.
    ///
    /// - Returns: whether the rotation journal can hold the session if a write fails later.
    private func checkLoginCanBeKept(_ identity: SessionIdentity, takingTheLock: Bool, until deadline: Deadline)
        async throws(TokenctlError) -> Bool
    {
        let store = self.store.bounded(until: deadline)
        let nothingSent = "Nothing was sent to the server."
        do { try profiles.checkWritable(identity.profile) } catch {
            throw TokenctlError(
                .configuration, error.message,
                hint:
                    "\(nothingSent) Make \(profiles.paths.profilesDirectory) a directory tokenctl can write (mode 0700), then log in again."
            )
        }
        do { try store.checkWritable(identity) } catch {
            throw TokenctlError(
                .storeUnavailable, error.message,
                hint: Hint.sentences(error.hint.map { $0.replacingSessionKept() }, nothingSent))
        }
        if takingTheLock {
            do { withExtendedLifetime(try await locks.acquire(identity.profile, until: lockDeadline)) {} } catch {
                throw TokenctlError(error.kind, error.message, hint: Hint.sentences(error.hint, nothingSent))
            }
        }
        return (store as? JournaledSessionStore)?.journal.canRecord() ?? false
    }

    /// A new DPoP key, once the server is known to take ES256 proofs (when discovery ran; a
    /// server whose endpoints were all given is asked directly, and the binding check catches
    /// one that ignores DPoP).
    static func newDPoPKey(for issuer: EndpointURL, metadata: ServerMetadata?) throws(TokenctlError) -> DPoPKey {
        if let metadata {
            guard let algorithms = metadata.dpopSigningAlgorithms, algorithms.contains("ES256") else {
                let advertised = metadata.dpopSigningAlgorithms.map {
                    $0.isEmpty ? "none" : $0.map(TerminalText.short).joined(separator: ", ")
                }
                throw TokenctlError(
                    .configuration,
                    "the server at \(issuer) does not support DPoP with ES256 (its dpop_signing_alg_values_supported: \(advertised ?? "not advertised"))",
                    hint:
                        "Nothing was sent. Sign in without --dpop (bearer tokens), or ask the server's operator to enable DPoP."
                )
            }
        }
        do { return try DPoPKey.generate() } catch {
            throw TokenctlError(
                .unexpected, "cannot make a DPoP key: \(error)",
                hint: "Nothing was sent. Install libgcrypt20, or sign in without --dpop.")
        }
    }

    /// A scope the provider refuses outright is refused before anything is sent.
    static func checkScope(_ scope: String?, against preset: ProviderPreset?) throws(TokenctlError) {
        guard let scope, let preset else { return }
        for word in scope.split(separator: " ") {
            if let why = preset.refusedScopes[String(word)] {
                throw TokenctlError(
                    .invalidInput, "\(why)",
                    hint: "Nothing was sent. Leave '\(word)' out of --scope.")
            }
        }
    }

    /// `openid offline_access`, limited to what the server advertises; `nil` (the server's
    /// default) when it advertises neither or lists no scopes.
    static func defaultScope(supported: [String]?) -> String? {
        guard let supported else { return nil }
        let wanted = ["openid", "offline_access"].filter(supported.contains)
        return wanted.isEmpty ? nil : wanted.joined(separator: " ")
    }

    /// - Parameter saved: the endpoints the profile saved; discovery runs even when they cover
    ///   the flow (only options given now skip it), and its absence is no error when they do.
    private func discoverForLogin(
        _ request: LoginRequest, saved: ExplicitEndpoints, http: any HTTPClient, dpop: Bool, preset: ProviderPreset?
    ) async throws(TokenctlError) -> ServerMetadata? {
        let explicit = request.endpoints
        let needsFlowEndpoint: Bool
        switch request.method {
        case .refreshToken: needsFlowEndpoint = false
        case .device: needsFlowEndpoint = explicit.deviceAuthorization == nil
        case .browser: needsFlowEndpoint = explicit.authorization == nil
        }
        let covered: Bool
        switch request.method {
        case .refreshToken: covered = (explicit.token ?? saved.token) != nil
        case .device:
            covered =
                (explicit.token ?? saved.token) != nil
                && (explicit.deviceAuthorization ?? saved.deviceAuthorization) != nil
        case .browser:
            covered = (explicit.token ?? saved.token) != nil && (explicit.authorization ?? saved.authorization) != nil
        }
        // The refresh-token import needs only the token endpoint: a given or saved one skips
        // discovery. Interactive logins skip it only when options give every endpoint.
        if case .refreshToken = request.method {
            if covered { return nil }
        } else if explicit.token != nil && !needsFlowEndpoint && explicit.jwks != nil {
            return nil
        }
        let cache = DiscoveryCache(directory: profiles.paths.discoveryCacheDirectory, clock: clock)
        do {
            // A cached document may predate a server change: one that lacks the flow's endpoint
            // is fetched again before a missing endpoint is reported (a fresh one is not).
            return try await ServerMetadata.discover(
                request.issuer, http: http, timeout: retry.attemptTimeout, cache: cache,
                issuerRule: preset?.issuerRule ?? .exact
            ) { metadata in
                // A server may have enabled DPoP since the document was cached.
                if dpop && !(metadata.dpopSigningAlgorithms?.contains("ES256") ?? false) { return false }
                return switch request.method {
                case .refreshToken: true // a document always names its token endpoint
                case .device:
                    (explicit.deviceAuthorization ?? saved.deviceAuthorization) != nil
                        || metadata.deviceAuthorizationEndpoint != nil
                case .browser:
                    (explicit.authorization ?? saved.authorization) != nil || metadata.authorizationEndpoint != nil
                }
            }
        } catch {
            // Given or saved endpoints cover everything the flow needs: discovery was only for extras.
            if covered, error.kind == .configuration { return nil }
            throw error
        }
    }

    private struct ResolvedEndpoints {
        var token: EndpointURL
        var revocation: EndpointURL?
        var deviceAuthorization: EndpointURL?
        var authorization: EndpointURL?
        var jwks: EndpointURL?
    }

    /// Each endpoint from the options, else the profile's saved one, else discovery, else the
    /// provider preset's.
    private func resolveEndpoints(
        _ request: LoginRequest, saved: ExplicitEndpoints, metadata: ServerMetadata?, fallback: ExplicitEndpoints
    ) throws(TokenctlError) -> ResolvedEndpoints {
        let explicit = request.endpoints
        guard let token = explicit.token ?? saved.token ?? metadata?.tokenEndpoint ?? fallback.token else {
            throw TokenctlError(
                .configuration, "no token endpoint for \(request.issuer)", hint: "Give it with --token-endpoint.")
        }
        return ResolvedEndpoints(
            token: token,
            revocation: explicit.revocation ?? saved.revocation ?? metadata?.revocationEndpoint ?? fallback.revocation,
            deviceAuthorization: explicit.deviceAuthorization ?? saved.deviceAuthorization
                ?? metadata?.deviceAuthorizationEndpoint ?? fallback.deviceAuthorization,
            authorization: explicit.authorization ?? saved.authorization ?? metadata?.authorizationEndpoint
                ?? fallback.authorization,
            jwks: explicit.jwks ?? saved.jwks ?? metadata?.jwksURI ?? fallback.jwks)
    }

    /// The server refused the client (its id or secret), not the grant: 78, with the row's fix.
    static func clientRefused(_ reason: TerminalReason, profile: ProfileName) -> TokenctlError {
        let row = ProviderErrorClasses.row(reason)
        return TokenctlError(
            .configuration, "the server refused the client: \(reason)",
            hint: Hint.sentences(
                "Nothing was stored.", row?.hint,
                row?.followUp == .forgetSecret ? ProviderErrorClasses.followUp(.forgetSecret, for: profile) : nil))
    }

    static func successOrThrow(
        _ outcome: RefreshOutcome, what: String, profile: ProfileName
    ) throws(TokenctlError) -> (TokenResponse, Double?) {
        switch outcome {
        case .success(let response, let serverDate):
            return (response, serverDate)
        case .terminal(let reason):
            throw TokenctlError(
                .loginRequired, "the server did not accept \(what): \(reason)",
                hint: Hint.sentences("Nothing was stored.", ProviderErrorClasses.row(reason)?.hint))
        case .clientRefused(let reason):
            throw clientRefused(reason, profile: profile)
        case .unusableTokens(let answer):
            // Accepted, but answered against the protocol: 76, as a refresh's unusable answer.
            throw TokenctlError(
                .protocolError, "the server accepted \(what) but its answer is unusable: \(answer)",
                hint: "Nothing was stored; a session signed in before is kept.")
        case .notTheServersVerdict(let answer):
            throw TokenctlError(
                answer.mayPass ? .transient : .protocolError,
                "the token endpoint did not answer the exchange of \(what): \(answer)",
                hint: Hint.sentences("Nothing was stored; a session signed in before is kept.", answer.advice))
        case .transient(.oauthError(let reason), _):
            throw TokenctlError(
                .transient, "the server could not take \(what) now: \(reason)",
                hint: Hint.sentences(
                    ProviderErrorClasses.row(reason)?.hint,
                    "Nothing was stored; run the same login command again later."))
        case .transient(let reason, _):
            throw TokenctlError(
                .transient, "could not reach the token endpoint: \(reason)",
                hint: "Nothing was stored; try again later.")
        }
    }

    /// Claims always; the signature when the issuer's JWKS is known. Returns whether the signature was verified.
    private func checkIDToken(
        _ idToken: String, issuer: String, clientID: String, nonce: String?, jwksURI: EndpointURL?,
        http: any HTTPClient,
        receivedAt: Double, serverDate: Double?, refusesUnsolicitedNonce: Bool, issuerRule: IssuerRule
    ) async throws(TokenctlError) -> Bool {
        func rejected(_ error: JWTError) -> TokenctlError {
            // A missing libcrypto is this machine's problem, not the token's: not "log in again".
            if case .cryptoUnavailable(let reason) = error {
                return TokenctlError(
                    .unexpected, "cannot check the ID token's signature: \(reason)", hint: "Nothing was stored.")
            }
            return TokenctlError(.loginRequired, "the ID token was rejected: \(error)", hint: "Nothing was stored.")
        }
        let claims: [String: JSONValue]
        var verified = false
        if let jwksURI {
            let response: HTTPResponse
            do {
                response = try await http.send(.getJSON(jwksURI.string), timeout: retry.attemptTimeout)
            } catch {
                throw TokenctlError(
                    .transient, "cannot fetch the issuer's keys from \(jwksURI): \(error)",
                    hint: "Nothing was stored; try again later.")
            }
            guard response.status == 200 else {
                let kind: TokenctlError.Kind = response.isTransientFailure ? .transient : .loginRequired
                throw TokenctlError(
                    kind, "the issuer's JWKS at \(jwksURI) answered HTTP \(response.status)",
                    hint: "Nothing was stored.")
            }
            let keys: JSONWebKeySet
            do { keys = try JSONWebKeySet.parse(response.body) } catch { throw rejected(error) }
            do { claims = try JWTVerifier.verify(idToken, keys: keys).claims } catch { throw rejected(error) }
            verified = true
            // Keys that just verified a token: what `status` checks signatures against offline.
            jwksCache.store(issuer, jwksURI: jwksURI.string, document: String(decoding: response.body, as: UTF8.self))
        } else {
            // Without keys, the token still came straight from the token endpoint over TLS
            // (OIDC Core §3.1.3.7 item 6) — but never accept 'none' or HMAC.
            let parts = idToken.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3,
                let header = UnverifiedJWT.base64URLDecode(String(parts[0])).flatMap(JSONValue.parseObject),
                let parsed = UnverifiedJWT.claims(of: idToken)
            else { throw rejected(.malformed("not a compact JWS")) }
            let algorithm = header["alg"]?.stringValue ?? "none"
            guard JWSAlgorithm(rawValue: algorithm) != nil else { throw rejected(.unsupportedAlgorithm(algorithm)) }
            claims = parsed
        }
        // exp and iat are on the server's clock: compare with the server's own Date when it sent one.
        let serverNow = serverDate.map { $0 + (clock.now() - receivedAt) } ?? clock.now()
        var expectations = IDTokenExpectations(issuer: issuer, clientID: clientID, nonce: nonce, now: serverNow)
        expectations.refusesUnsolicitedNonce = refusesUnsolicitedNonce
        expectations.issuerRule = issuerRule
        do { try IDTokenValidation.validate(claims, expectations) } catch { throw rejected(error) }
        return verified
    }

    /// Store everything a login produced in one locked, signal-deferred step. The server has
    /// issued the session by now (an imported refresh token is spent), so nothing that holds
    /// the new set is undone: it goes to the rotation journal, then to the Secret Service; then
    /// the client secret and the profile are written. A step that still fails (all were proved
    /// writable before the exchange) is reported with what was kept and what to run.
    private func persistLogin(
        _ tokenSet: TokenSet, configuration: ProfileConfiguration, profile: ProfileName, clientSecret: String?,
        previous: ProfileConfiguration?, alreadyLocked: Bool, journalUsable: Bool
    ) async throws(TokenctlError) {
        let identity = SessionIdentity(profile: profile, configuration: configuration)
        // The server has issued the session: if another process holds the profile lock past
        // the wait (a refresh of the old session stuck on its server), the new session is still
        // stored, without the lock: giving it up would spend the grant for nothing, and the
        // person asked for this session.
        var lock: (any HeldLock)?
        if !alreadyLocked {
            lock = try? await locks.acquire(profile, until: lockDeadline)
        }
        defer { withExtendedLifetime(lock) {} }
        // The writes get --timeout of their own from now: the person's wait and the lock's are over.
        let store = self.store.bounded(until: .after(retry.timeout, clock: clock))
        SignalDeferral.begin()
        defer { SignalDeferral.end() }
        let outcome: PersistOutcome
        do { outcome = try store.persist(tokenSet, for: identity) } catch {
            // Only without a journal entry: the journal keeps whatever the Secret Service refuses.
            let why =
                journalUsable
                ? "the kernel keyring's rotation journal could not hold them either"
                : "there is no rotation journal here: the kernel keyring is unusable"
            throw TokenctlError(
                .storeUnavailable, "the server issued the session but it could not be saved: \(error.message)",
                hint:
                    "The tokens were not kept (\(why)) and the server may count the grant as used: log in again once the Secret Service works (see 'tokenctl doctor')."
            )
        }
        var secretError: StoreError?
        if let clientSecret {
            do { try store.writeClientSecret(clientSecret, for: identity) } catch { secretError = error }
        }
        var profileError: TokenctlError?
        do { try profiles.save(configuration, as: profile) } catch { profileError = error }
        hotCache?.forget(identity)
        hotCache?.remember(tokenSet, for: identity, now: clock.now())
        // A profile re-pointed at another issuer or client leaves no stale item behind (unless
        // the profile could not be re-pointed: it still uses that item).
        if profileError == nil, let previous, SessionIdentity(profile: profile, configuration: previous) != identity {
            let stale = SessionIdentity(profile: profile, configuration: previous)
            _ = try? store.delete(stale)
            _ = try? store.deleteClientSecret(stale)
            hotCache?.forget(stale)
        }
        events?.append(
            EventRecord(
                time: clock.now(), event: .signedIn, profile: profile.rawValue, issuer: configuration.issuer.string,
                subject: tokenSet.subject))
        if let stored = tokenSet.dpopKey, tokenSet.tokenType == "DPoP", let key = try? DPoPKey(stored: stored) {
            events?.append(
                EventRecord(
                    time: clock.now(), event: .dpopBound, profile: profile.rawValue,
                    issuer: configuration.issuer.string, subject: tokenSet.subject,
                    reason: "jkt:" + key.thumbprint))
        }
        var pendingError: StoreError?
        if case .pending(let error) = outcome {
            pendingError = error
            events?.append(
                EventRecord(
                    time: clock.now(), event: .storeUnavailable, profile: profile.rawValue,
                    issuer: configuration.issuer.string,
                    subject: tokenSet.subject, reason: "write-pending:" + error.reason.rawValue))
        }
        let kept =
            pendingError == nil
            ? "The session is saved in the Secret Service"
            : "The session is held in memory only (the kernel keyring's rotation journal; a reboot or logout loses it) until the Secret Service takes it"
        if let profileError {
            let sameIdentity =
                previous.map { SessionIdentity(profile: profile, configuration: $0) == identity } ?? false
            let next =
                sameIdentity
                ? "; the profile keeps its previous settings, which find it. To save the new ones, make \(profiles.paths.profilesDirectory) writable and run '\(CommandHint.login(profile))' again."
                : " (profile '\(profile)', issuer \(configuration.issuer), client \(configuration.clientID)), but no command finds it until the profile names them: make \(profiles.paths.profilesDirectory) writable, then run '\(CommandHint.tokenctl(profile, "login --issuer \(configuration.issuer) --client-id \(configuration.clientID)"))' again."
            throw TokenctlError(.configuration, "signed in, but \(profileError.message)", hint: kept + next)
        }
        if let secretError {
            throw TokenctlError(
                .storeUnavailable,
                "signed in, but the Secret Service could not save the client secret: \(secretError.message)",
                hint: kept
                    + ", but it cannot be refreshed without its client secret: once the Secret Service works (see 'tokenctl doctor'), run 'printf %s \"$CLIENT_SECRET\" | \(CommandHint.login(profile)) --client-secret-stdin'."
            )
        }
        if let pendingError {
            throw TokenctlError(
                .storeUnavailable,
                "signed in, but the Secret Service could not save the session: \(pendingError.message)",
                hint: Hint.sentences(
                    "\(kept); the profile is saved.", pendingError.hint.map { $0.replacingSessionKept() },
                    "Then run '\(CommandHint.tokenctl(profile, "status"))': it writes the session to the Secret Service (as any tokenctl command does once it can) and shows it as pending until then."
                ))
        }
    }
}

extension String {
    /// A store hint without "The session is kept." (said before a login has stored anything).
    func replacingSessionKept() -> String {
        if hasSuffix(" The session is kept.") { return String(dropLast(" The session is kept.".count)) }
        if hasSuffix("; the session is kept.") { return String(dropLast("; the session is kept.".count)) + "." }
        return self
    }
}
