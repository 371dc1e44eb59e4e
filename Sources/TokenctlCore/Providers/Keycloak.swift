import TokenctlEssentials

// Keycloak (https://www.keycloak.org/docs/latest/server_admin/): an issuer per realm, and
// invalid_grant texts that say why a session ended.

extension Provider {
    public static let keycloak = Provider(
        "keycloak", displayName: "Keycloak", needsIssuer: true,
        issuerAdvice: " (the realm's URL, e.g. https://sso.example.com/realms/NAME).",
        configurePreset: { preset in preset.defaultScope = "openid offline_access" },
        errorRows: ProviderErrorRows(byInvalidGrantText: Keycloak.invalidGrantTexts),
        registrationHelp: """
            Clients > Create client (OpenID Connect), "Client authentication" off, "Standard
            flow" and "OAuth 2.0 Device Authorization Grant" on; valid redirect URI
            http://127.0.0.1/callback (without a port, any port works). --issuer
            https://HOST/realms/REALM. Scopes: openid offline_access (the user needs the
            offline_access role).
            """)
}

/// Keycloak's error answers.
enum Keycloak {
    typealias Row = ProviderErrorClasses.Row

    static let idle = Row(
        .signInAgain, "Keycloak",
        hint:
            "Keycloak ended the session: usually SSO Session Idle passed (30 minutes by default) or the session was logged out; refreshing more often than the idle timeout, or the offline_access scope, keeps it.",
        // The same words said of an offline session (the session's scope has `offline_access`,
        // so SSO Session Idle does not apply: Offline Session Idle does, 30 days by default;
        // https://www.keycloak.org/docs/latest/server_admin/#_timeouts).
        offlineSessionHint:
            "Keycloak ended the offline session (the scope has offline_access): it was not refreshed within the realm's Offline Session Idle (30 days by default), or it was revoked. Refreshing more often than that keeps it, for example on a schedule: '\(tokenctl: .default, .schedule(.install, []))'."
    )
    static let reuse = Row(
        .signInAgain, "Keycloak",
        hint:
            "Keycloak refused a refresh token that was already used (Revoke Refresh Token is on): the session is revoked. Something else refreshed with the same token: never share one session between machines or tools."
    )

    /// `invalid_grant` rows by the exact `error_description` (its TokenManager.java:
    /// https://github.com/keycloak/keycloak).
    static let invalidGrantTexts: [String: Row] = [
        "Token is not active": idle,
        "Session not active": idle,
        "Client session not active": idle,
        "Refresh token expired": idle,
        "Offline session not active": Row(
            .signInAgain, "Keycloak",
            hint: "Keycloak's offline session ended (Offline Session Idle passed, 30 days by default)."),
        "Stale token": Row(
            .signInAgain, "Keycloak",
            hint:
                "Keycloak refused a stale token: an administrator pushed a not-before policy, or the token was already used (Revoke Refresh Token)."
        ),
        "Stale refresh token": reuse,
        "Maximum allowed refresh token reuse exceeded": reuse,
    ]
}
