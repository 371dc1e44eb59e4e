import Testing

@testable import TokenctlCore

/// Known-answer vectors from RFC 7515 appendix A (the payload is the same in A.1–A.3).
private enum RFC7515 {
    static let payload =
        "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    // A.2: RS256.
    static let rsaModulus =
        "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"
    static let rs256 =
        "eyJhbGciOiJSUzI1NiJ9." + payload
        + ".cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"
    // A.3: ES256 (raw r || s).
    static let ecX = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"
    static let ecY = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
    static let es256 =
        "eyJhbGciOiJFUzI1NiJ9." + payload
        + ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"
    // A.1: HS256 — must be refused whatever the keys.
    static let hs256 =
        "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9." + payload + ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

    static var rsaKey: JSONWebKey {
        JSONWebKey(object: ["kty": .string("RSA"), "n": .string(rsaModulus), "e": .string("AQAB")])
    }
    static var ecKey: JSONWebKey {
        JSONWebKey(object: ["kty": .string("EC"), "crv": .string("P-256"), "x": .string(ecX), "y": .string(ecY)])
    }
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
            #expect(throws: JWTError.badSignature) {
                try JWTVerifier.verify(parts[0] + "." + otherPayload + "." + parts[2], keys: RFC7515.keys)
            }
        }
    }

    @Test("the right signature under the wrong key type finds no key")
    func wrongKeys() {
        #expect(throws: JWTError.noMatchingKey(nil)) {
            try JWTVerifier.verify(RFC7515.es256, keys: JSONWebKeySet(keys: [RFC7515.rsaKey]))
        }
        #expect(throws: JWTError.noMatchingKey(nil)) {
            try JWTVerifier.verify(RFC7515.rs256, keys: JSONWebKeySet(keys: [RFC7515.ecKey]))
        }
    }

    @Test("alg none and HMAC are rejected")
    func rejectedAlgorithms() {
        #expect(throws: JWTError.unsupportedAlgorithm("HS256")) {
            try JWTVerifier.verify(RFC7515.hs256, keys: RFC7515.keys)
        }
        let none = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + RFC7515.payload + "."
        #expect(throws: JWTError.unsupportedAlgorithm("none")) { try JWTVerifier.verify(none, keys: RFC7515.keys) }
    }

    @Test("kid selects the key; an unknown kid matches nothing")
    func keyID() throws {
        var rsa = RFC7515.rsaKey
        rsa.keyID = "k1"
        let header = Base64URL.encode(Array(#"{"alg":"RS256","kid":"k2"}"#.utf8))
        let token = header + "." + RFC7515.payload + ".AAAA"
        #expect(throws: JWTError.noMatchingKey("k2")) {
            try JWTVerifier.verify(token, keys: JSONWebKeySet(keys: [rsa]))
        }
    }

    @Test("a truncated ES256 signature is malformed, not a crash")
    func truncatedSignature() {
        let token = String(RFC7515.es256.dropLast(4))
        #expect(throws: JWTError.self) { try JWTVerifier.verify(token, keys: RFC7515.keys) }
    }

    @Test("a JWKS document parses; anything else is rejected")
    func jwksParsing() throws {
        let set = try JSONWebKeySet.parse(
            Array(
                #"{"keys":[{"kty":"EC","crv":"P-256","x":"a","y":"b","kid":"1"},{"kty":"RSA","n":"c","e":"AQAB"}]}"#
                    .utf8))
        #expect(set.keys.count == 2)
        #expect(set.keys[0].keyID == "1")
        #expect(throws: JWTError.self) { try JSONWebKeySet.parse(Array("[]".utf8)) }
    }
}

/// RFC 8037 appendix A.4: the Ed25519 JWS example (key of A.2, RFC 8032 §7.1 test 1).
private enum RFC8037 {
    static let x = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
    static let token =
        "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
    static var key: JSONWebKey {
        JSONWebKey(object: ["kty": .string("OKP"), "crv": .string("Ed25519"), "x": .string(x)])
    }
    /// A.4's payload is not JSON, so also a JWT signed (deterministically) with the A.1 private key by
    /// `openssl pkeyutl -sign -rawin`: header {"alg":"EdDSA","kid":"ed"}, payload {"iss":"joe","exp":1300819380}.
    static let jwt =
        "eyJhbGciOiJFZERTQSIsImtpZCI6ImVkIn0.eyJpc3MiOiJqb2UiLCJleHAiOjEzMDA4MTkzODB9.FqQ8dYbD6z1GN5258CqWN6CxCiDzS2UDN3DpB6Beh0owxXIZwhfNiVR6s765b3LJLfo2yGYmyzwFlDYLWy9EBA"
}

/// A PS256 vector made once with `openssl dgst -sha256 -sign key.pem -sigopt rsa_padding_mode:pss
/// -sigopt rsa_pss_saltlen:32 -sigopt rsa_mgf1_md:sha256` over the signing input (2048-bit key, e = 65537).
private enum PS256Vector {
    static let modulus =
        "6A5ZPoMIyeTWW0sjN_pfIMERW1d1FPnXIl6W_Wr0s-airzYTxeqjGKBonA3CXISfnZkZ054EGcz4j6MGBilLCI4XLyBxUePEW0QYFwfO4XKwjxnZGmfq8orgzwjPLYsLPxi7mLctuciOz9vQSe9WDF00sQYoZEhpUHf4a6snx6Wz_5GabT3L2Y_asluHBsT90ZsXyNJVjKVKrmySwtZ00Oc4QAC7HHjjge8bqon3tDOZvMr_YLTdGebOEMdrCe0bPFUp0wTBabE8hqm0T3UwweLZlIW7gpYcx38IPUEN5EIHxqZsrcj25-JoZ9fDZhT0QUMkB_3YZdj9s4qqfoEgiw"
    // Header {"alg":"PS256","kid":"ps"}, payload {"iss":"joe","exp":1300819380}.
    static let token =
        "eyJhbGciOiJQUzI1NiIsImtpZCI6InBzIn0.eyJpc3MiOiJqb2UiLCJleHAiOjEzMDA4MTkzODB9.0-uphfNnxtSWgCd-xFNnQsYTeu1XkQpsKcpKywgDExF4m0z_9VtDNb4voBaopZACUH4R9z8vEicLIvPe1OGws0sHOjzSIzHv6BvlwnFK1nFG9HhV4xHw9dl1MrVU06nevO_ORmmW0kM9ZZMyGetnLBgTmtg-6uegnWhjfLMxyM3HpgRjzh2ERXX4RubOiDwHz64w0oCA4gwVE4GvufvjoHBFsPWZPccGyea4PM5qhS1wvm7ZIT9e5NBkk8OYAQQRYXl7GeM34TosdRUY1UxHExRJJYdPRB0cRuvNkuAgkXcHOqEepyogRP91tKc_mqWSzBZBi2k3V9EPDeryKAmclg"
    static var key: JSONWebKey {
        JSONWebKey(object: ["kty": .string("RSA"), "kid": .string("ps"), "n": .string(modulus), "e": .string("AQAB")])
    }
}

@Suite("JWS verification: PS256 and EdDSA (RFC 8037 A.4); kid/alg mismatches")
struct MoreAlgorithmTests {
    @Test("RFC 8037 A.4 Ed25519 verifies; a changed payload does not")
    func ed25519() throws {
        let parts = RFC8037.token.split(separator: ".").map(String.init)
        let key = try RFC8037.key.publicKey()
        let signature = try #require(UnverifiedJWT.base64URLDecode(parts[2]))
        #expect(OpenSSL.verifyEd25519(key: key, message: Array((parts[0] + "." + parts[1]).utf8), signature: signature))
        let other = Base64URL.encode(Array("Example of Ed25519 signinG".utf8))
        #expect(!OpenSSL.verifyEd25519(key: key, message: Array((parts[0] + "." + other).utf8), signature: signature))

        var keyWithID = RFC8037.key
        keyWithID.keyID = "ed"
        let verified = try JWTVerifier.verify(RFC8037.jwt, keys: JSONWebKeySet(keys: [keyWithID]))
        #expect(verified.algorithm == .edDSA && verified.claims["iss"] == .string("joe"))
        let jwtParts = RFC8037.jwt.split(separator: ".").map(String.init)
        let otherPayload = Base64URL.encode(Array(#"{"iss":"eve","exp":1300819380}"#.utf8))
        #expect(throws: JWTError.badSignature) {
            try JWTVerifier.verify(
                jwtParts[0] + "." + otherPayload + "." + jwtParts[2], keys: JSONWebKeySet(keys: [keyWithID]))
        }
    }

    @Test("PS256 (salt 32, MGF1-SHA-256) verifies; tampered or as RS256 it does not")
    func ps256() throws {
        let keys = JSONWebKeySet(keys: [PS256Vector.key])
        let verified = try JWTVerifier.verify(PS256Vector.token, keys: keys)
        #expect(verified.algorithm == .ps256 && verified.keyID == "ps")
        #expect(verified.claims["iss"] == .string("joe"))
        let parts = PS256Vector.token.split(separator: ".").map(String.init)
        let other = Base64URL.encode(Array(#"{"iss":"eve","exp":1300819380}"#.utf8))
        #expect(throws: JWTError.badSignature) {
            try JWTVerifier.verify(parts[0] + "." + other + "." + parts[2], keys: keys)
        }
        // The same signature claimed as PKCS#1 v1.5 must fail.
        let rs = Base64URL.encode(Array(#"{"alg":"RS256","kid":"ps"}"#.utf8))
        #expect(throws: JWTError.badSignature) {
            try JWTVerifier.verify(rs + "." + parts[1] + "." + parts[2], keys: keys)
        }
    }

    @Test("a kid whose key has another alg or key type is a mismatch, not an unknown key")
    func mismatch() {
        var rsa = PS256Vector.key
        rsa.algorithm = "RS256"
        #expect(throws: JWTError.keyMismatch(kid: "ps", alg: "PS256")) {
            try JWTVerifier.verify(PS256Vector.token, keys: JSONWebKeySet(keys: [rsa]))
        }
        var ed = RFC8037.key
        ed.keyID = "ps"
        #expect(throws: JWTError.keyMismatch(kid: "ps", alg: "PS256")) {
            try JWTVerifier.verify(PS256Vector.token, keys: JSONWebKeySet(keys: [ed]))
        }
        // EdDSA under an RSA key with that kid.
        let header = Base64URL.encode(Array(#"{"alg":"EdDSA","kid":"ps"}"#.utf8))
        let parts = RFC8037.jwt.split(separator: ".").map(String.init)
        #expect(throws: JWTError.keyMismatch(kid: "ps", alg: "EdDSA")) {
            try JWTVerifier.verify(
                header + "." + parts[1] + "." + parts[2], keys: JSONWebKeySet(keys: [PS256Vector.key]))
        }
    }

    @Test("HS384/HS512 and None spellings are rejected")
    func otherForbidden() {
        for alg in ["HS384", "HS512", "None", "NONE"] {
            let token = Base64URL.encode(Array(#"{"alg":"\#(alg)"}"#.utf8)) + ".e30.AAAA"
            #expect(throws: JWTError.unsupportedAlgorithm(alg)) {
                try JWTVerifier.verify(token, keys: JSONWebKeySet(keys: [RFC8037.key, PS256Vector.key]))
            }
        }
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
        try IDTokenValidation.validate(
            claims(["aud": .array([.string("cli"), .string("api")]), "azp": .string("cli")]), expectations())
    }

    @Test(
        "each failed check is named",
        arguments: [
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
        #expect(throws: JWTError.self) {
            try IDTokenValidation.validate(claims(["aud": .array([.string("cli"), .string("api")])]), expectations())
        }
        // No nonce sent (device flow): none required.
        #expect(throws: Never.self) {
            try IDTokenValidation.validate(claims(removing: ["nonce"]), expectations(nonce: nil))
        }
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
        let a = PKCE()
        let b = PKCE()
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
