import Foundation
import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

#if canImport(Glibc)
import Glibc
#endif

/// DPoP nonces across processes: the nonce an issuer gave is kept in a small
/// file per issuer beside the discovery cache, read before a process's first proof to that
/// issuer and written whenever an answer carries a new one; whatever is wrong with the file
/// costs one retry, never an error.
@Suite("DPoP nonces across processes")
struct DPoPNonceCacheTests {
    static let issuer = "https://issuer.example"
    static let tokenEndpoint = "https://issuer.example/token"

    func directory() -> String {
        NSTemporaryDirectory() + "tokenctl-dpop-nonce-" + UUID().uuidString + "/dpop-nonce"
    }

    /// A server demanding nonce `current`: use_dpop_nonce (with the nonce) to a proof without it.
    func nonceServer(_ current: @escaping @Sendable () -> String) -> FakeHTTPClient {
        FakeHTTPClient { request, _ in
            let sent = DPoPSessionTests.proof(request)?.claims["nonce"]?.stringValue
            return .success(
                sent == current()
                    ? .json(200, "{}", headers: ["dpop-nonce": current()])
                    : .json(400, #"{"error":"use_dpop_nonce"}"#, headers: ["dpop-nonce": current()]))
        }
    }

    func client(_ http: FakeHTTPClient, _ state: DPoPIssuerState, key: DPoPKey) -> DPoPHTTPClient {
        DPoPHTTPClient(
            http, key: key, issuer: Self.issuer, endpoints: [Self.tokenEndpoint], clock: VirtualClock().clock,
            issuerState: state)
    }

    @Test("a second process's first proof carries the nonce the first one was given: one use_dpop_nonce in all")
    func nonceSurvivesTheProcess() async throws {
        let key = try DPoPKey.generate()
        let cache = DPoPNonceCache(directory: directory())
        let server = nonceServer { "n-1" }
        // Two processes: two states over the same directory.
        let first = client(server, DPoPIssuerState(persisted: cache), key: key)
        #expect(try await first.send(.form(Self.tokenEndpoint, []), timeout: 5).status == 200)
        #expect(server.requestCount == 2)
        #expect(cache.load(Self.issuer) == "n-1")
        let second = client(server, DPoPIssuerState(persisted: cache), key: key)
        #expect(try await second.send(.form(Self.tokenEndpoint, []), timeout: 5).status == 200)
        #expect(server.requestCount == 3, "the second process needed no retry")
        #expect(DPoPSessionTests.proof(server.requests[2])?.claims["nonce"] == .string("n-1"))
        // The file is private.
        var info = stat()
        #expect(stat(cache.file(for: Self.issuer), &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(cache.directory, &info) == 0 && info.st_mode & 0o777 == 0o700)
    }

    @Test("a rotated nonce costs one retry, and the file then holds the new one")
    func rotationCostsOneRetry() async throws {
        let key = try DPoPKey.generate()
        let cache = DPoPNonceCache(directory: directory())
        cache.store("n-old", for: Self.issuer)
        let server = nonceServer { "n-new" }
        let process = client(server, DPoPIssuerState(persisted: cache), key: key)
        #expect(try await process.send(.form(Self.tokenEndpoint, []), timeout: 5).status == 200)
        #expect(server.requestCount == 2)
        #expect(DPoPSessionTests.proof(server.requests[0])?.claims["nonce"] == .string("n-old"))
        #expect(cache.load(Self.issuer) == "n-new")
    }

    @Test(
        "a file that is garbage, another issuer's, unusable, too old, too big or a FIFO is ignored: the proof goes without a nonce, one retry, the file replaced",
        arguments: ["garbage", "other-issuer", "bad-nonce", "stale", "huge", "fifo"])
    func badFileIsIgnored(kind: String) async throws {
        let key = try DPoPKey.generate()
        let clock = VirtualClock()
        let cache = DPoPNonceCache(directory: directory(), clock: clock.clock)
        try FileIO.ensurePrivateDirectory(cache.directory)
        let path = cache.file(for: Self.issuer)
        let now = Int(clock.now)
        switch kind {
        case "garbage": try FileIO.writeAtomically("\u{1}{not json", to: path)
        case "other-issuer":
            try FileIO.writeAtomically(
                #"{"issuer":"https://other.example","nonce":"n-1","received_at":\#(now)}"#, to: path)
        case "bad-nonce":
            try FileIO.writeAtomically(#"{"issuer":"\#(Self.issuer)","nonce":"a b","received_at":\#(now)}"#, to: path)
        case "stale":
            try FileIO.writeAtomically(
                #"{"issuer":"\#(Self.issuer)","nonce":"n-1","received_at":\#(now - 86_400)}"#, to: path)
        case "huge":
            try FileIO.writeAtomically(
                #"{"issuer":"\#(Self.issuer)","nonce":"n-1","received_at":\#(now),"x":"\#(String(repeating: "x", count: 9000))"}"#,
                to: path)
        default: #expect(mkfifo(path, 0o600) == 0)
        }
        #expect(cache.load(Self.issuer) == nil)
        let server = nonceServer { "n-1" }
        let process = DPoPHTTPClient(
            server, key: key, issuer: Self.issuer, endpoints: [Self.tokenEndpoint], clock: clock.clock,
            issuerState: DPoPIssuerState(persisted: cache))
        #expect(try await process.send(.form(Self.tokenEndpoint, []), timeout: 5).status == 200)
        #expect(server.requestCount == 2, "one retry, no error")
        #expect(DPoPSessionTests.proof(server.requests[0])?.claims["nonce"] == nil)
        #expect(cache.load(Self.issuer) == "n-1", "replaced by the answer's nonce")
    }

    @Test("a nonce every answer repeats is written once; the file is read once per process")
    func writtenOnlyWhenNew() async throws {
        let key = try DPoPKey.generate()
        let cache = DPoPNonceCache(directory: directory())
        let state = DPoPIssuerState(persisted: cache)
        let server = nonceServer { "n-1" }
        let process = client(server, state, key: key)
        _ = try await process.send(.form(Self.tokenEndpoint, []), timeout: 5)
        // Another process writes a newer nonce: this one keeps what its own answers said.
        cache.store("n-elsewhere", for: Self.issuer)
        _ = try await process.send(.form(Self.tokenEndpoint, []), timeout: 5)
        #expect(server.requestCount == 3)
        #expect(DPoPSessionTests.proof(server.requests[2])?.claims["nonce"] == .string("n-1"))
        #expect(cache.load(Self.issuer) == "n-elsewhere", "the repeated nonce was not written again")
    }

    @Test("without a cache (a client made outside a service) nothing is written")
    func inMemoryOnly() async throws {
        let key = try DPoPKey.generate()
        let state = DPoPIssuerState()
        let server = nonceServer { "n-1" }
        _ = try await client(server, state, key: key).send(.form(Self.tokenEndpoint, []), timeout: 5)
        #expect(state.persisted == nil && state.nonce(Self.issuer) == "n-1")
    }

    @Test("the service's state keeps nonces under the cache directory, beside discovery")
    func serviceUsesTheCacheDirectory() {
        let root = NSTemporaryDirectory() + "tokenctl-paths-" + UUID().uuidString
        let paths = Paths(
            configDirectory: root + "/config", lockDirectory: root + "/run", stateDirectory: root + "/state")
        #expect(paths.dpopNonceCacheDirectory == paths.cacheDirectory + "/dpop-nonce")
        let http = FakeHTTPClient { _, _ in .success(.json(500, "{}")) }
        let service = TokenctlService(
            paths: paths, store: InMemorySessionStore(), locks: NoProfileLocks(), httpClient: { _ in http })
        #expect(service.dpopState.persisted?.directory == paths.dpopNonceCacheDirectory)
    }
}
