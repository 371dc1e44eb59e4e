import TokenctlEssentials

/// Authorization server metadata: OpenID Connect Discovery 1.0, then RFC 8414.
public struct ServerMetadata: Equatable, Sendable {
    public var issuer: String
    public var tokenEndpoint: EndpointURL
    public var revocationEndpoint: EndpointURL?
    public var deviceAuthorizationEndpoint: EndpointURL?
    public var authorizationEndpoint: EndpointURL?
    public var jwksURI: EndpointURL?
    /// `token_endpoint_auth_methods_supported`; `nil` when not advertised (RFC 8414 default: client_secret_basic).
    public var tokenEndpointAuthMethods: [String]?
    /// `code_challenge_methods_supported`; `nil` when not advertised.
    public var codeChallengeMethods: [String]?
    /// `scopes_supported`; `nil` when not advertised.
    public var scopesSupported: [String]?
    /// `id_token_signing_alg_values_supported`; `nil` when not advertised.
    public var idTokenSigningAlgorithms: [String]?
    /// `dpop_signing_alg_values_supported` (RFC 9449 §5.1); `nil` when not advertised.
    public var dpopSigningAlgorithms: [String]?
    /// `mtls_endpoint_aliases.token_endpoint` (RFC 8705 §5): where a client presenting a
    /// certificate asks for tokens.
    public var mtlsTokenEndpoint: EndpointURL?
    /// `token_endpoint_auth_signing_alg_values_supported` (RFC 8414 §2): the algorithms of
    /// client assertions the server accepts.
    public var tokenEndpointAuthSigningAlgorithms: [String]?

    public init(
        issuer: String, tokenEndpoint: EndpointURL, revocationEndpoint: EndpointURL? = nil,
        deviceAuthorizationEndpoint: EndpointURL? = nil, authorizationEndpoint: EndpointURL? = nil,
        jwksURI: EndpointURL? = nil,
        tokenEndpointAuthMethods: [String]? = nil, codeChallengeMethods: [String]? = nil,
        scopesSupported: [String]? = nil,
        idTokenSigningAlgorithms: [String]? = nil
    ) {
        self.issuer = issuer
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.authorizationEndpoint = authorizationEndpoint
        self.jwksURI = jwksURI
        self.tokenEndpointAuthMethods = tokenEndpointAuthMethods
        self.codeChallengeMethods = codeChallengeMethods
        self.scopesSupported = scopesSupported
        self.idTokenSigningAlgorithms = idTokenSigningAlgorithms
    }

    /// The well-known locations to try, in order: OIDC (`issuer + /.well-known/openid-configuration`),
    /// then RFC 8414 §3 (the well-known segment inserted between host and path).
    public static func discoveryURLs(for issuer: EndpointURL) -> [String] {
        let base = issuer.withoutTrailingSlash
        var urls = [base + "/.well-known/openid-configuration"]
        let afterScheme = base.firstRange(of: "://")!.upperBound
        let pathStart = base[afterScheme...].firstIndex(of: "/") ?? base.endIndex
        let origin = base[..<pathStart]
        let path = base[pathStart...]
        urls.append(origin + "/.well-known/oauth-authorization-server" + path)
        return urls
    }

    /// Fetch the metadata of `issuer`, or take it from `cache`. A cached document that fails
    /// `cachedIsUsable` (it may predate a server change) is dropped and fetched again once.
    ///
    /// - Throws: transient `TokenctlError` when the server cannot be reached; a configuration
    ///   error when no document is found, it is malformed, or its issuer differs.
    public static func discover(
        _ issuer: EndpointURL, http: any HTTPClient, timeout: Double, cache: DiscoveryCache? = nil,
        issuerRule: IssuerRule = .exact, cachedIsUsable: (ServerMetadata) -> Bool = { _ in true }
    ) async throws(TokenctlError) -> ServerMetadata {
        if let cache, let cached = cache.load(issuer),
            var metadata = try? parse(
                Array(cached.document.utf8), expectedIssuer: issuer, issuerRule: issuerRule, url: cached.url)
        {
            if let url = cached.supplementURL, let document = cached.supplementDocument,
                let supplement = try? parse(
                    Array(document.utf8), expectedIssuer: issuer, issuerRule: issuerRule, url: url)
            {
                metadata.fillGaps(from: supplement)
            }
            if cachedIsUsable(metadata) { return metadata }
            cache.remove(issuer)
        }
        var problems: [String] = []
        let urls = discoveryURLs(for: issuer)
        for (index, url) in urls.enumerated() {
            let response: HTTPResponse
            do {
                response = try await http.send(.getJSON(url), timeout: timeout)
            } catch {
                throw error.kind.isSettled
                    ? error.tokenctlError("cannot reach the issuer \(issuer)", hint: nil)
                    : TokenctlError(
                        .transient, "cannot reach the issuer \(issuer): \(error)",
                        hint: "Check the URL and the network, then try again.")
            }
            guard response.status == 200 else {
                problems.append("\(url): HTTP \(response.status)")
                continue
            }
            var metadata = try parse(response.body, expectedIssuer: issuer, issuerRule: issuerRule, url: url)
            var supplement: (url: String, document: String)?
            // Some servers (django-oauth-toolkit) list the device and revocation endpoints only in
            // their RFC 8414 document: fill what the OIDC document lacks from it, if it is there.
            if index == 0, metadata.deviceAuthorizationEndpoint == nil || metadata.revocationEndpoint == nil,
                let response = try? await http.send(.getJSON(urls[1]), timeout: timeout),
                response.status == 200,
                let other = try? parse(response.body, expectedIssuer: issuer, issuerRule: issuerRule, url: urls[1])
            {
                metadata.fillGaps(from: other)
                supplement = (urls[1], String(decoding: response.body, as: UTF8.self))
            }
            // Only documents that passed every check are cached; a cache failure is not an error.
            cache?.store(
                issuer, url: url, document: String(decoding: response.body, as: UTF8.self), supplement: supplement)
            return metadata
        }
        throw TokenctlError(
            .configuration, "no discovery document for \(issuer) (\(problems.joined(separator: "; ")))",
            hint:
                "Give the endpoints explicitly with \(options: .login([.tokenEndpoint(.omitted)])) (and \(options: .login([.revocationEndpoint(.omitted)])))."
        )
    }

    /// Take the endpoints and capabilities this document lacks from `other` (same issuer).
    mutating func fillGaps(from other: ServerMetadata) {
        revocationEndpoint = revocationEndpoint ?? other.revocationEndpoint
        deviceAuthorizationEndpoint = deviceAuthorizationEndpoint ?? other.deviceAuthorizationEndpoint
        authorizationEndpoint = authorizationEndpoint ?? other.authorizationEndpoint
        jwksURI = jwksURI ?? other.jwksURI
        tokenEndpointAuthMethods = tokenEndpointAuthMethods ?? other.tokenEndpointAuthMethods
        codeChallengeMethods = codeChallengeMethods ?? other.codeChallengeMethods
        scopesSupported = scopesSupported ?? other.scopesSupported
        dpopSigningAlgorithms = dpopSigningAlgorithms ?? other.dpopSigningAlgorithms
        mtlsTokenEndpoint = mtlsTokenEndpoint ?? other.mtlsTokenEndpoint
        tokenEndpointAuthSigningAlgorithms =
            tokenEndpointAuthSigningAlgorithms ?? other.tokenEndpointAuthSigningAlgorithms
    }

    /// What to do when discovery names another issuer: Entra's multi-tenant template needs
    /// the preset; another URL is the one to use.
    static func mismatchHint(named: String) -> Suggestion {
        if let hint = EntraTenant.discoveryMismatchHint(named: named) { return hint }
        if let url = try? EndpointURL(named), !named.contains(" ") {
            return
                "Use the issuer URL exactly as the server names it: \(options: .login([.issuer(.word(TerminalText.short(url.string)))]))"
        }
        return "Use the issuer URL exactly as the server names it."
    }

    static func parse(
        _ body: [UInt8], expectedIssuer: EndpointURL, issuerRule: IssuerRule = .exact, url: String
    ) throws(TokenctlError) -> ServerMetadata {
        guard let object = JSONValue.parseObject(body) else {
            throw TokenctlError(.configuration, "the discovery document at \(url) is not a JSON object")
        }
        guard let issuer = object["issuer"]?.stringValue else {
            throw TokenctlError(.configuration, "the discovery document at \(url) has no issuer")
        }
        // OIDC Discovery §4.3 / RFC 8414 §3.3: the issuer must be exactly the one configured.
        // A preset may say otherwise for its own provider (Entra's `{tenantid}` template).
        guard issuerRule.acceptsDiscoveryIssuer(issuer, configured: expectedIssuer) else {
            throw TokenctlError(
                .configuration,
                "the discovery document at \(url) names issuer '\(TerminalText.short(issuer))', not '\(expectedIssuer)'",
                hint: mismatchHint(named: issuer))
        }
        func endpoint(_ key: String) throws(TokenctlError) -> EndpointURL? {
            guard let value = object[key] else { return nil }
            guard let string = value.stringValue else {
                throw TokenctlError(.configuration, "the discovery document at \(url) has an invalid \(key)")
            }
            do { return try EndpointURL(string) } catch {
                throw TokenctlError(.configuration, "the discovery document at \(url) has an unusable \(key): \(error)")
            }
        }
        guard let token = try endpoint("token_endpoint") else {
            throw TokenctlError(
                .configuration, "the discovery document at \(url) has no token_endpoint",
                hint: "Give it with \(options: .login([.tokenEndpoint(.omitted)])).")
        }
        func strings(_ key: String) throws(TokenctlError) -> [String]? {
            guard let value = object[key], value != .null else { return nil }
            guard case .array(let items) = value else {
                throw TokenctlError(
                    .configuration, "the discovery document at \(url) has an invalid \(key) (not an array)")
            }
            return items.compactMap(\.stringValue)
        }
        var metadata = ServerMetadata(
            issuer: issuer, tokenEndpoint: token, revocationEndpoint: try endpoint("revocation_endpoint"),
            deviceAuthorizationEndpoint: try endpoint("device_authorization_endpoint"),
            authorizationEndpoint: try endpoint("authorization_endpoint"), jwksURI: try endpoint("jwks_uri"),
            tokenEndpointAuthMethods: try strings("token_endpoint_auth_methods_supported"),
            codeChallengeMethods: try strings("code_challenge_methods_supported"),
            scopesSupported: try strings("scopes_supported"),
            idTokenSigningAlgorithms: try strings("id_token_signing_alg_values_supported"))
        metadata.dpopSigningAlgorithms = try strings("dpop_signing_alg_values_supported")
        metadata.tokenEndpointAuthSigningAlgorithms = try strings("token_endpoint_auth_signing_alg_values_supported")
        if case .object(let aliases)? = object["mtls_endpoint_aliases"],
            let alias = aliases["token_endpoint"]?.stringValue
        {
            do { metadata.mtlsTokenEndpoint = try EndpointURL(alias) } catch {
                throw TokenctlError(
                    .configuration,
                    "the discovery document at \(url) has an unusable mtls_endpoint_aliases token_endpoint: \(error)")
            }
        }
        return metadata
    }
}
