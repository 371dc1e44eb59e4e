import TokenctlEssentials

/// How the client authenticates at the token endpoint: public, or confidential with the secret
/// given now or stored by the last login, by a method the server takes.
struct LoginClient: Sendable {
    var credentials: ClientCredentials
    /// The method a confidential client uses (saved in the profile); nil for a public client.
    var authMethod: ClientAuthenticationMethod?
    /// The secret given now or stored by the last login; nil for a public client.
    var secret: String?

    /// - Throws: the provider needs a secret and there is none (nothing is sent), or the server
    ///   advertises no method tokenctl speaks.
    init(
        _ plan: LoginPlan, metadata: ServerMetadata?, store: any SessionStore
    ) throws(TokenctlError) {
        let request = plan.request
        let previous = plan.previous
        let preset = plan.preset
        credentials = ClientCredentials(clientID: request.clientID)
        secret = request.clientSecret
        if secret == nil, previous?.tokenEndpointAuthMethod != nil, previous?.issuer == request.issuer,
            previous?.clientID == request.clientID
        {
            // A confidential client logging in again: the secret stored last time still applies.
            secret = try? store.readClientSecret(plan.identity)
        }
        if let secret {
            // Keep the method used before while the server still advertises it; else pick one.
            if let method = previous?.tokenEndpointAuthMethod,
                metadata?.tokenEndpointAuthMethods?.contains(method.rawValue) ?? true
            {
                authMethod = method
            } else if metadata?.tokenEndpointAuthMethods == nil, let preferred = preset?.preferredAuthMethod {
                authMethod = preferred
            } else {
                authMethod = try ClientCredentials.preferredMethod(supported: metadata?.tokenEndpointAuthMethods)
            }
            credentials = ClientCredentials(clientID: request.clientID, secret: secret, method: authMethod)
        }
        if let preset,
            preset.provider.requiresClientSecret || (plan.isBrowser && preset.provider.codeExchangeNeedsSecret),
            secret == nil
        {
            throw TokenctlError(
                .invalidInput,
                "\(preset.provider.displayName) needs the client's secret\(preset.provider.requiresClientSecret ? "" : " to sign in by browser (the code exchange)"), and profile '\(request.profile)' has none stored",
                hint: Self.secretNeededHint(request, preset: preset))
        }
    }

    /// "Give the secret": the login asked for, with `--client-secret-stdin`, when it can be
    /// printed (`browserLogin`), else the preset and client alone.
    static func secretNeededHint(_ request: TokenctlService.LoginRequest, preset: ProviderPreset) -> Suggestion {
        var printable = request
        printable.clientSecret = nil
        let command: SuggestedCommand
        if case .browser = request.method, let browser = printable.browserLogin(secretStored: false) {
            command = browser
        } else {
            command = SuggestedCommand(
                request.profile,
                .login([
                    .provider(.word(preset.provider.rawValue)), .clientID(.word(TerminalText.short(request.clientID))),
                    .clientSecretStdin,
                ]))
        }
        return "Nothing was sent. Give it once on standard input: '\(command)'."
    }
}
