import TokenctlEssentials

/// A refresh answer once checked (`TokenBroker.checkAnswer`): what `RefreshConsequence` reads.
enum CheckedRefreshAnswer: Equatable, Sendable {
    /// The answer as classified; `.grantEnded` when its ID token is not the session's.
    case outcome(RefreshOutcome)
    /// Tokens the session's DPoP binding cannot use (RFC 9449 §5).
    case bindingRefused(DPoPBinding.Refusal)
    /// The server refused the refresh's DPoP proof, not its grant (RFC 9449 §7.1, §8).
    case proofRefused(GrantEndReason)
    /// The server refused what a narrowed refresh asked for, not the grant.
    case targetRefused(GrantEndReason)
}

extension TokenBroker {
    /// The checks of a refresh answer, in order: the DPoP binding of a usable answer; a refused
    /// proof; the ID token of an answer that is kept (OIDC Core §12.2); then, for a narrowed
    /// refresh, whether the server refused the target rather than the grant.
    ///
    /// - Parameter dpopKey: the key the request's proof was signed with (nil: none was sent).
    func checkAnswer(
        _ outcome: RefreshOutcome, dpopKey: DPoPKey?, _ profile: ResolvedProfile, target: TokenTarget,
        current: TokenSet
    ) async -> CheckedRefreshAnswer {
        if case .success(let response, _) = outcome {
            do {
                try DPoPBinding.check(response, key: dpopKey, allowBearer: profile.configuration.dpopAllowBearer)
            } catch { return .bindingRefused(error) }
        }
        if case .grantEnded(let reason) = outcome, Self.refusesProof(reason) { return .proofRefused(reason) }
        var outcome = outcome
        var idTokenRefused = false
        // The ID token of a usable answer, or of one whose rotated refresh token is kept.
        let answeredIDToken: String? =
            switch outcome {
            case .success(let response, _): response.idToken
            case .unusableTokens(let answer): answer.idToken
            default: nil
            }
        if let idToken = answeredIDToken, let refusal = await refusal(ofRefreshed: idToken, profile, current: current) {
            outcome = .grantEnded(.unusableResponse(refusal))
            idTokenRefused = true
        }
        if !target.isSession, case .grantEnded(let reason) = outcome, !idTokenRefused, !Self.endsSession(reason) {
            return .targetRefused(reason)
        }
        return .outcome(outcome)
    }

    /// Why a refreshed ID token is not the session's, or nil when it is: the same issuer,
    /// subject and client (OIDC Core §12.2), signed by the issuer; else the answer ends the grant,
    /// and nothing is stored.
    private func refusal(ofRefreshed idToken: String, _ profile: ResolvedProfile, current: TokenSet) async -> String? {
        do {
            guard let claims = UnverifiedJWT.claims(of: idToken) else {
                throw JWTError.claim("the refreshed ID token is not a JWT")
            }
            try IDTokenValidation.validateRefreshed(
                claims, previous: current.idToken.flatMap(UnverifiedJWT.claims(of:)),
                issuer: profile.configuration.issuer.string,
                clientID: profile.configuration.clientID,
                issuerRule: profile.configuration.preset?.issuerRule ?? .exact)
            try await checkSignature(ofRefreshed: idToken, profile)
        } catch {
            return "\(error)"
        }
        return nil
    }

    /// Whether a server refused a refresh's DPoP proof (RFC 9449 §7.1, §8), not its grant: the
    /// refresh token was not spent, and the session stays whatever the target.
    static func refusesProof(_ reason: GrantEndReason) -> Bool {
        if case .oauthError(_, let code, _, _) = reason {
            return code == "invalid_dpop_proof" || code == "use_dpop_nonce"
        }
        return false
    }

    /// Whether a server's refusal of a refresh means the grant is dead (the session ends), as
    /// opposed to a refusal of what a narrowed refresh asked for.
    static func endsSession(_ reason: GrantEndReason) -> Bool { ProviderErrorClasses.endsGrant(reason) }

    /// The signature of an ID token that came with a refresh, as at login: against the issuer's
    /// cached keys (those that verified the login's ID token), fetched again once when they do
    /// not know its key (an issuer that rotated its keys). It fails when a check was possible and
    /// failed: a forbidden algorithm, a bad signature, a key that cannot make it, or a key the
    /// issuer's current JWKS does not have. When no keys can be had (no JWKS URI, the fetch
    /// failed or is rate-limited) or libcrypto is missing, the claims checks stand alone: the
    /// token came straight from the token endpoint over TLS (OIDC Core §3.1.3.7 item 6), and the
    /// refresh token it came with is already spent.
    private func checkSignature(ofRefreshed idToken: String, _ profile: ResolvedProfile) async throws(JWTError) {
        guard let issuerKeys else { return }
        var keys = await issuerKeys(profile, false)
        var fetched = false
        if SignatureVerdict.evaluate(idToken, keys: keys).fetchMightHelp, let fresh = await issuerKeys(profile, true) {
            keys = fresh
            fetched = true
        }
        switch SignatureVerdict.evaluate(idToken, keys: keys) {
        case .verified, .noKeysCached, .cryptoUnavailable:
            return
        case .unknownKey:
            if fetched { throw .claim("the refreshed ID token is signed with a key the issuer's JWKS does not have") }
        case .invalid:
            guard let keys else { throw .claim("the refreshed ID token is not signed with an accepted algorithm") }
            do { _ = try JWTVerifier.verify(idToken, keys: keys) } catch {
                throw .claim("the refreshed ID token was rejected: \(error)")
            }
        }
    }
}
