import TokenctlEssentials

/// How a login obtains its first token set.
public enum LoginMethod: Sendable, Equatable {
    /// Import a refresh token (exchanged once to prove it works).
    case refreshToken(String)
    /// RFC 8628 device authorization grant.
    case device
    /// Authorization code with PKCE and a loopback redirect (RFC 7636, RFC 8252).
    case browser(port: UInt16?, openBrowser: Bool, timeout: Double)
    /// A machine profile: the client credentials grant (RFC 6749 §4.4), no person.
    case clientCredentials
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
        /// How the client authenticates (`--client-auth`); nil: what the profile saved while
        /// the server still advertises it, else chosen from discovery.
        public var clientAuth: ClientAuthenticationMethod?
        /// A machine profile's grant and the platform's files it reads (`--grant`,
        /// `--subject-token-file`, …); each nil: what the profile saved.
        public var machine = MachineExchange()

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
}

/// A machine profile's grant and the files of a platform's tokens it exchanges (RFC 8693 §2.1,
/// RFC 7523 §2.1, RFC 7521 §4.2): paths only, read on every request (`PlatformTokenFile`).
public struct MachineExchange: Sendable, Equatable {
    /// nil: the saved grant, else client credentials.
    public var grant: MachineGrant?
    public var subjectTokenFile: String?
    public var subjectTokenType: String?
    public var requestedTokenType: String?
    public var assertionFile: String?
    public var clientAssertionFile: String?

    /// Nothing given: what the profile saved, else client credentials.
    public init() {}

    /// What is not given now filled in from the profile's saved values.
    func completed(from saved: ProfileConfiguration) -> MachineExchange {
        var completed = self
        completed.grant = grant ?? saved.grant
        completed.subjectTokenFile = subjectTokenFile ?? saved.subjectTokenFile
        completed.subjectTokenType = subjectTokenType ?? saved.subjectTokenType
        completed.requestedTokenType = requestedTokenType ?? saved.requestedTokenType
        completed.assertionFile = assertionFile ?? saved.assertionFile
        completed.clientAssertionFile = clientAssertionFile ?? saved.clientAssertionFile
        return completed
    }

    /// Write these into `configuration` (the grant: client credentials when none is named).
    func apply(to configuration: inout ProfileConfiguration) {
        let grant = grant ?? .clientCredentials
        configuration.grant = grant
        configuration.subjectTokenFile = grant == .tokenExchange ? subjectTokenFile : nil
        configuration.subjectTokenType = grant == .tokenExchange ? subjectTokenType : nil
        configuration.requestedTokenType = grant == .tokenExchange ? requestedTokenType : nil
        configuration.assertionFile = grant == .jwtBearer ? assertionFile : nil
        configuration.clientAssertionFile = clientAssertionFile
    }
}
