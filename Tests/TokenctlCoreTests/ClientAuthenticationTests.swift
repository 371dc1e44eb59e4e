import Foundation
import Testing
import TokenctlTestSupport

@testable import TokenctlCore

/// The client authentication methods at the token endpoint, by their registered names:
/// assertions made fresh for every request, on the server's clock; the method a machine
/// chooses; what a client credentials answer leads to.
@Suite("Client authentication methods")
struct ClientAuthenticationTests {
    static let endpoint = "https://issuer.example/token"

    func jwtCredentials(clock: VirtualClock, offset: Double? = nil) -> ClientCredentials {
        var credentials = ClientCredentials(clientID: "m1", secret: "hs-secret", method: .clientSecretJWT)
        credentials.assertion = ClientCredentials.AssertionSigning(
            signer: ClientSecretSigner(secret: "hs-secret"), audience: Self.endpoint, serverAlgorithms: nil,
            serverClockOffset: offset, clock: clock.clock)
        return credentials
    }

    func assertionClaims(_ request: HTTPRequest) throws -> [String: JSONValue] {
        let fields = formFields(request)
        #expect(fields["client_assertion_type"] == "urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer")
        #expect(fields["client_id"] == "m1")
        let assertion = try #require(fields["client_assertion"]?.removingPercentEncoding)
        return try #require(UnverifiedJWT.claims(of: assertion))
    }

    @Test("client_secret_jwt: an HS256 assertion (iss = sub = the client, aud), no secret sent, a new jti each time")
    func secretAssertion() throws {
        let clock = VirtualClock()
        let credentials = jwtCredentials(clock: clock)
        let first = try credentials.formRequest(Self.endpoint, [("grant_type", "client_credentials")])
        let second = try credentials.formRequest(Self.endpoint, [("grant_type", "client_credentials")])
        let claims = try assertionClaims(first)
        #expect(claims["iss"]?.stringValue == "m1" && claims["sub"]?.stringValue == "m1")
        #expect(claims["aud"]?.stringValue == Self.endpoint)
        #expect(claims["iat"] == .number(clock.now.rounded(.down)))
        #expect(claims["exp"] == .number(clock.now.rounded(.down) + 300))
        #expect(formFields(first)["client_secret"] == nil)
        #expect(first.headers.allSatisfy { $0.name != "Authorization" })
        #expect(!String(decoding: first.body ?? [], as: UTF8.self).contains("hs-secret"))
        #expect(try assertionClaims(second)["jti"] != claims["jti"])
    }

    @Test("the assertion's times are on the server's clock when the measured offset is trusted")
    func clockSkew() throws {
        let clock = VirtualClock()
        let ahead = try assertionClaims(
            try jwtCredentials(clock: clock, offset: 120).formRequest(Self.endpoint, []))
        #expect(ahead["iat"] == .number((clock.now + 120).rounded(.down)))
        #expect(ahead["nbf"] == ahead["iat"])
        // Beyond ClockSkew.trustedBound the offset cannot be placed: the local clock is used.
        let untrusted = try assertionClaims(
            try jwtCredentials(clock: clock, offset: 5000).formRequest(Self.endpoint, []))
        #expect(untrusted["iat"] == .number(clock.now.rounded(.down)))
    }

    @Test("a retried request carries a new assertion: none is ever sent twice")
    func retryMakesNewAssertion() async throws {
        let clock = VirtualClock()
        let http = FakeHTTPClient(script: [.success(.text(503, "")), .success(.tokens())])
        let client = TokenEndpointClient(
            http: http, clock: clock.clock, retry: RetryPolicy(timeout: 30, attemptTimeout: 15, random: { 0.5 }))
        let credentials = jwtCredentials(clock: clock)
        let (outcome, _) = try await client.exchange(building: { () throws(TokenctlError) in
            try credentials.formRequest(Self.endpoint, [("grant_type", "client_credentials")])
        })
        guard case .success = outcome else {
            Issue.record("expected success, got \(outcome)")
            return
        }
        #expect(http.requestCount == 2)
        let jtis = try http.requests.map { try assertionClaims($0)["jti"] }
        #expect(jtis[0] != jtis[1])
    }

    static let certificate = ClientCertificate(
        certificatePEM: Array("-----BEGIN CERTIFICATE-----\n".utf8), privateKey: .pem(Array("key".utf8)),
        thumbprint: "presented-x5t", subject: "CN=m1", notAfter: Date(timeIntervalSince1970: 1_800_000_000))

    /// An unsigned JWT access token with `claims` (the binding check reads, never verifies).
    static func accessToken(_ claims: String) -> String {
        "eyJhbGciOiJub25lIn0." + Base64URL.encode(Array(claims.utf8)) + ".c2ln"
    }

    @Test(
        "the TLS methods: the certificate goes on the request (libcurl presents it), client_id in the form, no secret")
    func certificateOnRequest() throws {
        var credentials = ClientCredentials(clientID: "m1", method: .tlsClientAuth)
        credentials.certificate = Self.certificate
        let request = try credentials.formRequest(Self.endpoint, [("grant_type", "client_credentials")])
        #expect(request.clientCertificate == Self.certificate)
        #expect(formFields(request) == ["grant_type": "client_credentials", "client_id": "m1"])
        #expect(
            try ClientCredentials(clientID: "m1", secret: "s").formRequest(Self.endpoint, []).clientCertificate == nil)
    }

    @Test("a certificate-bound token (cnf x5t#S256) must name the presented certificate; a mismatch names both")
    func binding() {
        func response(_ claims: String) -> TokenResponse {
            TokenResponse(
                accessToken: Self.accessToken(claims), tokenType: "Bearer", expiresIn: 3600, refreshToken: nil,
                scope: nil)
        }
        let bound = response(#"{"client_id":"m1","cnf":{"x5t#S256":"presented-x5t"}}"#)
        #expect(ClientCredentialsGrant.bindingRefusal(bound, certificate: Self.certificate, profile: .default) == nil)
        let other = response(#"{"client_id":"m1","cnf":{"x5t#S256":"another-x5t"}}"#)
        let refusal = ClientCredentialsGrant.bindingRefusal(other, certificate: Self.certificate, profile: .default)
        #expect(refusal?.message.contains("another-x5t") == true && refusal?.message.contains("presented-x5t") == true)
        #expect(ClientCredentialsGrant.bindingRefusal(other, certificate: nil, profile: .default) == nil)
        #expect(
            ClientCredentialsGrant.bindingRefusal(
                response(#"{"client_id":"m1"}"#), certificate: Self.certificate, profile: .default) == nil)
        let row = RefreshConsequence.ofClientCredentials(
            .success(other, serverDate: nil), profile: .default, target: .session, hint: "",
            certificate: Self.certificate)
        #expect(row.action == .keepSession && row.error?.kind == .protocolError)
    }

    @Test(
        "a machine's request that could not be sent: 78 for a proxy's 407 or a certificate, 69 for a locked Secret Service, else 75"
    )
    func unsentRequests() {
        let expected: [(HTTPTransportError.Kind, TokenctlError.Kind)] = [
            (.proxyAuthentication, .configuration), (.certificate, .configuration),
            (.secretService, .storeUnavailable), (.connect, .transient), (.timeout, .transient),
        ]
        for (kind, exit) in expected {
            let row = RefreshConsequence.ofClientCredentials(
                .transient(.transport(kind, "failed", advice: "Do this."), retryAfter: nil), profile: .default,
                target: .session, hint: "")
            #expect(row.action == .keepSession)
            #expect(row.reason == kind.rawValue)
            #expect(row.error?.kind == exit, "\(kind)")
            #expect(
                row.error?.hint == (exit == .transient ? "Nothing is lost: try again later." : "Do this."), "\(kind)")
        }
    }

    @Test("an expired certificate is refused before anything is sent")
    func expiredCertificate() {
        #expect(throws: TokenctlError.self) {
            try ClientCredentialsGrant.checkUsable(Self.certificate, profile: .default, now: 1_900_000_000)
        }
        #expect(throws: Never.self) {
            try ClientCredentialsGrant.checkUsable(Self.certificate, profile: .default, now: 1_700_000_000)
        }
    }

    @Test("a machine's method: keys before secrets, only what the server lists (none listed: client_secret_basic)")
    func methodChoice() throws {
        let glewlwyd = ClientAuthenticationMethod.names
        typealias Means = ClientCredentials.Means
        #expect(
            try ClientCredentials.preferredMethod(supported: glewlwyd, means: Means(secret: true)) == .clientSecretBasic
        )
        #expect(
            try ClientCredentials.preferredMethod(supported: glewlwyd, means: Means(secret: true, key: true))
                == .privateKeyJWT)
        #expect(
            try ClientCredentials.preferredMethod(supported: ["client_secret_jwt"], means: Means(secret: true))
                == .clientSecretJWT)
        #expect(try ClientCredentials.preferredMethod(supported: nil, means: Means(secret: true)) == .clientSecretBasic)
        #expect(throws: TokenctlError.self) {
            try ClientCredentials.preferredMethod(supported: nil, means: Means(key: true))
        }
        #expect(throws: TokenctlError.self) {
            try ClientCredentials.preferredMethod(supported: glewlwyd, means: Means())
        }
    }

    @Test("a client credentials answer: refused client 78 (glewlwyd's bare 403 too), transient 75, refused scope 64")
    func consequences() {
        func row(_ response: HTTPResponse) -> RefreshConsequence {
            RefreshConsequence.ofClientCredentials(
                RefreshOutcome.classify(.success(response), now: 0), profile: .default, target: .session,
                hint: "register it")
        }
        for refused in [
            HTTPResponse.text(403, ""), .json(401, #"{"error":"invalid_client"}"#),
            .json(400, #"{"error":"unauthorized_client"}"#),
        ] {
            #expect(row(refused).error?.kind == .configuration, "\(refused.status)")
            #expect(row(refused).error?.hint == "register it")
            #expect(row(refused).action == .keepSession)
        }
        #expect(row(.text(503, "")).error?.kind == .transient)
        #expect(row(.json(429, "{}")).error?.kind == .transient)
        #expect(row(.json(400, #"{"error":"invalid_scope"}"#)).error?.kind == .invalidInput)
        if case .storeRefreshed = row(.tokens()).action {} else { Issue.record("a token answer is stored") }
    }
}
