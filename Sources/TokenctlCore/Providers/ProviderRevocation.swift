import TokenctlEssentials

/// How `logout` ends a session at the server: RFC 7009, or a provider's own API (the provider's
/// file has the request and the words).
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

    /// What stays valid at the server when the session could not be revoked there, and where
    /// to end it by hand; nil where revocation is possible.
    public func unrevokedNotice(_ provider: Provider, issuer: EndpointURL, hasSecret: Bool) -> String? {
        provider.unrevoked(self, issuer, hasSecret)
    }
}
