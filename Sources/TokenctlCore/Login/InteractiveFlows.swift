import TokenctlEssentials

/// The device authorization grant (RFC 8628): request codes, show them, poll until approved.
struct DeviceFlow: Sendable {
    static let grantType = "urn:ietf:params:oauth:grant-type:device_code"

    var http: any HTTPClient
    var clock: Clock
    var retry: RetryPolicy
    var credentials: ClientCredentials
    var presenter: any LoginPresenter
    /// The same login by browser, for hints (`LoginRequest.browserLoginCommand`); nil: none printable.
    var browserCommand: String? = nil
    /// The profile signing in, for the commands hints name.
    var profile: ProfileName = .default
    /// The provider preset, for how to read its errors (GitHub's `unauthorized_client`).
    var provider: Provider? = nil

    func run(
        deviceEndpoint: String, tokenEndpoint: String, scope: String?, extra: [(String, String)]
    ) async throws(TokenctlError) -> (TokenResponse, receivedAt: Double, serverDate: Double?) {
        var fields: [(String, String)] = []
        if let scope { fields.append(("scope", scope)) }
        fields += extra
        let response: HTTPResponse
        let deviceRequest = credentials.formRequest(deviceEndpoint, fields)
        // The client secret, should the endpoint's error text echo the request.
        let deviceRedaction = SecretRedaction(request: deviceRequest)
        do {
            response = try await http.send(deviceRequest, timeout: retry.attemptTimeout)
        } catch {
            throw TokenctlError(
                .transient, "cannot reach the device authorization endpoint: \(error)",
                hint: "Nothing was stored; try again later.")
        }
        if response.isTransientFailure {
            throw TokenctlError(
                .transient, "the device authorization endpoint failed with HTTP \(response.status)",
                hint: "Nothing was stored; try again later.")
        }
        // No such endpoint, whatever the body says: a server without the device grant (GitLab
        // before 17.2 or with its feature flag off answers 404:
        // https://docs.gitlab.com/api/oauth2/#device-authorization-grant-flow).
        if [404, 405, 501].contains(response.status) {
            throw TokenctlError(
                .configuration,
                "the server does not support the device flow: its device authorization endpoint \(deviceEndpoint) answered HTTP \(response.status)",
                hint: Hint.sentences(
                    "Nothing was stored.", signInByBrowser,
                    "If the server has a device authorization endpoint elsewhere, give it with --device-authorization-endpoint."
                ))
        }
        // The body decides (GitHub answers its errors with HTTP 200, by default form-encoded).
        let object = EndpointAnswer.object(response)
        if let (code, description) = EndpointAnswer.error(in: object) {
            let (row, providerCode) = ProviderErrorClasses.match(
                code: code, description: description, errorCodes: object?["error_codes"], status: response.status)
            if case .transient? = row?.errorClass {
                let reason = TerminalReason.oauthError(
                    status: response.status, code: deviceRedaction.scrub(code),
                    description: description.map { TerminalText.short(deviceRedaction.scrub($0)) },
                    providerCode: providerCode)
                throw TokenctlError(
                    .transient, "the device authorization endpoint cannot answer now: \(reason)",
                    hint: Hint.sentences(row?.hint, "Nothing was stored; try again later."))
            }
            throw deviceEndpointRefusal(
                status: response.status, code: TerminalText.short(deviceRedaction.scrub(code)),
                description: description.map { TerminalText.short(deviceRedaction.scrub($0)) }, row: row)
        }
        guard (200..<300).contains(response.status) else {
            throw TokenctlError(
                .configuration, "the device authorization endpoint refused the request (HTTP \(response.status))",
                hint: "Check --client-id and --scope, and that the client may use the device flow.")
        }
        let authorization = try DeviceAuthorization.parse(object, endpoint: deviceEndpoint)
        let expiresAt = clock.now() + authorization.expiresIn
        presenter.showDeviceAuthorization(authorization, expiresAt: expiresAt)
        defer { presenter.deviceFlowEnded() }

        let request = credentials.formRequest(
            tokenEndpoint, [("grant_type", Self.grantType), ("device_code", authorization.deviceCode)])
        var schedule = DevicePollSchedule(interval: authorization.interval)
        var transientFailures = 0
        // A wait the server asked for (Retry-After, or a row's minimum backoff), for the next poll only.
        var serverWait: Double?
        while true {
            // §3.5: wait `interval` (and a margin) before every poll, also the first.
            let wait = max(schedule.wait(afterTransientFailures: transientFailures), serverWait ?? 0)
            serverWait = nil
            guard clock.now() + wait < expiresAt else { throw expired() }
            do { try await clock.sleep(wait) } catch {
                throw TokenctlError(.loginRequired, "login cancelled", hint: "Nothing was stored.")
            }
            let result: Result<HTTPResponse, HTTPTransportError>
            do { result = .success(try await http.send(request, timeout: retry.attemptTimeout)) } catch {
                result = .failure(error)
            }
            let receivedAt = clock.now()
            switch RefreshOutcome.classify(
                result, now: receivedAt, endpoint: tokenEndpoint, redaction: SecretRedaction(request: request))
            {
            case .success(let tokens, let serverDate):
                return (tokens, receivedAt, serverDate)
            case .transient(.rateLimited, let retryAfter):
                // 429: Auth0's slow_down, or a rate limit without an OAuth body (Okta:
                // https://developer.okta.com/docs/reference/rl-best-practices/) says what slow_down
                // says: the interval grows (to the body's interval if larger), and Retry-After is
                // waited out before the next poll.
                transientFailures = 0
                let answer = try? result.get()
                schedule.slowDown(
                    serverInterval: answer.flatMap { EndpointAnswer.seconds(EndpointAnswer.object($0)?["interval"]) })
                serverWait = retryAfter
                presenter.deviceFlowSlowedDown(interval: max(schedule.interval, retryAfter ?? 0))
            case .transient(_, let retryAfter):
                // §3.5: back off on connection problems and on a server that cannot answer now
                // (temporarily_unavailable, Entra's throttling), and keep going until the codes expire.
                transientFailures += 1
                serverWait = retryAfter
            case .terminal(.oauthError(let status, let code, let description, _))
            where Self.pollCodes.contains(code)
                || (Provider.deviceFlowExpiredCodes.contains(code) && receivedAt >= expiresAt):
                transientFailures = 0
                switch code {
                case "authorization_pending":
                    continue
                case "slow_down":
                    let answer = try? result.get()
                    schedule.slowDown(
                        serverInterval: answer.flatMap {
                            EndpointAnswer.seconds(EndpointAnswer.object($0)?["interval"])
                        })
                    presenter.deviceFlowSlowedDown(interval: schedule.interval)
                case "access_denied",
                    _ where Provider.deviceFlowDeclinedCodes.contains(code):
                    throw TokenctlError(
                        .loginRequired, "the sign-in was denied on the verification page",
                        hint: "Nothing was stored. Run the same login command to try again.")
                case "expired_token",
                    _ where Provider.deviceFlowExpiredCodes.contains(code):
                    throw expired()
                default:
                    throw deviceEndpointRefusal(status: status, code: code, description: description, row: nil)
                }
            case .notTheServersVerdict(let answer) where answer.mayPass:
                // A captive portal in the way: the codes stay valid until they expire (§3.5).
                transientFailures += 1
            case .notTheServersVerdict(let answer):
                throw TokenctlError(
                    .protocolError, "the token endpoint did not answer the device login's poll: \(answer)",
                    hint: Hint.sentences("Nothing was stored; a session signed in before is kept.", answer.advice))
            case .clientRefused(let reason):
                throw TokenctlService.clientRefused(reason, profile: profile)
            case .terminal(let reason):
                var words = "\(reason)"
                if case .oauthError(_, let code, let description, _) = reason {
                    words = "\(code)\(description.map { ": \($0)" } ?? "")"
                }
                throw TokenctlError(
                    .loginRequired, "the server ended the device login: \(words)",
                    hint: Hint.sentences("Nothing was stored.", ProviderErrorClasses.row(reason)?.hint))
            case .unusableTokens(let answer):
                // A 2xx without an access token and without an error: the server broke the
                // protocol, it did not refuse the login (76; a session signed in before stays).
                throw TokenctlError(
                    .protocolError, "the server approved the device login but its answer is unusable: \(answer)",
                    hint: "Nothing was stored; a session signed in before is kept. Report it to the server's operator.")
            }
        }
    }

    /// The poll answers RFC 8628 §3.5 and the providers give while the user has not finished,
    /// or that end the wait (and a provider's expired codes, `Provider.deviceFlowExpiredCodes`,
    /// once the codes have expired; before, they end the login as any refusal does).
    static let pollCodes: Set<String> = Set([
        "authorization_pending", "slow_down", "access_denied", "expired_token",
    ]).union(Provider.deviceFlowDeclinedCodes).union(deviceFlowOffCodes)

    /// Error codes that may say the device flow is switched off for this client (read by
    /// `saysDeviceFlowOff`).
    static let deviceFlowOffCodes: Set<String> = Provider.deviceFlowSwitchedOffCodes.union(["unauthorized_client"])

    /// Whether an error says the device flow is switched off for this client: a provider's own
    /// code (GitHub's `device_flow_disabled`), `unauthorized_client` from a preset that means so
    /// by it (GitHub's), or an `unauthorized_client` whose text says so (Keycloak: "Client is
    /// not allowed to initiate OAuth 2.0 Device Authorization Grant. The flow is disabled for
    /// the client."). Elsewhere `unauthorized_client` is RFC 6749 §5.2's: this client may not
    /// do this, as the server says.
    static func saysDeviceFlowOff(code: String, description: String?, provider: Provider?) -> Bool {
        if Provider.deviceFlowSwitchedOffCodes.contains(code) { return true }
        guard code == "unauthorized_client" else { return false }
        if provider?.deviceFlowWords.unauthorizedClientMeansSwitchedOff == true { return true }
        guard let text = description?.lowercased(), text.contains("device") else { return false }
        return ["disabled", "not enabled", "not allowed"].contains { text.contains($0) }
    }

    /// The device endpoint's (or a poll's) OAuth error, as the error to report: exit 78 either
    /// way, since the request or the client is what must change.
    private func deviceEndpointRefusal(status: Int?, code: String, description: String?, row: ProviderErrorClasses.Row?)
        -> TokenctlError
    {
        let words = "\(code)\(description.map { ": \($0)" } ?? "")"
        if Self.saysDeviceFlowOff(code: code, description: description, provider: provider) {
            let advice = Provider.deviceFlowSwitchedOnAdvice(code: code, provider: provider)
            return TokenctlError(
                .configuration,
                "the device flow is not enabled for client '\(TerminalText.short(credentials.clientID))' at this server (\(words))",
                hint: Hint.sentences(
                    "Nothing was stored.", signInByBrowser,
                    advice
                        ?? "Or have the server's administrator enable the device authorization grant for this client."
                ))
        }
        if let row, row.errorClass == .configuration {
            return TokenctlError(
                .configuration, "the device authorization endpoint refused the client (\(words))",
                hint: Hint.sentences("Nothing was stored.", row.hint))
        }
        return TokenctlError(
            .configuration,
            "the device authorization endpoint refused the request (\(status.map { "HTTP \($0) " } ?? "")\(words))",
            hint: "Check --client-id and --scope, and that the client may use the device flow.")
    }

    /// "Sign in by browser instead", with the command when it can be printed.
    private var signInByBrowser: String {
        browserCommand.map { "Sign in by browser instead: '\($0)'." }
            ?? "Sign in by browser instead: run the same login command with --browser in place of --device."
    }

    private func expired() -> TokenctlError {
        TokenctlError(
            .loginRequired, "the device code expired before the sign-in was approved",
            hint: "Nothing was stored. Run the same login command again and approve it in time.")
    }
}

/// The authorization code grant with PKCE (RFC 7636, S256) and a loopback redirect (RFC 8252 §7.3).
struct BrowserFlow: Sendable {
    var http: any HTTPClient
    var clock: Clock
    var retry: RetryPolicy
    var credentials: ClientCredentials
    var presenter: any LoginPresenter
    /// The profile signing in, for the commands hints name.
    var profile: ProfileName = .default

    struct Result {
        var response: TokenResponse
        var receivedAt: Double
        var serverDate: Double?
        var nonce: String?
    }

    func run(
        issuer: String, authorizationEndpoint: String, tokenEndpoint: String, scope: String?, extra: [(String, String)],
        port: UInt16?, openBrowser: Bool, timeout: Double, checksIssuerParameter: Bool, dpopThumbprint: String? = nil
    ) async throws(TokenctlError) -> Result {
        // The PKCE challenge needs libcrypto (SHA-256), loaded here on first use.
        if let reason = OpenSSL.unavailableReason {
            throw TokenctlError(.unexpected, "cannot make the PKCE challenge: \(reason)", hint: "Nothing was stored.")
        }
        let server = try LoopbackRedirectServer(port: port ?? 0)
        let pkce = PKCE()
        let state = SecureRandom.token()
        let nonce = (scope?.split(separator: " ").contains("openid") ?? false) ? SecureRandom.token() : nil
        var parameters: [(String, String)] = [
            ("response_type", "code"), ("client_id", credentials.clientID), ("redirect_uri", server.redirectURI),
            ("state", state), ("code_challenge", pkce.challenge), ("code_challenge_method", pkce.method),
        ]
        if let scope { parameters.append(("scope", scope)) }
        if let nonce { parameters.append(("nonce", nonce)) }
        // RFC 9449 §10: the code is bound to the key that will redeem it.
        if let dpopThumbprint { parameters.append(("dpop_jkt", dpopThumbprint)) }
        parameters += extra
        let separator = authorizationEndpoint.contains("?") ? "&" : "?"
        let url = authorizationEndpoint + separator + FormEncoding.encode(parameters)
        _ = presenter.showAuthorizationURL(url, openBrowser: openBrowser)

        guard let callback = await server.waitForCallback(timeout: timeout, expectedState: state, clock: clock) else {
            // A redirect that reached the listener but was refused is what the user needs to
            // hear about, not "no answer".
            throw TokenctlError(
                .loginRequired,
                server.lastRefusal.map {
                    "the browser's redirect was refused: \($0); no other came within \(Int(saturating: timeout)) seconds"
                }
                    ?? "no answer from the browser within \(Int(saturating: timeout)) seconds",
                hint: "Nothing was stored. Run the same login command again, or with --device instead of --browser.")
        }
        let received = callback.parameters
        // RFC 6749 §10.12: a response whose state we did not send is someone else's (CSRF).
        guard received["state"] == state else {
            callback.respond(
                status: 400, title: "Sign-in rejected",
                message: "The response did not match this login (wrong state). Return to the terminal.")
            throw TokenctlError(
                .loginRequired,
                "the redirect carried a state that does not match this login (a forged or stale response)",
                hint: "Nothing was stored. Run the same login command again.")
        }
        if let error = received["error"] {
            // The server's text reaches us through the browser: none of this login's secrets in it.
            let redaction = SecretRedaction([pkce.verifier, state, credentials.secret])
            let code = TerminalText.short(redaction.scrub(error))
            let description = received["error_description"].map { TerminalText.short(redaction.scrub($0)) }
            callback.respond(
                status: 200, title: "Sign-in not completed",
                message: "The server answered: \(Self.html(code)). Return to the terminal.")
            if code == "access_denied" {
                throw TokenctlError(
                    .loginRequired,
                    "the sign-in was denied in the browser (access_denied)\(description.map { ": \($0)" } ?? "")",
                    hint: "Nothing was stored.")
            }
            throw TokenctlError(
                .loginRequired,
                "the authorization server refused the sign-in: \(code)\(description.map { ": \($0)" } ?? "")",
                hint: "Nothing was stored.")
        }
        // RFC 9207: when the server names itself in the response, it must be our issuer (mix-up defence).
        if checksIssuerParameter, let responseIssuer = received["iss"], responseIssuer != issuer {
            callback.respond(
                status: 400, title: "Sign-in rejected",
                message: "The response came from another issuer. Return to the terminal.")
            throw TokenctlError(
                .loginRequired, "the redirect came from issuer '\(TerminalText.short(responseIssuer))', not \(issuer)",
                hint: "Nothing was stored.")
        }
        guard let code = received["code"], !code.isEmpty else {
            callback.respond(
                status: 400, title: "Sign-in failed",
                message: "The response carried no authorization code. Return to the terminal.")
            throw TokenctlError(
                .loginRequired, "the redirect carried no authorization code", hint: "Nothing was stored.")
        }
        callback.respond(
            status: 200, title: "Signed in",
            message: "tokenctl received the authorization. You can close this tab and return to the terminal.")

        let request = credentials.formRequest(
            tokenEndpoint,
            [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", server.redirectURI),
                ("code_verifier", pkce.verifier),
            ])
        // An authorization code is single-use: never resend it after a response we could not read.
        var once = retry
        once.maximumAttempts = 1
        let client = TokenEndpointClient(http: http, clock: clock, retry: once)
        let (outcome, receivedAt) = await client.exchange(request)
        let (response, serverDate) = try TokenctlService.successOrThrow(
            outcome, what: "the authorization code", profile: profile)
        return Result(response: response, receivedAt: receivedAt, serverDate: serverDate, nonce: nonce)
    }

    static func html(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            default: result.append(character)
            }
        }
        return result
    }
}
