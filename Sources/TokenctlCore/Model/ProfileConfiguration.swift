import TokenctlEssentials

/// The hand-editable configuration of one profile: where its authorization server is and
/// which client it is. Never holds a secret.
///
/// Stored as `$XDG_CONFIG_HOME/tokenctl/profiles/NAME.conf`, one `key = value` a line,
/// `#` comments and blank lines allowed.
public struct ProfileConfiguration: Equatable, Sendable {
    public var issuer: EndpointURL
    public var clientID: String
    public var scope: String?
    public var tokenEndpoint: EndpointURL?
    public var revocationEndpoint: EndpointURL?
    /// RFC 8628 device authorization endpoint (`login --device`).
    public var deviceAuthorizationEndpoint: EndpointURL?
    /// RFC 6749 authorization endpoint (`login --browser`).
    public var authorizationEndpoint: EndpointURL?
    /// The issuer's JSON Web Key Set, for ID token signatures.
    public var jwksURI: EndpointURL?
    /// How a confidential client authenticates at the token endpoint, by its registered name
    /// (RFC 7591 §2, RFC 8705 §2): a secret (kept in the Secret Service), an assertion, or a
    /// TLS client certificate. `nil`: a public client.
    public var tokenEndpointAuthMethod: ClientAuthenticationMethod?
    /// The grant a machine profile gets its tokens with (`grant = client-credentials`, RFC 6749
    /// §4.4): no person, no refresh token; `token` asks for a new access token when the cached
    /// one is due. `nil`: a person's session.
    public var grant: MachineGrant?
    /// The `aud` of the client's assertions (`assertion_audience`, RFC 7523 §3); nil: the
    /// token endpoint.
    public var assertionAudience: String?
    /// The token endpoint for a client that presents a certificate (RFC 8705 §5
    /// `mtls_endpoint_aliases`), saved from discovery.
    public var mtlsTokenEndpoint: EndpointURL?
    /// A PEM bundle of extra trusted CAs for this issuer (private PKI).
    public var caBundle: String?
    /// The `audience` parameter sent at login (Auth0 and others), saved so a new login sends it again.
    public var audience: String?
    /// RFC 8707 resource indicators sent at login (`resource = URI URI…`), saved likewise.
    public var resources: [String] = []
    /// The user name `git-credential` answers with (default `oauth2`; some forges want another).
    public var gitUsername: String?
    /// DPoP (RFC 9449): a login makes the session's own key and binds its tokens to it
    /// (`dpop = true`, `login --dpop`). The static front leaves such profiles to the engine,
    /// which signs the proofs.
    public var dpop = false
    /// Accept a Bearer answer to a DPoP request (`dpop_allow_bearer = true`): for servers that
    /// ignore DPoP for some clients. Otherwise such an answer is refused.
    public var dpopAllowBearer = false
    /// The provider preset the profile was signed in with (`login --provider`, `provider =
    /// NAME`): how its issuer is matched, its default scopes and authorization parameters,
    /// how logout revokes (`ProviderPreset`).
    public var provider: Provider?
    /// Whether remote hosts and containers may get this profile's access tokens over the
    /// forward socket (`forward = true`, `tokenctl forward enable`). Never its refresh token.
    public var forward = false
    /// The most a forwarded request may ask for (`forward_scope = a b`): a request's scope must
    /// be within these words, and a request without one gets a token for exactly them.
    public var forwardScope: [String]?
    /// The audiences and resource indicators a forwarded request may name (`forward_audience =
    /// A B`); without the key, any the session can get.
    public var forwardAudience: [String]?

    /// Whether this is a machine's profile (`grant`), not a person's session.
    public var isMachine: Bool { grant != nil }

    /// The proxy for every request of the profile (`proxy = URL`), over the environment's
    /// proxy variables, loopback included. Without credentials: those come from the
    /// environment's proxy URL (`NetworkRoute`).
    public var proxy: String?
    /// The hosts that skip the proxy (`no_proxy = LIST`, as NO_PROXY), over the environment's.
    public var noProxy: String?
    /// The CA bundle an `https://` proxy's own certificate is checked against (`proxy_cacert`).
    public var proxyCABundle: String?
    /// The user name for the profile's `proxy` (`proxy_user = NAME`); its password is kept in
    /// the Secret Service (`ProxyAccount`), never in this file.
    public var proxyUser: String?

    /// What the profile's requests go through (`NetworkRoute`).
    public var network: NetworkSettings {
        var settings = NetworkSettings(
            caBundle: caBundle, proxy: proxy, noProxy: noProxy, proxyCABundle: proxyCABundle)
        settings.proxyUser = proxyUser
        return settings
    }

    /// `network`, for the hints that name `profile`.
    public func network(of profile: ProfileName?) -> NetworkSettings {
        var settings = network
        settings.profile = profile
        return settings
    }

    /// A client key (PEM) that another program keeps and rotates: read on every use, never copied.
    public var keyFile: String?
    /// Its certificate (PEM), for mTLS (RFC 8705): read on every use.
    public var certificateFile: String?
    /// The files a platform gives a job and rotates (a Kubernetes projected service account
    /// token, a CI job's ID token): read again on every exchange, bounded, never copied
    /// (`PlatformTokenFile`). The subject token of `grant = token-exchange` (RFC 8693 §2.1).
    public var subjectTokenFile: String?
    /// Its `subject_token_type` (RFC 8693 §3); nil: `urn:ietf:params:oauth:token-type:jwt`.
    public var subjectTokenType: String?
    /// The `requested_token_type` of a token exchange (RFC 8693 §2.1); nil: not sent.
    public var requestedTokenType: String?
    /// The assertion of `grant = jwt-bearer` (RFC 7523 §2.1).
    public var assertionFile: String?
    /// A federated client assertion (RFC 7521 §4.2): the client authenticates with the JWT in
    /// this file instead of one it signs, with any grant.
    public var clientAssertionFile: String?
    /// The provider's behaviour at this profile's issuer, when the profile has a provider.
    public var preset: ProviderPreset? { provider.map { ProviderPreset($0, issuer: issuer) } }

    public init(
        issuer: EndpointURL, clientID: String, scope: String? = nil,
        tokenEndpoint: EndpointURL? = nil, revocationEndpoint: EndpointURL? = nil, caBundle: String? = nil,
        deviceAuthorizationEndpoint: EndpointURL? = nil, authorizationEndpoint: EndpointURL? = nil,
        jwksURI: EndpointURL? = nil, tokenEndpointAuthMethod: ClientAuthenticationMethod? = nil
    ) {
        self.issuer = issuer
        self.clientID = clientID
        self.scope = scope
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.caBundle = caBundle
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.authorizationEndpoint = authorizationEndpoint
        self.jwksURI = jwksURI
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
    }

    /// Every key the file may hold, in the order they are written.
    public static let keys = [
        "issuer", "client_id", "scope", "token_endpoint", "revocation_endpoint", "device_authorization_endpoint",
        "authorization_endpoint", "jwks_uri", "token_endpoint_auth_method", "cacert", "audience", "resource",
        "git_username",
        "dpop", "dpop_allow_bearer", "provider", "forward", "forward_scope", "forward_audience",
        "grant", "assertion_audience", "mtls_token_endpoint",
        "key_file", "certificate_file",
        "subject_token_file", "subject_token_type", "requested_token_type", "assertion_file",
        "client_assertion_file",
        "proxy", "proxy_user", "no_proxy", "proxy_cacert",
    ]

    /// Parse a profile file.
    ///
    /// - Parameter path: used only in error messages.
    /// - Throws: `ConfigurationError` naming the file and line at fault.
    public static func parse(_ text: String, path: String) throws(ConfigurationError) -> ProfileConfiguration {
        let entries = try ProfileFileEntries(text, path: path)
        guard let issuer = try entries.url("issuer") else {
            throw ConfigurationError(path: path, line: nil, message: "'issuer' is missing")
        }
        guard let clientID = entries.entry("client_id") else {
            throw ConfigurationError(path: path, line: nil, message: "'client_id' is missing")
        }
        guard !clientID.value.isEmpty else {
            throw ConfigurationError(path: path, line: clientID.line, message: "'client_id' is empty")
        }
        let authMethod = try entries.authMethod()
        var configuration = ProfileConfiguration(
            issuer: issuer,
            clientID: clientID.value,
            scope: entries.text("scope"),
            tokenEndpoint: try entries.url("token_endpoint"),
            revocationEndpoint: try entries.url("revocation_endpoint"),
            caBundle: entries.text("cacert"),
            deviceAuthorizationEndpoint: try entries.url("device_authorization_endpoint"),
            authorizationEndpoint: try entries.url("authorization_endpoint"),
            jwksURI: try entries.url("jwks_uri"),
            tokenEndpointAuthMethod: authMethod
        )
        configuration.audience = entries.text("audience")
        configuration.resources =
            entries.entry("resource").map { $0.value.split(separator: " ").map(String.init) } ?? []
        configuration.gitUsername = entries.text("git_username")
        configuration.dpop = try entries.flag("dpop")
        configuration.dpopAllowBearer = try entries.flag("dpop_allow_bearer")
        configuration.provider = try entries.provider()
        configuration.forward = try entries.flag("forward")
        configuration.forwardScope = entries.words("forward_scope")
        configuration.forwardAudience = entries.words("forward_audience")
        configuration.grant = try entries.grant()
        configuration.assertionAudience = try entries.url("assertion_audience")?.string
        configuration.mtlsTokenEndpoint = try entries.url("mtls_token_endpoint")
        configuration.keyFile = entries.text("key_file")
        configuration.certificateFile = entries.text("certificate_file")
        configuration.subjectTokenFile = entries.text("subject_token_file")
        configuration.subjectTokenType = entries.text("subject_token_type")
        configuration.requestedTokenType = entries.text("requested_token_type")
        configuration.assertionFile = entries.text("assertion_file")
        configuration.clientAssertionFile = entries.text("client_assertion_file")
        configuration.proxy = try entries.proxy()
        configuration.noProxy = entries.text("no_proxy")
        configuration.proxyCABundle = entries.text("proxy_cacert")
        configuration.proxyUser = try entries.proxyUser(hasProxy: configuration.proxy != nil)
        return configuration
    }

    /// The file text: a header comment, then one line per set key.
    public func serialized(profile: ProfileName) -> String {
        var lines = [
            "# tokenctl profile '\(profile)'. Hand-editable; see tokenctl.conf(5).",
            "# Secrets are never stored here: they live in the Secret Service.",
            "issuer = \(issuer)",
            "client_id = \(clientID)",
        ]
        if let scope { lines.append("scope = \(scope)") }
        if let tokenEndpoint { lines.append("token_endpoint = \(tokenEndpoint)") }
        if let revocationEndpoint { lines.append("revocation_endpoint = \(revocationEndpoint)") }
        if let deviceAuthorizationEndpoint {
            lines.append("device_authorization_endpoint = \(deviceAuthorizationEndpoint)")
        }
        if let authorizationEndpoint { lines.append("authorization_endpoint = \(authorizationEndpoint)") }
        if let jwksURI { lines.append("jwks_uri = \(jwksURI)") }
        if let tokenEndpointAuthMethod {
            lines.append("token_endpoint_auth_method = \(tokenEndpointAuthMethod.rawValue)")
        }
        if let caBundle { lines.append("cacert = \(caBundle)") }
        if let audience { lines.append("audience = \(audience)") }
        if !resources.isEmpty { lines.append("resource = \(resources.joined(separator: " "))") }
        if let gitUsername { lines.append("git_username = \(gitUsername)") }
        if dpop { lines.append("dpop = true") }
        if dpopAllowBearer { lines.append("dpop_allow_bearer = true") }
        if let provider { lines.append("provider = \(provider.rawValue)") }
        if forward { lines.append("forward = true") }
        if let forwardScope { lines.append("forward_scope = \(forwardScope.joined(separator: " "))") }
        if let forwardAudience { lines.append("forward_audience = \(forwardAudience.joined(separator: " "))") }
        if let grant { lines.append("grant = \(grant.rawValue)") }
        if let assertionAudience { lines.append("assertion_audience = \(assertionAudience)") }
        if let mtlsTokenEndpoint { lines.append("mtls_token_endpoint = \(mtlsTokenEndpoint)") }
        if let keyFile { lines.append("key_file = \(keyFile)") }
        if let certificateFile { lines.append("certificate_file = \(certificateFile)") }
        let platformFiles = [
            ("subject_token_file", subjectTokenFile), ("subject_token_type", subjectTokenType),
            ("requested_token_type", requestedTokenType), ("assertion_file", assertionFile),
            ("client_assertion_file", clientAssertionFile),
        ]
        for case (let key, let value?) in platformFiles { lines.append("\(key) = \(value)") }
        if let proxy { lines.append("proxy = \(proxy)") }
        if let proxyUser { lines.append("proxy_user = \(proxyUser)") }
        if let noProxy { lines.append("no_proxy = \(noProxy)") }
        if let proxyCABundle { lines.append("proxy_cacert = \(proxyCABundle)") }
        return lines.joined(separator: "\n") + "\n"
    }
}
