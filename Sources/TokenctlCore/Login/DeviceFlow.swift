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
    var browserCommand: SuggestedCommand? = nil
    /// The profile signing in, for the commands hints name.
    var profile: ProfileName = .default
    /// The provider preset, for how to read its errors (GitHub's `unauthorized_client`).
    var provider: Provider? = nil

    func run(
        deviceEndpoint: String, tokenEndpoint: String, scope: String?, extra: [(String, String)]
    ) async throws(TokenctlError) -> (TokenResponse, receivedAt: Double, serverDate: Double?) {
        let authorization = try await requestCodes(deviceEndpoint: deviceEndpoint, scope: scope, extra: extra)
        let expiresAt = clock.now() + authorization.expiresIn
        presenter.showDeviceAuthorization(authorization, expiresAt: expiresAt)
        defer { presenter.deviceFlowEnded() }
        return try await awaitApproval(authorization, tokenEndpoint: tokenEndpoint, expiresAt: expiresAt)
    }

    /// §3.1, §3.2: the device and user codes, from the device authorization endpoint.
    private func requestCodes(
        deviceEndpoint: String, scope: String?, extra: [(String, String)]
    ) async throws(TokenctlError) -> DeviceAuthorization {
        var fields: [(String, String)] = []
        if let scope { fields.append(("scope", scope)) }
        fields += extra
        let response: HTTPResponse
        let deviceRequest = try credentials.formRequest(deviceEndpoint, fields)
        // The client secret, should the endpoint's error text echo the request.
        let deviceRedaction = SecretRedaction(request: deviceRequest)
        do {
            response = try await http.send(deviceRequest, timeout: retry.attemptTimeout)
        } catch {
            throw TokenctlError(
                .transient, "cannot reach the device authorization endpoint: \(error)",
                hint: "Nothing was stored; try again later.")
        }
        return try codes(in: response, deviceEndpoint: deviceEndpoint, redaction: deviceRedaction)
    }

    /// The device authorization endpoint's answer: the codes, or the error to report.
    private func codes(
        in response: HTTPResponse, deviceEndpoint: String, redaction deviceRedaction: SecretRedaction
    ) throws(TokenctlError) -> DeviceAuthorization {
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
                hint: Suggestion.sentences(
                    "Nothing was stored.", signInByBrowser,
                    "If the server has a device authorization endpoint elsewhere, give it with \(options: .login([.deviceAuthorizationEndpoint(.omitted)]))."
                ))
        }
        // The body decides (GitHub answers its errors with HTTP 200, by default form-encoded).
        let object = EndpointAnswer.object(response)
        if let (code, description) = EndpointAnswer.error(in: object) {
            let (row, providerCode) = ProviderErrorClasses.match(
                code: code, description: description, errorCodes: object?["error_codes"], status: response.status)
            if case .transient? = row?.errorClass {
                let reason = GrantEndReason.oauthError(
                    status: response.status, code: deviceRedaction.scrub(code),
                    description: description.map { TerminalText.short(deviceRedaction.scrub($0)) },
                    providerCode: providerCode)
                throw TokenctlError(
                    .transient, "the device authorization endpoint cannot answer now: \(reason)",
                    hint: Suggestion.sentences(row?.hint, "Nothing was stored; try again later."))
            }
            throw deviceEndpointRefusal(
                status: response.status, code: TerminalText.short(deviceRedaction.scrub(code)),
                description: description.map { TerminalText.short(deviceRedaction.scrub($0)) }, row: row)
        }
        guard (200..<300).contains(response.status) else {
            throw TokenctlError(
                .configuration, "the device authorization endpoint refused the request (HTTP \(response.status))",
                hint:
                    "Check \(options: .login([.clientID(.omitted)])) and \(options: .login([.scope(.omitted)])), and that the client may use the device flow."
            )
        }
        return try DeviceAuthorization.parse(object, endpoint: deviceEndpoint)
    }

    /// Where the polling stands: the interval (`slow_down` grows it), the failures to back off
    /// from, and a wait the server asked for (Retry-After, or a row's minimum backoff), for the
    /// next poll only.
    private struct PollState {
        var schedule: DevicePollSchedule
        var transientFailures = 0
        var serverWait: Double?
    }

    /// §3.4, §3.5: poll the token endpoint until the sign-in is approved, denied, or the codes expire.
    private func awaitApproval(
        _ authorization: DeviceAuthorization, tokenEndpoint: String, expiresAt: Double
    ) async throws(TokenctlError) -> (TokenResponse, receivedAt: Double, serverDate: Double?) {
        var state = PollState(schedule: DevicePollSchedule(interval: authorization.interval))
        while true {
            // §3.5: wait `interval` (and a margin) before every poll, also the first.
            let wait = max(state.schedule.wait(afterTransientFailures: state.transientFailures), state.serverWait ?? 0)
            state.serverWait = nil
            guard clock.now() + wait < expiresAt else { throw expired() }
            do { try await clock.sleep(wait) } catch {
                throw TokenctlError(.loginRequired, "login cancelled", hint: "Nothing was stored.")
            }
            // Made for each poll: a client assertion is never sent twice (RFC 7523 §3).
            let request = try credentials.formRequest(
                tokenEndpoint, [("grant_type", Self.grantType), ("device_code", authorization.deviceCode)])
            let result: Result<HTTPResponse, HTTPTransportError>
            do { result = .success(try await http.send(request, timeout: retry.attemptTimeout)) } catch {
                result = .failure(error)
            }
            let receivedAt = clock.now()
            let outcome = RefreshOutcome.classify(
                result, now: receivedAt, endpoint: tokenEndpoint, redaction: SecretRedaction(request: request))
            if let (tokens, serverDate) = try consider(
                outcome, answer: try? result.get(), receivedAt: receivedAt, expiresAt: expiresAt, &state)
            {
                return (tokens, receivedAt, serverDate)
            }
        }
    }

    /// A poll's answer: the tokens, nil to go on polling (after updating `state`), or the
    /// error that ends the login.
    private func consider(
        _ outcome: RefreshOutcome, answer: HTTPResponse?, receivedAt: Double, expiresAt: Double,
        _ state: inout PollState
    ) throws(TokenctlError) -> (TokenResponse, serverDate: Double?)? {
        switch outcome {
        case .success(let tokens, let serverDate):
            return (tokens, serverDate)
        case .transient(.rateLimited, let retryAfter):
            // 429: Auth0's slow_down, or a rate limit without an OAuth body (Okta:
            // https://developer.okta.com/docs/reference/rl-best-practices/) says what slow_down
            // says: the interval grows (to the body's interval if larger), and Retry-After is
            // waited out before the next poll.
            state.transientFailures = 0
            state.schedule.slowDown(
                serverInterval: answer.flatMap { EndpointAnswer.seconds(EndpointAnswer.object($0)?["interval"]) })
            state.serverWait = retryAfter
            presenter.deviceFlowSlowedDown(interval: max(state.schedule.interval, retryAfter ?? 0))
        case .transient(_, let retryAfter):
            // §3.5: back off on connection problems and on a server that cannot answer now
            // (temporarily_unavailable, Entra's throttling), and keep going until the codes expire.
            state.transientFailures += 1
            state.serverWait = retryAfter
        case .grantEnded(.oauthError(let status, let code, let description, _))
        where Self.pollCodes.contains(code)
            || (Provider.deviceFlowExpiredCodes.contains(code) && receivedAt >= expiresAt):
            state.transientFailures = 0
            try considerPollCode(code, status: status, description: description, answer: answer, &state)
        case .notTheServersVerdict(let answer) where answer.mayPass:
            // A captive portal in the way: the codes stay valid until they expire (§3.5).
            state.transientFailures += 1
        case .notTheServersVerdict(let answer):
            throw TokenctlError(
                .protocolError, "the token endpoint did not answer the device login's poll: \(answer)",
                hint: Suggestion.sentences("Nothing was stored; a session signed in before is kept.", answer.advice))
        case .clientRefused(let reason):
            throw LoginAnswer.clientRefused(reason, profile: profile)
        case .grantEnded(let reason):
            throw ended(reason)
        case .unusableTokens(let answer):
            // A 2xx without an access token and without an error: the server broke the
            // protocol, it did not refuse the login (76; a session signed in before stays).
            throw TokenctlError(
                .protocolError, "the server approved the device login but its answer is unusable: \(answer)",
                hint: "Nothing was stored; a session signed in before is kept. Report it to the server's operator.")
        }
        return nil
    }

    /// The poll answers of §3.5 (and the providers') while the user has not finished, or that end the wait.
    private func considerPollCode(
        _ code: String, status: Int?, description: String?, answer: HTTPResponse?, _ state: inout PollState
    ) throws(TokenctlError) {
        switch code {
        case "authorization_pending":
            return
        case "slow_down":
            state.schedule.slowDown(
                serverInterval: answer.flatMap {
                    EndpointAnswer.seconds(EndpointAnswer.object($0)?["interval"])
                })
            presenter.deviceFlowSlowedDown(interval: state.schedule.interval)
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
    }

    /// The server ended the login with an answer that is not one of the poll codes.
    private func ended(_ reason: GrantEndReason) -> TokenctlError {
        var words = "\(reason)"
        if case .oauthError(_, let code, let description, _) = reason {
            words = "\(code)\(description.map { ": \($0)" } ?? "")"
        }
        return TokenctlError(
            .loginRequired, "the server ended the device login: \(words)",
            hint: Suggestion.sentences("Nothing was stored.", ProviderErrorClasses.row(reason)?.hint))
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
                hint: Suggestion.sentences(
                    "Nothing was stored.", signInByBrowser,
                    advice.map { Suggestion($0) }
                        ?? "Or have the server's administrator enable the device authorization grant for this client."
                ))
        }
        if let row, row.errorClass == .configuration {
            return TokenctlError(
                .configuration, "the device authorization endpoint refused the client (\(words))",
                hint: Suggestion.sentences("Nothing was stored.", row.hint))
        }
        return TokenctlError(
            .configuration,
            "the device authorization endpoint refused the request (\(status.map { "HTTP \($0) " } ?? "")\(words))",
            hint:
                "Check \(options: .login([.clientID(.omitted)])) and \(options: .login([.scope(.omitted)])), and that the client may use the device flow."
        )
    }

    /// "Sign in by browser instead", with the command when it can be printed.
    private var signInByBrowser: Suggestion {
        browserCommand.map { "Sign in by browser instead: '\($0)'." }
            ?? "Sign in by browser instead: run the same login command with \(options: .login([.browser])) in place of \(options: .login([.device]))."
    }

    private func expired() -> TokenctlError {
        TokenctlError(
            .loginRequired, "the device code expired before the sign-in was approved",
            hint: "Nothing was stored. Run the same login command again and approve it in time.")
    }
}
