import TokenctlEssentials

/// What a login asks for: the options, with what the profile saved filled in where no option
/// replaces it, and the provider preset. Made before anything is sent.
///
/// Logging in again at the same issuer sends what the first login sent: the saved scope,
/// audience, resources and CA bundle apply unless options replace them. Saved endpoints
/// (discovered then, given once, or hand-edited for a server whose discovery is incomplete)
/// win over discovery, which still runs (cached for a day) for what only it knows: the
/// scopes, PKCE methods and client authentication the server supports.
struct LoginPlan: Sendable {
    typealias LoginRequest = TokenctlService.LoginRequest

    /// The options, completed from the saved profile.
    var request: LoginRequest
    /// The profile as it was before this login; nil for a new one.
    var previous: ProfileConfiguration?
    /// The endpoints the profile saved for this issuer.
    var saved = ExplicitEndpoints()
    /// `dpop_allow_bearer`: hand-set, no option changes it.
    var allowBearer = false
    /// Whether the new session is bound to a new DPoP key (RFC 9449).
    var dpop: Bool
    /// What the provider needs beyond the standards (`ProviderPreset`): fixed endpoints where
    /// there is no discovery, default scopes, authorization parameters, the issuer rule.
    var preset: ProviderPreset?

    /// - Throws: a scope the provider refuses outright (nothing is sent).
    init(_ request: LoginRequest, previous: ProfileConfiguration?) throws(TokenctlError) {
        var request = request
        self.previous = previous
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
            if configured.isMachine, configured.clientID == request.clientID {
                // A person's saved method is checked against discovery again (`LoginClient`).
                request.machine = request.machine.completed(from: configured)
                // A saved `none` stays while the client stays public: a secret given now, or the
                // client credentials grant, has the client choose again.
                let staysPublic =
                    request.clientSecret == nil && (request.machine.grant ?? .clientCredentials).allowsPublicClient
                let saved = configured.tokenEndpointAuthMethod
                request.clientAuth = request.clientAuth ?? (saved?.authenticates == false && !staysPublic ? nil : saved)
            }
            allowBearer = configured.dpopAllowBearer // hand-set: no option changes it
        }
        self.request = request
        dpop = request.dpop ?? false
        preset = request.provider.map { ProviderPreset($0, issuer: request.issuer) }
        try Self.checkScope(request.scope, against: preset)
    }

    /// What the login's requests go through: its CA bundle (`--cacert` or the saved one) and
    /// the profile's proxy keys, which a login keeps.
    var network: NetworkSettings {
        var network = previous?.network ?? NetworkSettings()
        network.caBundle = request.caBundle
        network.profile = request.profile
        return network
    }

    /// The refresh-token import: not interactive, no scope unless asked for.
    var isImport: Bool {
        if case .refreshToken = request.method { true } else { false }
    }

    /// A machine profile's login: the client credentials grant.
    var isMachine: Bool {
        if case .clientCredentials = request.method { true } else { false }
    }

    var isBrowser: Bool {
        if case .browser = request.method { true } else { false }
    }

    /// The session identity the login signs in.
    var identity: SessionIdentity {
        SessionIdentity(profile: request.profile, issuer: request.issuer.string, clientID: request.clientID)
    }

    /// The scope to ask for. The import asks for no scope unless told to; interactive logins
    /// default to the preset's scopes, else openid offline_access as far as the server
    /// advertises them.
    func scope(supported: [String]?) -> String? {
        // A machine asks for exactly the scope given (a server may require one: glewlwyd does).
        if isImport || isMachine { return request.scope }
        return request.scope ?? preset?.defaultScope ?? Self.defaultScope(supported: supported)
    }

    /// `audience` and RFC 8707 `resource` parameters, passed through.
    var extraParameters: [(String, String)] {
        var extra: [(String, String)] = []
        if let audience = request.audience { extra.append(("audience", audience)) }
        for resource in request.resources { extra.append(("resource", resource)) }
        return extra
    }

    /// A scope the provider refuses outright is refused before anything is sent.
    static func checkScope(_ scope: String?, against preset: ProviderPreset?) throws(TokenctlError) {
        guard let scope, let preset else { return }
        for word in scope.split(separator: " ") {
            if let why = preset.refusedScopes[String(word)] {
                throw TokenctlError(
                    .invalidInput, "\(why)",
                    hint: "Nothing was sent. Leave '\(word)' out of \(options: .login([.scope(.omitted)])).")
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
}
