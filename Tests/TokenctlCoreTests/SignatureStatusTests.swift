import Foundation
import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

#if canImport(Glibc)
import Glibc
#endif

/// A fixture JWKS and tokens: the PS256 vector of JWTVerifierTests (kid "ps") and the RFC 8037 key (kid "ed").
private enum Fixture {
    static let psModulus =
        "6A5ZPoMIyeTWW0sjN_pfIMERW1d1FPnXIl6W_Wr0s-airzYTxeqjGKBonA3CXISfnZkZ054EGcz4j6MGBilLCI4XLyBxUePEW0QYFwfO4XKwjxnZGmfq8orgzwjPLYsLPxi7mLctuciOz9vQSe9WDF00sQYoZEhpUHf4a6snx6Wz_5GabT3L2Y_asluHBsT90ZsXyNJVjKVKrmySwtZ00Oc4QAC7HHjjge8bqon3tDOZvMr_YLTdGebOEMdrCe0bPFUp0wTBabE8hqm0T3UwweLZlIW7gpYcx38IPUEN5EIHxqZsrcj25-JoZ9fDZhT0QUMkB_3YZdj9s4qqfoEgiw"
    static let psToken =
        "eyJhbGciOiJQUzI1NiIsImtpZCI6InBzIn0.eyJpc3MiOiJqb2UiLCJleHAiOjEzMDA4MTkzODB9.0-uphfNnxtSWgCd-xFNnQsYTeu1XkQpsKcpKywgDExF4m0z_9VtDNb4voBaopZACUH4R9z8vEicLIvPe1OGws0sHOjzSIzHv6BvlwnFK1nFG9HhV4xHw9dl1MrVU06nevO_ORmmW0kM9ZZMyGetnLBgTmtg-6uegnWhjfLMxyM3HpgRjzh2ERXX4RubOiDwHz64w0oCA4gwVE4GvufvjoHBFsPWZPccGyea4PM5qhS1wvm7ZIT9e5NBkk8OYAQQRYXl7GeM34TosdRUY1UxHExRJJYdPRB0cRuvNkuAgkXcHOqEepyogRP91tKc_mqWSzBZBi2k3V9EPDeryKAmclg"
    static let edKey =
        #"{"kty":"OKP","crv":"Ed25519","kid":"ed","alg":"EdDSA","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#
    static let psKey = #"{"kty":"RSA","kid":"ps","use":"sig","n":""# + psModulus + #"","e":"AQAB"}"#
    static let both = #"{"keys":["# + edKey + "," + psKey + "]}"
    static let edOnly = #"{"keys":["# + edKey + "]}"
    static let psAsRS256 = #"{"keys":[{"kty":"RSA","kid":"ps","alg":"RS256","n":""# + psModulus + #"","e":"AQAB"}]}"#

    static func token(header: String, payload: String = #"{"sub":"alice"}"#, signature: String = "AAAA") -> String {
        Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8)) + "." + signature
    }
}

@Suite("Signature verdicts (fixture JWKS)")
struct SignatureVerdictTests {
    func keys(_ document: String) throws -> JSONWebKeySet { try JSONWebKeySet.parse(Array(document.utf8)) }

    @Test("verified, unknown key, no keys cached, invalid")
    func verdicts() throws {
        #expect(SignatureVerdict.evaluate(Fixture.psToken, keys: try keys(Fixture.both)) == .verified)
        #expect(SignatureVerdict.evaluate(Fixture.psToken, keys: try keys(Fixture.edOnly)) == .unknownKey)
        #expect(SignatureVerdict.evaluate(Fixture.psToken, keys: nil) == .noKeysCached)
        #expect(SignatureVerdict.evaluate(Fixture.psToken, keys: JSONWebKeySet(keys: [])) == .noKeysCached)
        // A bad signature under the right key.
        let parts = Fixture.psToken.split(separator: ".").map(String.init)
        let tampered = parts[0] + "." + Base64URL.encode(Array(#"{"iss":"eve"}"#.utf8)) + "." + parts[2]
        #expect(SignatureVerdict.evaluate(tampered, keys: try keys(Fixture.both)) == .invalid)
        // kid/alg mismatch: the key named "ps" is for RS256 only; "ed" is an OKP key.
        #expect(SignatureVerdict.evaluate(Fixture.psToken, keys: try keys(Fixture.psAsRS256)) == .invalid)
        #expect(
            SignatureVerdict.evaluate(
                Fixture.token(header: #"{"alg":"RS256","kid":"ed"}"#), keys: try keys(Fixture.both)) == .invalid)
    }

    @Test("alg none and HMAC are invalid even with no keys cached; garbage is invalid")
    func forbidden() throws {
        for header in [#"{"alg":"none"}"#, #"{"alg":"HS256","kid":"ps"}"#, #"{"alg":"HS512"}"#, #"{"kid":"ps"}"#] {
            let token = Fixture.token(header: header, signature: header.contains("none") ? "" : "AAAA")
            #expect(SignatureVerdict.evaluate(token, keys: nil) == .invalid, "\(header)")
            #expect(SignatureVerdict.evaluate(token, keys: try keys(Fixture.both)) == .invalid, "\(header)")
        }
        #expect(SignatureVerdict.evaluate("not-a-jwt", keys: nil) == .invalid)
    }
}

@Suite("JWKS cache and status verdicts (fakes, injected clock)")
struct JWKSCacheStatusTests {
    static let issuer = "https://issuer.example"
    static let profile = ProfileName(rawValue: "work")!

    struct Harness {
        let service: TokenctlService
        let store: InMemorySessionStore
        let clock: VirtualClock
        let root: String
        var cache: JWKSCache { service.jwksCache }
    }

    /// A configured profile holding `idToken` (and an opaque or given access token), keys served by `http`.
    func harness(idToken: String?, accessToken: String = "opaque-at", http: FakeHTTPClient, jwksURI: Bool = true) throws
        -> Harness
    {
        let root = "/tmp/tokenctl-jwks-test-\(getpid())-\(Int.random(in: 0..<1_000_000_000))"
        let paths = Paths(
            configDirectory: root + "/config", lockDirectory: root + "/locks", stateDirectory: root + "/state",
            cacheDirectory: root + "/cache")
        let clock = VirtualClock()
        let store = InMemorySessionStore()
        let service = TokenctlService(
            paths: paths, store: store, locks: NoProfileLocks(), clock: clock.clock, httpClient: { _ in http })
        let configuration = ProfileConfiguration(
            issuer: try EndpointURL(Self.issuer), clientID: "cli",
            tokenEndpoint: try EndpointURL(Self.issuer + "/token"),
            jwksURI: jwksURI ? try EndpointURL(Self.issuer + "/jwks") : nil)
        try service.profiles.save(configuration, as: Self.profile)
        let tokenSet = TokenSet(
            accessToken: accessToken, refreshToken: "rt", idToken: idToken, expiresAt: clock.now + 3600,
            issuedLifetime: 3600, obtainedAt: clock.now)
        try store.write(tokenSet, for: SessionIdentity(profile: Self.profile, configuration: configuration))
        return Harness(service: service, store: store, clock: clock, root: root)
    }

    static func serving(_ documents: [String]) -> FakeHTTPClient {
        FakeHTTPClient { request, index in
            guard request.url.hasSuffix("/jwks") else { return .success(.json(404, "{}")) }
            return .success(.json(200, documents[min(index, documents.count - 1)]))
        }
    }

    @Test("nothing cached: one fetch, verified, and the file is 0600 in a 0700 directory")
    func firstFetch() async throws {
        let http = Self.serving([Fixture.both])
        let h = try harness(idToken: Fixture.psToken, http: http)
        defer { try? FileManager.default.removeItem(atPath: h.root) }
        #expect(try h.service.status(Self.profile).signature == .noKeysCached, "the synchronous status never fetches")
        #expect(http.requestCount == 0)
        let status = try await h.service.status(Self.profile, offline: false)
        #expect(status.signature == .verified)
        #expect(http.requests.map(\.url) == [Self.issuer + "/jwks"])
        var info = stat()
        #expect(stat(h.cache.file(for: Self.issuer), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(stat(h.cache.directory, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        #expect(h.cache.load(Self.issuer)?.jwksURI == Self.issuer + "/jwks")
        // Now from the cache: no further request.
        #expect(try await h.service.status(Self.profile, offline: false).signature == .verified)
        #expect(http.requestCount == 1)
    }

    @Test("offline never fetches: no keys cached, then the cached verdict")
    func offline() async throws {
        let http = Self.serving([Fixture.both])
        let h = try harness(idToken: Fixture.psToken, http: http)
        defer { try? FileManager.default.removeItem(atPath: h.root) }
        #expect(try await h.service.status(Self.profile, offline: true).signature == .noKeysCached)
        #expect(http.requestCount == 0)
        h.cache.store(Self.issuer, jwksURI: Self.issuer + "/jwks", document: Fixture.both)
        #expect(try await h.service.status(Self.profile, offline: true).signature == .verified)
        h.cache.store(Self.issuer, jwksURI: Self.issuer + "/jwks", document: Fixture.edOnly)
        #expect(try await h.service.status(Self.profile, offline: true).signature == .unknownKey)
        #expect(http.requestCount == 0)
    }

    @Test("an unknown kid: one re-fetch, then none within 60 s; after that one more")
    func rateLimit() async throws {
        // The server never knows the kid (a forged token).
        let http = Self.serving([Fixture.edOnly])
        let h = try harness(idToken: Fixture.psToken, http: http)
        defer { try? FileManager.default.removeItem(atPath: h.root) }
        h.cache.store(Self.issuer, jwksURI: Self.issuer + "/jwks", document: Fixture.edOnly)
        #expect(try await h.service.status(Self.profile, offline: false).signature == .unknownKey)
        #expect(http.requestCount == 1)
        h.clock.advance(30)
        for _ in 0..<5 { #expect(try await h.service.status(Self.profile, offline: false).signature == .unknownKey) }
        #expect(http.requestCount == 1, "no request within the window")
        #expect(h.cache.load(Self.issuer)?.refetchAttemptedAt == h.clock.now - 30)
        h.clock.advance(31)
        #expect(try await h.service.status(Self.profile, offline: false).signature == .unknownKey)
        #expect(http.requestCount == 2)
    }

    @Test("key rotation: the new kid is fetched once and verifies")
    func rotation() async throws {
        let http = Self.serving([Fixture.both])
        let h = try harness(idToken: Fixture.psToken, http: http)
        defer { try? FileManager.default.removeItem(atPath: h.root) }
        // Cached before the rotation: only the old key.
        h.cache.store(Self.issuer, jwksURI: Self.issuer + "/jwks", document: Fixture.edOnly)
        #expect(try await h.service.status(Self.profile, offline: false).signature == .verified)
        #expect(http.requestCount == 1)
        #expect(try h.service.status(Self.profile).signature == .verified, "the new keys were cached")
    }

    @Test("an unreachable server leaves the verdict from the cache")
    func unreachable() async throws {
        let http = FakeHTTPClient { _, _ in .failure(HTTPTransportError(.other, "connection refused")) }
        let h = try harness(idToken: Fixture.psToken, http: http)
        defer { try? FileManager.default.removeItem(atPath: h.root) }
        #expect(try await h.service.status(Self.profile, offline: false).signature == .noKeysCached)
        h.cache.store(Self.issuer, jwksURI: Self.issuer + "/jwks", document: Fixture.edOnly)
        h.clock.advance(61)
        #expect(try await h.service.status(Self.profile, offline: false).signature == .unknownKey)
        #expect(http.requestCount == 2)
        #expect(h.cache.keys(Self.issuer)?.keys.count == 1, "a failed fetch keeps the cached keys")
    }

    @Test("invalid tokens never fetch; opaque access tokens without an ID token have no verdict")
    func noFetchNeeded() async throws {
        let http = Self.serving([Fixture.both])
        let none = try harness(idToken: Fixture.token(header: #"{"alg":"none"}"#, signature: ""), http: http)
        defer { try? FileManager.default.removeItem(atPath: none.root) }
        #expect(try await none.service.status(Self.profile, offline: false).signature == .invalid)
        let opaque = try harness(idToken: nil, http: http)
        defer { try? FileManager.default.removeItem(atPath: opaque.root) }
        let status = try await opaque.service.status(Self.profile, offline: false)
        #expect(status.signature == nil && status.accessTokenFormat == "opaque")
        #expect(http.requestCount == 0)
        // A JWT access token (no ID token) is checked instead.
        let jwtAccess = try harness(idToken: nil, accessToken: Fixture.psToken, http: http)
        defer { try? FileManager.default.removeItem(atPath: jwtAccess.root) }
        #expect(try await jwtAccess.service.status(Self.profile, offline: false).signature == .verified)
    }

    @Test("without jwks_uri in the profile, the keys' address comes from discovery")
    func discovered() async throws {
        let http = FakeHTTPClient { request, _ in
            if request.url.hasSuffix("/.well-known/openid-configuration") {
                return .success(
                    .json(
                        200,
                        #"{"issuer":"https://issuer.example","token_endpoint":"https://issuer.example/token","jwks_uri":"https://issuer.example/keys"}"#
                    ))
            }
            if request.url == "https://issuer.example/keys" { return .success(.json(200, Fixture.both)) }
            return .success(.json(404, "{}"))
        }
        let h = try harness(idToken: Fixture.psToken, http: http, jwksURI: false)
        defer { try? FileManager.default.removeItem(atPath: h.root) }
        #expect(try await h.service.status(Self.profile, offline: false).signature == .verified)
    }
}
