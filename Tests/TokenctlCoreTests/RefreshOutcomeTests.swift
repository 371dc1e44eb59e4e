import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

private let now: Double = 1_700_000_000

private func classify(_ response: HTTPResponse) -> RefreshOutcome {
    RefreshOutcome.classify(.success(response), now: now)
}

private func endsGrant(_ outcome: RefreshOutcome) -> Bool {
    if case .grantEnded = outcome { return true }
    return false
}

/// The failure classes of a refresh answer, one test per row of the table in `RefreshOutcome`'s
/// doc comment (success; invalid_grant, other 4xx and unparseable answers terminal; network
/// errors, 408, 429 and 5xx transient; a 200 with unusable tokens of its own class).
@Suite("RefreshOutcome.classify")
struct RefreshOutcomeTests {
    @Test("200 with a valid token set → success, carrying the server's Date")
    func successRow() {
        let date = HTTPDate.format(now + 5)
        let outcome = classify(.tokens(access: "a", refresh: "r", expiresIn: 60, headers: ["date": date]))
        #expect(
            outcome
                == .success(
                    TokenResponse(accessToken: "a", tokenType: "Bearer", expiresIn: 60, refreshToken: "r"),
                    serverDate: now + 5))
    }

    @Test("200 without a Date header → success with no server date")
    func successWithoutDate() {
        guard case .success(_, let serverDate) = classify(.tokens()) else {
            Issue.record("expected success")
            return
        }
        #expect(serverDate == nil)
    }

    @Test(
        "200 that is neither an object nor an error (empty, HTML, an array) → unusable tokens, the stored refresh token kept (the body decides)",
        arguments: [
            "", "<html>oops</html>", "[]",
        ])
    func notAnAnswer200(body: String) {
        #expect(
            classify(.text(200, body, contentType: "application/json"))
                == .unusableTokens(UnusableTokens(problem: .notJSONObject, refreshToken: .absent)))
    }

    @Test(
        "200 with an access token but an unusable ID token or scope → terminal",
        arguments: [
            #"{"access_token": "a", "id_token": "x y"}"#, #"{"access_token": "a", "scope": 7}"#,
        ])
    func unusable200(body: String) {
        guard
            case .grantEnded(.unusableResponse(let message)) = classify(
                .text(200, body, contentType: "application/json"))
        else {
            Issue.record("expected a terminal unusable-response outcome")
            return
        }
        #expect(!message.isEmpty)
        #expect(GrantEndReason.unusableResponse(message).className == "unusable-response")
    }

    /// The forms of an access token that cannot be used, as JSON members (with what is wrong).
    static let unusableAccessTokens: [(members: String, problem: TokenResponseError)] = [
        (#""token_type": "Bearer""#, .missingAccessToken),
        (#""access_token": """#, .emptyToken("access_token")),
        (#""access_token": "at has spaces""#, .invalidTokenCharacters("access_token")),
        (#""access_token": "at_x\r\nX-Injected: 1""#, .invalidTokenCharacters("access_token")),
        (#""access_token": 42"#, .missingAccessToken),
        (#""access_token": null"#, .missingAccessToken),
        ("\"access_token\": \"\(String(repeating: "a", count: 64 * 1024 + 1))\"", .invalidField("access_token")),
        (#""access_token": "a", "token_type": "mac""#, .unsupportedTokenType("mac")),
        (#""access_token": "a", "expires_in": "soon""#, .invalidField("expires_in")),
    ]

    @Test(
        "200 whose access token cannot be used, with a usable rotated refresh token → unusable tokens carrying it",
        arguments: unusableAccessTokens.indices)
    func unusableAccessTokenRotated(index: Int) {
        let (members, problem) = Self.unusableAccessTokens[index]
        let outcome = classify(.json(200, "{" + members + #", "refresh_token": "rt-rotated", "id_token": "idt"}"#))
        #expect(
            outcome
                == .unusableTokens(
                    UnusableTokens(problem: problem, refreshToken: .rotated("rt-rotated"), idToken: "idt")))
        if case .unusableTokens(let answer) = outcome {
            #expect(answer.className == "unusable-access-token")
            #expect(
                !answer.description.contains("rt-rotated") && !answer.description.contains("X-Injected"),
                "no token material in messages")
        }
    }

    @Test(
        "200 whose access token cannot be used, without a refresh token → unusable tokens, none rotated",
        arguments: unusableAccessTokens.indices)
    func unusableAccessTokenNotRotated(index: Int) {
        let (members, problem) = Self.unusableAccessTokens[index]
        #expect(
            classify(.json(200, "{" + members + #", "refresh_token": """# + "}"))
                == .unusableTokens(UnusableTokens(problem: problem, refreshToken: .absent)))
        #expect(
            classify(.json(200, "{" + members + "}"))
                == .unusableTokens(UnusableTokens(problem: problem, refreshToken: .absent)))
    }

    @Test(
        "200 whose refresh token cannot be used → unusable tokens, whatever the access token",
        arguments: [
            #""refresh_token": 42"#, #""refresh_token": "rt has spaces""#, #""refresh_token": "rt\nx""#,
            "\"refresh_token\": \"\(String(repeating: "r", count: 64 * 1024 + 1))\"",
        ])
    func unusableRefreshToken(members: String) {
        for access in [#""access_token": "good""#, #""access_token": "bad one""#, #""token_type": "Bearer""#] {
            let outcome = classify(.json(200, "{" + access + ", " + members + "}"))
            guard case .unusableTokens(let answer) = outcome else {
                Issue.record("expected unusable tokens, got \(outcome)")
                continue
            }
            #expect(answer.refreshToken == .unusable)
            #expect(answer.problem.field == "refresh_token")
            #expect(answer.className == "unusable-refresh-token")
        }
    }

    @Test("400 invalid_grant → terminal OAuth error with its description")
    func invalidGrant() {
        let outcome = classify(.invalidGrant)
        #expect(
            outcome == .grantEnded(.oauthError(status: 400, code: "invalid_grant", description: "Token is expired")))
        if case .grantEnded(let reason) = outcome {
            #expect(reason.className == "invalid_grant")
            #expect(reason.description == "the server answered 400 invalid_grant: Token is expired")
        }
    }

    @Test(
        "other RFC 6749 §5.2 errors on a 400 are terminal too",
        arguments: ["unauthorized_client", "invalid_scope", "invalid_request"])
    func otherOAuthErrors(code: String) {
        #expect(
            classify(.json(400, #"{"error": "\#(code)"}"#))
                == .grantEnded(.oauthError(status: 400, code: code, description: nil)))
    }

    @Test(
        "a refused client is a configuration error, never a dead grant: any invalid_client (Dex's 401), and unauthorized_client with 401 or a client-credentials text (Keycloak's)",
        arguments: [
            HTTPResponse.json(401, #"{"error":"invalid_client","error_description":"Invalid client credentials."}"#),
            .json(400, #"{"error":"invalid_client"}"#),
            .json(
                401,
                #"{"error":"unauthorized_client","error_description":"Invalid client or Invalid client credentials"}"#),
            .json(401, #"{"error":"unauthorized_client"}"#),
            .json(
                400,
                #"{"error":"unauthorized_client","error_description":"Invalid client or Invalid client credentials"}"#),
            .json(400, #"{"error":"unauthorized_client","error_description":"Client secret not provided in request"}"#),
        ])
    func refusedClient(response: HTTPResponse) {
        guard case .clientRefused(let reason) = classify(response) else {
            Issue.record("expected clientRefused: \(classify(response))")
            return
        }
        let row = ProviderErrorClasses.row(reason)
        #expect(row?.errorClass == .configuration)
        #expect(row?.followUp == .newSecret)
        #expect(!ProviderErrorClasses.endsGrant(reason))
        let hint = ProviderErrorClasses.followUp(row?.followUp, for: ProfileName(rawValue: "work")!)
        #expect(
            hint?.rendered.contains("'tokenctl --profile work login --client-secret-stdin'") == true,
            "\(hint?.rendered ?? "")")
    }

    @Test("unauthorized_client on a 400 with another text stays the server's refusal of the grant")
    func unauthorizedClientOtherwise() {
        let response = HTTPResponse.json(
            400, #"{"error":"unauthorized_client","error_description":"Client not allowed for direct access grants"}"#)
        #expect(
            classify(response)
                == .grantEnded(
                    .oauthError(
                        status: 400, code: "unauthorized_client",
                        description: "Client not allowed for direct access grants")))
    }

    @Test("400 with an empty body → terminal (strict servers such as glewlwyd answer a dead refresh token so)")
    func empty400() {
        #expect(classify(HTTPResponse(status: 400)) == .grantEnded(.unexpectedStatus(400, contentType: nil)))
    }

    @Test("400 with HTML → not the server's verdict (76, session kept), naming the content type")
    func html400() {
        let outcome = classify(.text(400, "<html><body>Bad Request</body></html>", contentType: "text/html"))
        #expect(outcome == .notTheServersVerdict(ForeignAnswer(kind: .page, status: 400, contentType: "text/html")))
        if case .notTheServersVerdict(let answer) = outcome {
            #expect(answer.description.hasPrefix("HTTP 400 (text/html) without an OAuth error: a page"))
            #expect(answer.className == "not-oauth-400")
            #expect(!answer.mayPass)
        }
    }

    @Test("401 and 403: an OAuth error or an empty body is the server's; a page is not")
    func unauthorizedForbidden() {
        #expect(classify(HTTPResponse(status: 401)) == .grantEnded(.unexpectedStatus(401, contentType: nil)))
        #expect(classify(HTTPResponse(status: 403)) == .grantEnded(.unexpectedStatus(403, contentType: nil)))
        #expect(
            classify(.text(403, "Forbidden", contentType: "text/plain"))
                == .notTheServersVerdict(ForeignAnswer(kind: .page, status: 403, contentType: "text/plain")))
        #expect(
            classify(.text(403, "<html><body>Blocked by policy</body></html>", contentType: "text/html"))
                == .notTheServersVerdict(ForeignAnswer(kind: .page, status: 403, contentType: "text/html")))
        #expect(
            classify(.json(403, #"{"error":"invalid_grant","error_description":"Unknown or invalid refresh token."}"#))
                == .grantEnded(
                    .oauthError(
                        status: 403, code: "invalid_grant", description: "Unknown or invalid refresh token.")))
    }

    @Test(
        "other 4xx: empty or JSON without an error → terminal; a page → not the server's verdict",
        arguments: [402, 404, 405, 409, 410, 413, 415, 418, 422, 451])
    func other4xx(status: Int) {
        #expect(endsGrant(classify(HTTPResponse(status: status))))
        #expect(endsGrant(classify(.json(status, #"{"message":"no"}"#))))
        #expect(
            classify(.text(status, "whatever", contentType: "text/plain"))
                == .notTheServersVerdict(ForeignAnswer(kind: .page, status: status, contentType: "text/plain")))
    }

    @Test(
        "a redirect to another host (a captive portal) may pass: 75; one on the same host, or without a Location, 76",
        arguments: [301, 302, 303, 307, 308])
    func redirects(status: Int) {
        let endpoint = "https://sso.example.com/realms/x/protocol/openid-connect/token"
        func outcome(_ location: String?) -> RefreshOutcome {
            RefreshOutcome.classify(
                .success(
                    .text(
                        status, "<html>Moved</html>", contentType: "text/html",
                        headers: location.map { ["location": $0] } ?? [:])), now: now, endpoint: endpoint)
        }
        let portal = ForeignAnswer(
            kind: .redirect(toHost: "portal.hotel.example"), status: status, contentType: "text/html")
        #expect(outcome("http://portal.hotel.example/login?continue=x") == .notTheServersVerdict(portal))
        #expect(portal.mayPass)
        #expect(portal.className == "redirect-elsewhere-\(status)")
        #expect(portal.description.contains("a redirect to portal.hotel.example"))
        let same = ForeignAnswer(kind: .redirect(toHost: nil), status: status, contentType: "text/html")
        #expect(outcome("https://SSO.example.com/auth/realms/x/token") == .notTheServersVerdict(same))
        #expect(outcome("/auth/realms/x/token") == .notTheServersVerdict(same))
        #expect(outcome(nil) == .notTheServersVerdict(same))
        #expect(!same.mayPass)
    }

    @Test("407 (a proxy wants credentials) → 76; 511 (RFC 6585 §6, a captive portal) → 75; both any body")
    func proxyAndNetworkAuthentication() {
        let proxy = classify(.text(407, "<html>Proxy login</html>", contentType: "text/html"))
        #expect(
            proxy
                == .notTheServersVerdict(
                    ForeignAnswer(kind: .proxyAuthentication, status: 407, contentType: "text/html")))
        let portal = classify(HTTPResponse(status: 511))
        #expect(portal == .notTheServersVerdict(ForeignAnswer(kind: .networkAuthentication, status: 511)))
        if case .notTheServersVerdict(let answer) = portal { #expect(answer.mayPass) }
        if case .notTheServersVerdict(let answer) = proxy { #expect(!answer.mayPass) }
    }

    @Test("unlisted 5xx → not the server's verdict (76, session kept)", arguments: [501, 505, 599])
    func unlisted5xx(status: Int) {
        #expect(
            classify(HTTPResponse(status: status))
                == .notTheServersVerdict(ForeignAnswer(kind: .serverFailure, status: status)))
    }

    @Test(
        "Entra AADSTS65001 refuses a narrowed refresh's target, not the grant; on the session's own refresh it still ends it"
    )
    func consentRefusesTheTarget() {
        let answer = HTTPResponse.json(
            400,
            #"{"error":"invalid_grant","error_description":"AADSTS65001: The user or administrator has not consented.","error_codes":[65001]}"#
        )
        guard case .grantEnded(let reason) = classify(answer) else {
            Issue.record("expected terminal")
            return
        }
        #expect(!ProviderErrorClasses.endsGrant(reason))
        let (refused, hint) = ProviderErrorClasses.refusesTarget(reason)
        #expect(refused)
        #expect(hint?.rendered.contains("AADSTS65001") == true)
        #expect(ProviderErrorClasses.row(reason)?.errorClass == .interactionNeeded, "the session's own refresh")
        let scope = GrantEndReason.oauthError(status: 400, code: "invalid_scope", description: nil)
        #expect(ProviderErrorClasses.refusesTarget(scope) == (true, nil))
        let grant = GrantEndReason.oauthError(status: 400, code: "invalid_grant", description: nil)
        #expect(ProviderErrorClasses.refusesTarget(grant) == (false, nil))
        #expect(ProviderErrorClasses.endsGrant(grant))
    }

    @Test("Keycloak's idle texts on a session with offline_access name Offline Session Idle and a schedule")
    func keycloakOfflineIdle() {
        let row = ProviderErrorClasses.row(code: "invalid_grant", description: "Session not active", providerCode: nil)
        let offline = ProviderErrorClasses.hint(row, sessionScope: "openid offline_access profile")
        #expect(offline?.rendered.contains("Offline Session Idle (30 days by default)") == true)
        #expect(offline?.rendered.contains("'tokenctl schedule install'") == true)
        let offlineText = offline?.rendered ?? ""
        #expect(Hint.problems(in: offlineText).isEmpty)
        let online = ProviderErrorClasses.hint(row, sessionScope: "openid profile")
        #expect(online?.rendered.contains("SSO Session Idle") == true)
        #expect(ProviderErrorClasses.hint(row, sessionScope: nil) == online)
        let reuse = ProviderErrorClasses.row(
            code: "invalid_grant", description: "Stale refresh token", providerCode: nil)
        #expect(ProviderErrorClasses.hint(reuse, sessionScope: "offline_access") == reuse?.hint)
    }

    @Test(
        "an error answer's trace_id and correlation_id, for --verbose; nothing else, and only identifier-shaped values")
    func errorIdentifiers() {
        let entra = HTTPResponse.json(
            400,
            #"{"error":"invalid_grant","trace_id":"0b1c2d3e-aaaa-bbbb-cccc-0123456789ab","correlation_id":"11111111-2222-3333-4444-555555555555","refresh_token":"rt-secret"}"#
        )
        #expect(
            TokenEndpointClient.errorIdentifiers(entra)
                == "trace_id 0b1c2d3e-aaaa-bbbb-cccc-0123456789ab, correlation_id 11111111-2222-3333-4444-555555555555")
        #expect(
            TokenEndpointClient.errorIdentifiers(
                .json(
                    400,
                    #"{"error":"invalid_grant","trace_id":"has space","correlation_id":"\#(String(repeating: "a", count: 65))"}"#
                ))
                == nil)
        #expect(TokenEndpointClient.errorIdentifiers(.json(200, #"{"access_token":"a","trace_id":"abc"}"#)) == nil)
    }

    @Test("the authority of a redirect's Location: host and port, lowercased, without user information")
    func authority() {
        #expect(ForeignAnswer.authority(of: "https://User:pw@Portal.Example:8443/x?y") == "portal.example:8443")
        #expect(ForeignAnswer.authority(of: "//cdn.example/p") == "cdn.example")
        #expect(ForeignAnswer.authority(of: "/relative") == nil)
        #expect(ForeignAnswer.authority(of: "https://") == nil)
    }

    @Test(
        "another 2xx without a body: no error and no access token, so unusable tokens that keep the session",
        arguments: [201, 204])
    func other2xxWithoutBody(status: Int) {
        #expect(
            classify(HTTPResponse(status: status))
                == .unusableTokens(UnusableTokens(problem: .notJSONObject, refreshToken: .absent)))
    }

    @Test("an error field that is not a string is not an OAuth error")
    func nonStringError() {
        #expect(
            classify(.json(400, #"{"error": 42}"#))
                == .grantEnded(.unexpectedStatus(400, contentType: "application/json")))
    }

    @Test(
        "server-provided error text is sanitised: a line break becomes a space, other control characters removed, at most 200 characters"
    )
    func sanitisedDescription() {
        let long = String(repeating: "y", count: 500)
        let outcome = classify(
            .json(400, #"{"error": "invalid_grant", "error_description": "line1\nline2\u001b[31m\#(long)"}"#))
        guard case .grantEnded(.oauthError(_, _, let description?, _)) = outcome else {
            Issue.record("expected an OAuth error with a description")
            return
        }
        #expect(!description.contains("\n"))
        #expect(!description.contains("\u{1B}"))
        #expect(description.hasPrefix("line1 line2[31m"))
        #expect(description.count == 200)
    }

    @Test("429 without Retry-After → transient, no delay given")
    func rateLimitedPlain() {
        #expect(classify(HTTPResponse(status: 429)) == .transient(.rateLimited, retryAfter: nil))
    }

    @Test("429 with Retry-After in seconds → transient with that delay")
    func rateLimitedSeconds() {
        #expect(classify(.text(429, "", headers: ["retry-after": "120"])) == .transient(.rateLimited, retryAfter: 120))
        #expect(classify(.text(429, "", headers: ["retry-after": "0"])) == .transient(.rateLimited, retryAfter: 0))
    }

    @Test("429 with Retry-After as an HTTP-date → delay measured against the response's own Date header")
    func rateLimitedDate() {
        // The server's clock runs 1000 s ahead of ours: the delay is 30 s, not 1030 s.
        let serverNow = now + 1000
        let response = HTTPResponse.text(
            429, "",
            headers: [
                "date": HTTPDate.format(serverNow), "retry-after": HTTPDate.format(serverNow + 30),
            ])
        #expect(classify(response) == .transient(.rateLimited, retryAfter: 30))
    }

    @Test("429 with an HTTP-date and no Date header → delay from our clock")
    func rateLimitedDateWithoutDateHeader() {
        let response = HTTPResponse.text(429, "", headers: ["retry-after": HTTPDate.format(now + 45)])
        #expect(classify(response) == .transient(.rateLimited, retryAfter: 45))
    }

    @Test("a Retry-After date in the past means no wait")
    func retryAfterPast() {
        let response = HTTPResponse.text(
            503, "", headers: ["date": HTTPDate.format(now), "retry-after": HTTPDate.format(now - 60)])
        #expect(classify(response) == .transient(.serverError(503), retryAfter: 0))
    }

    @Test(
        "unparseable or negative Retry-After is ignored",
        arguments: ["soon", "-5", "", "nan", "Sun, 99 Nov 1994 08:49:37 GMT"])
    func badRetryAfter(value: String) {
        #expect(classify(.text(429, "", headers: ["retry-after": value])) == .transient(.rateLimited, retryAfter: nil))
    }

    @Test("408 Request Timeout → transient: the server gave up waiting, nothing was decided")
    func requestTimeout() {
        #expect(
            classify(.text(408, "<html>timeout</html>", contentType: "text/html"))
                == .transient(.serverError(408), retryAfter: nil))
        #expect(TransientReason.serverError(408).requestMayHaveReachedServer == false)
        #expect(TransientReason.transport(.timeout, "t").requestMayHaveReachedServer)
        #expect(TransientReason.transport(.connect, "c").requestMayHaveReachedServer == false)
    }

    @Test("500, 502, 503, 504 → transient whatever the body", arguments: [500, 502, 503, 504])
    func serverErrors(status: Int) {
        let bodies: [HTTPResponse] = [
            HTTPResponse(status: status),
            .text(status, "<html>Bad Gateway</html>", contentType: "text/html"),
            .json(status, #"{"error": "invalid_grant"}"#),
            .json(status, #"{"error": "temporarily_unavailable"}"#),
        ]
        for response in bodies {
            #expect(classify(response) == .transient(.serverError(status), retryAfter: nil))
        }
        #expect(
            classify(.text(status, "", headers: ["retry-after": "7"]))
                == .transient(.serverError(status), retryAfter: 7))
    }

    @Test("a response over the size cap is an unusable answer → terminal")
    func responseTooLarge() {
        let outcome = RefreshOutcome.classify(.failure(HTTPTransportError(.responseTooLarge, "too big")), now: now)
        #expect(outcome == .grantEnded(.unusableResponse("too big")))
    }

    @Test(
        "transport failures → transient",
        arguments: [
            HTTPTransportError.Kind.timeout, .connect, .resolve, .tls, .connectionReset, .other,
        ])
    func transportErrors(kind: HTTPTransportError.Kind) {
        let outcome = RefreshOutcome.classify(.failure(HTTPTransportError(kind, "it broke")), now: now)
        #expect(outcome == .transient(.transport(kind, "it broke"), retryAfter: nil))
        if case .transient(let reason, _) = outcome {
            #expect(reason.className == kind.rawValue)
            #expect(reason.description == "it broke")
        }
    }

    @Test("transient class names")
    func transientClassNames() {
        #expect(TransientReason.rateLimited.className == "rate-limited")
        #expect(TransientReason.serverError(503).className == "http-503")
        #expect(TransientReason.lockHeldTooLong.className == "lock-timeout")
        #expect(TransientReason.deadlineExceeded("x").className == "deadline")
    }
}

@Suite("HTTPDate")
struct HTTPDateTests {
    // RFC 9110 §5.6.7's example instant.
    let example: Double = 784_111_777

    @Test("IMF-fixdate")
    func imfFixdate() {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == example)
        #expect(HTTPDate.parse("Thu, 01 Jan 1970 00:00:00 GMT") == 0)
        #expect(HTTPDate.parse("Tue, 29 Feb 2028 23:59:59 GMT") == 1_835_481_599)
    }

    @Test("month names are case-insensitive")
    func monthCase() {
        #expect(HTTPDate.parse("Sun, 06 NOV 1994 08:49:37 GMT") == example)
    }

    @Test("RFC 850 (obsolete)")
    func rfc850() {
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == example)
        #expect(HTTPDate.parse("Thursday, 01-Jan-70 00:00:00 GMT") == 0)
        #expect(HTTPDate.parse("Monday, 01-Jan-24 00:00:00 GMT") == 1_704_067_200)
    }

    @Test("asctime (obsolete), with the space-padded day")
    func asctime() {
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == example)
        #expect(HTTPDate.parse("Sun Nov 06 08:49:37 1994") == example)
    }

    @Test(
        "garbage is not a date",
        arguments: [
            "", "garbage", "120", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT",
            "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Nov 1969 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 06 Nov 1994 08:49:37", "Sunday, 06-Nov 08:49:37 GMT", "Sun Nov  6 08:49:37", "2024-01-01T00:00:00Z",
        ])
    func garbage(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test("format is IMF-fixdate")
    func format() {
        #expect(HTTPDate.format(example) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
    }

    @Test(
        "format then parse gives the same whole second",
        arguments: [0.0, 784_111_777, 951_782_400, 1_700_000_000, 1_700_000_000.9, 4_102_444_799])
    func roundTrip(seconds: Double) {
        #expect(HTTPDate.parse(HTTPDate.format(seconds)) == seconds.rounded(.down))
    }
}
