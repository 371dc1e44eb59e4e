import TokenctlEssentials

/// Who the client is at the token, revocation and device endpoints: a public client (its
/// `client_id` in the form: no method, or a machine's `none`), or a confidential one, by a
/// method of the IANA registry: a secret sent as HTTP Basic (`client_secret_basic`) or in the
/// form (`client_secret_post`), RFC 6749 §2.3.1; a signed assertion (`client_secret_jwt`,
/// `private_key_jwt`, RFC 7523 §2.2); or a TLS client certificate (`tls_client_auth`,
/// `self_signed_tls_client_auth`, RFC 8705 §2).
///
/// `formRequest` is the one place a request gets its client authentication.
public struct ClientCredentials: Sendable, Equatable {
    public var clientID: String
    public var secret: String?
    public var method: ClientAuthenticationMethod?
    /// What signs the assertions of `client_secret_jwt` and `private_key_jwt`: a fresh one for
    /// every request (`formRequest`), never reused.
    public var assertion: AssertionSigning?
    /// The certificate presented on the TLS connection (RFC 8705 §2: `tls_client_auth`,
    /// `self_signed_tls_client_auth`).
    public var certificate: ClientCertificate?
    /// A federated client assertion (RFC 7521 §4.2, `client_assertion_file`): a JWT another
    /// party issued the client, read from its file for every request instead of one signed here.
    public var federatedAssertion: FederatedAssertion?

    /// Where a federated client assertion is read, and the clock its `exp` is checked on.
    public struct FederatedAssertion: Sendable {
        public var file: PlatformTokenFile
        /// Server minus local clock (`ClockSkew`), as for an assertion made here.
        public var serverClockOffset: Double?
        public var clock: Clock

        public init(path: String, serverClockOffset: Double?, clock: Clock) {
            file = PlatformTokenFile(path: path, role: .clientAssertion)
            self.serverClockOffset = serverClockOffset
            self.clock = clock
        }

        /// The file's assertion, checked now (78 before anything is sent otherwise).
        func read() throws(TokenctlError) -> String {
            let offset = serverClockOffset.flatMap { ClockSkew.isTrusted($0) ? $0 : nil } ?? 0
            return try file.read(now: clock.now() + offset)
        }
    }

    /// How a client's assertions are made (RFC 7523 §3).
    public struct AssertionSigning: Sendable {
        /// The client secret (HS256) or the client's key.
        public var signer: any ClientAssertionSigner
        /// The `aud`: the profile's `assertion_audience`, else the token endpoint (OpenID Connect
        /// Core §9), whichever endpoint the request goes to.
        public var audience: String
        /// Discovery's `token_endpoint_auth_signing_alg_values_supported` (nil: not advertised).
        public var serverAlgorithms: [String]?
        /// Server minus local clock (`ClockSkew`): `iat`, `nbf` and `exp` are on the server's clock.
        public var serverClockOffset: Double?
        public var clock: Clock

        public init(
            signer: any ClientAssertionSigner, audience: String, serverAlgorithms: [String]?,
            serverClockOffset: Double?, clock: Clock
        ) {
            self.signer = signer
            self.audience = audience
            self.serverAlgorithms = serverAlgorithms
            self.serverClockOffset = serverClockOffset
            self.clock = clock
        }

        /// The time an assertion made now carries: ours, corrected by a trusted offset.
        func now() -> Double {
            let offset = serverClockOffset.flatMap { ClockSkew.isTrusted($0) ? $0 : nil } ?? 0
            return clock.now() + offset
        }

        /// A new assertion: a fresh `jti`, the times of now.
        func make(clientID: String) throws(TokenctlError) -> String {
            try ClientAssertion.make(
                clientID: clientID, audience: audience, signer: signer, serverAlgorithms: serverAlgorithms,
                now: Date(timeIntervalSince1970: now()))
        }
    }

    public static func == (lhs: ClientCredentials, rhs: ClientCredentials) -> Bool {
        lhs.clientID == rhs.clientID && lhs.secret == rhs.secret && lhs.method == rhs.method
            && lhs.assertion?.signer.keyID == rhs.assertion?.signer.keyID
            && lhs.assertion?.audience == rhs.assertion?.audience
            && lhs.federatedAssertion?.file == rhs.federatedAssertion?.file
    }

    /// A public client (no secret, no method), or a confidential one: a secret alone means
    /// `client_secret_basic`; a method that needs no secret keeps it without one.
    public init(clientID: String, secret: String? = nil, method: ClientAuthenticationMethod? = nil) {
        self.clientID = clientID
        self.secret = secret
        if let method, !method.usesSecret {
            self.method = method
        } else {
            self.method = secret == nil ? nil : (method ?? .clientSecretBasic)
        }
    }

    /// A form request to `endpoint` carrying `fields` and this client's authentication; an
    /// assertion method's is made now, for this request only (RFC 7523 §3: a fresh `jti`).
    ///
    /// - Throws: an assertion that cannot be signed (the server takes none of the key's
    ///   algorithms: 78).
    public func formRequest(_ endpoint: String, _ fields: [(String, String)]) throws(TokenctlError) -> HTTPRequest {
        var fields = fields
        var headers: [(name: String, value: String)] = []
        if let federatedAssertion {
            // RFC 7521 §4.2 with RFC 7523 §2.2's type: the platform's JWT, as it is.
            fields.append(("client_id", clientID))
            fields.append(("client_assertion_type", ClientAssertion.type))
            fields.append(("client_assertion", try federatedAssertion.read()))
            return HTTPRequest.form(endpoint, fields, headers: headers)
        }
        if let method, method.usesAssertion, let assertion {
            // RFC 7523 §2.2; client_id too, which RFC 6749 §3.2.1 allows and servers use to
            // find the client before reading the assertion.
            fields.append(("client_id", clientID))
            fields.append(("client_assertion_type", ClientAssertion.type))
            fields.append(("client_assertion", try assertion.make(clientID: clientID)))
            return HTTPRequest.form(endpoint, fields, headers: headers)
        }
        if let method, method.usesCertificate {
            // RFC 8705 §2: the client names itself; the certificate on the connection proves it.
            fields.append(("client_id", clientID))
            var request = HTTPRequest.form(endpoint, fields, headers: headers)
            request.clientCertificate = try certificate?.loadedForTLS()
            return request
        }
        switch (method, secret) {
        case (.clientSecretBasic?, let secret?):
            // §2.3.1: both parts form-encoded before Basic (base64) encoding.
            let pair = FormEncoding.escape(clientID) + ":" + FormEncoding.escape(secret)
            headers.append(("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()))
            fields.append(("client_id", clientID))
        case (.clientSecretPost?, let secret?):
            fields.append(("client_id", clientID))
            fields.append(("client_secret", secret))
        default:
            // A public client (no method, or `none`: RFC 6749 §3.2.1, no Authorization, no
            // secret, no assertion), and RFC 8705 §2: a certificate-authenticated client names
            // itself with `client_id` (the certificate goes on the connection).
            fields.append(("client_id", clientID))
        }
        return HTTPRequest.form(endpoint, fields, headers: headers)
    }

    /// What a client has to authenticate with: the methods it can use.
    public struct Means: Sendable, Equatable {
        /// A client secret (given now or stored).
        public var secret: Bool
        /// A private key (the profile's key).
        public var key: Bool
        /// A certificate for that key: CA-issued (`tls_client_auth`) or self-signed.
        public var certificate: CertificateKind?
        /// The grant lets the client be public (`MachineGrant.allowsPublicClient`): with no
        /// secret, key or certificate, it is (`none`).
        public var publicAllowed: Bool

        public enum CertificateKind: Sendable, Equatable {
            case issuedByCA, selfSigned
        }

        public init(
            secret: Bool = false, key: Bool = false, certificate: CertificateKind? = nil, publicAllowed: Bool = false
        ) {
            self.secret = secret
            self.key = key
            self.certificate = certificate
            self.publicAllowed = publicAllowed
        }

        /// The methods these means allow, keys before secrets, each kind in its order of
        /// preference; `none` only for a client with no means at all whose grant allows it.
        public var methods: [ClientAuthenticationMethod] {
            var methods: [ClientAuthenticationMethod] = []
            if key { methods.append(.privateKeyJWT) }
            switch certificate {
            case .issuedByCA?: methods.append(.tlsClientAuth)
            case .selfSigned?: methods.append(.selfSignedTLSClientAuth)
            case nil: break
            }
            if secret {
                methods += ClientCredentials.implementedSecretMethods
            }
            if methods.isEmpty && publicAllowed { methods.append(.publicClient) }
            return methods.filter(ClientCredentials.implementedMethods.contains)
        }
    }

    /// Every method tokenctl speaks.
    public static let implementedMethods: [ClientAuthenticationMethod] =
        implementedSecretMethods + [.privateKeyJWT, .tlsClientAuth, .selfSignedTLSClientAuth, .publicClient]

    /// The secret methods tokenctl speaks, in order of preference: the secret itself before an
    /// assertion made with it (the assertion proves no more: the server holds the same secret).
    static let implementedSecretMethods: [ClientAuthenticationMethod] = [
        .clientSecretBasic, .clientSecretPost, .clientSecretJWT,
    ]

    /// The method to use with a server advertising `supported` (`nil`: not advertised, which
    /// RFC 8414 §2 defines as client_secret_basic), for a client with a secret.
    public static func preferredMethod(supported: [String]?) throws(TokenctlError) -> ClientAuthenticationMethod {
        try preferredMethod(supported: supported, means: Means(secret: true))
    }

    /// The method to use with a server advertising `supported`, for a client with `means`:
    /// keys before secrets. Not advertised means client_secret_basic only (RFC 8414 §2), and
    /// says nothing against a public client (`none`), which a server need not list.
    public static func preferredMethod(supported: [String]?, means: Means) throws(TokenctlError)
        -> ClientAuthenticationMethod
    {
        let methods = means.methods
        if methods == [.publicClient], supported?.contains(ClientAuthenticationMethod.publicClient.rawValue) ?? true {
            return .publicClient
        }
        let supported = supported ?? [ClientAuthenticationMethod.clientSecretBasic.rawValue]
        if let method = methods.first(where: { supported.contains($0.rawValue) }) { return method }
        let usable = methods.filter(\.authenticates).map(\.rawValue)
        throw TokenctlError(
            .configuration,
            usable.isEmpty
                ? "the client has no secret or key to authenticate with\(methods.isEmpty ? "" : ", and the server does not list none (a public client) among its methods (it advertises: \(supported.map(TerminalText.short).joined(separator: ", ")))")"
                : "the server supports none of \(usable.joined(separator: ", ")) for client authentication (it advertises: \(supported.map(TerminalText.short).joined(separator: ", ")))"
        )
    }
}
