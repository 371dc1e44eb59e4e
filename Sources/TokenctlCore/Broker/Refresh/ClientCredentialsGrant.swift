import TokenctlEssentials

/// A machine profile's access token (RFC 6749 §4.4, the client credentials grant): the
/// refresh's steps with another request. Under the same profile lock, re-read, served when
/// another process got one meanwhile, else one request with the client's authentication, its
/// answer classed by `RefreshOutcome`, its consequence a row of `RefreshConsequence`
/// (`ofClientCredentials`), and the token stored as a session's (journal, Secret Service, hot
/// cache). There is no refresh token to spend: a failed request loses nothing.
enum ClientCredentialsGrant {
    /// The form of a client credentials request (RFC 6749 §4.4.2; `audience` as Auth0 and
    /// others take it; RFC 8707 §2 `resource`).
    static func fields(scope: String?, audience: String?, resources: [String]) -> [(String, String)] {
        var fields = [("grant_type", "client_credentials")]
        if let scope { fields.append(("scope", scope)) }
        if let audience { fields.append(("audience", audience)) }
        for resource in resources { fields.append(("resource", resource)) }
        return fields
    }

    /// What a request of `target` on a machine profile configured as `configuration` asks for:
    /// the profile's grant (its files read now, checked against `now`, see
    /// `PlatformTokenFile`), the target's scope, audience and resources where it names them,
    /// the profile's otherwise.
    ///
    /// - Throws: a file that cannot be used (78): nothing is sent.
    static func fields(_ configuration: ProfileConfiguration, target: TokenTarget, now: Double, profile: ProfileName)
        throws(TokenctlError) -> [(String, String)]
    {
        var fields = fields(
            scope: target.scopeField ?? configuration.scope, audience: target.audience ?? configuration.audience,
            resources: target.resources.isEmpty ? configuration.resources : target.resources)
        let grant = configuration.grant ?? .clientCredentials
        fields[0] = ("grant_type", grant.grantType)
        switch grant {
        case .clientCredentials:
            break
        case .tokenExchange:
            // RFC 8693 §2.1.
            let type = configuration.subjectTokenType ?? PlatformTokenFile.defaultSubjectTokenType
            let file = PlatformTokenFile.subjectToken(
                try requiredFile(configuration, .subjectToken, profile: profile), tokenType: type)
            var exchange = [("subject_token", try file.read(now: now)), ("subject_token_type", type)]
            if let requested = configuration.requestedTokenType { exchange.append(("requested_token_type", requested)) }
            fields.insert(contentsOf: exchange, at: 1)
        case .jwtBearer:
            // RFC 7523 §2.1.
            let file = PlatformTokenFile(
                path: try requiredFile(configuration, .assertion, profile: profile), role: .assertion)
            fields.insert(("assertion", try file.read(now: now)), at: 1)
        }
        return fields
    }

    /// The file a grant needs, named by the profile.
    static func requiredFile(
        _ configuration: ProfileConfiguration, _ role: PlatformTokenFile.Role, profile: ProfileName
    ) throws(TokenctlError) -> String {
        let path = role == .subjectToken ? configuration.subjectTokenFile : configuration.assertionFile
        guard let path else {
            let option: TokenctlCommand.LoginOption =
                role == .subjectToken ? .subjectTokenFile(.placeholder) : .assertionFile(.placeholder)
            throw TokenctlError(
                .configuration,
                "machine profile '\(profile)' has grant \(configuration.grant?.rawValue ?? "") but no \(role.profileKey)",
                hint: "Nothing was sent. Name the file: '\(tokenctl: profile, .login([option]))'.")
        }
        return path
    }

    /// A public client (`none`) on the client credentials grant, which RFC 6749 §4.4 keeps to
    /// confidential clients: the refusal (78, nothing sent), or nil.
    static func publicClientRefusal(_ configuration: ProfileConfiguration, profile: ProfileName) -> TokenctlError? {
        let grant = configuration.grant ?? .clientCredentials
        guard configuration.tokenEndpointAuthMethod?.authenticates == false, !grant.allowsPublicClient else {
            return nil
        }
        return TokenctlError(
            .configuration,
            "machine profile '\(profile)' has token_endpoint_auth_method none (a public client), which the \(grant.rawValue) grant does not allow: it is for confidential clients only (RFC 6749 §4.4)",
            hint:
                "Nothing was sent. Sign it in again with the client's means: '\(tokenctl: profile, .login([.grant(.word(grant.rawValue)), .clientAuth(.placeholder)]))'."
        )
    }

    /// The token endpoint a client authenticating with `method` posts to: the mTLS alias for a
    /// certificate (RFC 8705 §5), else the token endpoint.
    static func endpoint(_ configuration: ProfileConfiguration, tokenEndpoint: String) -> String {
        if configuration.tokenEndpointAuthMethod?.usesCertificate == true, let alias = configuration.mtlsTokenEndpoint {
            return alias.string
        }
        return tokenEndpoint
    }

    /// A certificate past its `notAfter` is refused before anything is sent (78): the server
    /// would refuse it, and nothing else can be learnt from sending it.
    static func checkUsable(_ certificate: ClientCertificate, profile: ProfileName, now: Double)
        throws(TokenctlError)
    {
        guard certificate.notAfter.timeIntervalSince1970 > now else {
            throw TokenctlError(
                .configuration,
                "the client certificate of profile '\(profile)' ('\(TerminalText.short(certificate.subject))', x5t#S256 \(certificate.thumbprint)) expired at \(Timestamp.iso8601(certificate.notAfter.timeIntervalSince1970))",
                hint:
                    "Nothing was sent. Make a new one ('\(tokenctl: profile, .key(.create, [.certificate]))') or import the one the CA issued, and register it."
            )
        }
    }

    /// RFC 8705 §3: a token issued to a client that presented `certificate` and bound to a
    /// certificate (a JWT access token's `cnf` `x5t#S256`) must be bound to that one; the
    /// refusal, or nil. An opaque or unbound token is not checked.
    static func bindingRefusal(_ response: TokenResponse, certificate: ClientCertificate?, profile: ProfileName)
        -> TokenctlError?
    {
        guard let certificate,
            case .object(let confirmation)? = UnverifiedJWT.claims(of: response.accessToken)?["cnf"],
            let bound = confirmation["x5t#S256"]?.stringValue
        else { return nil }
        guard bound != certificate.thumbprint else { return nil }
        return TokenctlError(
            .protocolError,
            "the server bound the access token of profile '\(profile)' to another certificate: its cnf x5t#S256 is \(TerminalText.short(bound)), the client's certificate's is \(certificate.thumbprint)",
            hint:
                "Nothing was stored. A token bound to another certificate is refused by every resource server that checks the binding (RFC 8705 §3): check what the TLS front before the server passes on."
        )
    }

    /// The key or certificate `credentials` authenticate with, in words for a message (nil for
    /// a secret): what the server must have registered.
    static func credential(_ credentials: ClientCredentials, profile: ProfileName) -> Suggestion? {
        if let certificate = credentials.certificate {
            return
                "the certificate '\(TerminalText.short(certificate.subject))' (x5t#S256 \(certificate.thumbprint))"
        }
        guard credentials.method == .privateKeyJWT, let keyID = credentials.assertion?.signer.keyID else { return nil }
        return
            "the public key whose JWK thumbprint (kid) is \(keyID) ('\(tokenctl: profile, .key(.show, [.format(.word("jwks"))]))' prints it)"
    }

    /// What the server must have registered for `profile`'s client, in a sentence: the hint of
    /// a refusal (exit 78). `credential` names the key or certificate, when there is one.
    static func registrationHint(
        _ profile: ProfileName, _ configuration: ProfileConfiguration, credential: Suggestion?
    ) -> Suggestion {
        let method = configuration.tokenEndpointAuthMethod?.rawValue ?? "none"
        let grant = (configuration.grant ?? .clientCredentials).grantType
        var what: [Suggestion] = [
            "At \(configuration.issuer), the client '\(TerminalText.short(configuration.clientID))' must be registered for the grant \(grant) with token_endpoint_auth_method \(method)"
        ]
        for (key, path) in [
            ("subject_token_file", configuration.subjectTokenFile), ("assertion_file", configuration.assertionFile),
            ("client_assertion_file", configuration.clientAssertionFile),
        ] {
            // The server checks the file's token: its issuer, subject and audience must be the
            // ones it trusts (a federated credential, a trusted issuer).
            if let path {
                what.append(
                    "it must trust the issuer, subject and audience of the token in \(TerminalText.short(path)) (\(key))"
                )
            }
        }
        if let scope = configuration.scope { what[0] = what[0] + " and the scope '\(TerminalText.short(scope))'" }
        if let credential {
            what.append("and with \(credential)")
        } else if configuration.tokenEndpointAuthMethod?.usesSecret == true {
            what.append(
                "and the secret stored for profile '\(profile)' must be its secret: give a new one with '\(tokenctl: profile, .login([.clientSecretStdin]))'"
            )
        }
        return what.dropFirst().reduce(what[0]) { $0 + ", " + $1 } + "."
    }
}

/// A client credentials request ready to send.
struct ClientCredentialsRequest {
    var client: TokenEndpointClient
    var credentials: ClientCredentials
    var endpoint: String
    var fields: [(String, String)]
    /// The key or certificate the client authenticates with, for messages (no secret).
    var credential: Suggestion?
}

extension TokenBroker {
    /// A machine profile's token under the lock (see `ClientCredentialsGrant`), in the calling
    /// process: no refresh token is spent, so no detached child is needed.
    func acquireUnderLock(
        _ profile: ResolvedProfile, target: TokenTarget, snapshot: TokenSet?, minimumTimeToLive: Double, force: Bool,
        capMargin: Bool
    ) async throws(TokenctlError) -> TokenSet {
        let lock = try await takeRefreshLock(profile, snapshot: snapshot)
        defer { withExtendedLifetime(lock) {} }
        let current = try await readSession(profile.identity)
        if let current,
            let served = servedWithoutRequest(
                current, profile, target: target, snapshot: snapshot, minimumTimeToLive: minimumTimeToLive,
                force: force, capMargin: capMargin)
        {
            return served
        }
        let request = try await clientCredentialsRequest(profile, target: target, current: current)
        refreshRequestCount += 1
        narrate?("asking \(request.endpoint) for a token with the grant \(request.fields[0].1)")
        let (outcome, receivedAt) = try await request.client.exchange(building: { () throws(TokenctlError) in
            try request.credentials.formRequest(request.endpoint, request.fields)
        })
        let consequence = RefreshConsequence.ofClientCredentials(
            outcome, profile: profile.name, target: target,
            hint: ClientCredentialsGrant.registrationHint(
                profile.name, profile.configuration, credential: request.credential),
            certificate: request.credentials.certificate,
            platformGrant: (profile.configuration.grant ?? .clientCredentials) != .clientCredentials)
        return try await carryOutAcquisition(
            consequence, profile, target: target, current: current, receivedAt: receivedAt)
    }

    /// The request of a machine profile's token: its client's credentials and endpoint.
    func clientCredentialsRequest(_ profile: ResolvedProfile, target: TokenTarget, current: TokenSet?)
        async throws(TokenctlError) -> ClientCredentialsRequest
    {
        let configuration = profile.configuration
        guard configuration.tokenEndpointAuthMethod != nil else {
            throw TokenctlError(
                .configuration,
                "machine profile '\(profile.name)' has no client authentication (token_endpoint_auth_method)",
                hint:
                    "Sign it in again: '\(tokenctl: profile.name, .login([.grant(.word("client-credentials")), .clientAuth(.placeholder)]))'."
            )
        }
        if let refusal = ClientCredentialsGrant.publicClientRefusal(configuration, profile: profile.name) {
            throw refusal
        }
        let offset = current?.serverClockOffset ?? store.rememberedServerClockOffset(profile.identity)
        let credentials = try await clientCredentials(for: profile, serverClockOffset: offset)
        var client = endpointClient(profile)
        client.narrate = narrate
        client.knownSecrets = [current?.accessToken, credentials.secret]
        return ClientCredentialsRequest(
            client: client, credentials: credentials,
            endpoint: ClientCredentialsGrant.endpoint(configuration, tokenEndpoint: profile.tokenEndpoint),
            fields: try ClientCredentialsGrant.fields(
                configuration, target: target, now: clock.now() + Self.trustedOffset(offset),
                profile: profile.name),
            credential: ClientCredentialsGrant.credential(credentials, profile: profile.name))
    }

    /// A server clock offset to correct our clock by: a trusted one (`ClockSkew`), else none.
    static func trustedOffset(_ offset: Double?) -> Double {
        offset.flatMap { ClockSkew.isTrusted($0) ? $0 : nil } ?? 0
    }

    /// Do what `consequence` says for a machine profile's request: store the token (the
    /// profile's own, or a target's beside it) and hand it out, or record and throw.
    func carryOutAcquisition(
        _ consequence: RefreshConsequence, _ profile: ResolvedProfile, target: TokenTarget, current: TokenSet?,
        receivedAt: Double
    ) async throws(TokenctlError) -> TokenSet {
        guard case .storeRefreshed(var response, let serverDate) = consequence.action else {
            record(consequence.event, profile, subject: current?.subject, reason: consequence.reason)
            throw consequence.error ?? TokenctlError(.unexpected, "getting a token for '\(profile.name)' failed")
        }
        // RFC 6749 §4.4.3: no refresh token for this grant; one a server sends anyway is not kept.
        response.refreshToken = nil
        if target.isSession {
            var next = TokenSet(response: response, receivedAt: receivedAt, serverDate: serverDate, previous: current)
            next.refreshToken = nil
            try await persist(next, for: profile.identity, replacing: current)
            narrate?("stored the new access token of machine profile '\(profile.name)'")
            didServe?(next, profile.identity, .session)
            record(.tokenRefreshed, profile, subject: next.subject)
            return next
        }
        // A target's token sits beside the profile's own; with none stored yet, the target's
        // token stands in for it, already expired (the next plain `token` asks for its own).
        let base =
            current
            ?? {
                var placeholder = TokenSet(
                    response: response, receivedAt: receivedAt, serverDate: serverDate, previous: nil)
                placeholder.expiresAt = receivedAt
                return placeholder
            }()
        let (next, token) = Self.storingTargeted(
            response, target: target, receivedAt: receivedAt, serverDate: serverDate, in: base)
        try await persist(next, for: profile.identity, replacing: current)
        narrate?("stored the new access token for \(target) of machine profile '\(profile.name)'")
        let served = TokenSet(
            accessToken: token.accessToken, tokenType: token.tokenType, refreshToken: nil, scope: token.grantedScope,
            expiresAt: token.effectiveExpiry, issuedLifetime: token.issuedLifetime, obtainedAt: token.obtainedAt,
            subject: next.subject)
        didServe?(served, profile.identity, target)
        record(.tokenRefreshed, profile, subject: next.subject)
        return served
    }
}

extension RefreshConsequence {
    /// The row for the answer to a machine profile's client credentials request. As a
    /// refresh's, except: there is no grant to end, so a refusal keeps whatever is stored; a
    /// refused client (`invalid_client`, `unauthorized_client`, or a bare 401 or 403: glewlwyd
    /// refuses a client with 403 and an empty body) is the configuration's fault (78, with
    /// `hint`: what to register where); any other refusal is the request's.
    ///
    /// - Parameter certificate: the certificate the request presented: a token bound to
    ///   another is refused (`ClientCredentialsGrant.bindingRefusal`).
    /// - Parameter platformGrant: the request exchanged a platform's token (token exchange,
    ///   JWT bearer): the server refusing it is the configuration's fault too.
    static func ofClientCredentials(
        _ outcome: RefreshOutcome, profile: ProfileName, target: TokenTarget, hint: Suggestion,
        certificate: ClientCertificate? = nil, platformGrant: Bool = false
    ) -> RefreshConsequence {
        func refused(_ reason: GrantEndReason) -> RefreshConsequence {
            RefreshConsequence(
                action: .keepSession, event: .refreshFailed, reason: reason.className,
                error: TokenctlError(
                    .configuration,
                    "the server refused the \(platformGrant ? "request" : "client") of machine profile '\(profile)': \(reason)",
                    hint: hint))
        }
        switch outcome {
        case .success(let response, let serverDate):
            if let refusal = ClientCredentialsGrant.bindingRefusal(response, certificate: certificate, profile: profile)
            {
                return RefreshConsequence(
                    action: .keepSession, event: .refreshFailed, reason: "certificate-binding", error: refusal)
            }
            return RefreshConsequence(action: .storeRefreshed(response, serverDate: serverDate), event: .tokenRefreshed)
        case .clientRefused(let reason):
            return refused(reason)
        case .grantEnded(let reason):
            if case .oauthError(_, let code, _, _) = reason, code == "unauthorized_client" { return refused(reason) }
            // RFC 8693 §2.2.2, RFC 7523 §3.1: a subject token or assertion the server does not
            // accept is invalid_request or invalid_grant: the platform's token or what the server
            // trusts is at fault, the configuration's (78).
            if platformGrant, case .oauthError(_, let code, _, _) = reason,
                code == "invalid_grant" || code == "invalid_request"
            {
                return refused(reason)
            }
            if case .unexpectedStatus(let status, _) = reason, status == 401 || status == 403 { return refused(reason) }
            let (refusedTarget, why) = ProviderErrorClasses.refusesTarget(reason)
            return RefreshConsequence(
                action: .keepSession, event: .refreshFailed, reason: reason.className,
                error: TokenctlError(
                    refusedTarget ? .invalidInput : .unexpected,
                    "the server refused a token for \(target.isSession ? "machine profile '\(profile)'" : "\(target) on machine profile '\(profile)'"): \(reason)",
                    hint: Suggestion.sentences(why, hint)))
        case .transient(let reason, _):
            let message = "could not get a token for machine profile '\(profile)': \(reason)"
            if case .transport(let kind, _, let advice) = reason, kind.isSettled {
                // A proxy that refuses its credentials, a certificate that does not verify, a
                // proxy password the Secret Service cannot give: nothing was sent, and the same
                // again will not pass.
                return RefreshConsequence(
                    action: .keepSession, event: .refreshFailed, reason: reason.className,
                    error: TokenctlError(kind.commandFailure, message, hint: advice))
            }
            return RefreshConsequence(
                action: .keepSession, event: .refreshFailed, reason: reason.className,
                error: TokenctlError(.transient, message, hint: "Nothing is lost: try again later."))
        case .unusableTokens, .notTheServersVerdict:
            // As for a refresh, but nothing was spent: the rows' messages and exit statuses.
            var row = of(.outcome(outcome), profile: profile, target: target, sessionScope: nil)
            row.action = .keepSession
            return row
        }
    }
}
