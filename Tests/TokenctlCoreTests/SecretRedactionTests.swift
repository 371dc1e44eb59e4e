import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

/// Server texts never carry a secret of the exchange into a message: the whole secret, its
/// encodings, and any run of 16 bytes or more of it become `[redacted]`.
@Suite("SecretRedaction")
struct SecretRedactionTests {
    let refreshToken = "rt-7Hq2/Zk+9w==Xy81aaQeLm3vTn0p"
    let clientSecret = "s3cr3t-of-the-client-0123456789"

    @Test("the whole secret, its form and percent encodings, and runs of 16 bytes of it are redacted")
    func forms() {
        let redaction = SecretRedaction([refreshToken])
        #expect(redaction.scrub("token \(refreshToken) is revoked") == "token [redacted] is revoked")
        let encoded = FormEncoding.escape(refreshToken)
        #expect(redaction.scrub("refresh_token=\(encoded)&x=1") == "refresh_token=[redacted]&x=1")
        #expect(redaction.scrub(SecretRedaction.percentEncodedLowercase(refreshToken)) == "[redacted]")
        // Cut short (a text cut at 200 characters), or a part quoted.
        let part = String(refreshToken.dropFirst(5).prefix(16))
        #expect(redaction.scrub("… \(part)") == "… [redacted]")
        // Shorter runs are ordinary text.
        #expect(redaction.scrub("rt-7Hq2 expired") == "rt-7Hq2 expired")
        #expect(redaction.scrub("nothing secret here") == "nothing secret here")
    }

    @Test("a request's secrets: the refresh token, the client secret in the form and in HTTP Basic")
    func request() throws {
        let post = try ClientCredentials(clientID: "cli", secret: clientSecret, method: .clientSecretPost)
            .formRequest(
                "https://as.example/token", [("grant_type", "refresh_token"), ("refresh_token", refreshToken)])
        let redaction = SecretRedaction(request: post)
        let echoed = "bad request: " + String(decoding: post.body ?? [], as: UTF8.self)
        let scrubbed = redaction.scrub(echoed)
        #expect(
            !scrubbed.contains(FormEncoding.escape(refreshToken)) && !scrubbed.contains(clientSecret), "\(scrubbed)")
        #expect(scrubbed.contains("grant_type=refresh_token"))

        let basic = try ClientCredentials(clientID: "cli", secret: clientSecret, method: .clientSecretBasic)
            .formRequest(
                "https://as.example/token", [("grant_type", "refresh_token"), ("refresh_token", refreshToken)])
        #expect(SecretRedaction(request: basic).scrub("client \(clientSecret) unknown") == "client [redacted] unknown")
    }

    @Test("classify scrubs error_description, the error code and the content type before cutting them short")
    func classify() {
        let long = String(repeating: "x", count: 186)
        let body = #"{"error":"invalid_grant","error_description":"\#(long) token \#(refreshToken) unknown"}"#
        let outcome = RefreshOutcome.classify(
            .success(.json(400, body)), now: 0, redaction: SecretRedaction([refreshToken]))
        guard case .grantEnded(let reason) = outcome else {
            Issue.record("expected terminal: \(outcome)")
            return
        }
        // Cut at 200 characters, the token would leave a 7-character head; redacted first, none.
        #expect(!reason.description.contains("rt-7"), "\(reason)")
        let unscrubbed = RefreshOutcome.classify(.success(.json(400, body)), now: 0)
        #expect("\(unscrubbed)".contains("rt-7"), "without a redaction the text is as it came")
    }
}
