import TokenctlEssentials

/// A login, step by step: the plan (the options and the saved profile), the server
/// (discovery, endpoints, DPoP key), the client's credentials, the preflight (everything the
/// login writes is writable), the flow, the checks of its tokens, and the persisting of the
/// session and the profile. Nothing is stored on failure.
struct LoginProcedure: LoginStep {
    let service: TokenctlService
    let request: TokenctlService.LoginRequest
    let presenter: any LoginPresenter

    func run() async throws(TokenctlError) -> LoginResult {
        // --timeout bounds the store calls up to the check below (a person's wait is not
        // bounded by it; `LoginPersist` gives the writes after it a bound of their own).
        let checksDeadline = Deadline.after(retry.timeout, clock: clock)
        let store = self.store.bounded(until: checksDeadline)
        let plan = try LoginPlan(request, previous: try? profiles.load(request.profile))
        let server = try await LoginServerResolution(service: service, plan: plan).resolve()
        let key = clientKey(plan, store: store)
        let client = try LoginClient(
            plan, metadata: server.metadata, store: store, key: key, tokenEndpoint: server.endpoints.token.string,
            clock: clock)
        let scope = plan.scope(supported: server.metadata?.scopesSupported)
        let configuration = Self.configuration(plan, server: server, client: client, scope: scope)
        // Where the new token will live is the new profile's choice, before that profile is saved.
        (service.store as? SessionStoreRouter)?.declare(
            request.profile, configuration: configuration, hasTPMKey: key?.isTPM == true)
        // Find out before anything is sent to the token endpoint (which spends an imported
        // refresh token on a rotating server) or approved by the user that the tokens could
        // not be kept.
        let journalUsable = try await LoginPreflight(
            service: service, identity: plan.identity, takingTheLock: !plan.isImport, deadline: checksDeadline
        ).check()
        // The import exchanges a possibly rotating refresh token: hold the profile lock from
        // the exchange to the store, like a refresh. Interactive flows take it only to store.
        var importLock: (any HeldLock)?
        if plan.isImport {
            importLock = try await locks.acquire(request.profile, until: lockDeadline)
            SignalDeferral.begin()
        }
        defer {
            if importLock != nil { SignalDeferral.end() }
            withExtendedLifetime(importLock) {}
        }
        let exchanged = try await LoginExchange(
            service: service, plan: plan, server: server, client: client, scope: scope, presenter: presenter
        ).run()
        let verified = try await LoginChecks(service: service, plan: plan, server: server).check(exchanged)
        let tokenSet = Self.tokenSet(exchanged, dpopKey: server.dpopKey)
        try await LoginPersist(
            service: service, tokenSet: tokenSet,
            configuration: configuration, profile: request.profile, clientSecret: request.clientSecret,
            previous: plan.previous,
            alreadyLocked: importLock != nil, journalUsable: journalUsable
        ).persist()
        var result = LoginResult(
            tokenSet: tokenSet, idTokenSignatureVerified: verified,
            idTokenNonceChecked: exchanged.response.idToken != nil && exchanged.nonce != nil,
            requestedScope: scope)
        result.isMachine = plan.isMachine
        result.clientAuth = client.authMethod
        if plan.isMachine { result.grant = plan.request.machine.grant ?? .clientCredentials }
        return result
    }

    /// The client key, only where one can be used (a machine's login, or a method that signs or
    /// presents a certificate), read within --timeout like every store call before the checks.
    func clientKey(_ plan: LoginPlan, store: any SessionStore) -> ClientKey? {
        guard plan.isMachine || plan.request.clientAuth.map({ !$0.usesSecret }) == true else { return nil }
        return try? ClientKeys(store: store, paths: profiles.paths, clock: clock).key(
            of: request.profile, slot: .current, configuration: plan.previous)
    }

    /// The new session: nothing of a previous one stays.
    static func tokenSet(_ exchanged: LoginExchange.Exchanged, dpopKey: DPoPKey?) -> TokenSet {
        var tokenSet = TokenSet(
            response: exchanged.response, receivedAt: exchanged.receivedAt, serverDate: exchanged.serverDate,
            previous: exchanged.seed)
        tokenSet.lastRefreshAt = nil
        tokenSet.targetedTokens = [] // a new session: no token of the previous one stays
        tokenSet.scopeNarrowedAt = nil
        tokenSet.dpopKey = dpopKey?.stored
        return tokenSet
    }

    /// The profile the login writes: what it used, and the hand-set keys that survive it.
    static func configuration(
        _ plan: LoginPlan, server: LoginServer, client: LoginClient, scope: String?
    ) -> ProfileConfiguration {
        let request = plan.request
        let endpoints = server.endpoints
        var configuration = ProfileConfiguration(
            issuer: request.issuer, clientID: request.clientID, scope: scope,
            tokenEndpoint: endpoints.token, revocationEndpoint: endpoints.revocation, caBundle: request.caBundle,
            deviceAuthorizationEndpoint: endpoints.deviceAuthorization, authorizationEndpoint: endpoints.authorization,
            jwksURI: endpoints.jwks, tokenEndpointAuthMethod: client.authMethod)
        configuration.audience = request.audience
        // Hand-set keys a login has no option for survive it.
        configuration.gitUsername = plan.previous?.gitUsername
        configuration.proxy = plan.previous?.proxy
        configuration.noProxy = plan.previous?.noProxy
        configuration.proxyCABundle = plan.previous?.proxyCABundle
        configuration.proxyUser = plan.previous?.proxyUser
        // So does sharing (`forward enable`), for a new login of the same server and client only:
        // a profile pointed at another server is not shared until its user says so again.
        if let previous = plan.previous, previous.issuer == request.issuer, previous.clientID == request.clientID {
            configuration.forward = previous.forward
            configuration.forwardScope = previous.forwardScope
            configuration.forwardAudience = previous.forwardAudience
        }
        configuration.resources = request.resources
        configuration.dpop = plan.dpop
        configuration.dpopAllowBearer = plan.allowBearer
        configuration.provider = request.provider
        if plan.isMachine {
            plan.request.machine.apply(to: &configuration)
            configuration.mtlsTokenEndpoint = server.metadata?.mtlsTokenEndpoint ?? plan.previous?.mtlsTokenEndpoint
        }
        // Hand-set: no option changes them.
        if plan.previous?.issuer == request.issuer {
            configuration.assertionAudience = plan.previous?.assertionAudience
        }
        configuration.keyFile = plan.previous?.keyFile
        configuration.certificateFile = plan.previous?.certificateFile
        return configuration
    }
}
