import TokenctlEssentials

/// How `logout` ends a session at the server: RFC 7009, or a provider's own API.
public enum ProviderRevocation: Sendable, Equatable {
    /// RFC 7009 at the profile's `revocation_endpoint`, when it has one.
    case standard
    /// RFC 7009, and Google's 400 `invalid_token` means the token is already gone.
    case standardTreatingInvalidTokenAsGone
    /// GitHub: `DELETE {api}/applications/{client_id}/token` with the app's client id and
    /// secret (Basic) and `{"access_token": …}`; 204 revoked, 404 already gone. Without the
    /// app's secret nothing can be revoked.
    case gitHubApplicationToken(api: String)
    /// No revocation at all (Entra): the refresh token stays valid at the server until it
    /// expires or an administrator revokes the user's sessions; `endSession` is where the
    /// browser session can be ended.
    case none(endSession: String?)

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

    /// What stays valid at the server when the session could not be revoked there, and where
    /// to end it by hand; nil where revocation is possible.
    public func unrevokedNotice(_ provider: Provider, issuer: EndpointURL, hasSecret: Bool) -> String? {
        switch self {
        case .standard, .standardTreatingInvalidTokenAsGone:
            return nil
        case .gitHubApplicationToken:
            guard !hasSecret else { return nil }
            let settings =
                issuer.host == "github.com"
                ? "https://github.com/settings/applications" : issuer.withoutTrailingSlash + "/settings/applications"
            let lifetime =
                provider == .github
                ? "a GitHub OAuth App token never expires on its own" : "a GitHub App token expires within 8 hours"
            return
                "GitHub revokes a token only for the app itself (with its client secret, which this profile does not have): the token stays valid at GitHub (\(lifetime)); revoke it at \(settings)."
        case .none(let endSession):
            return
                "Microsoft Entra ID has no revocation endpoint: the refresh token stays valid at the server until it expires or an administrator revokes your sessions."
                + (endSession.map { " To end the browser session, open \($0)" } ?? "")
        }
    }
}
