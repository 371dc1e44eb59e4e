import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

private let profile = ResolvedProfile(
    name: ProfileName(rawValue: "work")!,
    configuration: ProfileConfiguration(issuer: try! EndpointURL("https://issuer.example"), clientID: "cli"),
    tokenEndpoint: "https://issuer.example/token")

private func entraError(_ error: String, _ code: Int) -> Result<HTTPResponse, HTTPTransportError> {
    .success(
        .json(
            400,
            #"{"error":"\#(error)","error_description":"AADSTS\#(code): Words.\r\nTrace ID: t\r\nCorrelation ID: c","error_codes":[\#(code)]}"#
        ))
}

/// A broker with an in-memory store holding an expired session, virtual time, and `answers`.
private func refresh(_ answers: [Result<HTTPResponse, HTTPTransportError>]) async -> (
    error: TokenctlError?, stored: TokenSet?, before: TokenSet?, http: FakeHTTPClient, clock: VirtualClock
) {
    let clock = VirtualClock()
    let http = FakeHTTPClient(script: answers)
    let memory = InMemorySessionStore()
    let policy = RetryPolicy(initialDelay: 0.5, maximumDelay: 8, timeout: 30, attemptTimeout: 15, random: { 0.5 })
    let broker = TokenBroker(store: memory, locks: NoProfileLocks(), clock: clock.clock) { _ in
        TokenEndpointClient(http: http, clock: clock.clock, retry: policy)
    }
    let before = TokenSet.fixture(
        accessToken: "old-access", refreshToken: "refresh-1", obtainedAt: clock.now - 4000, expiresIn: 3600)
    try? memory.write(before, for: profile.identity)
    var error: TokenctlError?
    do { _ = try await broker.validTokenSet(for: profile, minimumTimeToLive: 60) } catch let thrown { error = thrown }
    return (error, try? memory.read(profile.identity), before, http, clock)
}

/// What the broker and the login flows do with each class: a transient one
/// keeps the session and is retried, a configuration one keeps it and exits 78, a policy block
/// keeps it without asking for a login, the others end it.
@Suite("Provider error classes in the broker and the device flow")
struct ProviderErrorClassesFlowTests {
    @Test("refresh: Entra AADSTS90024 (temporarily_unavailable) is retried with backoff, then the tokens are kept")
    func transientRetried() async {
        let result = await refresh([entraError("temporarily_unavailable", 90024), .success(.tokens(access: "next"))])
        #expect(result.error == nil)
        #expect(result.http.requestCount == 2)
        #expect(result.clock.sleeps.count == 1)
        #expect(result.stored?.accessToken == "next")
    }

    @Test("refresh: Entra AADSTS90024 until the deadline: 75, the session kept, the server's words shown")
    func transientKeepsSession() async {
        let result = await refresh([entraError("temporarily_unavailable", 90024)])
        #expect(result.error?.exitStatus == .temporaryFailure)
        #expect(
            result.error?.message.contains("AADSTS90024: Words. Trace ID: t") == true,
            "\(String(describing: result.error))")
        #expect(result.error?.hint?.rendered.contains("The session is kept") == true)
        #expect(result.stored == result.before)
        #expect(result.http.requestCount > 1)
    }

    @Test("refresh: Entra AADSTS50196 backs off at least 60 s: past the 30 s deadline, 75 at once, one request")
    func loopDetectionBacksOffHard() async {
        let result = await refresh([entraError("invalid_request", 50196)])
        #expect(result.error?.exitStatus == .temporaryFailure)
        #expect(result.error?.hint?.rendered.contains("wait at least a minute") == true)
        #expect(result.http.requestCount == 1)
        #expect(result.stored == result.before)
    }

    @Test("refresh: Entra AADSTS7000218 is a configuration error: 78, the session kept, no 'sign in again'")
    func configurationKeepsSession() async {
        let result = await refresh([entraError("invalid_client", 7_000_218)])
        #expect(result.error?.exitStatus == .configuration)
        #expect(result.error?.hint?.rendered.contains("enable public client flows") == true)
        #expect(result.error?.hint?.rendered.contains("sign in again") == false)
        #expect(result.error?.hint?.rendered.contains("--client-secret-stdin'") == false, "no new-secret command")
        #expect(result.stored == result.before)
        #expect(result.http.requestCount == 1)
    }

    @Test("refresh: Entra AADSTS700082 ends the session: 77, sign in again")
    func signInAgainEndsSession() async {
        let result = await refresh([entraError("invalid_grant", 700082)])
        #expect(result.error?.exitStatus == .loginRequired)
        #expect(result.error?.hint?.rendered.hasSuffix("Run 'tokenctl --profile work login' to sign in again.") == true)
        #expect(result.stored == nil)
    }

    @Test("refresh: Entra AADSTS50076 ends the session: 77, sign in again interactively")
    func interactionEndsSession() async {
        let result = await refresh([entraError("invalid_grant", 50076)])
        #expect(result.error?.exitStatus == .loginRequired)
        #expect(
            result.error?.hint?.rendered.hasSuffix("Sign in again interactively: 'tokenctl --profile work login'.")
                == true)
        #expect(result.stored == nil)
    }

    @Test("refresh: Entra AADSTS53003 (Conditional Access): 77, the session kept, no login asked for")
    func conditionalAccessKeepsSession() async {
        let result = await refresh([entraError("invalid_grant", 53003)])
        #expect(result.error?.exitStatus == .loginRequired)
        #expect(result.error?.hint?.rendered.contains("Conditional Access") == true)
        #expect(result.error?.hint?.rendered.contains("login") == false, "\(String(describing: result.error?.hint))")
        #expect(result.stored == result.before)
    }

    @Test("refresh: Keycloak's reuse text ends the session: 77 with the reuse hint")
    func keycloakReuse() async {
        let result = await refresh([
            .success(
                .json(
                    400,
                    #"{"error":"invalid_grant","error_description":"Maximum allowed refresh token reuse exceeded"}"#
                ))
        ])
        #expect(result.error?.exitStatus == .loginRequired)
        #expect(result.error?.hint?.rendered.contains("Revoke Refresh Token") == true)
        #expect(result.stored == nil)
    }

    @Test("device polling: 429 without a body is slow_down: the interval grows by 5 s, and Retry-After is honoured")
    func rateLimitedPollSlowsDown() async throws {
        let flow = DeviceFlowTests()
        let (result, _, clock, presenter) = await flow.run([
            .text(429, "", headers: ["retry-after": "30"]), .text(429, ""), .tokens(),
        ])
        #expect(try result.get().accessToken == "access-2")
        // 5 s × 1.2; then Retry-After 30 over (5 + 5) × 1.4; then (10 + 5) × 1.4.
        #expect(DeviceFlowTests.sleptAbout(clock.sleeps, [6, 30, 21]), "\(clock.sleeps)")
        #expect(presenter.shown.withLock { $0 } == ["device WDJB-MJHT", "slow 30", "slow 15", "ended"])
    }

    @Test("device polling: Entra AADSTS90024 keeps the wait going with backoff, then the tokens")
    func transientPollContinues() async throws {
        let (result, _, clock, _) = await DeviceFlowTests().run([
            .json(400, #"{"error":"temporarily_unavailable","error_codes":[90024]}"#), .tokens(),
        ])
        #expect(try result.get().accessToken == "access-2")
        #expect(DeviceFlowTests.sleptAbout(clock.sleeps, [6, 12]), "\(clock.sleeps)")
    }

    @Test("device polling: Entra AADSTS7000218 ends the login with 78 and the registration hint")
    func configurationPollRefused() async {
        let (result, _, _, _) = await DeviceFlowTests().run([
            .json(400, #"{"error":"invalid_client","error_description":"AADSTS7000218: x","error_codes":[7000218]}"#)
        ])
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.exitStatus == .configuration)
        #expect(error.hint?.rendered.contains("enable public client flows") == true)
    }
}
