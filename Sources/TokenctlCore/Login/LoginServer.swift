import TokenctlEssentials

/// The server a login talks to: its metadata (discovery), the endpoints the flow uses, the new
/// session's DPoP key, and the HTTP client every request goes through.
struct LoginServer: Sendable {
    /// Each endpoint from the options, else the profile's saved one, else discovery, else the
    /// provider preset's.
    struct Endpoints: Sendable {
        var token: EndpointURL
        var revocation: EndpointURL?
        var deviceAuthorization: EndpointURL?
        var authorization: EndpointURL?
        var jwks: EndpointURL?
    }

    /// The discovery document; nil when discovery did not run or was not needed.
    var metadata: ServerMetadata?
    var endpoints: Endpoints
    /// The new session's key; nil for a bearer session.
    var dpopKey: DPoPKey?
    /// With DPoP, the client that signs a proof for every request to the token endpoint.
    var http: any HTTPClient
}

/// Finds the `LoginServer` for a plan: discovery, then the endpoints, then the DPoP key.
struct LoginServerResolution: LoginStep {
    let service: TokenctlService
    let plan: LoginPlan

    func resolve() async throws(TokenctlError) -> LoginServer {
        let request = plan.request
        let preset = plan.preset
        let plainHTTP = service.httpClient(plan.network)
        let metadata = preset?.discovers == false ? nil : try await discover(http: plainHTTP)
        let endpoints = try resolveEndpoints(
            metadata: metadata, fallback: preset?.fallbackEndpoints ?? ExplicitEndpoints())
        // DPoP: a new key for the new session; every request to the token endpoint carries a
        // proof signed with it (device polls, the code exchange, the import's refresh).
        let dpopKey = plan.dpop ? try Self.newDPoPKey(for: request.issuer, metadata: metadata) : nil
        var http = plainHTTP
        if let dpopKey {
            http = DPoPHTTPClient(
                plainHTTP, key: dpopKey, issuer: request.issuer.string, endpoints: [endpoints.token.string],
                clock: clock, issuerState: service.dpopState)
        }
        return LoginServer(metadata: metadata, endpoints: endpoints, dpopKey: dpopKey, http: http)
    }

    /// Whether the endpoints given or saved cover everything the flow needs.
    private var covered: Bool {
        let explicit = plan.request.endpoints
        let saved = plan.saved
        switch plan.request.method {
        case .refreshToken, .clientCredentials: return (explicit.token ?? saved.token) != nil
        case .device:
            return (explicit.token ?? saved.token) != nil
                && (explicit.deviceAuthorization ?? saved.deviceAuthorization) != nil
        case .browser:
            return (explicit.token ?? saved.token) != nil
                && (explicit.authorization ?? saved.authorization) != nil
        }
    }

    /// Whether the options given now name every endpoint an interactive login needs.
    private var optionsGiveEverything: Bool {
        let explicit = plan.request.endpoints
        let needsFlowEndpoint: Bool
        switch plan.request.method {
        case .refreshToken, .clientCredentials: needsFlowEndpoint = false
        case .device: needsFlowEndpoint = explicit.deviceAuthorization == nil
        case .browser: needsFlowEndpoint = explicit.authorization == nil
        }
        return explicit.token != nil && !needsFlowEndpoint && explicit.jwks != nil
    }

    /// The saved endpoints (`plan.saved`) do not skip discovery even when they cover the flow
    /// (only options given now skip it), and its absence is no error when they do.
    private func discover(http: any HTTPClient) async throws(TokenctlError) -> ServerMetadata? {
        let request = plan.request
        let explicit = request.endpoints
        let saved = plan.saved
        let dpop = plan.dpop
        let covered = covered
        // The refresh-token import needs only the token endpoint: a given or saved one skips
        // discovery. Interactive logins skip it only when options give every endpoint.
        if case .refreshToken = request.method {
            if covered { return nil }
        } else if optionsGiveEverything {
            return nil
        }
        let cache = DiscoveryCache(directory: profiles.paths.discoveryCacheDirectory, clock: clock)
        do {
            // A cached document may predate a server change: one that lacks the flow's endpoint
            // is fetched again before a missing endpoint is reported (a fresh one is not).
            return try await ServerMetadata.discover(
                request.issuer, http: http, timeout: retry.attemptTimeout, cache: cache,
                issuerRule: plan.preset?.issuerRule ?? .exact
            ) { metadata in
                // A server may have enabled DPoP since the document was cached.
                if dpop && !(metadata.dpopSigningAlgorithms?.contains("ES256") ?? false) { return false }
                return switch request.method {
                case .refreshToken, .clientCredentials: true // a document always names its token endpoint
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

    /// Each endpoint from the options, else the profile's saved one, else discovery, else the
    /// provider preset's.
    private func resolveEndpoints(
        metadata: ServerMetadata?, fallback: ExplicitEndpoints
    ) throws(TokenctlError) -> LoginServer.Endpoints {
        let request = plan.request
        let explicit = request.endpoints
        let saved = plan.saved
        guard let token = explicit.token ?? saved.token ?? metadata?.tokenEndpoint ?? fallback.token else {
            throw TokenctlError(
                .configuration, "no token endpoint for \(request.issuer)",
                hint: "Give it with \(options: .login([.tokenEndpoint(.omitted)])).")
        }
        return LoginServer.Endpoints(
            token: token,
            revocation: explicit.revocation ?? saved.revocation ?? metadata?.revocationEndpoint ?? fallback.revocation,
            deviceAuthorization: explicit.deviceAuthorization ?? saved.deviceAuthorization
                ?? metadata?.deviceAuthorizationEndpoint ?? fallback.deviceAuthorization,
            authorization: explicit.authorization ?? saved.authorization ?? metadata?.authorizationEndpoint
                ?? fallback.authorization,
            jwks: explicit.jwks ?? saved.jwks ?? metadata?.jwksURI ?? fallback.jwks)
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
                        "Nothing was sent. Sign in without \(options: .login([.dpop])) (bearer tokens), or ask the server's operator to enable DPoP."
                )
            }
        }
        do { return try DPoPKey.generate() } catch {
            throw TokenctlError(
                .unexpected, "cannot make a DPoP key: \(error)",
                hint: "Nothing was sent. Install libgcrypt20, or sign in without \(options: .login([.dpop])).")
        }
    }
}
