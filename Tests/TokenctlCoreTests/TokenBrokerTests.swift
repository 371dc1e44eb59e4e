import Synchronization
import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

private func resolvedProfile(_ name: String = "work") -> ResolvedProfile {
    ResolvedProfile(
        name: ProfileName(rawValue: name)!,
        configuration: ProfileConfiguration(issuer: try! EndpointURL("https://issuer.example"), clientID: "cli"),
        tokenEndpoint: "https://issuer.example/token")
}

/// A fake token endpoint that rotates: refresh token R yields access "access-for-R" and refresh "R+".
private func rotatingServer(slow: Bool = false, expiresIn: Double = 3600) -> FakeHTTPClient {
    FakeHTTPClient { request, _ in
        if slow, let cancelled = await slowNetwork() { return .failure(cancelled) }
        let sent = formFields(request)["refresh_token"] ?? "?"
        return .success(.tokens(access: "access-for-\(sent)", refresh: sent + "-next", expiresIn: expiresIn))
    }
}

/// The broker under test with an in-memory store, no cross-process lock and virtual time.
private struct Harness {
    let clock = VirtualClock()
    let store: any SessionStore
    let memory: InMemorySessionStore
    let http: FakeHTTPClient
    let broker: TokenBroker

    /// `retryDeadline` 0.1 s with 0.25 s backoff means exactly one attempt per refresh.
    init(
        http: FakeHTTPClient, retryDeadline: Double = 30, locks: any ProfileLocking = NoProfileLocks(),
        store: ((InMemorySessionStore) -> any SessionStore)? = nil
    ) {
        let memory = InMemorySessionStore()
        let store = store?(memory) ?? memory
        let clock = self.clock
        let policy = RetryPolicy(
            initialDelay: 0.5, maximumDelay: 8, timeout: retryDeadline, attemptTimeout: 15, random: { 0.5 })
        self.memory = memory
        self.store = store
        self.http = http
        self.broker = TokenBroker(store: store, locks: locks, clock: clock.clock) { _ in
            TokenEndpointClient(http: http, clock: clock.clock, retry: policy)
        }
    }

    var identity: SessionIdentity { resolvedProfile().identity }

    func storeExpired(_ profile: ResolvedProfile = resolvedProfile(), refreshToken: String? = "refresh-1") throws {
        try memory.write(
            TokenSet.fixture(
                accessToken: "old-access", refreshToken: refreshToken, obtainedAt: clock.now - 4000, expiresIn: 3600),
            for: profile.identity)
    }

    func storeFresh(_ profile: ResolvedProfile = resolvedProfile()) throws -> TokenSet {
        let set = TokenSet.fixture(
            accessToken: "cached-access", refreshToken: "refresh-1", obtainedAt: clock.now - 60, expiresIn: 3600)
        try memory.write(set, for: profile.identity)
        return set
    }

    func token(_ profile: ResolvedProfile = resolvedProfile(), minimumTimeToLive: Double = 60, force: Bool = false)
        async throws(TokenctlError) -> TokenSet
    {
        try await broker.validTokenSet(for: profile, minimumTimeToLive: minimumTimeToLive, force: force)
    }

    func tokenError(_ profile: ResolvedProfile = resolvedProfile(), force: Bool = false) async -> TokenctlError? {
        do {
            _ = try await token(profile, force: force)
            return nil
        } catch {
            return error
        }
    }
}

/// A lock provider whose `acquire` runs an action first: another process's work while we wait.
private struct ActingProfileLocks: ProfileLocking {
    let action: @Sendable () throws(TokenctlError) -> Void
    func acquire(_ profile: ProfileName, until deadline: Deadline) async throws(TokenctlError) -> any HeldLock {
        try action()
        return try await NoProfileLocks().acquire(profile, until: deadline)
    }
}

/// A store whose writes fail (reads and deletes pass through).
private final class WriteFailingStore: SessionStore {
    let inner: InMemorySessionStore
    let failure: StoreError
    init(_ inner: InMemorySessionStore, failure: StoreError) {
        self.inner = inner
        self.failure = failure
    }
    func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? { try inner.read(identity) }
    func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) { throw failure }
    func delete(_ identity: SessionIdentity) throws(StoreError) -> Bool { try inner.delete(identity) }
    func delete(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) throws(StoreError) -> Bool {
        try inner.delete(identity, ifRefreshTokenIs: refreshToken)
    }
    func storedIdentities() throws(StoreError) -> [SessionIdentity] { try inner.storedIdentities() }
}

/// A store that counts the reads that returned the expired set (callers that saw it).
private final class ExpiredReadCountingStore: SessionStore {
    let inner: InMemorySessionStore
    private let expiredReads = TestLock(0)
    init(_ inner: InMemorySessionStore) { self.inner = inner }
    var expiredReadCount: Int { expiredReads.withLock { $0 } }
    func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? {
        let set = try inner.read(identity)
        if set?.accessToken == "old-access" { expiredReads.withLock { $0 += 1 } }
        return set
    }
    func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) {
        try inner.write(tokenSet, for: identity)
    }
    func delete(_ identity: SessionIdentity) throws(StoreError) -> Bool { try inner.delete(identity) }
    func delete(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) throws(StoreError) -> Bool {
        try inner.delete(identity, ifRefreshTokenIs: refreshToken)
    }
    func storedIdentities() throws(StoreError) -> [SessionIdentity] { try inner.storedIdentities() }
}

@Suite("TokenBroker")
struct TokenBrokerTests {
    @Test("a fresh token is served from the store without HTTP")
    func freshServed() async throws {
        let harness = Harness(http: rotatingServer())
        let stored = try harness.storeFresh()
        let set = try await harness.token()
        #expect(set == stored)
        #expect(harness.http.requestCount == 0)
        #expect(await harness.broker.refreshRequestCount == 0)
        #expect(harness.memory.writeCount == 1)
    }

    @Test("an expired token is refreshed once; the rotated set is persisted by the time it is returned")
    func expiredRefreshed() async throws {
        let harness = Harness(http: rotatingServer())
        try harness.storeExpired()
        let set = try await harness.token()
        #expect(set.accessToken == "access-for-refresh-1")
        #expect(set.refreshToken == "refresh-1-next")
        #expect(set.lastRefreshAt == harness.clock.now)
        #expect(set.expiresAt == harness.clock.now + 3600)
        #expect(try harness.memory.read(harness.identity) == set)
        #expect(harness.memory.writeCount == 2)
        #expect(harness.http.requestCount == 1)
        #expect(await harness.broker.refreshRequestCount == 1)
        #expect(await !harness.broker.isRefreshing(resolvedProfile().name))

        let request = try #require(harness.http.requests.first)
        #expect(request.url == "https://issuer.example/token")
        #expect(
            formFields(request) == ["grant_type": "refresh_token", "refresh_token": "refresh-1", "client_id": "cli"])

        // The next call is served from the store.
        #expect(try await harness.token() == set)
        #expect(harness.http.requestCount == 1)
    }

    @Test("fake server: a refresh without a new refresh token keeps the old one in the store")
    func nonRotatingServer() async throws {
        let harness = Harness(http: FakeHTTPClient(script: [.success(.tokens(access: "new", refresh: nil))]))
        try harness.storeExpired()
        let set = try await harness.token()
        #expect(set.accessToken == "new")
        #expect(try harness.memory.read(harness.identity)?.refreshToken == "refresh-1")
    }

    @Test("50 concurrent callers on an expired token share ONE refresh request")
    func singleFlight() async throws {
        let harness = Harness(http: rotatingServer(slow: true)) { ExpiredReadCountingStore($0) }
        try harness.storeExpired()
        let results = await withTaskGroup(of: Result<TokenSet, TokenctlError>.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    do throws(TokenctlError) { return .success(try await harness.token()) } catch {
                        return .failure(error)
                    }
                }
            }
            var all: [Result<TokenSet, TokenctlError>] = []
            for await result in group { all.append(result) }
            return all
        }
        let tokens = results.compactMap { try? $0.get().accessToken }
        #expect(tokens.count == 50)
        #expect(Set(tokens) == ["access-for-refresh-1"])
        #expect(harness.http.requestCount == 1)
        #expect(await harness.broker.refreshRequestCount == 1)
        #expect(try harness.memory.read(harness.identity)?.refreshToken == "refresh-1-next")
        #expect(await !harness.broker.isRefreshing(resolvedProfile().name))
        // The starter's snapshot and its re-read under the lock make 2; any more are callers
        // that saw the expired token while the refresh was in flight and joined it.
        let counting = try #require(harness.store as? ExpiredReadCountingStore)
        #expect(counting.expiredReadCount > 2)
    }

    @Test("different profiles refresh independently: one request each")
    func profilesIndependent() async throws {
        let harness = Harness(http: rotatingServer(slow: true))
        let work = resolvedProfile("work")
        let home = resolvedProfile("home")
        try harness.storeExpired(work, refreshToken: "work-refresh")
        try harness.storeExpired(home, refreshToken: "home-refresh")
        let results = await withTaskGroup(of: (String, String?).self) { group in
            for index in 0..<20 {
                let profile = index.isMultiple(of: 2) ? work : home
                group.addTask { (profile.name.rawValue, try? await harness.token(profile).accessToken) }
            }
            var all: [(String, String?)] = []
            for await result in group { all.append(result) }
            return all
        }
        #expect(results.filter { $0.0 == "work" }.allSatisfy { $0.1 == "access-for-work-refresh" })
        #expect(results.filter { $0.0 == "home" }.allSatisfy { $0.1 == "access-for-home-refresh" })
        #expect(harness.http.requestCount == 2)
        #expect(
            Set(harness.http.requests.compactMap { formFields($0)["refresh_token"] }) == [
                "work-refresh", "home-refresh",
            ])
        #expect(try harness.memory.read(work.identity)?.refreshToken == "work-refresh-next")
        #expect(try harness.memory.read(home.identity)?.refreshToken == "home-refresh-next")
    }

    @Test("fake server: a failed (transient) refresh clears the in-flight entry; the next call sends a new request")
    func failedFlightCleared() async throws {
        let http = FakeHTTPClient(script: [.success(.text(503, "")), .success(.tokens(access: "second-try"))])
        let harness = Harness(http: http, retryDeadline: 0.1)
        try harness.storeExpired()
        let error = await harness.tokenError()
        #expect(error?.kind == .transient)
        #expect(await !harness.broker.isRefreshing(resolvedProfile().name))
        #expect(http.requestCount == 1)

        let set = try await harness.token()
        #expect(set.accessToken == "second-try")
        #expect(http.requestCount == 2)
    }

    @Test("cancelling the caller that started the refresh does not cancel the shared refresh")
    func cancellationDoesNotCancelSharedRefresh() async throws {
        let harness = Harness(http: rotatingServer(slow: true))
        try harness.storeExpired()
        let name = resolvedProfile().name
        let starter = Task { try await harness.token() }
        var spins = 0
        while await !harness.broker.isRefreshing(name), spins < 1_000_000 {
            await Task.yield()
            spins += 1
        }
        try #require(await harness.broker.isRefreshing(name))

        let others = Task {
            await withTaskGroup(of: String?.self) { group in
                for _ in 0..<10 { group.addTask { try? await harness.token().accessToken } }
                var all: [String?] = []
                for await result in group { all.append(result) }
                return all
            }
        }
        starter.cancel()
        _ = await starter.result

        let tokens = await others.value
        #expect(tokens == Array(repeating: "access-for-refresh-1", count: 10))
        #expect(harness.http.requestCount == 1)
        #expect(try harness.memory.read(harness.identity)?.refreshToken == "refresh-1-next")
        #expect(await !harness.broker.isRefreshing(name))
    }

    @Test("fake server: invalid_grant deletes the session that still holds the refresh token we sent")
    func terminalDeletes() async throws {
        let harness = Harness(http: FakeHTTPClient(script: [.success(.invalidGrant)]))
        try harness.storeExpired()
        let error = await harness.tokenError()
        #expect(error?.kind == .loginRequired)
        #expect(error?.exitStatus == .loginRequired)
        #expect(error?.message.contains("invalid_grant") == true)
        #expect(try harness.memory.read(harness.identity) == nil)
    }

    @Test(
        "fake server: another writer replaces the item during the request, then invalid_grant → the other writer's set survives"
    )
    func terminalCompareAndDelete() async throws {
        let memoryBox = Mutex<InMemorySessionStore?>(nil)
        let otherWriterSet = TokenSet.fixture(
            accessToken: "other-access", refreshToken: "other-writer-refresh", obtainedAt: 1_700_000_000)
        let http = FakeHTTPClient { _, _ in
            // Another process logs in (or refreshes) while our request is on the wire.
            if let store = memoryBox.withLock({ $0 }) {
                try? store.write(otherWriterSet, for: resolvedProfile().identity)
            }
            return .success(.invalidGrant)
        }
        let harness = Harness(http: http)
        memoryBox.withLock { $0 = harness.memory }
        try harness.storeExpired()
        let error = await harness.tokenError()
        #expect(error?.kind == .loginRequired)
        #expect(try harness.memory.read(harness.identity) == otherWriterSet)
    }

    @Test(
        "fake server: terminal answers other than invalid_grant also end the session",
        arguments: [
            HTTPResponse(status: 400), HTTPResponse(status: 401),
            .json(200, #"{"error":"bad_refresh_token"}"#),
        ])
    func otherTerminal(response: HTTPResponse) async throws {
        let harness = Harness(http: FakeHTTPClient(script: [.success(response)]))
        try harness.storeExpired()
        #expect(await harness.tokenError()?.kind == .loginRequired)
        #expect(try harness.memory.read(harness.identity) == nil)
    }

    @Test(
        "fake server: transient failure keeps the session and throws .transient",
        arguments: [
            Result<HTTPResponse, HTTPTransportError>.success(.text(503, "")),
            .success(.text(429, "", headers: ["retry-after": "600"])),
            .failure(HTTPTransportError(.connect, "connection refused")),
            .failure(HTTPTransportError(.tls, "certificate verify failed")),
        ])
    func transientKeepsSession(answer: Result<HTTPResponse, HTTPTransportError>) async throws {
        let harness = Harness(http: FakeHTTPClient(script: [answer]), retryDeadline: 0.1)
        try harness.storeExpired()
        let before = try harness.memory.read(harness.identity)
        let error = await harness.tokenError()
        #expect(error?.kind == .transient)
        #expect(error?.exitStatus == .temporaryFailure)
        #expect(try harness.memory.read(harness.identity) == before)
        #expect(harness.memory.writeCount == 1)
    }

    @Test("fake server: retries inside the broker's refresh stay one logical refresh")
    func retriesInsideRefresh() async throws {
        let http = FakeHTTPClient(script: [
            .success(.text(502, "")), .success(.text(504, "")), .success(.tokens(access: "third")),
        ])
        let harness = Harness(http: http)
        try harness.storeExpired()
        #expect(try await harness.token().accessToken == "third")
        #expect(http.requestCount == 3)
        #expect(await harness.broker.refreshRequestCount == 1)
        #expect(harness.clock.sleeps.count == 2)
    }

    @Test("expired with no refresh token → login required, no request")
    func noRefreshToken() async throws {
        let harness = Harness(http: rotatingServer())
        try harness.storeExpired(refreshToken: nil)
        let error = await harness.tokenError()
        #expect(error?.kind == .loginRequired)
        #expect(harness.http.requestCount == 0)
        #expect(try harness.memory.read(harness.identity) != nil)
    }

    @Test("no stored session → login required")
    func notLoggedIn() async {
        let harness = Harness(http: rotatingServer())
        let error = await harness.tokenError()
        #expect(error?.kind == .loginRequired)
        #expect(harness.http.requestCount == 0)
    }

    @Test("a session for another issuer or client is not used")
    func identityMismatch() async throws {
        let harness = Harness(http: rotatingServer())
        _ = try harness.storeFresh()
        var other = resolvedProfile()
        other.configuration.clientID = "another-client"
        #expect(await harness.tokenError(other)?.kind == .loginRequired)
    }

    @Test("fake store: read failure → .storeUnavailable")
    func storeReadFailure() async throws {
        let harness = Harness(http: rotatingServer())
        _ = try harness.storeFresh()
        harness.memory.failure = StoreError(.locked, "the collection is locked", hint: "Unlock it.")
        let error = await harness.tokenError()
        #expect(error?.kind == .storeUnavailable)
        #expect(error?.exitStatus == .unavailable)
        #expect(error?.hint == "Unlock it.")
        #expect(harness.http.requestCount == 0)
    }

    @Test("fake store: the rotated set cannot be written (locked) → .storeUnavailable after one request")
    func storeWriteFailure() async throws {
        let harness = Harness(http: rotatingServer()) { memory in
            WriteFailingStore(memory, failure: StoreError(.locked, "the collection is locked"))
        }
        try harness.storeExpired()
        let error = await harness.tokenError()
        #expect(error?.kind == .storeUnavailable)
        #expect(error?.message.contains("could not be saved") == true)
        #expect(harness.http.requestCount == 1)
    }

    // MARK: Answers whose access or refresh token cannot be used

    /// A 200 answer made of `members` (a JSON object's members).
    private static func answer(_ members: String) -> Result<HTTPResponse, HTTPTransportError> {
        .success(.json(200, "{" + members + "}"))
    }

    @Test(
        "an unusable access token with a rotated refresh token: the rotated one is stored, 76, and the next call refreshes with it",
        arguments: RefreshOutcomeTests.unusableAccessTokens.indices)
    func unusableAccessTokenKeepsRotatedRefreshToken(index: Int) async throws {
        let members = RefreshOutcomeTests.unusableAccessTokens[index].members
        let http = FakeHTTPClient(script: [
            Self.answer(members + #", "refresh_token": "refresh-2""#),
            .success(.tokens(access: "access-3", refresh: "refresh-3")),
        ])
        let harness = Harness(http: http)
        try harness.storeExpired()
        let error = await harness.tokenError()
        #expect(error?.kind == .protocolError)
        #expect(error?.exitStatus == .protocolError && error?.exitStatus.rawValue == 76)
        #expect(error?.message.contains("unusable") == true, "\(String(describing: error))")
        #expect(error?.hint?.rendered.contains("the session is kept") == true, "\(String(describing: error))")
        #expect(
            error.map { !"\($0.message) \($0.hint?.rendered ?? "")".contains("refresh-2") } == true,
            "no token in messages")
        #expect(http.requestCount == 1, "an unusable answer is not retried: the refresh token it answered is spent")
        let stored = try #require(try harness.memory.read(harness.identity))
        #expect(stored.refreshToken == "refresh-2", "the rotated refresh token is kept")
        #expect(stored.accessToken == "old-access")
        #expect(!stored.isFresh(at: harness.clock.now, minimumTimeToLive: 0))
        let next = try await harness.token()
        #expect(next.accessToken == "access-3")
        #expect(
            formFields(http.requests[1])["refresh_token"] == "refresh-2", "the next refresh spends the rotated token")
        #expect(try harness.memory.read(harness.identity)?.refreshToken == "refresh-3")
    }

    @Test(
        "a forced refresh of a fresh token answered with an unusable access token: the old access token is not served again"
    )
    func unusableAccessTokenOnForcedRefresh() async throws {
        let http = FakeHTTPClient(script: [
            Self.answer(#""access_token": "a b", "refresh_token": "refresh-2""#),
            .success(.tokens(access: "access-3", refresh: "refresh-3")),
        ])
        let harness = Harness(http: http)
        _ = try harness.storeFresh()
        #expect(await harness.tokenError(force: true)?.kind == .protocolError)
        #expect(try await harness.token().accessToken == "access-3")
        #expect(http.requestCount == 2)
    }

    @Test(
        "an unusable access token and no refresh token: the stored session is left as it was (a non-rotating server), 76",
        arguments: RefreshOutcomeTests.unusableAccessTokens.indices)
    func unusableAccessTokenWithoutRefreshToken(index: Int) async throws {
        let members = RefreshOutcomeTests.unusableAccessTokens[index].members
        let http = FakeHTTPClient(script: [Self.answer(members), .success(.tokens(access: "access-3", refresh: nil))])
        let harness = Harness(http: http)
        try harness.storeExpired()
        let before = try harness.memory.read(harness.identity)
        let error = await harness.tokenError()
        #expect(error?.kind == .protocolError)
        #expect(error?.hint?.rendered.contains("no new refresh token") == true, "\(String(describing: error))")
        #expect(try harness.memory.read(harness.identity) == before)
        #expect(try await harness.token().accessToken == "access-3")
        #expect(formFields(http.requests[1])["refresh_token"] == "refresh-1")
    }

    @Test(
        "an unusable refresh token: nothing of the answer is stored, the session is left as it was, 76 saying it may be lost",
        arguments: [
            #""access_token": "good", "refresh_token": "r t""#, #""access_token": "good", "refresh_token": 7"#,
            #""access_token": "a b", "refresh_token": "r\nx""#,
        ])
    func unusableRefreshToken(members: String) async throws {
        let harness = Harness(http: FakeHTTPClient(script: [Self.answer(members)]))
        try harness.storeExpired()
        let before = try harness.memory.read(harness.identity)
        let error = await harness.tokenError()
        #expect(error?.kind == .protocolError)
        #expect(error?.message.contains("refresh_token") == true, "\(String(describing: error))")
        #expect(
            error?.hint?.rendered.contains("the session is lost and the next command will say so") == true,
            "\(String(describing: error))")
        #expect(try harness.memory.read(harness.identity) == before)
    }

    @Test(
        "a narrowed refresh answered with an unusable access token: the rotated refresh token becomes the session's, whose own token stays"
    )
    func unusableAccessTokenOnNarrowedRefresh() async throws {
        let http = FakeHTTPClient(script: [Self.answer(#""access_token": "", "refresh_token": "refresh-2""#)])
        let harness = Harness(http: http)
        var session = try harness.storeFresh()
        session.scope = "openid read"
        try harness.memory.write(session, for: harness.identity)
        let read = try TokenTarget(scope: "read", audience: nil, resource: nil)
        do {
            _ = try await harness.broker.validTokenSet(for: resolvedProfile(), target: read, minimumTimeToLive: 60)
            Issue.record("expected an error")
        } catch {
            #expect(error.kind == .protocolError)
        }
        let stored = try #require(try harness.memory.read(harness.identity))
        #expect(stored.refreshToken == "refresh-2")
        #expect(
            stored.accessToken == session.accessToken && stored.expiresAt == session.expiresAt,
            "the session's own token is untouched")
        #expect(stored.targetedTokens.isEmpty)
    }

    @Test(
        "an unusable access token whose rotated refresh token cannot be written anywhere: 69, saying the session is lost"
    )
    func unusableAccessTokenRotatedButUnsaved() async throws {
        let harness = Harness(
            http: FakeHTTPClient(script: [Self.answer(#""access_token": "a b", "refresh_token": "refresh-2""#)])
        ) { memory in
            WriteFailingStore(
                memory,
                failure: StoreError(.locked, "the collection is locked", hint: "Unlock it. The session is kept."))
        }
        try harness.storeExpired()
        let error = await harness.tokenError()
        #expect(error?.kind == .storeUnavailable)
        #expect(error?.hint?.rendered.contains("the session is lost") == true, "\(String(describing: error))")
        #expect(error?.hint?.rendered.contains("kept") == false, "\(String(describing: error))")
    }

    // MARK: A rotation nothing could hold

    @Test(
        "fake store: a rotated set neither the journal nor the Secret Service took → the message says the session is lost, and nothing else"
    )
    func rotatedSetLost() async throws {
        let journal = RotationJournal(environment: .fixed([HotCache.disableVariable: "1"]))
        let harness = Harness(http: rotatingServer()) { memory in
            JournaledSessionStore(
                WriteFailingStore(
                    memory,
                    failure: StoreError(.locked, "the keyring is locked", hint: "Unlock it. The session is kept.")),
                journal: journal)
        }
        try harness.storeExpired()
        let error = try #require(await harness.tokenError())
        #expect(error.kind == .storeUnavailable)
        #expect(error.message.contains("could not be saved: the keyring is locked"), "\(error)")
        #expect(
            error.message.contains(
                "the rotation journal (kernel keyring) could not hold it either: the kernel keyring is switched off"),
            "\(error)")
        let hint = try #require(error.hint?.rendered)
        #expect(hint.hasPrefix("Unlock it. The server rotated the refresh token"), "\(hint)")
        #expect(hint.contains("the session is lost") && !hint.contains("kept") && !hint.contains("probably"), "\(hint)")
    }

    @Test(
        "fake store: a set without a rotated refresh token that nothing could hold → the message says the session is kept, and nothing else"
    )
    func unrotatedSetUnsaved() async throws {
        let journal = RotationJournal(environment: .fixed([HotCache.disableVariable: "1"]))
        let http = FakeHTTPClient(script: [.success(.tokens(access: "access-2", refresh: nil))])
        let harness = Harness(http: http) { memory in
            JournaledSessionStore(
                WriteFailingStore(
                    memory,
                    failure: StoreError(.locked, "the keyring is locked", hint: "Unlock it. The session is kept.")),
                journal: journal)
        }
        try harness.storeExpired()
        let hint = try #require(await harness.tokenError()?.hint?.rendered)
        #expect(hint.contains("did not rotate the refresh token") && hint.contains("the session is kept"), "\(hint)")
        #expect(!hint.contains("lost") && !hint.contains("log in again"), "\(hint)")
        #expect(hint.components(separatedBy: "ession is kept").count == 2, "said once: \(hint)")
    }

    @Test("force refreshes even when the token is fresh")
    func force() async throws {
        let harness = Harness(http: rotatingServer())
        _ = try harness.storeFresh()
        let set = try await harness.token(force: true)
        #expect(set.accessToken == "access-for-refresh-1")
        #expect(harness.http.requestCount == 1)
        #expect(try harness.memory.read(harness.identity) == set)
    }

    @Test("min-ttl larger than the time left triggers a refresh")
    func minimumTimeToLive() async throws {
        let harness = Harness(http: rotatingServer())
        // 3600 s token with 100 s left.
        try harness.memory.write(
            TokenSet.fixture(accessToken: "cached", obtainedAt: harness.clock.now - 3500, expiresIn: 3600),
            for: harness.identity)
        #expect(try await harness.token(minimumTimeToLive: 60).accessToken == "cached")
        #expect(harness.http.requestCount == 0)
        #expect(try await harness.token(minimumTimeToLive: 200).accessToken == "access-for-refresh-1")
        #expect(harness.http.requestCount == 1)
    }

    @Test("fake lock: another process rotates while we wait for the lock → its set is served, no request")
    func rotatedWhileWaitingForLock() async throws {
        let memoryBox = Mutex<(InMemorySessionStore, TokenSet)?>(nil)
        let locks = ActingProfileLocks {
            if let (store, set) = memoryBox.withLock({ $0 }) { try? store.write(set, for: resolvedProfile().identity) }
        }
        let harness = Harness(http: rotatingServer(), locks: locks)
        let rotated = TokenSet.fixture(
            accessToken: "from-other-process", refreshToken: "rotated", obtainedAt: harness.clock.now)
        memoryBox.withLock { $0 = (harness.memory, rotated) }
        try harness.storeExpired()
        #expect(try await harness.token() == rotated)
        #expect(harness.http.requestCount == 0)
    }

    @Test("fake lock: with force, a set rotated by another process while we waited is served, not refreshed again")
    func forceAfterRotationElsewhere() async throws {
        let memoryBox = Mutex<(InMemorySessionStore, TokenSet)?>(nil)
        let locks = ActingProfileLocks {
            if let (store, set) = memoryBox.withLock({ $0 }) { try? store.write(set, for: resolvedProfile().identity) }
        }
        let harness = Harness(http: rotatingServer(), locks: locks)
        let rotated = TokenSet.fixture(
            accessToken: "from-other-process", refreshToken: "rotated", obtainedAt: harness.clock.now)
        memoryBox.withLock { $0 = (harness.memory, rotated) }
        _ = try harness.storeFresh()
        #expect(try await harness.token(force: true) == rotated)
        #expect(harness.http.requestCount == 0)
    }

    @Test("fake lock: a lock timeout is transient and sends nothing")
    func lockTimeout() async throws {
        let locks = ActingProfileLocks { () throws(TokenctlError) in
            throw TokenctlError(.transient, TransientReason.lockHeldTooLong.description)
        }
        let harness = Harness(http: rotatingServer(), locks: locks)
        try harness.storeExpired()
        #expect(await harness.tokenError()?.kind == .transient)
        #expect(harness.http.requestCount == 0)
        #expect(await !harness.broker.isRefreshing(resolvedProfile().name))
    }

    @Test("fake lock: the session disappears while we wait for the lock → login required")
    func loggedOutWhileWaiting() async throws {
        let memoryBox = Mutex<InMemorySessionStore?>(nil)
        let locks = ActingProfileLocks {
            if let store = memoryBox.withLock({ $0 }) { _ = try? store.delete(resolvedProfile().identity) }
        }
        let harness = Harness(http: rotatingServer(), locks: locks)
        memoryBox.withLock { $0 = harness.memory }
        try harness.storeExpired()
        #expect(await harness.tokenError()?.kind == .loginRequired)
        #expect(harness.http.requestCount == 0)
    }
}

@Suite("TokenBroker: ID tokens that come with a refresh (OIDC Core §12.2)")
struct RefreshedIDTokenTests {
    private static func server(idTokenClaims: String) -> FakeHTTPClient {
        FakeHTTPClient { request, _ in
            let sent = formFields(request)["refresh_token"] ?? "?"
            let body =
                #"{"access_token":"access-for-\#(sent)","refresh_token":"\#(sent)-next","expires_in":3600,"token_type":"Bearer","id_token":"\#(unsignedJWT(idTokenClaims))"}"#
            return .success(
                HTTPResponse(status: 200, headers: ["content-type": "application/json"], body: Array(body.utf8)))
        }
    }

    private static let loginClaims = #"{"iss":"https://issuer.example","sub":"alice","aud":"cli"}"#

    @Test("the same iss, sub and aud: stored")
    func sameSubject() async throws {
        let harness = Harness(http: Self.server(idTokenClaims: Self.loginClaims))
        var stored = TokenSet.fixture(
            accessToken: "old-access", refreshToken: "refresh-1", obtainedAt: harness.clock.now - 4000, expiresIn: 3600)
        stored.idToken = unsignedJWT(Self.loginClaims)
        try harness.memory.write(stored, for: harness.identity)
        #expect(try await harness.token().refreshToken == "refresh-1-next")
    }

    @Test(
        "another sub, iss or aud: terminal for the refresh, nothing of it stored",
        arguments: [
            #"{"iss":"https://issuer.example","sub":"mallory","aud":"cli"}"#,
            #"{"iss":"https://evil.example","sub":"alice","aud":"cli"}"#,
            #"{"iss":"https://issuer.example","sub":"alice","aud":"other"}"#,
        ])
    func mismatch(claims: String) async throws {
        let harness = Harness(http: Self.server(idTokenClaims: claims))
        var stored = TokenSet.fixture(
            accessToken: "old-access", refreshToken: "refresh-1", obtainedAt: harness.clock.now - 4000, expiresIn: 3600)
        stored.idToken = unsignedJWT(Self.loginClaims)
        try harness.memory.write(stored, for: harness.identity)
        let error = await harness.tokenError()
        #expect(error?.kind == .loginRequired)
        #expect(
            try harness.memory.read(harness.identity) == nil, "the session is ended, the mismatching set never stored")
    }
}
