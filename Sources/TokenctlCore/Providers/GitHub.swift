import TokenctlEssentials

// GitHub (github.com and GitHub Enterprise Server): OAuth Apps and GitHub Apps, which sign in
// alike. No discovery and no ID token; its errors come with HTTP 200
// (https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps).

extension Provider {
    public static let github = Provider(
        "github", displayName: "GitHub OAuth App", defaultHost: "github.com", takesHost: true,
        codeExchangeNeedsSecret: true,
        configurePreset: { preset in
            GitHub.configure(&preset)
            // gh's minimum.
            preset.defaultScope = "repo read:org gist"
        },
        errorRows: GitHub.errorRows, deviceFlowWords: GitHub.deviceFlowWords,
        unrevoked: { revocation, issuer, hasSecret in
            GitHub.unrevokedNotice(
                revocation, issuer: issuer, hasSecret: hasSecret,
                lifetime: "a GitHub OAuth App token never expires on its own")
        },
        registrationHelp: """
            OAuth App: github.com/settings/applications/new (Enterprise Server: the same on
            your host, with --host HOST). Callback URL http://127.0.0.1/callback; tick
            "Enable Device Flow" for --device. Default scopes: repo read:org gist. The browser
            login needs the app's secret (--client-secret-stdin), and so does revocation at
            logout; tokens never expire on their own.
            """)

    public static let githubApp = Provider(
        "github-app", displayName: "GitHub App", defaultHost: "github.com", takesHost: true,
        codeExchangeNeedsSecret: true,
        // GitHub Apps ignore scopes (their permissions are the app's).
        configurePreset: GitHub.configure,
        errorRows: GitHub.errorRows, deviceFlowWords: GitHub.deviceFlowWords,
        unrevoked: { revocation, issuer, hasSecret in
            GitHub.unrevokedNotice(
                revocation, issuer: issuer, hasSecret: hasSecret, lifetime: "a GitHub App token expires within 8 hours")
        },
        registrationHelp: """
            GitHub App: github.com/settings/apps/new. Callback URL http://127.0.0.1/callback,
            "Expire user authorization tokens" on (8-hour tokens, 6-month refresh tokens),
            "Enable Device Flow" for --device. Permissions are the app's: no scopes.
            """)
}

/// What GitHub OAuth Apps and GitHub Apps share.
enum GitHub {
    /// No discovery, no ID token: GitHub's fixed paths on the host (GHES: the same paths). The
    /// token endpoint requires `client_secret` with a code
    /// (https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#2-users-are-redirected-back-to-your-site-by-github).
    @Sendable static func configure(_ preset: inout ProviderPreset) {
        let base = preset.issuer.withoutTrailingSlash
        func url(_ text: String) -> EndpointURL? { try? EndpointURL(text) }
        preset.discovers = false
        preset.fallbackEndpoints = ExplicitEndpoints(
            token: url(base + "/login/oauth/access_token"), deviceAuthorization: url(base + "/login/device/code"),
            authorization: url(base + "/login/oauth/authorize"))
        preset.preferredAuthMethod = .clientSecretPost
        let api = preset.issuer.host == "github.com" ? "https://api.github.com" : base + "/api/v3"
        preset.revocation = .gitHubApplicationToken(api: api)
    }

    static let errorRows = ProviderErrorRows(byCode: [
        // A dead GitHub App refresh token, with HTTP 200 (orgs/community discussion #24745).
        "bad_refresh_token": ProviderErrorClasses.Row(.signInAgain, "GitHub"),
        // GitHub's word for a wrong client id or secret, with HTTP 200.
        "incorrect_client_credentials": ProviderErrorClasses.Row(
            .configuration, "GitHub", hint: "Check the profile's client id and client secret.", followUp: .newSecret),
    ])

    /// `device_flow_disabled` (the app's owner must enable it), and `unauthorized_client` from a
    /// GitHub preset (GitHub Enterprise Server answers so at the device endpoint, RFC 8628
    /// §3.2; https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#error-codes-for-the-device-flow).
    static let deviceFlowWords = DeviceFlowWords(
        switchedOffCodes: ["device_flow_disabled"], unauthorizedClientMeansSwitchedOff: true,
        switchedOnAdvice:
            "Or have the app's owner enable the device flow (GitHub: the app's settings, \"Enable Device Flow\").")

    /// GitHub revokes a token only for the app, with its secret.
    static func unrevokedNotice(
        _ revocation: ProviderRevocation, issuer: EndpointURL, hasSecret: Bool, lifetime: String
    )
        -> String?
    {
        guard case .gitHubApplicationToken = revocation, !hasSecret else { return nil }
        let settings =
            issuer.host == "github.com"
            ? "https://github.com/settings/applications" : issuer.withoutTrailingSlash + "/settings/applications"
        return
            "GitHub revokes a token only for the app itself (with its client secret, which this profile does not have): the token stays valid at GitHub (\(lifetime)); revoke it at \(settings)."
    }

    /// GitHub's revocation (not RFC 7009): 204 revoked; 404 or 422 the token is not valid.
    static func revoke(
        api: String, clientID: String, secret: String, accessToken: String, http: any HTTPClient, timeout: Double
    ) async -> Result<Void, TokenctlService.RevocationFailure> {
        let request = ProviderRevocation.gitHubRequest(
            api: api, clientID: clientID, secret: secret, accessToken: accessToken)
        do {
            let response = try await http.send(request, timeout: timeout)
            if response.status == 204 || response.status == 200 { return .success(()) }
            let kind: TokenctlError.Kind = response.isTransientFailure ? .transient : .unexpected
            var failure = TokenctlService.RevocationFailure(
                error: TokenctlError(kind, "GitHub refused to revoke the token (HTTP \(response.status))"),
                reason: "http-\(response.status)")
            failure.alreadyGone = response.status == 404
            return .failure(failure)
        } catch {
            return .failure(
                TokenctlService.RevocationFailure(
                    error: TokenctlError(.transient, "could not reach GitHub's API at \(api): \(error)"),
                    reason: "unreachable"))
        }
    }
}

extension ProviderRevocation {
    /// GitHub's revocation request for `accessToken`, authenticated as the app.
    public static func gitHubRequest(api: String, clientID: String, secret: String, accessToken: String) -> HTTPRequest
    {
        let pair = clientID + ":" + secret
        let body = JSONText.object([("access_token", .string(accessToken))])
        return HTTPRequest(
            method: .delete, url: api + "/applications/" + FormEncoding.escape(clientID) + "/token",
            headers: [
                ("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()),
                ("Accept", "application/vnd.github+json"), ("Content-Type", "application/json"),
                ("X-GitHub-Api-Version", "2022-11-28"),
            ],
            body: Array(body.utf8))
    }
}
