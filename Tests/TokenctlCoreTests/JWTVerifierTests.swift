import Testing
@testable import TokenctlCore

/// Known-answer vectors from RFC 7515 appendix A (the payload is the same in A.1–A.3).
private enum RFC7515 {
    static let payload = "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    // A.2: RS256.
    static let rsaModulus = "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"
    static let rs256 = "eyJhbGciOiJSUzI1NiJ9." + payload + ".cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"
    // A.3: ES256 (raw r || s).
    static let ecX = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"
    static let ecY = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
    static let es256 = "eyJhbGciOiJFUzI1NiJ9." + payload + ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"
    // A.1: HS256 — must be refused whatever the keys.
    static let hs256 = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9." + payload + ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

    static var rsaKey: JSONWebKey { JSONWebKey(object: ["kty": .string("RSA"), "n": .string(rsaModulus), "e": .string("AQAB")]) }
    static var ecKey: JSONWebKey { JSONWebKey(object: ["kty": .string("EC"), "crv": .string("P-256"), "x": .string(ecX), "y": .string(ecY)]) }
    static var keys: JSONWebKeySet { JSONWebKeySet(keys: [rsaKey, ecKey]) }
}

@Suite("JWS verification (RFC 7515 appendix A)")
struct JWTVerifierTests {
    @Test("A.2 RS256 verifies")
    func rs256() throws {
        let verified = try JWTVerifier.verify(RFC7515.rs256, keys: RFC7515.keys)
        #expect(verified.algorithm == .rs256)
        #expect(verified.claims["iss"] == .string("joe"))
        #expect(verified.claims["exp"] == .number(1_300_819_380))
    }

    @Test("A.3 ES256 verifies (raw r||s converted to DER)")
    func es256() throws {
        let verified = try JWTVerifier.verify(RFC7515.es256, keys: RFC7515.keys)
        #expect(verified.algorithm == .es256)
        #expect(verified.claims["iss"] == .string("joe"))
    }

    @Test("a changed payload breaks both signatures")
    func tampered() {
        let otherPayload = Base64URL.encode(Array(#"{"iss":"mallory","exp":1300819380}"#.utf8))
        for token in [RFC7515.rs256, RFC7515.es256] {
            let parts = token.split(separator: ".").map(String.init)
            #expect(throws: JWTError.badSignature) { try JWTVerifier.verify(parts[0] + "." + otherPayload + "." + parts[2], keys: RFC7515.keys) }
        }
    }

    @Test("the right signature under the wrong key type finds no key")
    func wrongKeys() {
        #expect(throws: JWTError.noMatchingKey(nil)) { try JWTVerifier.verify(RFC7515.es256, keys: JSONWebKeySet(keys: [RFC7515.rsaKey])) }
        #expect(throws: JWTError.noMatchingKey(nil)) { try JWTVerifier.verify(RFC7515.rs256, keys: JSONWebKeySet(keys: [RFC7515.ecKey])) }
    }

    @Test("alg none and HMAC are rejected")
    func rejectedAlgorithms() {
        #expect(throws: JWTError.unsupportedAlgorithm("HS256")) { try JWTVerifier.verify(RFC7515.hs256, keys: RFC7515.keys) }
        let none = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + RFC7515.payload + "."
        #expect(throws: JWTError.unsupportedAlgorithm("none")) { try JWTVerifier.verify(none, keys: RFC7515.keys) }
    }

    @Test("kid selects the key; an unknown kid matches nothing")
    func keyID() throws {
        var rsa = RFC7515.rsaKey
        rsa.keyID = "k1"
        let header = Base64URL.encode(Array(#"{"alg":"RS256","kid":"k2"}"#.utf8))
        let token = header + "." + RFC7515.payload + ".AAAA"
        #expect(throws: JWTError.noMatchingKey("k2")) { try JWTVerifier.verify(token, keys: JSONWebKeySet(keys: [rsa])) }
    }

    @Test("a truncated ES256 signature is malformed, not a crash")
    func truncatedSignature() {
        let token = String(RFC7515.es256.dropLast(4))
        #expect(throws: JWTError.self) { try JWTVerifier.verify(token, keys: RFC7515.keys) }
    }

    @Test("a JWKS document parses; anything else is rejected")
    func jwksParsing() throws {
        let set = try JSONWebKeySet.parse(Array(#"{"keys":[{"kty":"EC","crv":"P-256","x":"a","y":"b","kid":"1"},{"kty":"RSA","n":"c","e":"AQAB"}]}"#.utf8))
        #expect(set.keys.count == 2)
        #expect(set.keys[0].keyID == "1")
        #expect(throws: JWTError.self) { try JSONWebKeySet.parse(Array("[]".utf8)) }
    }
}

@Suite("ID token claims (OIDC Core §3.1.3.7)")
struct IDTokenValidationTests {
    let now = 1_700_000_000.0

    func claims(_ overrides: [String: JSONValue] = [:], removing removed: [String] = []) -> [String: JSONValue] {
        var claims: [String: JSONValue] = [
            "iss": .string("https://issuer.example"), "aud": .string("cli"), "sub": .string("alice"),
            "exp": .number(now + 300), "iat": .number(now - 5), "nonce": .string("n-1"),
        ]
        for (key, value) in overrides { claims[key] = value }
        for key in removed { claims[key] = nil }
        return claims
    }

    func expectations(nonce: String? = "n-1") -> IDTokenExpectations {
        IDTokenExpectations(issuer: "https://issuer.example", clientID: "cli", nonce: nonce, now: now)
    }

    @Test("a valid token passes")
    func valid() throws {
        try IDTokenValidation.validate(claims(), expectations())
        try IDTokenValidation.validate(claims(["aud": .array([.string("cli"), .string("api")]), "azp": .string("cli")]), expectations())
    }

    @Test("each failed check is named", arguments: [
        ("iss", JSONValue.string("https://evil.example"), "issued by"),
        ("aud", JSONValue.string("other"), "another client"),
        ("exp", JSONValue.number(1_700_000_000 - 3600), "expired"),
        ("iat", JSONValue.number(1_700_000_000 + 3600), "future"),
        ("nonce", JSONValue.string("n-2"), "nonce"),
        ("azp", JSONValue.string("other"), "azp"),
    ])
    func failures(key: String, value: JSONValue, words: String) {
        #expect {
            try IDTokenValidation.validate(claims([key: value]), expectations())
        } throws: { error in
            (error as? JWTError)?.description.contains(words) == true
        }
    }

    @Test("missing claims are rejected; several audiences need azp; a sent nonce must come back")
    func missing() {
        for key in ["iss", "aud", "exp", "iat", "nonce"] {
            #expect(throws: JWTError.self) { try IDTokenValidation.validate(claims(removing: [key]), expectations()) }
        }
        #expect(throws: JWTError.self) { try IDTokenValidation.validate(claims(["aud": .array([.string("cli"), .string("api")])]), expectations()) }
        // No nonce sent (device flow): none required.
        #expect(throws: Never.self) { try IDTokenValidation.validate(claims(removing: ["nonce"]), expectations(nonce: nil)) }
    }
}

@Suite("PKCE, random values, QR codes")
struct PKCETests {
    @Test("RFC 7636 appendix B: the S256 challenge of the example verifier")
    func appendixB() {
        let pkce = PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(pkce.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(pkce.method == "S256")
    }

    @Test("fresh verifiers are 43 base64url characters and differ")
    func fresh() {
        let a = PKCE(), b = PKCE()
        #expect(a.verifier.count == 43)
        #expect(a.verifier != b.verifier)
        #expect(a.verifier.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
    }

    @Test("a QR code is square and renders two module rows per line")
    func qrCode() throws {
        let code = try #require(QRCode("https://issuer.example/device?user_code=WDJB-MJHT"))
        #expect(code.modules.count >= 21)
        #expect(code.modules.allSatisfy { $0.count == code.modules.count })
        let lines = code.terminalLines(margin: 2)
        #expect(lines.count == (code.modules.count + 4 + 1) / 2)
    }

    @Test("form decoding undoes form encoding")
    func formRoundTrip() {
        let fields = [("code", "a b/c+d"), ("state", "x&y=z"), ("empty", "")]
        let decoded = FormEncoding.decode(FormEncoding.encode(fields))
        #expect(decoded == ["code": "a b/c+d", "state": "x&y=z", "empty": ""])
    }
}
