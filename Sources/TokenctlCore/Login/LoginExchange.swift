import TokenctlEssentials

/// The chosen flow, up to the token endpoint's answer: the import of a refresh token (exchanged
/// once to prove it works), the device flow, or the browser flow.
struct LoginExchange: LoginStep {
    let service: TokenctlService
    let plan: LoginPlan
    let server: LoginServer
    let client: LoginClient
    /// The scope asked for (`LoginPlan.scope(supported:)`).
    let scope: String?
    let presenter: any LoginPresenter

    /// The token endpoint's answer.
    struct Exchanged {
        var response: TokenResponse
        var receivedAt: Double
        var serverDate: Double?
        /// The nonce the browser flow sent, for the ID token check.
        var nonce: String?
        /// What the answer completes (the imported refresh token, which it may not repeat).
        var seed: TokenSet?
    }

    func run() async throws(TokenctlError) -> Exchanged {
        switch plan.request.method {
        case .refreshToken(let refreshToken):
            return try await importRefreshToken(refreshToken)
        case .device:
            return try await device()
        case .browser(let port, let openBrowser, let timeout):
            return try await browser(port: port, openBrowser: openBrowser, timeout: timeout)
        case .clientCredentials:
            return try await clientCredentials()
        }
    }

    /// A machine's first token, the request `token` makes later (`ClientCredentialsGrant`):
    /// it proves the configuration (client, method, credentials, scope) before it is saved.
    private func clientCredentials() async throws(TokenctlError) -> Exchanged {
        let request = plan.request
        let configuration = LoginProcedure.configuration(plan, server: server, client: client, scope: scope)
        var endpointClient = TokenEndpointClient(http: server.http, clock: clock, retry: retry)
        endpointClient.knownSecrets = [client.secret]
        let endpoint = ClientCredentialsGrant.endpoint(configuration, tokenEndpoint: server.endpoints.token.string)
        let credentials = client.credentials
        let fields = try ClientCredentialsGrant.fields(
            configuration, target: .session, now: clock.now(), profile: request.profile)
        let (outcome, receivedAt) = try await endpointClient.exchange(building: { () throws(TokenctlError) in
            try credentials.formRequest(endpoint, fields)
        })
        let consequence = RefreshConsequence.ofClientCredentials(
            outcome, profile: request.profile, target: .session,
            hint: ClientCredentialsGrant.registrationHint(
                request.profile, configuration,
                credential: ClientCredentialsGrant.credential(client.credentials, profile: request.profile)),
            certificate: client.credentials.certificate, platformGrant: configuration.grant != .clientCredentials)
        guard case .storeRefreshed(var response, let serverDate) = consequence.action else {
            var error = consequence.error ?? TokenctlError(.unexpected, "the machine profile's token request failed")
            error.hint = Suggestion.sentences("Nothing was stored.", error.hint)
            throw error
        }
        response.refreshToken = nil // RFC 6749 §4.4.3
        return Exchanged(response: response, receivedAt: receivedAt, serverDate: serverDate)
    }

    private func importRefreshToken(_ refreshToken: String) async throws(TokenctlError) -> Exchanged {
        let request = plan.request
        do { try TokenResponse.validateToken(refreshToken, field: "refresh token") } catch {
            throw TokenctlError(
                .invalidInput,
                "the refresh token on standard input is empty or contains whitespace or control characters")
        }
        let endpointClient = TokenEndpointClient(http: server.http, clock: clock, retry: retry)
        let (outcome, receivedAt) = try await endpointClient.refresh(
            refreshToken: refreshToken, endpoint: server.endpoints.token.string, clientID: request.clientID,
            scope: request.scope,
            credentials: client.credentials)
        let (response, serverDate) = try LoginAnswer.successOrThrow(
            outcome, what: "the refresh token", profile: request.profile)
        let seed = TokenSet(
            accessToken: "-", refreshToken: refreshToken, expiresAt: nil, issuedLifetime: nil,
            obtainedAt: receivedAt)
        return Exchanged(response: response, receivedAt: receivedAt, serverDate: serverDate, nonce: nil, seed: seed)
    }

    private func device() async throws(TokenctlError) -> Exchanged {
        let request = plan.request
        guard let deviceEndpoint = server.endpoints.deviceAuthorization else {
            throw TokenctlError(
                .configuration, "the server at \(request.issuer) advertises no device_authorization_endpoint",
                hint:
                    "Give it with \(options: .login([.deviceAuthorizationEndpoint(.omitted)])), or use \(options: .login([.browser]))."
            )
        }
        let flow = DeviceFlow(
            http: server.http, clock: clock, retry: retry, credentials: client.credentials, presenter: presenter,
            browserCommand: request.browserLogin(secretStored: client.secret != nil), profile: request.profile,
            provider: request.provider)
        let (response, receivedAt, serverDate) = try await flow.run(
            deviceEndpoint: deviceEndpoint.string, tokenEndpoint: server.endpoints.token.string, scope: scope,
            extra: plan.extraParameters
        )
        return Exchanged(response: response, receivedAt: receivedAt, serverDate: serverDate)
    }

    private func browser(port: UInt16?, openBrowser: Bool, timeout: Double) async throws(TokenctlError) -> Exchanged {
        let request = plan.request
        let extra = plan.extraParameters + (plan.preset?.authorizationParameters ?? [])
        guard let authorizationEndpoint = server.endpoints.authorization else {
            throw TokenctlError(
                .configuration, "the server at \(request.issuer) advertises no authorization_endpoint",
                hint:
                    "Give it with \(options: .login([.authorizationEndpoint(.omitted)])), or use \(options: .login([.device]))."
            )
        }
        if let methods = server.metadata?.codeChallengeMethods, !methods.contains("S256") {
            throw TokenctlError(
                .configuration,
                "the server does not support PKCE with S256 (it advertises: \(methods.map(TerminalText.short).joined(separator: ", ")))"
            )
        }
        let flow = BrowserFlow(
            http: server.http, clock: clock, retry: retry, credentials: client.credentials, presenter: presenter,
            profile: request.profile)
        let result = try await flow.run(
            issuer: request.issuer.string, authorizationEndpoint: authorizationEndpoint.string,
            tokenEndpoint: server.endpoints.token.string,
            scope: scope, extra: extra, port: port, openBrowser: openBrowser, timeout: timeout,
            checksIssuerParameter: server.metadata != nil, dpopThumbprint: server.dpopKey?.thumbprint)
        return Exchanged(
            response: result.response, receivedAt: result.receivedAt, serverDate: result.serverDate,
            nonce: result.nonce)
    }
}
