import TokenctlEssentials

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

        let callback = try await waitForCallback(server, timeout: timeout, state: state)
        let code = try authorizationCode(
            callback, state: state, secrets: [pkce.verifier, state, credentials.secret],
            issuer: checksIssuerParameter ? issuer : nil)
        let (response, receivedAt, serverDate) = try await exchange(
            code, tokenEndpoint: tokenEndpoint, redirectURI: server.redirectURI, verifier: pkce.verifier)
        return Result(response: response, receivedAt: receivedAt, serverDate: serverDate, nonce: nonce)
    }

    /// The browser's redirect to the loopback listener, within `timeout`.
    private func waitForCallback(
        _ server: LoopbackRedirectServer, timeout: Double, state: String
    ) async throws(TokenctlError) -> LoopbackRedirectServer.Callback {
        guard let callback = await server.waitForCallback(timeout: timeout, expectedState: state, clock: clock) else {
            // A redirect that reached the listener but was refused is what the user needs to
            // hear about, not "no answer".
            throw TokenctlError(
                .loginRequired,
                server.lastRefusal.map {
                    "the browser's redirect was refused: \($0); no other came within \(Int(saturating: timeout)) seconds"
                }
                    ?? "no answer from the browser within \(Int(saturating: timeout)) seconds",
                hint:
                    "Nothing was stored. Run the same login command again, or with \(options: .login([.device])) instead of \(options: .login([.browser]))."
            )
        }
        return callback
    }

    /// The authorization code the redirect carries, once it is this login's answer; the browser
    /// gets a page saying how it went.
    ///
    /// - Parameters:
    ///   - secrets: this login's secrets, scrubbed from the server's text.
    ///   - issuer: the issuer the response must name when it names one (RFC 9207); nil: not checked.
    private func authorizationCode(
        _ callback: LoopbackRedirectServer.Callback, state: String, secrets: [String?], issuer: String?
    ) throws(TokenctlError) -> String {
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
            throw refusal(error, description: received["error_description"], callback, secrets: secrets)
        }
        // RFC 9207: when the server names itself in the response, it must be our issuer (mix-up defence).
        if let issuer, let responseIssuer = received["iss"], responseIssuer != issuer {
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
        return code
    }

    /// The authorization server's refusal, as the redirect carried it.
    private func refusal(
        _ error: String, description: String?, _ callback: LoopbackRedirectServer.Callback, secrets: [String?]
    ) -> TokenctlError {
        // The server's text reaches us through the browser: none of this login's secrets in it.
        let redaction = SecretRedaction(secrets)
        let code = TerminalText.short(redaction.scrub(error))
        let description = description.map { TerminalText.short(redaction.scrub($0)) }
        callback.respond(
            status: 200, title: "Sign-in not completed",
            message: "The server answered: \(Self.html(code)). Return to the terminal.")
        if code == "access_denied" {
            return TokenctlError(
                .loginRequired,
                "the sign-in was denied in the browser (access_denied)\(description.map { ": \($0)" } ?? "")",
                hint: "Nothing was stored.")
        }
        return TokenctlError(
            .loginRequired,
            "the authorization server refused the sign-in: \(code)\(description.map { ": \($0)" } ?? "")",
            hint: "Nothing was stored.")
    }

    /// The code for tokens at the token endpoint (RFC 7636 §4.5: with the verifier).
    private func exchange(
        _ code: String, tokenEndpoint: String, redirectURI: String, verifier: String
    ) async throws(TokenctlError) -> (TokenResponse, receivedAt: Double, serverDate: Double?) {
        let request = try credentials.formRequest(
            tokenEndpoint,
            [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                ("code_verifier", verifier),
            ])
        // An authorization code is single-use: never resend it after a response we could not read.
        var once = retry
        once.maximumAttempts = 1
        let client = TokenEndpointClient(http: http, clock: clock, retry: once)
        let (outcome, receivedAt) = await client.exchange(request)
        let (response, serverDate) = try LoginAnswer.successOrThrow(
            outcome, what: "the authorization code", profile: profile)
        return (response, receivedAt, serverDate)
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
