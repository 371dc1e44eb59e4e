import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

private func parse(_ body: String) throws(TokenResponseError) -> TokenResponse {
    try TokenResponse.parse(bytes(body))
}

private func parseError(_ body: String) -> TokenResponseError? {
    do {
        _ = try parse(body)
        return nil
    } catch {
        return error
    }
}

@Suite("TokenResponse.parse")
struct TokenResponseTests {
    @Test("a complete response")
    func valid() throws {
        let response = try parse(
            #"""
            {"access_token": "eyJ.abc.def", "token_type": "Bearer", "expires_in": 3600,
             "refresh_token": "r-1", "id_token": "id.tok.en", "scope": "openid offline_access", "extra": [1, {"x": null}]}
            """#)
        #expect(
            response
                == TokenResponse(
                    accessToken: "eyJ.abc.def", tokenType: "Bearer", expiresIn: 3600, refreshToken: "r-1",
                    idToken: "id.tok.en", scope: "openid offline_access"))
    }

    @Test("token_type is case-insensitive and absent means Bearer")
    func tokenTypeCase() throws {
        #expect(try parse(#"{"access_token": "a", "token_type": "bearer"}"#).tokenType == "Bearer")
        #expect(try parse(#"{"access_token": "a", "token_type": "BEARER"}"#).tokenType == "Bearer")
        #expect(try parse(#"{"access_token": "a"}"#).tokenType == "Bearer")
    }

    @Test("expires_in as a quoted number")
    func expiresInString() throws {
        #expect(try parse(#"{"access_token": "a", "expires_in": "3600"}"#).expiresIn == 3600)
        #expect(try parse(#"{"access_token": "a", "expires_in": "90.5"}"#).expiresIn == 90.5)
    }

    @Test("expires_in absent or null means unknown")
    func expiresInAbsent() throws {
        #expect(try parse(#"{"access_token": "a"}"#).expiresIn == nil)
        #expect(try parse(#"{"access_token": "a", "expires_in": null}"#).expiresIn == nil)
    }

    @Test("small expires_in values, including 0 and 1, are numbers")
    func expiresInSmall() throws {
        #expect(try parse(#"{"access_token": "a", "expires_in": 0}"#).expiresIn == 0)
        #expect(try parse(#"{"access_token": "a", "expires_in": 1}"#).expiresIn == 1)
        #expect(try parse(#"{"access_token": "a", "expires_in": 30}"#).expiresIn == 30)
    }

    @Test(
        "invalid expires_in values",
        arguments: [
            #""expires_in": "soon""#, #""expires_in": """#, #""expires_in": true"#,
            #""expires_in": [3600]"#, #""expires_in": {"s": 1}"#, #""expires_in": "nan""#,
        ])
    func invalidExpiresIn(field: String) {
        #expect(parseError(#"{"access_token": "a", \#(field)}"#) == .invalidField("expires_in"))
    }

    @Test("absurd expires_in values are clamped, not refused: the response has already rotated the refresh token")
    func expiresInClamped() throws {
        #expect(try parse(#"{"access_token": "a", "expires_in": 315359999}"#).expiresIn == 315_359_999)
        #expect(
            try parse(#"{"access_token": "a", "expires_in": 315360000}"#).expiresIn == TokenResponse.maximumLifetime)
        #expect(try parse(#"{"access_token": "a", "expires_in": 1e300}"#).expiresIn == TokenResponse.maximumLifetime)
        #expect(try parse(#"{"access_token": "a", "expires_in": -1}"#).expiresIn == 0)
        #expect(try parse(#"{"access_token": "a", "expires_in": "-5"}"#).expiresIn == 0)
    }

    @Test("a JWT exp of ±2^63 with no expires_in is clamped where it arrives: nothing later traps")
    func hugeJWTExpiry() {
        for exp in ["9223372036854775808", "-9223372036854775808", "1e308"] {
            let jwt = unsignedJWT(#"{"exp":"# + exp + "}")
            let response = TokenResponse(
                accessToken: jwt, tokenType: "Bearer", expiresIn: nil, refreshToken: "r", idToken: nil, scope: nil)
            let set = TokenSet(response: response, receivedAt: 1_700_000_000, serverDate: nil, previous: nil)
            let expiry = set.expiresAt ?? 0
            #expect(expiry >= 0 && expiry <= 1_700_000_000 + TokenResponse.maximumLifetime)
            _ = Timestamp.iso8601(expiry)
            _ = set.isFresh(at: 1_700_000_000, minimumTimeToLive: 60)
        }
    }

    @Test("refresh_token absent, null or empty means none")
    func refreshTokenAbsent() throws {
        #expect(try parse(#"{"access_token": "a"}"#).refreshToken == nil)
        #expect(try parse(#"{"access_token": "a", "refresh_token": null}"#).refreshToken == nil)
        #expect(try parse(#"{"access_token": "a", "refresh_token": ""}"#).refreshToken == nil)
    }

    @Test(
        "missing or non-string access_token",
        arguments: [
            #"{}"#, #"{"token_type": "Bearer"}"#, #"{"access_token": null}"#, #"{"access_token": 42}"#,
            #"{"access_token": ["a"]}"#, #"{"error": "invalid_grant"}"#,
        ])
    func missingAccessToken(body: String) {
        #expect(parseError(body) == .missingAccessToken)
    }

    @Test("empty access_token")
    func emptyToken() {
        #expect(parseError(#"{"access_token": ""}"#) == .emptyToken("access_token"))
    }

    @Test(
        "bodies that are not a JSON object",
        arguments: [
            "", "not json", "<html><body>Login</body></html>", "<!DOCTYPE html><html></html>", "[]",
            #"[{"access_token": "a"}]"#, #""access_token""#, "42", "null", "{", #"{"access_token": "a""#,
        ])
    func notJSONObject(body: String) {
        #expect(parseError(body) == .notJSONObject)
    }

    @Test(
        "tokens with whitespace, control or non-ASCII characters are rejected",
        arguments: [
            "a b", "a\\nb", "a\\r\\nInjected: header", "a\\tb", "a\\u0000b", "a\\u007fb", " a", "a ", "caf\\u00e9",
        ])
    func badAccessTokenCharacters(token: String) {
        #expect(parseError(#"{"access_token": "\#(token)"}"#) == .invalidTokenCharacters("access_token"))
    }

    @Test("refresh and ID tokens are checked the same way")
    func otherTokens() {
        #expect(
            parseError(#"{"access_token": "a", "refresh_token": "r r"}"#) == .invalidTokenCharacters("refresh_token"))
        #expect(parseError(#"{"access_token": "a", "id_token": "i\nd"}"#) == .invalidTokenCharacters("id_token"))
        #expect(parseError(#"{"access_token": "a", "refresh_token": 7}"#) == .invalidField("refresh_token"))
        #expect(parseError(#"{"access_token": "a", "scope": false}"#) == .invalidField("scope"))
    }

    @Test("an oversized token is rejected")
    func oversizedToken() {
        let token = String(repeating: "x", count: 64 * 1024 + 1)
        #expect(parseError(#"{"access_token": "\#(token)"}"#) == .invalidField("access_token"))
    }

    @Test("token types other than Bearer and DPoP are rejected", arguments: ["mac", "N_A", "", "DPoP2"])
    func unsupportedTokenType(type: String) {
        #expect(parseError(#"{"access_token": "a", "token_type": "\#(type)"}"#) == .unsupportedTokenType(type))
    }

    @Test(
        "Bearer and DPoP token types are read case-insensitively (RFC 6749 §5.1) and normalised",
        arguments: [
            ("bearer", "Bearer"), ("BEARER", "Bearer"), ("DPoP", "DPoP"), ("dpop", "DPoP"), ("DPOP", "DPoP"),
        ])
    func knownTokenTypes(given: String, normalised: String) throws {
        let response = try TokenResponse.parse(Array(#"{"access_token": "a", "token_type": "\#(given)"}"#.utf8))
        #expect(response.tokenType == normalised)
    }

    @Test("a non-string token_type is invalid")
    func nonStringTokenType() {
        #expect(parseError(#"{"access_token": "a", "token_type": 1}"#) == .invalidField("token_type"))
    }

    @Test("error descriptions name the field, never the token")
    func descriptions() {
        #expect(TokenResponseError.invalidTokenCharacters("refresh_token").description.contains("refresh_token"))
        #expect(TokenResponseError.unsupportedTokenType("mac").description.contains("'mac'"))
    }
}

@Suite("FormEncoding")
struct FormEncodingTests {
    @Test(
        "unreserved characters pass, space becomes '+', everything else is percent-encoded",
        arguments: [
            ("abcXYZ019-._~", "abcXYZ019-._~"),
            ("a b", "a+b"),
            ("a+b", "a%2Bb"),
            ("a&b=c", "a%26b%3Dc"),
            ("https://x/y?z", "https%3A%2F%2Fx%2Fy%3Fz"),
            ("é", "%C3%A9"),
            ("%", "%25"),
            ("\n", "%0A"),
            ("", ""),
        ])
    func escape(input: String, expected: String) {
        #expect(FormEncoding.escape(input) == expected)
    }

    @Test("fields are joined in order with '&'")
    func encode() {
        #expect(
            FormEncoding.encode([
                ("grant_type", "refresh_token"), ("refresh_token", "a/b+c"), ("scope", "openid profile"),
            ])
                == "grant_type=refresh_token&refresh_token=a%2Fb%2Bc&scope=openid+profile")
        #expect(FormEncoding.encode([]) == "")
    }

    @Test("a form request is a POST with the form content type")
    func formRequest() {
        let request = HTTPRequest.form("https://a.example/token", [("a", "1")], headers: [("X-Test", "y")])
        #expect(request.method == .post)
        #expect(request.url == "https://a.example/token")
        #expect(request.body == bytes("a=1"))
        #expect(
            request.headers.contains { $0.name == "Content-Type" && $0.value == "application/x-www-form-urlencoded" })
        #expect(request.headers.contains { $0.name == "Accept" && $0.value == "application/json" })
        #expect(request.headers.contains { $0.name == "X-Test" && $0.value == "y" })
    }

    @Test("HTTPResponse header lookup is case-insensitive on the asked name")
    func headerLookup() {
        let response = HTTPResponse(
            status: 200, headers: ["retry-after": "5", "date": "Sun, 06 Nov 1994 08:49:37 GMT"])
        #expect(response.header("Retry-After") == "5")
        #expect(response.serverDate == 784_111_777)
        #expect(HTTPResponse(status: 200).serverDate == nil)
    }
}
