// Okta (https://developer.okta.com/docs/guides/): an issuer per org and authorization server.

extension Provider {
    public static let okta = Provider(
        "okta", displayName: "Okta", needsIssuer: true,
        issuerAdvice: " (https://ORG.okta.com/oauth2/default for the default authorization server).",
        configurePreset: { preset in preset.defaultScope = "openid offline_access" },
        registrationHelp: """
            Applications > Create App Integration > OIDC, "Native Application"; sign-in
            redirect URI http://127.0.0.1/callback; grant types Authorization Code, Refresh
            Token, Device Authorization. --issuer https://ORG.okta.com/oauth2/default (or the
            org server https://ORG.okta.com). Scopes: openid offline_access. If the app
            requires DPoP, add --dpop.
            """)
}
