import Foundation
import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

/// A fake token endpoint that rotates with no grace and detects reuse: each refresh token works
/// once; the access token names the refresh token and the target it was asked for. The fake
/// stands in for the faults a real server will not produce on demand (a refusal of one target,
/// a spent token); the end-to-end tests run the same paths against the test server.
private final class RotatingTargetServer: @unchecked Sendable {
    let valid = TestLock<Set<String>>(["refresh-1"])
    let reused = TestLock(0)
    let refuse: String?

    init(refuse: String? = nil) { self.refuse = refuse }

    var http: FakeHTTPClient {
        FakeHTTPClient { request, _ in
            _ = await slowNetwork(milliseconds: 20)
            let fields = formFields(request)
            let sent = fields["refresh_token"] ?? "?"
            let scope = fields["scope"]?.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            if let refuse = self.refuse, scope == refuse { return .success(.json(400, #"{"error":"invalid_scope"}"#)) }
            let spent = self.valid.withLock { valid -> Bool in valid.remove(sent) == nil }
            if spent {
                self.reused.withLock { $0 += 1 }
                return .success(.invalidGrant)
            }
            let next = sent + "n"
            self.valid.withLock { _ = $0.insert(next) }
            let audience = fields["audience"] ?? ""
            return .success(
                .tokens(
                    access:
                        "at[\((scope ?? "session").replacingOccurrences(of: " ", with: "_"))|\(audience)]-from-\(sent)",
                    refresh: next))
        }
    }
}

private func profile() -> ResolvedProfile {
    ResolvedProfile(
        name: ProfileName(rawValue: "work")!,
        configuration: ProfileConfiguration(issuer: try! EndpointURL("https://issuer.example"), clientID: "cli"),
        tokenEndpoint: "https://issuer.example/token")
}

private func target(_ scope: String?, audience: String? = nil, resource: String? = nil) -> TokenTarget {
    try! TokenTarget(scope: scope, audience: audience, resource: resource)
}

@Suite("TokenBroker: tokens for other targets (token --scope/--audience/--resource)")
struct TokenBrokerTargetTests {
    let clock = VirtualClock()
    let memory = InMemorySessionStore()

    func broker(_ http: FakeHTTPClient) -> TokenBroker {
        let clock = self.clock
        let directory = NSTemporaryDirectory() + "tokenctl-target-locks-" + UUID().uuidString
        // The lock wait is real time: generous, so a machine that starves the test's tasks (a
        // CI run beside other builds) does not turn the fan-in into lock timeouts.
        return TokenBroker(
            store: memory, locks: FileProfileLocks(directory: directory), clock: clock.clock,
            configuration: TokenBroker.Configuration(lockWait: 600)
        ) { _ in
            TokenEndpointClient(
                http: http, clock: clock.clock,
                retry: RetryPolicy(
                    initialDelay: 0.5, maximumDelay: 8, timeout: 30, attemptTimeout: 15, random: { 0.5 }))
        }
    }

    func storeSession(expired: Bool = false, scope: String? = "openid read write") throws {
        var set = TokenSet.fixture(
            accessToken: "session-access", refreshToken: "refresh-1", obtainedAt: clock.now - (expired ? 4000 : 60),
            expiresIn: 3600)
        set.scope = scope
        try memory.write(set, for: profile().identity)
    }

    @Test(
        "a narrowed refresh: scope, audience and resource sent; the rotated refresh token becomes the session's; the session's own token stays"
    )
    func narrowed() async throws {
        let server = RotatingTargetServer()
        let http = server.http
        let broker = broker(http)
        try storeSession()
        let read = target("read", audience: "api", resource: "https://r.test/")
        let served = try await broker.validTokenSet(for: profile(), target: read, minimumTimeToLive: 60)
        #expect(served.accessToken == "at[read|api]-from-refresh-1")
        #expect(served.refreshToken == nil, "a target's token is handed out without the refresh token")
        let fields = formFields(http.requests[0])
        #expect(
            fields["scope"] == "read" && fields["audience"] == "api" && fields["resource"] == "https%3A%2F%2Fr.test%2F")
        let stored = try #require(try memory.read(profile().identity))
        #expect(stored.refreshToken == "refresh-1n")
        #expect(stored.accessToken == "session-access" && stored.scope == "openid read write")
        #expect(stored.targetedToken(for: read)?.accessToken == served.accessToken)

        // Served from the store next time; the session's own token without a request either.
        #expect(
            try await broker.validTokenSet(for: profile(), target: read, minimumTimeToLive: 60).accessToken
                == served.accessToken)
        #expect(try await broker.validTokenSet(for: profile(), minimumTimeToLive: 60).accessToken == "session-access")
        #expect(http.requestCount == 1)

        // The session's own refresh spends the rotated token, and keeps the target's token.
        let forced = try await broker.validTokenSet(for: profile(), minimumTimeToLive: 60, force: true)
        #expect(forced.accessToken == "at[session|]-from-refresh-1n")
        #expect(try memory.read(profile().identity)?.targetedToken(for: read)?.accessToken == served.accessToken)
        #expect(server.reused.withLock { $0 } == 0)
    }

    @Test(
        "mixed targets at once on an expired session: one request per target, taking turns on the refresh token, no reuse"
    )
    func fanIn() async throws {
        let server = RotatingTargetServer()
        let http = server.http
        let broker = broker(http)
        try storeSession(expired: true)
        let targets: [TokenTarget] = [.session, target("read"), target("write"), target("read write")]
        let results = await withTaskGroup(of: (TokenTarget, String?).self) { group in
            for index in 0..<40 {
                let wanted = targets[index % targets.count]
                group.addTask {
                    do {
                        return (
                            wanted,
                            try await broker.validTokenSet(for: profile(), target: wanted, minimumTimeToLive: 60)
                                .accessToken
                        )
                    } catch {
                        Issue.record("target \(wanted): \(error)")
                        return (wanted, nil)
                    }
                }
            }
            var all: [(TokenTarget, String?)] = []
            for await result in group { all.append(result) }
            return all
        }
        #expect(results.allSatisfy { $0.1 != nil }, "\(results)")
        for wanted in targets {
            let tokens = Set(results.filter { $0.0 == wanted }.map { $0.1 })
            #expect(tokens.count == 1, "one token per target: \(wanted) \(tokens)")
            let scope = (wanted.scopeField ?? "session").replacingOccurrences(of: " ", with: "_")
            #expect(tokens.first??.hasPrefix("at[\(scope)|]") == true, "\(tokens)")
        }
        #expect(http.requestCount == 4, "one request per distinct target")
        #expect(server.reused.withLock { $0 } == 0, "each request sent a refresh token not spent before")
        let stored = try #require(try memory.read(profile().identity))
        #expect(stored.refreshToken == "refresh-1nnnn")
        #expect(stored.targetedTokens.count == 3)
    }

    @Test("the server refuses a target (invalid_scope): usage error, the session and its refresh token are kept")
    func refusedTarget() async throws {
        let http = RotatingTargetServer(refuse: "write").http
        let broker = broker(http)
        try storeSession()
        do {
            _ = try await broker.validTokenSet(for: profile(), target: target("write"), minimumTimeToLive: 60)
            Issue.record("expected an error")
        } catch {
            #expect(error.kind == .invalidInput)
            #expect(error.message.contains("invalid_scope") && error.message.contains("scope 'write'"))
            #expect(error.hint?.rendered.contains("The session is kept") == true)
        }
        #expect(try memory.read(profile().identity)?.refreshToken == "refresh-1")
    }

    @Test("a dead grant on a narrowed refresh ends the session like any refresh")
    func deadGrant() async throws {
        let broker = broker(FakeHTTPClient(script: [.success(.invalidGrant)]))
        try storeSession()
        do {
            _ = try await broker.validTokenSet(for: profile(), target: target("read"), minimumTimeToLive: 60)
            Issue.record("expected an error")
        } catch {
            #expect(error.kind == .loginRequired)
        }
        #expect(try memory.read(profile().identity) == nil)
    }

    @Test("scopes the session was not granted are refused before any request (RFC 6749 §6)")
    func notGranted() async throws {
        let http = RotatingTargetServer().http
        let broker = broker(http)
        try storeSession(scope: "openid read")
        do {
            _ = try await broker.validTokenSet(for: profile(), target: target("read admin"), minimumTimeToLive: 60)
            Issue.record("expected an error")
        } catch {
            #expect(error.kind == .invalidInput)
            #expect(error.message.contains("'admin'"))
            #expect(
                error.hint?.rendered.contains("login --scope \"openid read admin\"'") == true,
                "\(String(describing: error.hint))")
        }
        #expect(http.requestCount == 0)
        // Unknown session scope: the server decides.
        try storeSession(scope: nil)
        #expect(
            try await broker.validTokenSet(for: profile(), target: target("read admin"), minimumTimeToLive: 60)
                .accessToken.hasPrefix("at[admin_read|]"))
    }

    @Test("a server that narrows the session on a refresh: the set records when, and keeps it until a new login")
    func narrowedByServer() async throws {
        let http = FakeHTTPClient(script: [
            .success(
                .json(
                    200,
                    #"{"access_token":"a2","token_type":"Bearer","expires_in":3600,"refresh_token":"r2","scope":"read"}"#
                )),
            .success(
                .json(
                    200,
                    #"{"access_token":"a3","token_type":"Bearer","expires_in":3600,"refresh_token":"r3","scope":"read"}"#
                )),
        ])
        let broker = broker(http)
        try storeSession(scope: "openid read write")
        _ = try await broker.validTokenSet(for: profile(), minimumTimeToLive: 60, force: true)
        let first = try #require(try memory.read(profile().identity))
        #expect(first.scope == "read" && first.scopeNarrowedAt == clock.now)
        _ = try await broker.validTokenSet(for: profile(), minimumTimeToLive: 60, force: true)
        #expect(try memory.read(profile().identity)?.scopeNarrowedAt == first.scopeNarrowedAt, "kept, not moved")
        #expect(
            !TokenBroker.isNarrower("read write", than: "write read")
                && TokenBroker.isNarrower("read", than: "read write"))
        #expect(!TokenBroker.isNarrower("read admin", than: "read write"), "other scopes are not a narrowing")
    }

    @Test(
        "a narrowed refresh's rotation is newer for the rotation journal, though the session's own token did not change"
    )
    func journalOrder() throws {
        var current = TokenSet.fixture(
            accessToken: "session-access", refreshToken: "refresh-1", obtainedAt: 1000, expiresIn: 3600)
        current.lastRefreshAt = nil
        let (next, _) = TokenBroker.storingTargeted(
            .fixture(accessToken: "read-access", refreshToken: "refresh-2", scope: "read"), target: target("read"),
            receivedAt: 1500, serverDate: nil, in: current)
        #expect(next.obtainedAt == current.obtainedAt && next.refreshToken == "refresh-2")
        let entry = RotationJournal.Entry(
            identity: profile().identity, tokenSet: next, journaledAt: 1500, pendingReason: "locked")
        #expect(entry.isNewer(than: current), "a pending write of this rotation must win over the stored set")
        #expect(
            !RotationJournal.Entry(identity: profile().identity, tokenSet: current, journaledAt: 1000).isNewer(
                than: next))
    }

    @Test(
        "targets never grow the stored set past what the rotation journal can hold: the others expiring first go, then the new one"
    )
    func boundedBySize() throws {
        var set = TokenSet.fixture(accessToken: "a", refreshToken: "r", obtainedAt: 1000, expiresIn: 3600)
        let big = String(repeating: "x", count: 6000)
        for index in 0..<8 {
            set = set.storing(
                TargetedToken(
                    target: target("s\(index)"), accessToken: big + "\(index)", tokenType: "Bearer",
                    expiresAt: 5000 + Double(index), issuedLifetime: 3600, obtainedAt: 1000),
                now: 1000)
            #expect(try set.encoded().count <= TokenSet.maximumEncodedBytesWithTargets)
            #expect(set.targetedToken(for: target("s\(index)")) != nil, "the newest is kept")
        }
        #expect(
            set.targetedTokens.count < 8 && set.targetedToken(for: target("s0")) == nil,
            "the first ones, expiring first, went")
        // A token that cannot fit even alone is handed out but not kept, and costs the others nothing.
        let huge = TargetedToken(
            target: target("huge"), accessToken: String(repeating: "y", count: 40_000), tokenType: "Bearer",
            expiresAt: 9000, issuedLifetime: 3600, obtainedAt: 1000)
        let after = set.storing(huge, now: 1000)
        #expect(after.targetedToken(for: target("huge")) == nil && after.targetedTokens == set.targetedTokens)
        #expect(try after.encoded().count <= TokenSet.maximumEncodedBytesWithTargets)
        let journaled = try RotationJournal.encode(
            RotationJournal.Entry(
                identity: profile().identity, tokenSet: set, journaledAt: 1000, pendingReason: "locked"))
        #expect(journaled.count <= HotCacheEntry.maximumPayloadSize, "the journal holds the set")
    }

    @Test("at most 16 tokens for other targets per session: expired ones go first, then the one expiring first")
    func bounded() throws {
        var set = TokenSet.fixture(accessToken: "a", refreshToken: "r", obtainedAt: 1000, expiresIn: 3600)
        for index in 0..<20 {
            set = set.storing(
                TargetedToken(
                    target: target("s\(index)"), accessToken: "t\(index)", tokenType: "Bearer",
                    expiresAt: 5000 + Double(index), issuedLifetime: 3600, obtainedAt: 1000),
                now: 1000)
        }
        #expect(set.targetedTokens.count == TargetedToken.maximumPerSession)
        #expect(set.targetedToken(for: target("s0")) == nil && set.targetedToken(for: target("s19")) != nil)
        set = set.storing(
            TargetedToken(
                target: target("late"), accessToken: "late", tokenType: "Bearer", expiresAt: 9000, issuedLifetime: 3600,
                obtainedAt: 6000),
            now: 5010)
        #expect(
            set.targetedTokens.count == 10, "the expired ones are gone: \(set.targetedTokens.map(\.target.description))"
        )
        let decoded = try TokenSet.decode(try set.encoded())
        #expect(decoded == set)
    }
}
