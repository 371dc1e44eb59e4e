import TokenctlEssentials

/// What the tokens must pass before anything is stored: their DPoP binding (RFC 9449 §5) and
/// the ID token (OIDC Core §3.1.3.7), its signature when the issuer's keys are known.
struct LoginChecks: LoginStep {
    let service: TokenctlService
    let plan: LoginPlan
    let server: LoginServer

    /// - Returns: whether an ID token came back and its signature was verified.
    func check(_ exchanged: LoginExchange.Exchanged) async throws(TokenctlError) -> Bool {
        let request = plan.request
        try checkBinding(exchanged.response)
        guard let idToken = exchanged.response.idToken else { return false }
        return try await checkIDToken(
            idToken, issuer: request.issuer.string, clientID: request.clientID, nonce: exchanged.nonce,
            receivedAt: exchanged.receivedAt, serverDate: exchanged.serverDate,
            refusesUnsolicitedNonce: { if case .device = request.method { true } else { false } }(),
            issuerRule: plan.preset?.issuerRule ?? .exact)
    }

    /// RFC 9449 §5: tokens bound to our key, or (dpop_allow_bearer) Bearer ones; else nothing is stored.
    private func checkBinding(_ response: TokenResponse) throws(TokenctlError) {
        let request = plan.request
        do { try DPoPBinding.check(response, key: server.dpopKey, allowBearer: plan.allowBearer) } catch {
            events?.append(
                EventRecord(
                    time: clock.now(), event: .dpopDowngradeRefused, profile: request.profile.rawValue,
                    issuer: request.issuer.string,
                    reason: error.eventReason))
            throw TokenctlError(
                .configuration, "refused the tokens the server issued: \(error)",
                hint: Suggestion.sentences("Nothing was stored.", DPoPBinding.hint(request.profile, error)))
        }
    }

    /// Claims always; the signature when the issuer's JWKS is known. Returns whether the signature was verified.
    private func checkIDToken(
        _ idToken: String, issuer: String, clientID: String, nonce: String?,
        receivedAt: Double, serverDate: Double?, refusesUnsolicitedNonce: Bool, issuerRule: IssuerRule
    ) async throws(TokenctlError) -> Bool {
        let claims: [String: JSONValue]
        var verified = false
        if let jwksURI = server.endpoints.jwks {
            claims = try await verifiedClaims(idToken, issuer: issuer, jwksURI: jwksURI)
            verified = true
        } else {
            claims = try unverifiedClaims(idToken)
        }
        // exp and iat are on the server's clock: compare with the server's own Date when it sent one.
        let serverNow = serverDate.map { $0 + (clock.now() - receivedAt) } ?? clock.now()
        var expectations = IDTokenExpectations(issuer: issuer, clientID: clientID, nonce: nonce, now: serverNow)
        expectations.refusesUnsolicitedNonce = refusesUnsolicitedNonce
        expectations.issuerRule = issuerRule
        do { try IDTokenValidation.validate(claims, expectations) } catch { throw Self.rejected(error) }
        return verified
    }

    /// The claims of an ID token whose signature the issuer's keys verify.
    private func verifiedClaims(
        _ idToken: String, issuer: String, jwksURI: EndpointURL
    ) async throws(TokenctlError) -> [String: JSONValue] {
        let response: HTTPResponse
        do {
            response = try await server.http.send(.getJSON(jwksURI.string), timeout: retry.attemptTimeout)
        } catch {
            throw TokenctlError(
                .transient, "cannot fetch the issuer's keys from \(jwksURI): \(error)",
                hint: "Nothing was stored; try again later.")
        }
        guard response.status == 200 else {
            let kind: TokenctlError.Kind = response.isTransientFailure ? .transient : .loginRequired
            throw TokenctlError(
                kind, "the issuer's JWKS at \(jwksURI) answered HTTP \(response.status)",
                hint: "Nothing was stored.")
        }
        let keys: JSONWebKeySet
        let claims: [String: JSONValue]
        do { keys = try JSONWebKeySet.parse(response.body) } catch { throw Self.rejected(error) }
        do { claims = try JWTVerifier.verify(idToken, keys: keys).claims } catch { throw Self.rejected(error) }
        // Keys that just verified a token: what `status` checks signatures against offline.
        service.jwksCache.store(
            issuer, jwksURI: jwksURI.string, document: String(decoding: response.body, as: UTF8.self))
        return claims
    }

    /// Without keys, the token still came straight from the token endpoint over TLS (OIDC Core
    /// §3.1.3.7 item 6) — but never accept 'none' or HMAC.
    private func unverifiedClaims(_ idToken: String) throws(TokenctlError) -> [String: JSONValue] {
        let parts = idToken.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let header = UnverifiedJWT.base64URLDecode(String(parts[0])).flatMap(JSONValue.parseObject),
            let parsed = UnverifiedJWT.claims(of: idToken)
        else { throw Self.rejected(.malformed("not a compact JWS")) }
        let algorithm = header["alg"]?.stringValue ?? "none"
        guard JWSAlgorithm(rawValue: algorithm) != nil else { throw Self.rejected(.unsupportedAlgorithm(algorithm)) }
        return parsed
    }

    private static func rejected(_ error: JWTError) -> TokenctlError {
        // A missing libcrypto is this machine's problem, not the token's: not "log in again".
        if case .cryptoUnavailable(let reason) = error {
            return TokenctlError(
                .unexpected, "cannot check the ID token's signature: \(reason)", hint: "Nothing was stored.")
        }
        return TokenctlError(.loginRequired, "the ID token was rejected: \(error)", hint: "Nothing was stored.")
    }
}
