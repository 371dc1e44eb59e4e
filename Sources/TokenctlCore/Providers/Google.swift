import TokenctlEssentials

// Google (https://developers.google.com/identity/protocols/oauth2): one home, a refresh token
// only with access_type=offline, desktop clients that need their secret.

extension Provider {
    public static let google = Provider(
        "google", displayName: "Google", defaultHost: "accounts.google.com", issuerAdvice: "; Google has one home.",
        // Google's desktop clients: the secret is required, though Google says it is not treated as one.
        requiresClientSecret: true, codeExchangeNeedsSecret: true,
        configurePreset: { preset in
            preset.defaultScope = "openid email profile"
            preset.refusedScopes = [
                "offline_access":
                    "Google refuses the offline_access scope (invalid_scope); tokenctl asks for a refresh token with access_type=offline instead"
            ]
            // A refresh token only with access_type=offline, and again only when consent is shown.
            preset.authorizationParameters = [("access_type", "offline"), ("prompt", "consent")]
            if preset.issuer.host == "accounts.google.com" {
                preset.fallbackEndpoints.deviceAuthorization = try? EndpointURL(
                    "https://oauth2.googleapis.com/device/code")
            }
            preset.issuerRule = .schemelessAlias
            preset.revocation = .standardTreatingInvalidTokenAsGone
        },
        errorRows: ProviderErrorRows(byInvalidGrantText: [
            // https://developers.google.com/identity/protocols/oauth2#expiration
            "Token has been expired or revoked.": ProviderErrorClasses.Row(
                .signInAgain, "Google",
                hint:
                    "Google revoked the refresh token. If this recurs about weekly, the app's OAuth consent screen is in \"Testing\" publishing status, whose refresh tokens die after 7 days: publish the app (\"In production\")."
            )
        ]),
        // "verification_url" is the pre-RFC spelling Google still sends.
        deviceFlowWords: DeviceFlowWords(verificationURIAliases: ["verification_url"]),
        registrationHelp: """
            Google Cloud console, APIs & Services > Credentials > OAuth client ID, type
            "Desktop app" (loopback redirects need no registration); for --device a separate
            "TVs and Limited Input devices" client (openid, email, profile and a few Drive and
            YouTube scopes only). Both need their secret: --client-secret-stdin. Scopes: openid
            email profile; tokenctl sends access_type=offline and prompt=consent, never
            offline_access. An app in "Testing" status loses its refresh tokens after 7 days.
            """)
}
