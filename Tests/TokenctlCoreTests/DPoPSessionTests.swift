import Synchronization
import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

/// DPoP on the wire and in the session: proofs on the token and revocation
/// endpoints only, the nonce dance, the binding checks, and a DPoP session's refresh in the
/// broker. The token endpoint here is a fake, to script what a real server will not do on
/// demand (a downgrade, a wrong cnf.jkt, a refused proof); the end-to-end suite
/// (DPoPTests in TokenctlEndToEndTests) runs the same paths against the test server, which
/// verifies every proof independently.
@Suite("DPoP sessions: proofs, nonces, binding (fake token endpoint)")
struct DPoPSessionTests {
    static let tokenEndpoint = "https://issuer.example/token"

    static func profile(allowBearer: Bool = false) -> ResolvedProfile {
        var configuration = ProfileConfiguration(issuer: try! EndpointURL("https://issuer.example"), clientID: "cli")
        configuration.dpop = true
        configuration.dpopAllowBearer = allowBearer
        return ResolvedProfile(
            name: ProfileName(rawValue: "work")!, configuration: configuration, tokenEndpoint: tokenEndpoint)
    }

    /// The proof's header and claims, unverified (the signature is checked by DPoPTests'
    /// independent verifier).
    static func proof(_ request: HTTPRequest) -> (header: [String: JSONValue], claims: [String: JSONValue])? {
        guard let value = request.headers.last(where: { $0.name == "DPoP" })?.value else { return nil }
        let parts = value.split(separator: ".").map(String.init)
        guard parts.count == 3, let header = UnverifiedJWT.base64URLDecode(parts[0]).flatMap(JSONValue.parseObject),
            let claims = UnverifiedJWT.claims(of: value)
        else { return nil }
        return (header, claims)
    }

    static func thumbprint(ofJWKIn header: [String: JSONValue]) -> String? {
        guard case .object(let jwk)? = header["jwk"], let x = jwk["x"]?.stringValue, let y = jwk["y"]?.stringValue
        else { return nil }
        return Base64URL.encode(
            OpenSSL.sha256(Array("{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"\(x)\",\"y\":\"\(y)\"}".utf8)))
    }

    static func dpopTokens(
        access: String = "dpop-access-2", refresh: String = "refresh-2", headers: [String: String] = [:]
    ) -> HTTPResponse {
        .json(
            200,
            #"{"access_token": "\#(access)", "token_type": "DPoP", "refresh_token": "\#(refresh)", "expires_in": 3600}"#,
            headers: headers)
    }

    @Test(
        "only POSTs to the listed endpoints carry a proof; each proof is new (jti) and names the request (htm, htu without query)"
    )
    func proofsOnListedEndpoints() async throws {
        let key = try DPoPKey.generate()
        let fake = FakeHTTPClient { _, _ in .success(.json(200, "{}")) }
        let client = DPoPHTTPClient(
            fake, key: key, issuer: "https://issuer.example", endpoints: [Self.tokenEndpoint + "?x=1"],
            clock: VirtualClock().clock, issuerState: DPoPIssuerState())
        _ = try await client.send(.form(Self.tokenEndpoint + "?x=1", [("a", "b")]), timeout: 5)
        _ = try await client.send(.form(Self.tokenEndpoint + "?x=1", [("a", "b")]), timeout: 5)
        _ = try await client.send(.getJSON(Self.tokenEndpoint + "?x=1"), timeout: 5)
        _ = try await client.send(.form("https://issuer.example/device", [("a", "b")]), timeout: 5)
        let requests = fake.requests
        let first = try #require(Self.proof(requests[0]))
        let second = try #require(Self.proof(requests[1]))
        #expect(Self.proof(requests[2]) == nil && Self.proof(requests[3]) == nil)
        #expect(first.claims["htm"] == .string("POST") && first.claims["htu"] == .string(Self.tokenEndpoint))
        #expect(first.claims["jti"] != second.claims["jti"])
        #expect(first.claims["ath"] == nil && first.claims["nonce"] == nil)
        #expect(first.header["typ"] == .string("dpop+jwt") && first.header["alg"] == .string("ES256"))
        #expect(Self.thumbprint(ofJWKIn: first.header) == key.thumbprint)
        // The proof's time is on the server's clock (the session's measured offset).
        let skewed = DPoPHTTPClient(
            fake, key: key, issuer: "https://issuer.example", endpoints: [Self.tokenEndpoint],
            clock: VirtualClock().clock, serverClockOffset: -300,
            issuerState: DPoPIssuerState())
        _ = try await skewed.send(.form(Self.tokenEndpoint, []), timeout: 5)
        let late = try #require(Self.proof(fake.requests[4]))
        guard case .number(let iat)? = late.claims["iat"], case .number(let iat0)? = first.claims["iat"] else {
            Issue.record("no iat")
            return
        }
        #expect(iat0 - iat == 300)
    }

    @Test(
        "use_dpop_nonce is retried once with the server's nonce, which later proofs carry until a response replaces it")
    func nonceDance() async throws {
        let key = try DPoPKey.generate()
        let fake = FakeHTTPClient { request, index in
            let nonce = Self.proof(request)?.claims["nonce"]?.stringValue
            switch index {
            case 0: return .success(.json(400, #"{"error":"use_dpop_nonce"}"#, headers: ["dpop-nonce": "n1"]))
            case 1: return .success(.json(200, "{}", headers: nonce == "n1" ? [:] : ["x-wrong": "1"]))
            case 2: return .success(.json(200, "{}", headers: ["dpop-nonce": "n2"]))
            default: return .success(.json(400, #"{"error":"use_dpop_nonce"}"#, headers: ["dpop-nonce": "n3"]))
            }
        }
        let nonces = DPoPIssuerState()
        let client = DPoPHTTPClient(
            fake, key: key, issuer: "https://issuer.example", endpoints: [Self.tokenEndpoint],
            clock: VirtualClock().clock, issuerState: nonces)
        let answer = try await client.send(.form(Self.tokenEndpoint, []), timeout: 5)
        #expect(answer.status == 200 && answer.header("x-wrong") == nil)
        #expect(fake.requestCount == 2 && nonces.nonce("https://issuer.example") == "n1")
        _ = try await client.send(.form(Self.tokenEndpoint, []), timeout: 5)
        #expect(Self.proof(fake.requests[2])?.claims["nonce"] == .string("n1"))
        #expect(nonces.nonce("https://issuer.example") == "n2")
        // A second use_dpop_nonce in a row is the answer: one retry, not a loop.
        let refused = try await client.send(.form(Self.tokenEndpoint, []), timeout: 5)
        #expect(refused.status == 400 && fake.requestCount == 5)
        #expect(
            Self.proof(fake.requests[3])?.claims["nonce"] == .string("n2")
                && Self.proof(fake.requests[4])?.claims["nonce"] == .string("n3"))
        // Without a usable nonce there is nothing to retry with.
        let bare = FakeHTTPClient { _, _ in
            .success(.json(400, #"{"error":"use_dpop_nonce"}"#, headers: ["dpop-nonce": "bad\"nonce"]))
        }
        let other = DPoPHTTPClient(
            bare, key: key, issuer: "https://other.example", endpoints: [Self.tokenEndpoint],
            clock: VirtualClock().clock, issuerState: nonces)
        _ = try await other.send(.form(Self.tokenEndpoint, []), timeout: 5)
        #expect(bare.requestCount == 1 && nonces.nonce("https://other.example") == nil)
    }

    @Test(
        "a proof refused while the Date header shows the local clock far off is signed again on the server's clock, once; the offset is kept"
    )
    func clockSkew() async throws {
        let key = try DPoPKey.generate()
        let clock = VirtualClock()
        let serverAhead = 600.0
        let fake = FakeHTTPClient { request, _ in
            guard case .number(let iat)? = DPoPSessionTests.proof(request)?.claims["iat"] else {
                return .success(.json(500, "{}"))
            }
            let serverNow = clock.now + serverAhead
            let date = ["date": HTTPDate.format(serverNow)]
            return .success(
                abs(iat - serverNow) <= 60
                    ? .json(200, "{}", headers: date)
                    : .json(400, #"{"error":"invalid_dpop_proof","error_description":"iat"}"#, headers: date))
        }
        let state = DPoPIssuerState()
        let client = DPoPHTTPClient(
            fake, key: key, issuer: "https://issuer.example", endpoints: [Self.tokenEndpoint], clock: clock.clock,
            issuerState: state)
        #expect(try await client.send(.form(Self.tokenEndpoint, []), timeout: 5).status == 200)
        #expect(fake.requestCount == 2)
        #expect(abs((state.clockOffset("https://issuer.example") ?? 0) - serverAhead) < 1.5)
        // The next request starts on the server's clock: one request.
        #expect(try await client.send(.form(Self.tokenEndpoint, []), timeout: 5).status == 200)
        #expect(fake.requestCount == 3)
        // A refusal with the clocks in agreement is the answer: no retry.
        let refusing = FakeHTTPClient { _, _ in
            .success(.json(400, #"{"error":"invalid_dpop_proof"}"#, headers: ["date": HTTPDate.format(clock.now)]))
        }
        let other = DPoPHTTPClient(
            refusing, key: key, issuer: "https://other.example", endpoints: [Self.tokenEndpoint], clock: clock.clock,
            issuerState: state)
        #expect(try await other.send(.form(Self.tokenEndpoint, []), timeout: 5).status == 400)
        #expect(refusing.requestCount == 1)
    }

    @Test("the binding check: DPoP tokens after a proof, cnf.jkt of a JWT names our key, Bearer only when allowed")
    func bindingCheck() throws {
        let key = try DPoPKey.generate()
        func response(_ type: String, _ access: String = "opaque") -> TokenResponse {
            TokenResponse(
                accessToken: access, tokenType: type, expiresIn: 60, refreshToken: nil, idToken: nil, scope: nil)
        }
        #expect(throws: Never.self) { try DPoPBinding.check(response("DPoP"), key: key, allowBearer: false) }
        #expect(throws: DPoPBinding.Refusal.downgraded) {
            try DPoPBinding.check(response("Bearer"), key: key, allowBearer: false)
        }
        #expect(throws: Never.self) { try DPoPBinding.check(response("Bearer"), key: key, allowBearer: true) }
        #expect(throws: DPoPBinding.Refusal.unrequested) {
            try DPoPBinding.check(response("DPoP"), key: nil, allowBearer: false)
        }
        #expect(throws: Never.self) { try DPoPBinding.check(response("Bearer"), key: nil, allowBearer: false) }
        let bound = unsignedJWT(#"{"sub":"a","cnf":{"jkt":"\#(key.thumbprint)"}}"#)
        #expect(throws: Never.self) { try DPoPBinding.check(response("DPoP", bound), key: key, allowBearer: false) }
        let other = unsignedJWT(#"{"sub":"a","cnf":{"jkt":"\#(try DPoPKey.generate().thumbprint)"}}"#)
        #expect(throws: DPoPBinding.Refusal.self) {
            try DPoPBinding.check(response("DPoP", other), key: key, allowBearer: false)
        }
        #expect(throws: DPoPBinding.Refusal.self) {
            try DPoPBinding.check(response("DPoP", unsignedJWT(#"{"sub":"a"}"#)), key: key, allowBearer: false)
        }
    }

    @Test("the key is stored with the tokens, kept by every refresh, and refused when it is not a key")
    func storedWithTheSession() throws {
        let key = try DPoPKey.generate()
        var set = TokenSet.fixture(obtainedAt: 1000)
        set.tokenType = "DPoP"
        set.dpopKey = key.stored
        let read = try TokenSet.decode(try set.encoded())
        #expect(read.dpopKey == key.stored && read == set)
        let refreshed = TokenSet(
            response: .fixture(accessToken: "a2"), receivedAt: 2000, serverDate: nil, previous: read)
        #expect(refreshed.dpopKey == key.stored)
        #expect(read.served(for: .session)?.dpopKey == key.stored)
        // The rotation journal holds it with the rest of the set (a rotation pending there keeps its key).
        let identity = SessionIdentity(
            profile: ProfileName(rawValue: "work")!, issuer: "https://issuer.example", clientID: "cli")
        let entry = RotationJournal.Entry(identity: identity, tokenSet: set, journaledAt: 1000, pendingReason: nil)
        #expect(try RotationJournal.decode(try RotationJournal.encode(entry)).tokenSet.dpopKey == key.stored)
        var broken = set
        broken.dpopKey = "not-a-key"
        #expect(throws: FlatJSONObjectError.self) { try TokenSet.decode(try broken.encoded()) }
    }

    @Test("dpop and dpop_allow_bearer in the profile file: true, false, written back, anything else refused")
    func profileFile() throws {
        let text = "issuer = https://issuer.example\nclient_id = cli\ndpop = true\ndpop_allow_bearer = false\n"
        let configuration = try ProfileConfiguration.parse(text, path: "p.conf")
        #expect(configuration.dpop && !configuration.dpopAllowBearer)
        let written = configuration.serialized(profile: .default)
        #expect(written.contains("dpop = true\n") && !written.contains("dpop_allow_bearer"))
        #expect(try ProfileConfiguration.parse(written, path: "p.conf") == configuration)
        #expect(throws: ConfigurationError.self) {
            try ProfileConfiguration.parse(
                "issuer = https://issuer.example\nclient_id = cli\ndpop = yes\n", path: "p.conf")
        }
    }

    /// A broker over a DPoP session (key stored with an expired token) and a fake endpoint.
    struct Harness {
        let clock = VirtualClock()
        let memory = InMemorySessionStore()
        let http: FakeHTTPClient
        let broker: TokenBroker
        let key: DPoPKey
        let profile: ResolvedProfile

        init(allowBearer: Bool = false, _ handler: @escaping FakeHTTPClient.Handler) throws {
            let http = FakeHTTPClient(handler)
            let clock = self.clock
            self.http = http
            self.key = try DPoPKey.generate()
            self.profile = DPoPSessionTests.profile(allowBearer: allowBearer)
            let policy = RetryPolicy(
                initialDelay: 0.5, maximumDelay: 8, timeout: 30, attemptTimeout: 15, random: { 0.5 })
            broker = TokenBroker(store: memory, locks: NoProfileLocks(), clock: clock.clock) { _ in
                TokenEndpointClient(http: http, clock: clock.clock, retry: policy)
            }
            var set = TokenSet.fixture(
                accessToken: "old-access", refreshToken: "refresh-1", obtainedAt: clock.now - 4000, expiresIn: 3600)
            set.tokenType = "DPoP"
            set.dpopKey = key.stored
            try memory.write(set, for: profile.identity)
        }

        var stored: TokenSet? { try? memory.read(profile.identity) }

        func refresh() async -> Result<TokenSet, TokenctlError> {
            do { return .success(try await broker.validTokenSet(for: profile, minimumTimeToLive: 60)) } catch {
                return .failure(error)
            }
        }
    }

    @Test("a DPoP session's refresh is signed with the session's key; the rotated DPoP tokens are stored with the key")
    func refreshSigned() async throws {
        let harness = try Harness { _, _ in .success(DPoPSessionTests.dpopTokens()) }
        let served = try await harness.refresh().get()
        #expect(
            served.accessToken == "dpop-access-2" && served.tokenType == "DPoP" && served.dpopKey == harness.key.stored)
        #expect(harness.stored?.refreshToken == "refresh-2" && harness.stored?.dpopKey == harness.key.stored)
        let proof = try #require(Self.proof(harness.http.requests[0]))
        #expect(Self.thumbprint(ofJWKIn: proof.header) == harness.key.thumbprint)
        #expect(proof.claims["htu"] == .string(Self.tokenEndpoint) && proof.claims["ath"] == nil)
    }

    @Test(
        "a refresh answered with Bearer is refused (exit 78) and does not replace the session, unless dpop_allow_bearer"
    )
    func downgradeRefused() async throws {
        let harness = try Harness { _, _ in .success(.tokens(access: "bearer-access", refresh: "refresh-2")) }
        guard case .failure(let error) = await harness.refresh() else {
            Issue.record("a downgrade was accepted")
            return
        }
        #expect(
            error.kind == .configuration && error.message.contains("Bearer")
                && error.hint?.rendered.contains("dpop_allow_bearer") == true)
        #expect(harness.stored?.accessToken == "old-access" && harness.stored?.refreshToken == "refresh-1")
        #expect(!error.description.contains("bearer-access") && !error.description.contains("refresh-2"))

        let allowing = try Harness(allowBearer: true) { _, _ in
            .success(.tokens(access: "bearer-access", refresh: "refresh-2"))
        }
        let served = try await allowing.refresh().get()
        #expect(
            served.tokenType == "Bearer" && allowing.stored?.refreshToken == "refresh-2"
                && allowing.stored?.dpopKey == allowing.key.stored)
    }

    @Test("a JWT access token bound to another key is refused; the session is not replaced")
    func wrongConfirmation() async throws {
        let other = try DPoPKey.generate()
        let jwt = unsignedJWT(#"{"sub":"a","cnf":{"jkt":"\#(other.thumbprint)"}}"#)
        let harness = try Harness { _, _ in .success(DPoPSessionTests.dpopTokens(access: jwt)) }
        guard case .failure(let error) = await harness.refresh() else {
            Issue.record("a token bound to another key was accepted")
            return
        }
        #expect(error.kind == .configuration && error.message.contains("not bound to this session's DPoP key"))
        #expect(harness.stored?.refreshToken == "refresh-1")
    }

    @Test("invalid_dpop_proof keeps the session (the refresh token was not spent); invalid_grant still ends it")
    func refusedProofKeepsSession() async throws {
        let harness = try Harness { _, _ in
            .success(.json(400, #"{"error":"invalid_dpop_proof","error_description":"iat"}"#))
        }
        guard case .failure(let error) = await harness.refresh() else {
            Issue.record("no error")
            return
        }
        #expect(error.kind == .unexpected && error.hint?.rendered.contains("clock") == true)
        #expect(harness.stored?.refreshToken == "refresh-1")
        let ended = try Harness { _, _ in .success(.invalidGrant) }
        guard case .failure(let endedError) = await ended.refresh() else {
            Issue.record("no error")
            return
        }
        #expect(endedError.kind == .loginRequired && ended.stored == nil)
    }

    @Test("a bearer session that is answered with a DPoP token refuses it and keeps the session")
    func unrequestedDPoPToken() async throws {
        let clock = VirtualClock()
        let memory = InMemorySessionStore()
        let http = FakeHTTPClient { _, _ in .success(DPoPSessionTests.dpopTokens()) }
        let policy = RetryPolicy(initialDelay: 0.5, maximumDelay: 8, timeout: 30, attemptTimeout: 15, random: { 0.5 })
        let broker = TokenBroker(store: memory, locks: NoProfileLocks(), clock: clock.clock) { _ in
            TokenEndpointClient(http: http, clock: clock.clock, retry: policy)
        }
        let profile = Self.profile()
        try memory.write(
            TokenSet.fixture(accessToken: "old", refreshToken: "refresh-1", obtainedAt: clock.now - 4000),
            for: profile.identity)
        await #expect(throws: TokenctlError.self) {
            try await broker.validTokenSet(for: profile, minimumTimeToLive: 60)
        }
        #expect(Self.proof(http.requests[0]) == nil)
        #expect(try memory.read(profile.identity)?.refreshToken == "refresh-1")
    }
}
