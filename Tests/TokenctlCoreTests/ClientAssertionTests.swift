import Foundation
import Testing
import TokenctlEssentials

@testable import TokenctlCore

/// A signer that only records what it was asked to sign (a fake: no key; the real keys are
/// ClientKeyTests'), for the claims and the choice of algorithm.
private struct FakeRecordingSigner: ClientAssertionSigner {
    var keyID: String?
    var algorithms: [String]
    func signature(of signingInput: [UInt8], algorithm: String) throws(TokenctlError) -> [UInt8] {
        Array(algorithm.utf8)
    }
}

private func decodedPart(_ assertion: String, _ index: Int) -> [String: JSONValue]? {
    let parts = assertion.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    guard parts.count == 3, let bytes = UnverifiedJWT.base64URLDecode(parts[index]) else { return nil }
    return JSONValue.parseObject(bytes)
}

@Suite("Client assertions (RFC 7523) and client_secret_jwt's HMAC")
struct ClientAssertionTests {
    @Test("HMAC-SHA256 matches RFC 4231 test case 2")
    func hmacKnownAnswer() throws {
        let mac = try OpenSSL.hmacSHA256(
            key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        #expect(
            mac.map { String(format: "%02x", $0) }.joined()
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test("HS256 of RFC 7515 appendix A.1 gives its signature")
    func hs256KnownAnswer() throws {
        // A.1's key is the JWK's `k`; its signing input is the first two parts of the example.
        let key = try #require(
            UnverifiedJWT.base64URLDecode(
                "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"))
        let input =
            "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
        let mac = try OpenSSL.hmacSHA256(key: key, message: Array(input.utf8))
        #expect(Base64URL.encode(mac) == "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
    }

    @Test("client_secret_jwt: HS256 with the secret, no kid, the claims of RFC 7523 §3")
    func clientSecretJWT() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let signer = ClientSecretSigner(secret: "s3cr3t-of-the-client")
        let assertion = try ClientAssertion.make(
            clientID: "machine-1", audience: "https://idp.example/token", signer: signer, serverAlgorithms: nil,
            now: now)
        let header = try #require(decodedPart(assertion, 0))
        let claims = try #require(decodedPart(assertion, 1))
        #expect(header["alg"] == .string("HS256"))
        #expect(header["kid"] == nil)
        #expect(header["typ"] == .string("JWT"))
        #expect(claims["iss"] == .string("machine-1"))
        #expect(claims["sub"] == .string("machine-1"))
        #expect(claims["aud"] == .string("https://idp.example/token"))
        #expect(claims["iat"] == .number(1_800_000_000))
        #expect(claims["nbf"] == .number(1_800_000_000))
        #expect(claims["exp"] == .number(1_800_000_300))
        let jti = try #require(claims["jti"]?.stringValue)
        #expect(jti.count >= 32)
        // The signature is HMAC-SHA256 of the signing input with the secret.
        let parts = assertion.split(separator: ".").map(String.init)
        let expected = try OpenSSL.hmacSHA256(
            key: Array("s3cr3t-of-the-client".utf8), message: Array((parts[0] + "." + parts[1]).utf8))
        #expect(parts[2] == Base64URL.encode(expected))
        // Never the secret in the signer's description.
        #expect(!String(describing: signer).contains("s3cr3t"))
    }

    @Test("every assertion has a fresh jti")
    func freshJTI() throws {
        let signer = ClientSecretSigner(secret: "secret")
        let now = Date()
        let ids = try (0..<20).map { _ in
            try decodedPart(
                ClientAssertion.make(
                    clientID: "c", audience: "a", signer: signer, serverAlgorithms: nil, now: now), 1)?["jti"]
        }
        #expect(Set(ids.compactMap { $0?.stringValue }).count == 20)
    }

    @Test("the lifetime is at most 300 seconds", arguments: [(60.0, 60), (300.0, 300), (3600.0, 300)])
    func lifetime(asked: Double, expected: Int) throws {
        let now = Date(timeIntervalSince1970: 1_000)
        let assertion = try ClientAssertion.make(
            clientID: "c", audience: "a", signer: ClientSecretSigner(secret: "secret"), serverAlgorithms: nil,
            now: now, lifetime: asked)
        let claims = try #require(decodedPart(assertion, 1))
        #expect(claims["exp"] == .number(Double(1_000 + expected)))
    }

    @Test("kid is the signer's, alg the first the server allows")
    func algorithmChoice() throws {
        let signer = FakeRecordingSigner(keyID: "thumb", algorithms: ["RS256", "PS256"])
        let assertion = try ClientAssertion.make(
            clientID: "c", audience: "a", signer: signer, serverAlgorithms: ["PS256", "ES256"], now: Date())
        let header = try #require(decodedPart(assertion, 0))
        #expect(header["alg"] == .string("PS256"))
        #expect(header["kid"] == .string("thumb"))
        #expect(assertion.split(separator: ".").last.map(String.init) == Base64URL.encode(Array("PS256".utf8)))
        let unadvertised = try ClientAssertion.make(
            clientID: "c", audience: "a", signer: signer, serverAlgorithms: nil, now: Date())
        #expect(decodedPart(unadvertised, 0)?["alg"] == .string("RS256"))
    }

    @Test("no algorithm in common, or one the key cannot make, is a configuration error (78)")
    func refusal() {
        let signer = FakeRecordingSigner(keyID: "thumb", algorithms: ["ES256"])
        #expect {
            try ClientAssertion.make(
                clientID: "c", audience: "a", signer: signer, serverAlgorithms: ["RS256", "HS256"], now: Date())
        } throws: { ($0 as? TokenctlError)?.exitStatus == .configuration }
        #expect {
            try ClientAssertion.make(
                clientID: "c", audience: "a", signer: signer, serverAlgorithms: nil, algorithm: "RS256", now: Date())
        } throws: { ($0 as? TokenctlError)?.exitStatus == .configuration }
        #expect {
            try ClientAssertion.make(
                clientID: "c", audience: "a", signer: ClientSecretSigner(secret: "s"), serverAlgorithms: ["ES256"],
                now: Date())
        } throws: { ($0 as? TokenctlError)?.exitStatus == .configuration }
    }
}
