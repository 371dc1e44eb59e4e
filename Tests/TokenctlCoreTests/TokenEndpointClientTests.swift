import Synchronization
import Testing
import TokenctlTestSupport

@testable import TokenctlCore

@Suite("RetryPolicy")
struct RetryPolicyTests {
    @Test("full jitter: the delay is random × min(maximum, initial × 2^attempt)")
    func ceilings() {
        let top = RetryPolicy(initialDelay: 0.5, maximumDelay: 8, random: { 0.999 })
        let expected: [Double] = [0.5, 1, 2, 4, 8, 8, 8]
        for (attempt, ceiling) in expected.enumerated() {
            #expect(top.delay(afterAttempt: attempt, retryAfter: nil) == 0.999 * ceiling)
        }
        let bottom = RetryPolicy(random: { 0 })
        #expect(
            bottom.delay(afterAttempt: 3, retryAfter: nil) == bottom.minimumDelay,
            "a zero jitter still waits the minimum")
    }

    @Test("with the real random source every delay stays in [0, ceiling)")
    func jitterBound() {
        let policy = RetryPolicy(initialDelay: 0.5, maximumDelay: 8)
        for attempt in 0..<12 {
            let ceiling = min(8, 0.5 * Double(1 << attempt))
            for _ in 0..<200 {
                let delay = policy.delay(afterAttempt: attempt, retryAfter: nil)
                #expect(delay >= policy.minimumDelay && delay < max(ceiling, policy.minimumDelay + 1e-9))
            }
        }
    }

    @Test("the cap holds for huge attempt numbers")
    func cap() {
        let policy = RetryPolicy(initialDelay: 1, maximumDelay: 5, random: { 0.999 })
        #expect(policy.delay(afterAttempt: 60, retryAfter: nil) == 0.999 * 5)
        #expect(policy.delay(afterAttempt: Int.max, retryAfter: nil) == 0.999 * 5)
    }

    @Test("Retry-After wins over backoff when longer, even above the cap; never shortens it")
    func retryAfterWins() {
        let policy = RetryPolicy(maximumDelay: 8, random: { 0.5 })
        #expect(policy.delay(afterAttempt: 0, retryAfter: 42) == 42)
        #expect(
            policy.delay(afterAttempt: 5, retryAfter: 0) == 4,
            "Retry-After: 0 keeps the backoff: no back-to-back requests")
        #expect(policy.delay(afterAttempt: 5, retryAfter: -10) == 4)
        #expect(policy.delay(afterAttempt: 0, retryAfter: 0) == 0.25)
    }

    @Test("defaults: 0.5 s initial, 8 s cap, 30 s deadline, 15 s per attempt")
    func defaults() {
        let policy = RetryPolicy()
        #expect(policy.initialDelay == 0.5)
        #expect(policy.maximumDelay == 8)
        #expect(policy.timeout == 30)
        #expect(policy.attemptTimeout == 15)
    }
}

private let endpoint = "https://issuer.example/token"

private func client(_ http: FakeHTTPClient, _ clock: VirtualClock, timeout: Double = 30, random: Double = 0.5)
    -> TokenEndpointClient
{
    TokenEndpointClient(
        http: http, clock: clock.clock,
        retry: RetryPolicy(
            initialDelay: 0.5, maximumDelay: 8, timeout: timeout, attemptTimeout: 15, random: { random }))
}

private func isSuccess(_ outcome: RefreshOutcome) -> Bool {
    if case .success = outcome { return true }
    return false
}

@Suite("TokenEndpointClient retry loop")
struct TokenEndpointClientTests {
    @Test("sends one refresh_token grant as a form POST")
    func request() async throws {
        let http = FakeHTTPClient(script: [.success(.tokens())])
        let clock = VirtualClock()
        let (outcome, receivedAt) = try await client(http, clock).refresh(
            refreshToken: "r/1+x", endpoint: endpoint, clientID: "cli", scope: "openid api")
        #expect(isSuccess(outcome))
        #expect(receivedAt == clock.now)
        let sent = try #require(http.requests.first)
        #expect(sent.method == .post)
        #expect(sent.url == endpoint)
        #expect(
            formFields(sent) == [
                "grant_type": "refresh_token", "refresh_token": "r%2F1%2Bx", "client_id": "cli", "scope": "openid+api",
            ])
        #expect(http.timeouts == [15])
        #expect(clock.sleeps.isEmpty)
    }

    @Test("no scope field unless a scope is given")
    func noScope() async throws {
        let http = FakeHTTPClient(script: [.success(.tokens())])
        _ = try await client(http, VirtualClock()).refresh(refreshToken: "r", endpoint: endpoint, clientID: "cli")
        #expect(formFields(http.requests[0])["scope"] == nil)
    }

    @Test("fake server: 503 twice, then 200 → success after two backoff waits")
    func retriesThenSucceeds() async throws {
        let http = FakeHTTPClient(script: [
            .success(.text(503, "down")), .success(.text(503, "down")), .success(.tokens(access: "fresh")),
        ])
        let clock = VirtualClock()
        let start = clock.now
        let attempts = Mutex<[Int]>([])
        let (outcome, _) = try await client(http, clock).refresh(refreshToken: "r", endpoint: endpoint, clientID: "cli")
        {
            attempt in
            attempts.withLock { $0.append(attempt) }
        }
        guard case .success(let response, _) = outcome else {
            Issue.record("expected success, got \(outcome)")
            return
        }
        #expect(response.accessToken == "fresh")
        #expect(http.requestCount == 3)
        #expect(attempts.withLock { $0 } == [0, 1, 2])
        // Full jitter with random() = 0.5 over ceilings 0.5 and 1.
        #expect(clock.sleeps == [0.25, 0.5])
        #expect(clock.now - start == 0.75)
        // The same request every time.
        #expect(Set(http.requests.map { formFields($0)["refresh_token"] ?? "" }) == ["r"])
    }

    @Test("fake server: transport errors (timeout, reset) are retried")
    func transportRetried() async throws {
        let http = FakeHTTPClient(script: [
            .failure(HTTPTransportError(.timeout, "timed out")),
            .failure(HTTPTransportError(.connectionReset, "reset")),
            .success(.tokens()),
        ])
        let (outcome, _) = try await client(http, VirtualClock()).refresh(
            refreshToken: "r", endpoint: endpoint, clientID: "cli")
        #expect(isSuccess(outcome))
        #expect(http.requestCount == 3)
    }

    @Test("fake server: always 503 → stops before the deadline with the last transient reason")
    func stopsAtDeadline() async throws {
        let http = FakeHTTPClient(script: [.success(.text(503, ""))])
        let clock = VirtualClock()
        let start = clock.now
        let (outcome, _) = try await client(http, clock, timeout: 10, random: 0.999).refresh(
            refreshToken: "r", endpoint: endpoint, clientID: "cli")
        #expect(outcome == .transient(.serverError(503), retryAfter: nil))
        // Waits 0.4995 + 0.999 + 1.998 + 3.996 = 7.4925 s; the next (7.992 s) would pass 10 s.
        #expect(http.requestCount == 5)
        #expect(clock.sleeps.count == 4)
        #expect(clock.now - start <= 10)
    }

    @Test(
        "fake server: a grant other than the refresh gets no minimum once sent: each attempt's timeout is what is left")
    func slowAttemptsOtherGrant() async throws {
        let clock = VirtualClock()
        let http = FakeHTTPClient { _, _ in
            clock.advance(4)
            return .failure(HTTPTransportError(.timeout, "timed out"))
        }
        let request = try ClientCredentials(clientID: "cli").formRequest(
            endpoint, [("grant_type", "urn:ietf:params:oauth:grant-type:device_code")])
        _ = try await client(http, clock, timeout: 10, random: 0.5).exchange(request)
        #expect(http.timeouts == [10, 5.75, 1.25])
    }

    @Test("a command deadline ends the retries before the exchange's own deadline")
    func commandDeadline() async throws {
        let clock = VirtualClock()
        let http = FakeHTTPClient { _, _ in
            clock.advance(1)
            return .failure(HTTPTransportError(.connect, "refused"))
        }
        let retry = RetryPolicy(timeout: 30, attemptTimeout: 15, random: { 0.5 })
        let (outcome, _) = try await TokenEndpointClient(
            http: http, clock: clock.clock, retry: retry, deadline: Deadline(clock.now + 3)
        )
        .refresh(refreshToken: "r", endpoint: endpoint, clientID: "cli")
        #expect(outcome == .transient(.transport(.connect, "refused"), retryAfter: nil))
        // t=0 (3 left), t=1.25 (1.75 left), t=2.75 (0.25 left); no attempt starts past t=3.
        #expect(http.connectTimeouts == [3, 1.75, 0.25])
        #expect(http.timeouts == [5, 5, 5])
    }

    @Test("fake server: slow attempts eat the deadline; each attempt's timeout is what is left")
    func slowAttempts() async throws {
        let clock = VirtualClock()
        let http = FakeHTTPClient { _, _ in
            clock.advance(4)
            return .failure(HTTPTransportError(.timeout, "timed out"))
        }
        let start = clock.now
        let (outcome, _) = try await client(http, clock, timeout: 10, random: 0.5).refresh(
            refreshToken: "r", endpoint: endpoint, clientID: "cli")
        #expect(outcome == .transient(.transport(.timeout, "timed out"), retryAfter: nil))
        // t=0 send (15 → capped to 10) ... t=4 wait 0.25, t=4.25 send (5.75 left), t=8.25 wait 0.5, t=8.75 send (1.25 left), t=12.75 stop.
        // Connecting stays inside the deadline; a refresh request once sent gets at least 5 s
        // (RetryPolicy.sentRefreshMinimum) to be answered, so a rotation is not abandoned unseen.
        #expect(http.connectTimeouts == [10, 5.75, 1.25])
        #expect(http.timeouts == [10, 5.75, 5])
        #expect(clock.sleeps == [0.25, 0.5])
        #expect(clock.now - start == 12.75)
    }

    @Test("fake server: 429 with Retry-After seconds → waits exactly that long, then succeeds")
    func honoursRetryAfterSeconds() async throws {
        let http = FakeHTTPClient(script: [
            .success(.text(429, "", headers: ["retry-after": "7"])), .success(.tokens()),
        ])
        let clock = VirtualClock()
        let (outcome, _) = try await client(http, clock).refresh(refreshToken: "r", endpoint: endpoint, clientID: "cli")
        #expect(isSuccess(outcome))
        #expect(clock.sleeps == [7])
    }

    @Test("fake server: 503 with Retry-After as an HTTP-date relative to its Date header")
    func honoursRetryAfterDate() async throws {
        let clock = VirtualClock()
        let http = FakeHTTPClient { _, index in
            guard index == 0 else { return .success(.tokens()) }
            // The server's clock is 2000 s ahead; it asks for 12 s.
            let serverNow = clock.now + 2000
            return .success(
                .text(
                    503, "",
                    headers: ["date": HTTPDate.format(serverNow), "retry-after": HTTPDate.format(serverNow + 12)]))
        }
        let (outcome, _) = try await client(http, clock).refresh(refreshToken: "r", endpoint: endpoint, clientID: "cli")
        #expect(isSuccess(outcome))
        #expect(clock.sleeps == [12])
    }

    @Test("fake server: Retry-After beyond the deadline → give up at once, reporting the delay")
    func retryAfterBeyondDeadline() async throws {
        let http = FakeHTTPClient(script: [
            .success(.text(429, "", headers: ["retry-after": "3600"])), .success(.tokens()),
        ])
        let clock = VirtualClock()
        let (outcome, _) = try await client(http, clock).refresh(refreshToken: "r", endpoint: endpoint, clientID: "cli")
        #expect(outcome == .transient(.rateLimited, retryAfter: 3600))
        #expect(http.requestCount == 1)
        #expect(clock.sleeps.isEmpty)
    }

    @Test(
        "fake server: terminal answers are never retried",
        arguments: [
            HTTPResponse.invalidGrant, HTTPResponse(status: 400), HTTPResponse(status: 401),
            .json(200, #"{"error":"bad_refresh_token"}"#),
        ])
    func terminalNotRetried(response: HTTPResponse) async throws {
        let http = FakeHTTPClient(script: [.success(response), .success(.tokens())])
        let clock = VirtualClock()
        let (outcome, _) = try await client(http, clock).refresh(refreshToken: "r", endpoint: endpoint, clientID: "cli")
        guard case .grantEnded = outcome else {
            Issue.record("expected terminal, got \(outcome)")
            return
        }
        #expect(http.requestCount == 1)
        #expect(clock.sleeps.isEmpty)
    }

    @Test("a zero deadline sends nothing")
    func zeroDeadline() async throws {
        let http = FakeHTTPClient(script: [.success(.tokens())])
        let (outcome, _) = try await client(http, VirtualClock(), timeout: 0).refresh(
            refreshToken: "r", endpoint: endpoint, clientID: "cli")
        #expect(outcome == .transient(.deadlineExceeded("no time left"), retryAfter: nil))
        #expect(http.requestCount == 0)
    }

    @Test("a cancelled backoff wait ends the loop with the transient reason")
    func cancelledWait() async throws {
        let http = FakeHTTPClient(script: [.success(.text(502, "")), .success(.tokens())])
        let clock = VirtualClock()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await client(http, clock).refresh(refreshToken: "r", endpoint: endpoint, clientID: "cli")
        }
        let (outcome, _) = try await task.value
        #expect(outcome == .transient(.serverError(502), retryAfter: nil))
        #expect(http.requestCount == 1)
    }
}
