import TokenctlEssentials

@testable import TokenctlCommands
// Fuzz target: a JWT as tokenctl reads one: UnverifiedJWT.claims (sub/exp of access and ID
// tokens, never to grant anything), JWTVerifier.verify against a fixed key set (RS256, PS256,
// ES256 and EdDSA keys: the seeds are tokens these keys signed), IDTokenValidation of the claims,
// PlatformTokenFile's checks of a token file's content, and the token as the access token of a token response: its exp becomes the set's expiry
// (ClockSkew), stored, read back and printed (Shared/TokenSetUse.swift).
//
// Input: the token text (UTF-8 with repair).
// fuzz-extra-sources: Tests/Fuzz/Shared/TokenSetUse.swift
@testable import TokenctlCore

/// Public keys only; the private halves signed the seed tokens and are not kept.
let fixedKeys = try! JSONWebKeySet.parse(
    Array(
        #"""
        {"keys":[{"kty":"RSA","kid":"rsa1","use":"sig","alg":"RS256","n":"yglWY_dtFEk7mLEAPsEx_964LL4wDteNm4heZbiYfPEm-dtcbk-JpFQQQdnn52L0SBzn3Qyr4F0C47av0LECblDGI1X8FCSTgve09Cxvl7Qh2KHKTX8MyBayeRQJ9ihYLbq-CBFJurPtDjqdo1t7z0oPegdYHw70sD6SDnfemWPt-4jp_gnhpg1UELoBvFE6OEvTKSOl-ZYIo2fYSctXtU48SyJ0z3c5Zm93Ty0kLzlLi30E8PhmwsjA8H-_ZgQ60TjB7pjAub0AS6Jr5MuzAs7hJtuxyZPY1xw-UQ7hJnZ3M7-dyjl-LuNywc0qUmmXEkT1Uh6uFzKIcjiSk5K7ew","e":"AQAB"},{"kty":"RSA","kid":"rsa-pss","use":"sig","alg":"PS256","n":"yglWY_dtFEk7mLEAPsEx_964LL4wDteNm4heZbiYfPEm-dtcbk-JpFQQQdnn52L0SBzn3Qyr4F0C47av0LECblDGI1X8FCSTgve09Cxvl7Qh2KHKTX8MyBayeRQJ9ihYLbq-CBFJurPtDjqdo1t7z0oPegdYHw70sD6SDnfemWPt-4jp_gnhpg1UELoBvFE6OEvTKSOl-ZYIo2fYSctXtU48SyJ0z3c5Zm93Ty0kLzlLi30E8PhmwsjA8H-_ZgQ60TjB7pjAub0AS6Jr5MuzAs7hJtuxyZPY1xw-UQ7hJnZ3M7-dyjl-LuNywc0qUmmXEkT1Uh6uFzKIcjiSk5K7ew","e":"AQAB"},{"kty":"EC","kid":"ec1","crv":"P-256","x":"72tiA72DYvZY4FgVNGSWSkj9KtuN5i3Qw4cJgmNOj24","y":"USSiSkVcCLPlzkeHpJr9GY9nzfa_oebsbovG2nkEeBg"},{"kty":"OKP","kid":"ed1","crv":"Ed25519","x":"nO40Di76YJpiKHUCpV5yQZ2rp-ZW3iSRI_LtzXdeXK4"}]}
        """#.utf8))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJWT(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let token = String(decoding: FuzzSupport.bytes(data, size), as: UTF8.self)
    let now = 1_764_426_000.0
    let expectations = IDTokenExpectations(
        issuer: "https://login.example.com", clientID: "cli", nonce: "n-0S6_WzA2Mj", now: now)

    if let claims = UnverifiedJWT.claims(of: token) {
        // Validation is pure claim checking; here without a signature, to reach every check.
        do { try IDTokenValidation.validate(claims, expectations) } catch { _ = error.description }
    }
    do {
        let verified = try JWTVerifier.verify(token, keys: fixedKeys)
        try? IDTokenValidation.validate(verified.claims, expectations)
    } catch {
        _ = error.description
    }

    // As the content of a platform's token file (PlatformTokenFile: a subject token, an
    // assertion): the checks made before it is sent.
    for mustBeJWT in [true, false] {
        let file = PlatformTokenFile(path: "/dev/null", role: .subjectToken, mustBeJWT: mustBeJWT)
        let (checked, problem) = file.check(token, now: now)
        if problem == nil, mustBeJWT, PlatformTokenFile.jwtClaims(checked ?? "") == nil {
            fatalError("a file's token accepted as a JWT does not parse as one")
        }
    }

    // As an access token (with and without expires_in, with and without a Date header).
    guard (try? TokenResponse.validateToken(token, field: "access_token")) != nil else { return 0 }
    for expiresIn in [nil, 3600.0] {
        for serverDate in [nil, now + 2, now + 7200] {
            let response = TokenResponse(
                accessToken: token, tokenType: "Bearer", expiresIn: expiresIn, refreshToken: "r", idToken: token,
                scope: nil)
            let set = TokenSet(response: response, receivedAt: now, serverDate: serverDate, previous: nil)
            TokenSetUse.exercise(set, now: now)
        }
    }
    return 0
}
