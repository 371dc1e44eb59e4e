import TokenctlEssentials

/// What the command-line layer shows during an interactive login. The core decides what
/// happens; the presenter only prints (stderr), draws the QR code, and opens the browser.
public protocol LoginPresenter: Sendable {
    /// The device flow's codes are ready: show them until `deviceFlowEnded()`.
    func showDeviceAuthorization(_ authorization: DeviceAuthorization, expiresAt: Double)
    /// Polling ended (approved, denied, expired or failed).
    func deviceFlowEnded()
    /// The server asked us to poll more slowly.
    func deviceFlowSlowedDown(interval: Double)
    /// The authorization URL is ready; `openBrowser` says whether to launch a browser.
    /// Returns whether a browser was launched.
    func showAuthorizationURL(_ url: String, openBrowser: Bool) -> Bool
}

/// The outcome of a login, for the command-line layer's summary.
public struct LoginResult: Sendable {
    public var tokenSet: TokenSet
    /// Whether an ID token came back and passed every check, including its signature.
    public var idTokenSignatureVerified: Bool
    /// Whether the ID token's `nonce` was checked against one this login sent (browser logins).
    public var idTokenNonceChecked = false
    /// The scope requested (after defaults), or nil when the server's default was used.
    public var requestedScope: String?
    /// Whether the profile is a machine's (`login --grant client-credentials`).
    public var isMachine = false
    /// How the client authenticated; nil for a public client.
    public var clientAuth: ClientAuthenticationMethod?
    /// A machine profile's grant.
    public var grant: MachineGrant?
}

extension TokenctlService {
    /// Sign a profile in: resolve endpoints, run the chosen flow, check the ID token, then store
    /// the token set (and the client secret) and write the profile. Nothing is stored on failure.
    /// The steps are `LoginProcedure`'s.
    public func login(_ request: LoginRequest, presenter: any LoginPresenter) async throws(TokenctlError) -> LoginResult
    {
        try await LoginProcedure(service: self, request: request, presenter: presenter).run()
    }
}

extension Suggestion {
    /// A store hint without "The session is kept." (said before a login has stored anything).
    func replacingSessionKept() -> Suggestion {
        guard case .text(let last) = parts.last else { return self }
        var parts = parts
        if last.hasSuffix(" The session is kept.") {
            parts[parts.count - 1] = .text(String(last.dropLast(" The session is kept.".count)))
        } else if last.hasSuffix("; the session is kept.") {
            parts[parts.count - 1] = .text(String(last.dropLast("; the session is kept.".count)) + ".")
        }
        return Suggestion(parts: parts)
    }
}
