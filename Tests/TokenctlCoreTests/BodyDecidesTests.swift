import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

private let now: Double = 1_700_000_000

private func classify(_ response: HTTPResponse) -> RefreshOutcome {
    RefreshOutcome.classify(.success(response), now: now)
}

private func form(_ status: Int, _ body: String) -> HTTPResponse {
    .text(status, body, contentType: "application/x-www-form-urlencoded; charset=utf-8")
}

/// Every token-endpoint and device-endpoint answer is classified by its
/// `error` member first, whatever the status or the encoding (docs.github.com).
@Suite("The body decides: classification by the error member, JSON or form-encoded")
struct BodyDecidesTests {
    @Test(
        "a 2xx with error is an OAuth error, JSON or form-encoded, whatever the status",
        arguments: [
            HTTPResponse.json(
                200,
                #"{"error":"bad_refresh_token","error_description":"The refresh token passed is incorrect or expired."}"#
            ),
            form(200, "error=bad_refresh_token&error_description=The+refresh+token+passed+is+incorrect+or+expired."),
            form(
                201,
                "error=bad_refresh_token&error_description=The%20refresh%20token%20passed%20is%20incorrect%20or%20expired."
            ),
        ])
    func errorWith2xx(response: HTTPResponse) {
        let outcome = classify(response)
        #expect(
            outcome
                == .grantEnded(
                    .oauthError(
                        status: response.status, code: "bad_refresh_token",
                        description: "The refresh token passed is incorrect or expired.")))
        if case .grantEnded(let reason) = outcome { #expect(reason.className == "bad_refresh_token") }
    }

    @Test(
        "device polling answers with HTTP 200 (GitHub) are OAuth errors, not token sets",
        arguments: ["authorization_pending", "slow_down", "expired_token"])
    func pendingWith200(code: String) {
        #expect(
            classify(form(200, "error=\(code)&error_description=x"))
                == .grantEnded(.oauthError(status: 200, code: code, description: "x")))
        #expect(
            classify(.json(200, #"{"error":"\#(code)"}"#))
                == .grantEnded(.oauthError(status: 200, code: code, description: nil)))
    }

    @Test("a 400 form-encoded error is read too; a non-2xx without error stays an unexpected status")
    func formErrorWith400() {
        #expect(
            classify(form(400, "error=invalid_grant"))
                == .grantEnded(.oauthError(status: 400, code: "invalid_grant", description: nil)))
        #expect(
            classify(form(403, "message=nope"))
                == .grantEnded(.unexpectedStatus(403, contentType: "application/x-www-form-urlencoded; charset=utf-8")))
    }

    @Test("the transient statuses stay transient whatever the body says")
    func transientFirst() {
        #expect(classify(.json(503, #"{"error":"invalid_grant"}"#)) == .transient(.serverError(503), retryAfter: nil))
    }

    @Test(
        "a form-encoded token answer (GitHub without Accept: application/json) is a success, its comma-separated scope split"
    )
    func formEncodedSuccess() {
        let outcome = classify(
            form(200, "access_token=gho_16C7e42F292c6912E7710c838347Ae178B4a&scope=repo%2Cgist&token_type=bearer"))
        #expect(
            outcome
                == .success(
                    TokenResponse(
                        accessToken: "gho_16C7e42F292c6912E7710c838347Ae178B4a", tokenType: "Bearer", expiresIn: nil,
                        refreshToken: nil, scope: "repo gist"), serverDate: nil))
    }

    @Test("numbers given as strings are read (early GitHub App answers)")
    func numbersAsStrings() {
        let outcome = classify(
            .json(
                200,
                #"{"access_token":"ghu_x","token_type":"bearer","expires_in":"28800","refresh_token":"ghr_y","refresh_token_expires_in":"15897600","scope":""}"#
            ))
        #expect(
            outcome
                == .success(
                    TokenResponse(
                        accessToken: "ghu_x", tokenType: "Bearer", expiresIn: 28800, refreshToken: "ghr_y", scope: nil,
                        refreshTokenExpiresIn: 15_897_600),
                    serverDate: nil))
    }

    @Test("a body that is form-encoded only by its look (text/plain) is not read as a form")
    func formOnlyByMediaType() {
        #expect(
            classify(.text(200, "access_token=at_x&token_type=bearer", contentType: "text/plain"))
                == .unusableTokens(UnusableTokens(problem: .notJSONObject, refreshToken: .absent)))
    }

    @Test(
        "a 2xx without access_token and without error is a protocol error that keeps the session (76), JSON or form",
        arguments: [
            HTTPResponse.json(200, #"{"token_type":"bearer","scope":"repo"}"#),
            form(200, "token_type=bearer&scope=repo"), .json(200, "{}"),
        ])
    func noAccessTokenNoError(response: HTTPResponse) {
        #expect(
            classify(response) == .unusableTokens(UnusableTokens(problem: .missingAccessToken, refreshToken: .absent)))
    }

    @Test(
        "the provider error-code table: GitHub's bad_refresh_token ends the grant (77), incorrect_client_credentials refuses the client (78)"
    )
    func errorCodeTable() {
        func reason(_ code: String) -> GrantEndReason { .oauthError(status: 200, code: code, description: nil) }
        #expect(ProviderErrorClasses.codes["bad_refresh_token"]?.errorClass == .signInAgain)
        #expect(ProviderErrorClasses.endsGrant(reason("bad_refresh_token")))
        #expect(ProviderErrorClasses.endsGrant(reason("invalid_grant")))
        #expect(!ProviderErrorClasses.endsGrant(reason("invalid_scope")))
        #expect(ProviderErrorClasses.codes["incorrect_client_credentials"]?.errorClass == .configuration)
        #expect(
            classify(
                .json(
                    200,
                    #"{"error":"incorrect_client_credentials","error_description":"The client_id and/or client_secret passed are incorrect."}"#
                ))
                == .clientRefused(
                    .oauthError(
                        status: 200, code: "incorrect_client_credentials",
                        description: "The client_id and/or client_secret passed are incorrect.")))
        #expect(
            ProviderErrorClasses.codes["invalid_grant"] == nil,
            "RFC 6749's codes are the classifier's default, not table rows")
    }

    @Test(
        "the answer reader: JSON whatever the content type; a form only as application/x-www-form-urlencoded; invalid UTF-8 refused"
    )
    func answerReader() {
        #expect(EndpointAnswer.object(body: Array(#"{"a":"b"}"#.utf8), contentType: "text/html")?["a"] == .string("b"))
        #expect(
            EndpointAnswer.object(body: Array("a=b%20c&a=d".utf8), contentType: "application/x-www-form-urlencoded")?[
                "a"] == .string("b c"))
        #expect(EndpointAnswer.object(body: Array("a=b".utf8), contentType: nil) == nil)
        #expect(
            EndpointAnswer.object(body: [0x61, 0x3D, 0xFF], contentType: "application/x-www-form-urlencoded") == nil)
        #expect(EndpointAnswer.object(body: [], contentType: "application/x-www-form-urlencoded") == nil)
    }
}

@Suite("Scopes split on spaces and commas")
struct ScopeWordsTests {
    @Test(
        "normalized: space-separated, order kept, duplicates and empty words dropped, nothing → nil",
        arguments: [
            ("repo,gist", "repo gist"), ("public_repo, user:email", "public_repo user:email"),
            ("openid  offline_access", "openid offline_access"),
            ("a,a b", "a b"), ("", nil), (" , ", nil),
        ] as [(String, String?)])
    func normalized(scope: String, expected: String?) {
        #expect(ScopeWords.normalized(scope) == expected)
    }

    @Test("a token answer's scope is stored space-separated; GitHub App's empty scope is no scope information")
    func answerScope() throws {
        #expect(try TokenResponse.parse(Array(#"{"access_token":"a","scope":"repo,gist"}"#.utf8)).scope == "repo gist")
        #expect(try TokenResponse.parse(Array(#"{"access_token":"a","scope":""}"#.utf8)).scope == nil)
    }

    @Test("a narrowed refresh is checked against a comma-separated stored scope (an old session's)")
    func checkScopesWithCommas() throws {
        let session = TokenSet(
            accessToken: "a", refreshToken: "r", scope: "repo,gist", expiresAt: nil, issuedLifetime: nil,
            obtainedAt: now)
        let profile = ProfileName(rawValue: "p")!
        #expect(throws: Never.self) {
            try TokenBroker.checkScopes(
                try TokenTarget(scope: "gist", audience: nil, resource: nil), within: session, profile)
        }
        #expect(throws: TokenctlError.self) {
            try TokenBroker.checkScopes(
                try TokenTarget(scope: "admin", audience: nil, resource: nil), within: session, profile)
        }
        #expect(TokenBroker.isNarrower("repo", than: "repo,gist"))
        #expect(!TokenBroker.isNarrower("gist repo", than: "repo,gist"))
    }
}

@Suite("Device polling: RFC 8628 plus what providers do")
struct DevicePollScheduleTests {
    func close(_ a: Double, _ b: Double) -> Bool { abs(a - b) < 1e-9 }

    @Test("every wait keeps a 20% margin over the interval; after slow_down, 40%")
    func margin() {
        var schedule = DevicePollSchedule(interval: 5)
        #expect(close(schedule.wait(), 6))
        schedule.slowDown(serverInterval: nil)
        #expect(schedule.interval == 10)
        #expect(close(schedule.wait(), 14))
        #expect(schedule.slowDowns == 1)
    }

    @Test(
        "slow_down: +5 s, or the server's interval when larger",
        arguments: [
            (5.0, nil, 10.0), (5.0, 30.0, 30.0), (5.0, 7.0, 10.0), (20.0, 10.0, 25.0),
        ] as [(Double, Double?, Double)])
    func slowDown(interval: Double, server: Double?, expected: Double) {
        var schedule = DevicePollSchedule(interval: interval)
        schedule.slowDown(serverInterval: server)
        #expect(schedule.interval == expected)
    }

    @Test("transient failures double the wait, at most 16 times; a hostile interval is bounded")
    func backoffAndBounds() {
        let schedule = DevicePollSchedule(interval: 5)
        #expect(close(schedule.wait(afterTransientFailures: 1), 12))
        #expect(close(schedule.wait(afterTransientFailures: 9), 96))
        var hostile = DevicePollSchedule(interval: 1e12)
        #expect(hostile.interval == DevicePollSchedule.maximumInterval)
        hostile.slowDown(serverInterval: .infinity)
        #expect(hostile.interval == DevicePollSchedule.maximumInterval)
        #expect(DevicePollSchedule(interval: .nan).interval == 5)
    }
}

@Suite("Device flow against a GitHub-like server: errors with HTTP 200, form bodies")
struct GitHubDeviceFlowTests {
    static let deviceForm = form(
        200,
        "device_code=3584d83530557fdd1f46af8289938c8ef79f9dc5&expires_in=900&interval=5&user_code=WDJB-MJHT&verification_uri=https%3A%2F%2Fgithub.com%2Flogin%2Fdevice"
    )

    func run(_ answers: [HTTPResponse], provider: Provider? = nil) async -> (
        Result<TokenResponse, TokenctlError>, FakeHTTPClient, VirtualClock, RecordingPresenter
    ) {
        let clock = VirtualClock()
        let http = FakeHTTPClient(script: answers.map { .success($0) })
        let presenter = RecordingPresenter()
        let flow = DeviceFlow(
            http: http, clock: clock.clock, retry: RetryPolicy(), credentials: ClientCredentials(clientID: "Iv1.abc"),
            presenter: presenter, provider: provider)
        do {
            let (response, _, _) = try await flow.run(
                deviceEndpoint: "https://github.com/login/device/code",
                tokenEndpoint: "https://github.com/login/oauth/access_token", scope: nil, extra: [])
            return (.success(response), http, clock, presenter)
        } catch {
            return (.failure(error), http, clock, presenter)
        }
    }

    @Test(
        "pending and slow_down with 200 (slow_down carrying interval=12), then the token: waits 6, 6, then 12 with 40%")
    func pendingThenApproved() async throws {
        let (result, http, clock, presenter) = await run([
            Self.deviceForm, form(200, "error=authorization_pending"), form(200, "error=slow_down&interval=12"),
            form(200, "access_token=gho_x&scope=repo%2Cgist&token_type=bearer"),
        ])
        let tokens = try result.get()
        #expect(tokens.accessToken == "gho_x" && tokens.scope == "repo gist" && tokens.expiresIn == nil)
        #expect(clock.sleeps.count == 3)
        #expect(
            clock.sleeps.enumerated().allSatisfy { abs($0.element - [6, 6, 16.8][$0.offset]) < 1e-9 }, "\(clock.sleeps)"
        )
        #expect(http.requestCount == 4)
        #expect(presenter.shown.withLock { $0 } == ["device WDJB-MJHT", "slow 12", "ended"])
    }

    @Test("authorization_declined (Entra) is a denial, like access_denied")
    func declined() async {
        let (result, _, _, _) = await run([Self.deviceForm, .json(400, #"{"error":"authorization_declined"}"#)])
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.exitStatus == .loginRequired)
        #expect(error.message.contains("denied"))
    }

    @Test(
        "device_flow_disabled (200) or unauthorized_client at the device endpoint: the device flow is off for this client, --browser offered (78)",
        arguments: [
            form(
                200, "error=device_flow_disabled&error_description=Device+Flow+must+be+explicitly+enabled+for+this+App"),
            HTTPResponse.json(400, #"{"error":"unauthorized_client"}"#),
        ])
    func deviceFlowDisabled(response: HTTPResponse) async {
        let (result, http, _, _) = await run([response], provider: .github)
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.exitStatus == .configuration)
        #expect(error.message.contains("the device flow is not enabled for client 'Iv1.abc'"))
        #expect(error.hint?.rendered.contains("--browser") == true)
        #expect(error.hint?.rendered.contains("\"Enable Device Flow\"") == true)
        #expect(http.requestCount == 1, "nothing is polled")
    }

    @Test(
        "unauthorized_client elsewhere than GitHub is what the server said, never GitHub's device-flow text: a refused client (401, Keycloak's text), a plain refusal, a poll",
        arguments: [
            [
                HTTPResponse.json(
                    401,
                    #"{"error":"unauthorized_client","error_description":"Invalid client or Invalid client credentials"}"#
                )
            ],
            [HTTPResponse.json(400, #"{"error":"unauthorized_client"}"#)],
            [
                GitHubDeviceFlowTests.deviceForm,
                .json(400, #"{"error":"unauthorized_client","error_description":"Client is not permitted here"}"#),
            ],
        ])
    func unauthorizedClientElsewhere(answers: [HTTPResponse]) async {
        for provider in [nil, Provider.keycloak] {
            let (result, _, _, _) = await run(answers, provider: provider)
            guard case .failure(let error) = result else {
                Issue.record("expected a failure")
                return
            }
            #expect(error.exitStatus == .configuration)
            #expect(!error.message.contains("device flow is not enabled"), "\(error)")
            #expect(error.hint?.rendered.contains("GitHub") != true, "\(error.hint?.rendered ?? "")")
            #expect(error.message.contains("unauthorized_client"), "the server's word: \(error)")
            if answers.first?.status == 401 {
                #expect(error.message.contains("refused the client"), "\(error)")
                #expect(
                    error.hint?.rendered.contains("client secret (or key)") == true, "\(error.hint?.rendered ?? "")")
            }
        }
    }

    @Test("a text that says the device flow is off for the client (Keycloak's) reads so, without GitHub's settings")
    func deviceFlowOffByText() async {
        let (result, _, _, _) = await run([
            .json(
                400,
                #"{"error":"unauthorized_client","error_description":"Client is not allowed to initiate OAuth 2.0 Device Authorization Grant. The flow is disabled for the client."}"#
            )
        ])
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.message.contains("the device flow is not enabled for client 'Iv1.abc'"))
        #expect(error.hint?.rendered.contains("GitHub") == false)
        #expect(error.hint?.rendered.contains("device authorization grant for this client") == true)
    }

    @Test("expired_token ends the wait; so does device_flow_disabled at a poll")
    func endings() async {
        let (expired, _, _, _) = await run([Self.deviceForm, form(200, "error=expired_token")])
        guard case .failure(let error) = expired else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.message.contains("expired"))
        let (disabled, _, _, _) = await run([Self.deviceForm, form(200, "error=device_flow_disabled")])
        guard case .failure(let off) = disabled else {
            Issue.record("expected a failure")
            return
        }
        #expect(off.exitStatus == .configuration && off.hint?.rendered.contains("--browser") == true)
    }

    @Test("a device answer's message (Entra) is kept for the presenter, printable")
    func message() throws {
        let parsed = try DeviceAuthorization.parse(
            Array(
                #"{"device_code":"d","user_code":"A","verification_uri":"https://microsoft.com/devicelogin","message":"To sign in, use a web browser\r\n\u001b[31mand enter the code A."}"#
                    .utf8), endpoint: "e")
        #expect(parsed.message == "To sign in, use a web browser   [31mand enter the code A.")
        #expect(
            try DeviceAuthorization.parse(
                Array(#"{"device_code":"d","user_code":"A","verification_uri":"https://i.example/d"}"#.utf8),
                endpoint: "e"
            ).message == nil)
    }
}

@Suite("Lifetimes as the server states them")
struct StatedLifetimeTests {
    @Test("no expires_in and no refresh token: no stated expiry, fresh for ever, time left infinite")
    func noStatedExpiry() {
        let set = TokenSet(
            response: .fixture(expiresIn: nil, refreshToken: nil), receivedAt: now, serverDate: nil, previous: nil)
        #expect(set.statesNoExpiry)
        #expect(set.expiresAt == nil)
        #expect(set.isFresh(at: now + 10 * 86400, minimumTimeToLive: 3600))
        #expect(set.timeLeft(at: now + 10 * 86400) == .infinity)
    }

    @Test("no expires_in but a refresh token: the assumed 300 s apply, since the token can be renewed")
    func assumedWhereRenewable() {
        let set = TokenSet(
            response: .fixture(expiresIn: nil, refreshToken: "r"), receivedAt: now, serverDate: nil, previous: nil)
        #expect(!set.statesNoExpiry)
        #expect(set.isFresh(at: now + 200, minimumTimeToLive: 60))
        #expect(!set.isFresh(at: now + 250, minimumTimeToLive: 60))
        #expect(set.timeLeft(at: now) == AccessTokenLifetime.assumedLifetime)
    }

    @Test("expires_in stated without a refresh token: it expires as stated")
    func statedWithoutRefreshToken() {
        let set = TokenSet(
            response: .fixture(expiresIn: 3600, refreshToken: nil), receivedAt: now, serverDate: nil, previous: nil)
        #expect(!set.statesNoExpiry)
        #expect(!set.isFresh(at: now + 3600, minimumTimeToLive: 60))
    }

    @Test("a targeted token is renewable: its set states an expiry, assumed when the server gave none")
    func targetedIsRenewable() throws {
        let target = try TokenTarget(scope: "read", audience: nil, resource: nil)
        var session = TokenSet(
            accessToken: "a", refreshToken: "r", expiresAt: now + 3600, issuedLifetime: 3600, obtainedAt: now)
        session = session.storing(
            TargetedToken(
                target: target, accessToken: "t", tokenType: "Bearer", grantedScope: "read", expiresAt: nil,
                issuedLifetime: nil, obtainedAt: now), now: now)
        let served = try #require(session.served(for: target))
        #expect(!served.statesNoExpiry)
        #expect(served.expiresAt == now + AccessTokenLifetime.assumedLifetime)
    }

    @Test(
        "created_at (GitLab): the expiry is created_at + expires_in on the server's clock, never later than the arrival plus expires_in"
    )
    func createdAt() throws {
        let response = try TokenResponse.parse(
            Array(#"{"access_token":"a","expires_in":7200,"refresh_token":"r","created_at":\#(Int(now) - 600)}"#.utf8))
        #expect(response.createdAt == now - 600)
        let set = TokenSet(response: response, receivedAt: now, serverDate: now, previous: nil)
        #expect(set.expiresAt == now - 600 + 7200)
        // The server's clock 100 s ahead (Date header): mapped back to ours.
        let ahead = TokenSet(response: response, receivedAt: now - 100, serverDate: now, previous: nil)
        #expect(ahead.expiresAt == now - 600 + 7200 - 100)
        // A created_at in the future gives no more than expires_in from arrival.
        let future = try TokenResponse.parse(
            Array(#"{"access_token":"a","expires_in":7200,"created_at":\#(Int(now) + 900)}"#.utf8))
        #expect(TokenSet(response: future, receivedAt: now, serverDate: now, previous: nil).expiresAt == now + 7200)
        // Not a plausible time: ignored.
        #expect(try TokenResponse.parse(Array(#"{"access_token":"a","created_at":"yesterday"}"#.utf8)).createdAt == nil)
    }

    @Test(
        "a hot-cache entry of a set with no stated expiry says so (expires_at=never), round-trips, is fresh and is kept a day"
    )
    func hotCacheEntry() throws {
        let set = TokenSet(
            response: .fixture(expiresIn: nil, refreshToken: nil), receivedAt: now, serverDate: nil, previous: nil)
        let identity = SessionIdentity(
            profile: ProfileName(rawValue: "gh")!, issuer: "https://github.com", clientID: "Ov23li")
        let entry = HotCacheEntry(set, for: identity)
        #expect(entry.statesNoExpiry)
        let text = String(decoding: try entry.encoded(), as: UTF8.self)
        #expect(text.contains("\nexpires_at=never\n"))
        #expect(try HotCacheEntry.decode(try entry.encoded()) == entry)
        #expect(entry.isFresh(at: now + 30 * 86400, minimumTimeToLive: 60))
        #expect(entry.kernelTimeout(at: now + 30 * 86400) == HotCacheEntry.noExpiryKernelTimeout)
        let served = TokenSet(cached: entry)
        #expect(served.statesNoExpiry && served.timeLeft(at: now) == .infinity)
        // A renewable set's entry keeps the assumed lifetime, also once served from the cache.
        let renewable = HotCacheEntry(
            TokenSet(
                response: .fixture(expiresIn: nil, refreshToken: "r"), receivedAt: now, serverDate: nil, previous: nil),
            for: identity)
        #expect(!renewable.statesNoExpiry && !renewable.isFresh(at: now + 300, minimumTimeToLive: 0))
        #expect(TokenSet(cached: renewable).expiresAt == now + AccessTokenLifetime.assumedLifetime)
    }
}

/// The broker with an in-memory store and virtual time, for GitHub's answers.
private struct GitHubBroker {
    let clock = VirtualClock()
    let memory = InMemorySessionStore()
    let http: FakeHTTPClient
    let broker: TokenBroker
    let profile = ResolvedProfile(
        name: ProfileName(rawValue: "gh")!,
        configuration: ProfileConfiguration(issuer: try! EndpointURL("https://github.com"), clientID: "Iv1.abc"),
        tokenEndpoint: "https://github.com/login/oauth/access_token")

    init(_ answers: [HTTPResponse]) {
        let http = FakeHTTPClient(script: answers.map { .success($0) })
        let clock = self.clock
        self.http = http
        let policy = RetryPolicy(initialDelay: 0.5, maximumDelay: 8, timeout: 30, attemptTimeout: 15, random: { 0.5 })
        broker = TokenBroker(store: memory, locks: NoProfileLocks(), clock: clock.clock) { _ in
            TokenEndpointClient(http: http, clock: clock.clock, retry: policy)
        }
    }

    func result(force: Bool = false) async -> Result<TokenSet, TokenctlError> {
        do {
            return .success(try await broker.validTokenSet(for: profile, minimumTimeToLive: 60, force: force))
        } catch {
            return .failure(error)
        }
    }
}

@Suite("The broker with GitHub's answers and lifetimes")
struct GitHubBrokerTests {
    @Test(
        "an OAuth App token (no expires_in, no refresh token) is served long after 300 s would have passed, with no request"
    )
    func servedWithoutExpiry() async throws {
        let harness = GitHubBroker([])
        let stored = TokenSet(
            accessToken: "gho_x", refreshToken: nil, scope: "repo gist", expiresAt: nil, issuedLifetime: nil,
            obtainedAt: harness.clock.now - 30 * 86400)
        try harness.memory.write(stored, for: harness.profile.identity)
        #expect(try await harness.result().get().accessToken == "gho_x")
        #expect(harness.http.requestCount == 0)
    }

    @Test(
        "token --force on it (the user saw a 401): 77 saying no new token can be had, the session stored as it was, the next token served"
    )
    func forceKeepsTheSession() async throws {
        let harness = GitHubBroker([])
        let stored = TokenSet(
            accessToken: "gho_x", refreshToken: nil, expiresAt: nil, issuedLifetime: nil,
            obtainedAt: harness.clock.now - 3600)
        try harness.memory.write(stored, for: harness.profile.identity)
        guard case .failure(let error) = await harness.result(force: true) else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.exitStatus == .loginRequired)
        #expect(error.message.contains("kept as it was") && !error.message.contains("has expired"), "\(error.message)")
        #expect(error.hint?.rendered.contains("tokenctl --profile gh login") == true, "\(error.hint?.rendered ?? "")")
        #expect(try harness.memory.read(harness.profile.identity) == stored)
        #expect(try await harness.result().get().accessToken == "gho_x")
        #expect(harness.http.requestCount == 0)
    }

    @Test(
        "a dead GitHub App refresh token (200 bad_refresh_token): the session ends (77) with the server's words, the item deleted"
    )
    func badRefreshToken() async throws {
        let harness = GitHubBroker([
            .json(
                200,
                #"{"error":"bad_refresh_token","error_description":"The refresh token passed is incorrect or expired.","error_uri":"https://docs.github.com"}"#
            )
        ])
        try harness.memory.write(
            TokenSet.fixture(
                accessToken: "ghu_old", refreshToken: "ghr_dead", obtainedAt: harness.clock.now - 30000,
                expiresIn: 28800), for: harness.profile.identity)
        guard case .failure(let error) = await harness.result() else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.exitStatus == .loginRequired)
        #expect(
            error.message.contains("bad_refresh_token: The refresh token passed is incorrect or expired."),
            "\(error.message)")
        #expect(!error.message.contains("no access_token"))
        #expect(try harness.memory.read(harness.profile.identity) == nil)
    }

    @Test("incorrect_client_credentials (200): 78, the session kept, the table's hint")
    func incorrectClientCredentials() async throws {
        let harness = GitHubBroker([
            .json(
                200,
                #"{"error":"incorrect_client_credentials","error_description":"The client_id and/or client_secret passed are incorrect."}"#
            )
        ])
        let stored = TokenSet.fixture(
            accessToken: "ghu_old", refreshToken: "ghr_x", obtainedAt: harness.clock.now - 30000, expiresIn: 28800)
        try harness.memory.write(stored, for: harness.profile.identity)
        guard case .failure(let error) = await harness.result() else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.exitStatus == .configuration)
        #expect(error.message.contains("incorrect_client_credentials"))
        #expect(
            error.hint?.rendered.contains("The session is kept") == true
                && error.hint?.rendered.contains("client secret") == true)
        #expect(try harness.memory.read(harness.profile.identity) == stored)
    }

    @Test("a 200 without access_token and without error: 76, the session kept as it was")
    func noAccessToken() async throws {
        let harness = GitHubBroker([.json(200, #"{"token_type":"bearer","scope":""}"#)])
        let stored = TokenSet.fixture(
            accessToken: "ghu_old", refreshToken: "ghr_x", obtainedAt: harness.clock.now - 30000, expiresIn: 28800)
        try harness.memory.write(stored, for: harness.profile.identity)
        guard case .failure(let error) = await harness.result() else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.exitStatus == .protocolError)
        #expect(try harness.memory.read(harness.profile.identity) == stored)
    }

    @Test("a refresh answer without a refresh token or ID token keeps the stored ones; no ID token skips the check")
    func refreshKeepsStoredTokens() async throws {
        let harness = GitHubBroker([
            .json(200, #"{"access_token":"new","token_type":"Bearer","expires_in":3600,"scope":"openid,email"}"#)
        ])
        let idToken = unsignedJWT(#"{"iss":"https://github.com","sub":"u1","aud":"Iv1.abc","exp":1}"#)
        var stored = TokenSet.fixture(
            accessToken: "old", refreshToken: "keep-me", obtainedAt: harness.clock.now - 4000, expiresIn: 3600)
        stored.idToken = idToken
        try harness.memory.write(stored, for: harness.profile.identity)
        let next = try await harness.result().get()
        #expect(
            next.accessToken == "new" && next.refreshToken == "keep-me" && next.idToken == idToken
                && next.scope == "openid email")
        #expect(try harness.memory.read(harness.profile.identity)?.refreshToken == "keep-me")
    }
}
