import TokenctlEssentials

/// How the client authenticates at the token endpoint: public, or confidential with the secret
/// given now or stored by the last login, by a method the server takes.
struct LoginClient: Sendable {
    var credentials: ClientCredentials
    /// The method a confidential client uses (saved in the profile); nil for a public client.
    var authMethod: ClientAuthenticationMethod?
    /// The secret given now or stored by the last login; nil for a public client.
    var secret: String?

    /// - Throws: the provider needs a secret and there is none (nothing is sent), or the server
    ///   advertises no method tokenctl speaks.
    ///
    /// - Parameters:
    ///   - key: the profile's client key (`TokenctlService.clientKey(of:)`), nil for none.
    ///   - tokenEndpoint: the default `aud` of the client's assertions.
    init(
        _ plan: LoginPlan, metadata: ServerMetadata?, store: any SessionStore, key: ClientKey? = nil,
        tokenEndpoint: String? = nil, clock: Clock = .system
    ) throws(TokenctlError) {
        let request = plan.request
        secret = Self.secret(plan, store: store)
        if plan.isMachine, let path = request.machine.clientAssertionFile {
            (authMethod, credentials) = (.privateKeyJWT, Self.federated(request.clientID, path: path, clock: clock))
            return
        }
        authMethod = try Self.method(plan, metadata: metadata, secret: secret, key: key)
        // A public client sends no secret, not even one stored by an earlier login.
        if request.clientAuth == .publicClient || authMethod == .publicClient { secret = nil }
        // A public client has neither a secret nor a method.
        credentials = ClientCredentials(clientID: request.clientID, secret: secret, method: authMethod)
        if let authMethod, authMethod.usesAssertion || authMethod.usesCertificate {
            try attachKey(
                authMethod, key: key, plan: plan, metadata: metadata, tokenEndpoint: tokenEndpoint, clock: clock)
        }
        if let preset = plan.preset,
            preset.provider.requiresClientSecret || (plan.isBrowser && preset.provider.codeExchangeNeedsSecret),
            secret == nil
        {
            throw TokenctlError(
                .invalidInput,
                "\(preset.provider.displayName) needs the client's secret\(preset.provider.requiresClientSecret ? "" : " to sign in by browser (the code exchange)"), and profile '\(request.profile)' has none stored",
                hint: Self.secretNeededHint(request, preset: preset))
        }
    }

    /// The secret given now, or for a confidential client logging in again to the same issuer
    /// and client, the one stored last time.
    static func secret(_ plan: LoginPlan, store: any SessionStore) -> String? {
        let request = plan.request
        let previous = plan.previous
        if request.clientSecret == nil, previous?.tokenEndpointAuthMethod?.authenticates == true,
            previous?.issuer == request.issuer,
            previous?.clientID == request.clientID
        {
            return try? store.readClientSecret(plan.identity)
        }
        return request.clientSecret
    }

    /// The method the client authenticates with: the one named, a machine's best, the one a
    /// confidential client used before or the server's; nil for a public client (a machine's
    /// public client: `none`).
    static func method(_ plan: LoginPlan, metadata: ServerMetadata?, secret: String?, key: ClientKey?)
        throws(TokenctlError) -> ClientAuthenticationMethod?
    {
        let request = plan.request
        if request.clientAuth == .publicClient {
            return try publicMethod(plan)
        } else if let method = request.clientAuth, plan.isMachine || secret != nil || !method.usesSecret {
            // Named (`--client-auth`, or saved by a machine's login): used as it is, the
            // server's own list aside (a server may support more than it advertises).
            guard !method.usesSecret || secret != nil else {
                throw TokenctlError(
                    .invalidInput,
                    "\(method.rawValue) needs the client's secret, and profile '\(request.profile)' has none stored",
                    hint:
                        "Nothing was sent. Give it once on standard input with \(options: .login([.clientSecretStdin]))."
                )
            }
            try checkImplemented(method)
            return method
        } else if plan.isMachine {
            return try machineMethod(plan, metadata: metadata, secret: secret, key: key)
        } else if secret != nil {
            // Keep the method used before while the server still advertises it; else pick one.
            if let method = plan.previous?.tokenEndpointAuthMethod,
                metadata?.tokenEndpointAuthMethods?.contains(method.rawValue) ?? true
            {
                return method
            } else if metadata?.tokenEndpointAuthMethods == nil, let preferred = plan.preset?.preferredAuthMethod {
                return preferred
            }
            return try ClientCredentials.preferredMethod(supported: metadata?.tokenEndpointAuthMethods)
        }
        return nil
    }

    /// `--client-auth none` (or a machine's saved `none`): a person's client is public anyway
    /// (nil: nothing saved); a machine's is `none` for a grant that allows a public client.
    ///
    /// - Throws: the client credentials grant, a confidential client's only (RFC 6749 §4.4).
    static func publicMethod(_ plan: LoginPlan) throws(TokenctlError) -> ClientAuthenticationMethod? {
        if plan.request.clientSecret != nil {
            throw TokenctlError(
                .invalidInput, "a public client (none) sends no secret, and one was given",
                hint: "Nothing was sent. Leave out \(options: .login([.clientSecretStdin])), or name another method.")
        }
        guard plan.isMachine else { return nil }
        let grant = plan.request.machine.grant ?? .clientCredentials
        guard grant.allowsPublicClient else {
            throw TokenctlError(
                .invalidInput,
                "machine profile '\(plan.request.profile)' cannot use the \(grant.rawValue) grant as a public client (none): it is for confidential clients only (RFC 6749 §4.4)",
                hint:
                    "Nothing was sent. Give the client's secret with \(options: .login([.clientSecretStdin])) or make it a key, and name a method with \(options: .login([.clientAuth(.omitted)])), or use a platform's token: \(options: .login([.grant(.word(MachineGrant.jwtBearer.rawValue))])) or \(options: .login([.grant(.word(MachineGrant.tokenExchange.rawValue))]))."
            )
        }
        return .publicClient
    }

    /// A machine authenticates with the best method the server takes and the client has the
    /// means for, keys before secrets; with no means, for a platform grant, as a public client
    /// (`none`) where the server lists it or lists nothing.
    static func machineMethod(_ plan: LoginPlan, metadata: ServerMetadata?, secret: String?, key: ClientKey?)
        throws(TokenctlError) -> ClientAuthenticationMethod
    {
        let means = ClientCredentials.Means(
            secret: secret != nil, key: key != nil, certificate: key?.certificate.map(Self.certificateKind),
            publicAllowed: (plan.request.machine.grant ?? .clientCredentials).allowsPublicClient)
        do {
            return try ClientCredentials.preferredMethod(supported: metadata?.tokenEndpointAuthMethods, means: means)
        } catch {
            throw TokenctlError(
                .invalidInput,
                "machine profile '\(plan.request.profile)' has no means to authenticate its client: \(error.message)",
                hint:
                    "Nothing was sent. Give the client's secret with \(options: .login([.clientSecretStdin])), or name the method with \(options: .login([.clientAuth(.omitted)])) (the server advertises: \(metadata?.tokenEndpointAuthMethods?.joined(separator: ", ") ?? "nothing, so client_secret_basic"))."
            )
        }
    }

    /// The assertion signer or certificate of `method`: the secret (client_secret_jwt), the
    /// profile's key (private_key_jwt), or its certificate (the TLS methods).
    private mutating func attachKey(
        _ method: ClientAuthenticationMethod, key: ClientKey?, plan: LoginPlan, metadata: ServerMetadata?,
        tokenEndpoint: String?, clock: Clock
    ) throws(TokenctlError) {
        let profile = plan.request.profile
        let previous = plan.previous?.issuer == plan.request.issuer ? plan.previous : nil
        let audience = previous?.assertionAudience ?? tokenEndpoint ?? metadata?.tokenEndpoint.string ?? ""
        if method == .clientSecretJWT, let secret {
            credentials.assertion = ClientCredentials.AssertionSigning(
                signer: ClientSecretSigner(secret: secret), audience: audience,
                serverAlgorithms: metadata?.tokenEndpointAuthSigningAlgorithms, serverClockOffset: nil, clock: clock)
            return
        }
        guard let key else {
            throw TokenctlError(
                .invalidInput, "\(method.rawValue) needs a client key, and profile '\(profile)' has none",
                hint:
                    "Nothing was sent. Make one with '\(tokenctl: profile, .key(.create, method.usesCertificate ? [.certificate] : []))' and register what '\(tokenctl: profile, .key(.show, []))' prints with the client."
            )
        }
        if method == .privateKeyJWT {
            credentials.assertion = ClientCredentials.AssertionSigning(
                signer: key, audience: audience, serverAlgorithms: metadata?.tokenEndpointAuthSigningAlgorithms,
                serverClockOffset: nil, clock: clock)
            // The algorithm is chosen now: a key the server takes no algorithm of is refused before
            // anything is sent (78).
            _ = try ClientAssertion.chooseAlgorithm(
                signer: key, serverAlgorithms: metadata?.tokenEndpointAuthSigningAlgorithms)
            return
        }
        guard let certificate = key.certificate else {
            throw TokenctlError(
                .invalidInput,
                "\(method.rawValue) needs a certificate, and the client key of profile '\(profile)' has none",
                hint:
                    "Nothing was sent. Make one with '\(tokenctl: profile, .key(.create, [.certificate]))', or import the certificate the CA issued."
            )
        }
        try ClientCredentialsGrant.checkUsable(certificate, profile: profile, now: clock.now())
        credentials.certificate = certificate
    }

    /// A federated client assertion's credentials (RFC 7521 §4.2): the server registered the
    /// client for private_key_jwt with a trusted issuer; the platform's JWT in `path` stands for
    /// one signed here.
    static func federated(_ clientID: String, path: String, clock: Clock) -> ClientCredentials {
        var credentials = ClientCredentials(clientID: clientID, method: .privateKeyJWT)
        credentials.federatedAssertion = ClientCredentials.FederatedAssertion(
            path: path, serverClockOffset: nil, clock: clock)
        return credentials
    }

    /// Whether a certificate is self-signed (its issuer is its subject, RFC 8705 §2.2) or issued by a CA.
    static func certificateKind(_ certificate: ClientCertificate) -> ClientCredentials.Means.CertificateKind {
        guard let info = try? CertificateInfo(certificate.certificatePEM) else { return .selfSigned }
        return info.issuer == info.subject ? .selfSigned : .issuedByCA
    }

    /// A method tokenctl cannot use yet is refused before anything is sent.
    static func checkImplemented(_ method: ClientAuthenticationMethod) throws(TokenctlError) {
        guard ClientCredentials.implementedMethods.contains(method) else {
            throw TokenctlError(
                .invalidInput, "client authentication \(method.rawValue) is not available in this build",
                hint:
                    "Nothing was sent. Use one of \(ClientCredentials.implementedMethods.map(\.rawValue).joined(separator: ", "))."
            )
        }
    }

    /// "Give the secret": the login asked for, with `--client-secret-stdin`, when it can be
    /// printed (`browserLogin`), else the preset and client alone.
    static func secretNeededHint(_ request: TokenctlService.LoginRequest, preset: ProviderPreset) -> Suggestion {
        var printable = request
        printable.clientSecret = nil
        let command: SuggestedCommand
        if case .browser = request.method, let browser = printable.browserLogin(secretStored: false) {
            command = browser
        } else {
            command = SuggestedCommand(
                request.profile,
                .login([
                    .provider(.word(preset.provider.rawValue)), .clientID(.word(TerminalText.short(request.clientID))),
                    .clientSecretStdin,
                ]))
        }
        return "Nothing was sent. Give it once on standard input: '\(command)'."
    }
}
