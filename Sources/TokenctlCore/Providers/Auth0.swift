// Auth0 (https://auth0.com/docs/): an issuer per tenant, with its trailing slash.

extension Provider {
    public static let auth0 = Provider(
        "auth0", displayName: "Auth0", needsIssuer: true, issuerAdvice: " (https://TENANT.auth0.com/, with the slash).",
        configurePreset: { preset in preset.defaultScope = "openid offline_access" },
        // The device flow's poll answers expired_token once, then invalid_grant.
        deviceFlowWords: DeviceFlowWords(expiredCodes: ["invalid_grant"]),
        registrationHelp: """
            Applications > Create Application > "Native"; Allowed Callback URLs
            http://127.0.0.1/callback; Advanced > Grant Types: Device Code and Refresh Token;
            your API: "Allow Offline Access". --issuer https://TENANT.auth0.com/ (with the
            slash) and --audience your API's identifier. Scopes: openid offline_access.
            """)
}
