import TokenctlEssentials

/// OAuth error answers whose meaning is not RFC 6749 §5.2's "the grant is dead", or that only
/// some providers send, as tokenctl's error classes: one table, a row per provider's code or
/// text (GitHub, Google, Entra ID and Keycloak, each row citing its source), read by
/// `RefreshOutcome.classify` (the class) and by
/// `TokenBroker` and the login flows (the hint). An answer no row matches is classed by its
/// `error` as §5.2 says: terminal.
///
/// A row is found by what the answer itself says, whichever server sent it (a profile names
/// no provider): Entra's AADSTS code (from `error_codes`, else the `AADSTSnnnn:` prefix of
/// `error_description`), then the `error` code, then, for `invalid_grant`, the exact
/// `error_description` (Keycloak's and Google's texts).
public enum ProviderErrorClasses {
    /// What an error answer means for the session, and the exit status it leaves with.
    public enum ErrorClass: Sendable, Equatable {
        /// The grant is dead: the session ends, exit 77, "sign in again".
        case signInAgain
        /// The grant needs the user (MFA, consent): the session ends, exit 77, "sign in again
        /// interactively" (a refresh cannot do it).
        case interactionNeeded
        /// A policy refuses this sign-in (Entra's Conditional Access): exit 77, but the session
        /// is kept and no login is asked for, since a new one would be refused too.
        case blockedByPolicy
        /// The client or its registration is wrong, not the grant: the session is kept, exit 78,
        /// never "sign in again" (a login loop that cannot succeed).
        case configuration
        /// The server cannot answer now: the session is kept and the request retried with
        /// backoff, exit 75; waits are at least `minimumBackoff` seconds when it is given.
        case transient(minimumBackoff: Double?)
    }

    /// The command a hint ends with, spelled for the profile by `followUp(_:for:)`.
    public enum FollowUp: Sendable, Equatable {
        case signIn, signInInteractively, newSecret, forgetSecret
    }

    public struct Row: Sendable, Equatable {
        public var errorClass: ErrorClass
        /// Who sends it (for readers of the table).
        public var provider: String
        /// What it means and what to change, shown after the server's words; no command.
        public var hint: String?
        public var followUp: FollowUp?

        init(_ errorClass: ErrorClass, _ provider: String, hint: String? = nil, followUp: FollowUp? = nil) {
            self.errorClass = errorClass
            self.provider = provider
            self.hint = hint
            self.followUp = followUp ?? Self.defaultFollowUp(errorClass)
        }

        static func defaultFollowUp(_ errorClass: ErrorClass) -> FollowUp? {
            switch errorClass {
            case .signInAgain: .signIn
            case .interactionNeeded: .signInInteractively
            case .blockedByPolicy, .configuration, .transient: nil
            }
        }
    }

    // MARK: The table

    static let entraSignIn = Row(.signInAgain, "Entra")
    static let entraInteraction = Row(
        .interactionNeeded, "Entra",
        hint:
            "Entra needs the user for this sign-in (multi-factor authentication or consent), which a refresh cannot give."
    )
    static let entraTransient = Row(.transient(minimumBackoff: nil), "Entra")

    /// Entra ID's AADSTS codes (https://learn.microsoft.com/en-us/entra/identity-platform/reference-error-codes).
    public static let entra: [String: Row] = [
        // Sign in again: the refresh token is dead.
        "AADSTS50173": entraSignIn, // FreshTokenNeeded: revoked, or the password changed
        "AADSTS700082": Row(
            .signInAgain, "Entra",
            hint:
                "The refresh token expired from inactivity (90 days, or sooner under a Conditional Access policy): refresh it on a schedule to keep it alive."
        ),
        "AADSTS70008": entraSignIn, // the grant expired or was revoked
        "AADSTS700084": Row(
            .signInAgain, "Entra",
            hint:
                "The refresh token was issued to a single-page-app redirect and lives 24 hours at most: register the redirect URI as \"Mobile and desktop applications\" for a command-line client."
        ),
        "AADSTS70043": entraSignIn, // a sign-in-frequency Conditional Access check
        "AADSTS50132": entraSignIn, // session invalid after a password change
        "AADSTS50133": entraSignIn,
        "AADSTS54005": entraSignIn, // the authorization code was already redeemed
        "AADSTS50089": entraSignIn, // the flow token expired
        "AADSTS70000": entraSignIn, // invalid grant
        // Interaction needed: multi-factor authentication, enrolment, consent, no session.
        "AADSTS50076": entraInteraction,
        "AADSTS50079": entraInteraction,
        "AADSTS50078": entraInteraction,
        "AADSTS65001": entraInteraction,
        "AADSTS50058": entraInteraction,
        "AADSTS53003": Row(
            .blockedByPolicy, "Entra",
            hint:
                "Entra's Conditional Access blocked this sign-in (AADSTS53003): signing in again will not help until the policy allows this device, network or app; the tenant's administrator can tell which policy applies."
        ),
        // Configuration: the app registration or the profile must change.
        "AADSTS7000218": Row(
            .configuration, "Entra",
            hint:
                "Entra expects a client secret from this client (AADSTS7000218): in the app registration, enable public client flows (\"Allow public client flows\") and register the redirect URI as \"Mobile and desktop applications\", not \"Web\"; a confidential client gives its secret with --client-secret-stdin."
        ),
        "AADSTS700025": Row(
            .configuration, "Entra",
            hint:
                "A public client must not send a secret (AADSTS700025): log in again without --client-secret-stdin.",
            followUp: .forgetSecret),
        "AADSTS7000215": Row(
            .configuration, "Entra",
            hint:
                "Entra refused the client secret (AADSTS7000215): give the secret's value, not its ID, and check that it has not expired.",
            followUp: .newSecret),
        "AADSTS50011": Row(
            .configuration, "Entra",
            hint:
                "The redirect URI is not registered for this app (AADSTS50011): register http://127.0.0.1 (any port) under \"Mobile and desktop applications\" in the app registration's manifest."
        ),
        "AADSTS70004": Row(
            .configuration, "Entra",
            hint: "The redirect URI is not valid for this app (AADSTS70004): register it exactly as tokenctl sends it."),
        "AADSTS700016": Row(
            .configuration, "Entra",
            hint:
                "No app with this client id is registered in this tenant (AADSTS700016): check --client-id and the tenant in the issuer URL."
        ),
        "AADSTS50194": Row(
            .configuration, "Entra",
            hint:
                "A single-tenant app cannot sign in at /common or /organizations (AADSTS50194): use the tenant's own issuer (https://login.microsoftonline.com/TENANT-ID/v2.0), or make the app multi-tenant."
        ),
        "AADSTS70011": Row(
            .configuration, "Entra",
            hint:
                "Entra refused the scope (AADSTS70011): check --scope (for example \"openid offline_access https://graph.microsoft.com/.default\")."
        ),
        "AADSTS9002313": Row(
            .configuration, "Entra",
            hint: "Entra found the request malformed (AADSTS9002313): check the profile's endpoints and options."),
        // Transient: retried with backoff; the session is kept.
        "AADSTS50033": entraTransient, // a retry of a failed connection
        "AADSTS90006": entraTransient,
        "AADSTS90024": entraTransient, // RequestBudgetExceeded
        "AADSTS90055": entraTransient, // throttled
        "AADSTS50196": Row(
            .transient(minimumBackoff: 60), "Entra",
            hint:
                "Entra saw the same request too often (AADSTS50196, loop detection): wait at least a minute before trying again."
        ),
    ]

    /// Rows by the answer's `error` code.
    public static let codes: [String: Row] = [
        // RFC 6749 §5.2, from any server: it cannot handle the request now.
        "temporarily_unavailable": Row(.transient(minimumBackoff: nil), "any"),
        // A dead GitHub App refresh token, with HTTP 200 (orgs/community discussion #24745).
        "bad_refresh_token": Row(.signInAgain, "GitHub"),
        // GitHub's word for a wrong client id or secret, with HTTP 200.
        "incorrect_client_credentials": Row(
            .configuration, "GitHub", hint: "Check the profile's client id and client secret.", followUp: .newSecret),
        // RFC 6749 §5.2: client authentication failed (Dex: 401 "Invalid client credentials.").
        "invalid_client": clientCredentialsRefused,
    ]

    /// A client whose credentials the server refused: its secret (or key) is wrong, expired
    /// or rotated, or its id is not known; the grant may be alive (RFC 6749 §5.2).
    static let clientCredentialsRefused = Row(
        .configuration, "any",
        hint:
            "The server refused the client's credentials (RFC 6749 §5.2), not the grant: the client secret (or key) is wrong, expired or was rotated, or the client id is not registered there.",
        followUp: .newSecret)

    /// `unauthorized_client` (RFC 6749 §5.2: the client may not use this grant) said of failed
    /// client authentication: with HTTP 401, or with a text about the client's credentials, as
    /// Keycloak answers a wrong or rotated secret (401 "Invalid client or Invalid client
    /// credentials"; https://www.keycloak.org/docs/latest/server_admin/#_client-credentials).
    static func refusesClientCredentials(code: String, status: Int?, description: String?) -> Bool {
        guard code == "unauthorized_client" else { return false }
        if status == 401 { return true }
        guard let text = description?.lowercased() else { return false }
        return ["client credentials", "invalid client", "client secret", "client authentication"].contains {
            text.contains($0)
        }
    }

    static let keycloakIdle = Row(
        .signInAgain, "Keycloak",
        hint:
            "Keycloak ended the session: usually SSO Session Idle passed (30 minutes by default) or the session was logged out; refreshing more often than the idle timeout, or the offline_access scope, keeps it."
    )
    static let keycloakReuse = Row(
        .signInAgain, "Keycloak",
        hint:
            "Keycloak refused a refresh token that was already used (Revoke Refresh Token is on): the session is revoked. Something else refreshed with the same token: never share one session between machines or tools."
    )

    /// Keycloak's words for an ended session said of an offline session (the session's scope
    /// has `offline_access`, so SSO Session Idle does not apply: Offline Session Idle does,
    /// 30 days by default; https://www.keycloak.org/docs/latest/server_admin/#_timeouts).
    static let keycloakOfflineIdleHint =
        "Keycloak ended the offline session (the scope has offline_access): it was not refreshed within the realm's Offline Session Idle (30 days by default), or it was revoked. Refreshing more often than that keeps it, for example on a schedule: 'tokenctl schedule install'."

    /// The hint of `row` for a session whose scope is `sessionScope`: Keycloak's idle texts
    /// name the offline session when the session asked for `offline_access`.
    public static func hint(_ row: Row?, sessionScope: String?) -> String? {
        guard let row else { return nil }
        if row == keycloakIdle, let sessionScope, ScopeWords.words(sessionScope).contains("offline_access") {
            return keycloakOfflineIdleHint
        }
        return row.hint
    }

    /// `invalid_grant` rows by the exact `error_description`.
    public static let invalidGrantTexts: [String: Row] = [
        // Keycloak (its TokenManager.java: https://github.com/keycloak/keycloak).
        "Token is not active": keycloakIdle,
        "Session not active": keycloakIdle,
        "Client session not active": keycloakIdle,
        "Refresh token expired": keycloakIdle,
        "Offline session not active": Row(
            .signInAgain, "Keycloak",
            hint: "Keycloak's offline session ended (Offline Session Idle passed, 30 days by default)."),
        "Stale token": Row(
            .signInAgain, "Keycloak",
            hint:
                "Keycloak refused a stale token: an administrator pushed a not-before policy, or the token was already used (Revoke Refresh Token)."
        ),
        "Stale refresh token": keycloakReuse,
        "Maximum allowed refresh token reuse exceeded": keycloakReuse,
        // Google (https://developers.google.com/identity/protocols/oauth2#expiration).
        "Token has been expired or revoked.": Row(
            .signInAgain, "Google",
            hint:
                "Google revoked the refresh token. If this recurs about weekly, the app's OAuth consent screen is in \"Testing\" publishing status, whose refresh tokens die after 7 days: publish the app (\"In production\")."
        ),
    ]

    // MARK: Matching

    /// The row for an error answer, and the provider's own code it carried (Entra's
    /// `AADSTSnnnn`), if any.
    public static func match(code: String, description: String?, errorCodes: JSONValue?, status: Int? = nil) -> (
        row: Row?, providerCode: String?
    ) {
        let providerCode = entraCode(errorCodes: errorCodes, description: description)
        return (row(code: code, description: description, providerCode: providerCode, status: status), providerCode)
    }

    /// The row for a classified answer's parts (`status`: its HTTP status, when known).
    public static func row(code: String, description: String?, providerCode: String?, status: Int? = nil) -> Row? {
        if let providerCode, let row = entra[providerCode] { return row }
        if let row = codes[code] { return row }
        if refusesClientCredentials(code: code, status: status, description: description) {
            return clientCredentialsRefused
        }
        if code == "invalid_grant", let description {
            return invalidGrantTexts[description.trimmingCharacters(in: " ")]
        }
        return nil
    }

    /// The row of a terminal or refused answer's reason.
    public static func row(_ reason: TerminalReason) -> Row? {
        guard case .oauthError(let status, let code, let description, let providerCode) = reason else { return nil }
        return row(code: code, description: description, providerCode: providerCode, status: status)
    }

    /// Whether an answer says the grant is dead whatever was asked for (RFC 6749 §5.2's
    /// `invalid_grant`, a refused client, and the rows that end the session), as opposed to a
    /// refusal of what a narrowed refresh asked for.
    public static func endsGrant(_ reason: TerminalReason) -> Bool {
        guard case .oauthError(_, let code, _, let providerCode) = reason else { return false }
        if let providerCode, targetRefusals[providerCode] != nil { return false }
        switch row(reason)?.errorClass {
        case .signInAgain?, .interactionNeeded?: return true
        case .blockedByPolicy?, .configuration?, .transient?: return false
        case nil: return ["invalid_grant", "invalid_client", "unauthorized_client"].contains(code)
        }
    }

    /// Provider codes that refuse what a narrowed refresh (`token --scope`, `--resource`) asked
    /// for, not the grant: on such a refresh the session stays and the target is refused; on
    /// the session's own refresh their row applies. Entra's AADSTS65001: no consent for that
    /// scope or resource
    /// (https://learn.microsoft.com/en-us/entra/identity-platform/reference-error-codes).
    public static let targetRefusals: [String: String] = [
        "AADSTS65001":
            "Entra has no consent for that scope or resource (AADSTS65001): the user, or the tenant's administrator, must grant it to the app first (in the app registration's API permissions, or by signing in asking for it)."
    ]

    /// Whether a narrowed refresh's refusal refuses the target (exit 64, as `invalid_scope`
    /// does), and with which hint.
    public static func refusesTarget(_ reason: TerminalReason) -> (refused: Bool, hint: String?) {
        guard case .oauthError(_, let code, _, let providerCode) = reason else { return (false, nil) }
        if let providerCode, let hint = targetRefusals[providerCode] { return (true, hint) }
        return (["invalid_scope", "invalid_target", "invalid_request"].contains(code), nil)
    }

    /// Entra's code: the first of `error_codes` the table knows (else the first), or the
    /// `AADSTSnnnn:` that starts `error_description`.
    static func entraCode(errorCodes: JSONValue?, description: String?) -> String? {
        var listed: [String] = []
        if case .array(let values)? = errorCodes {
            for value in values.prefix(16) {
                let number: Double? =
                    switch value {
                    case .number(let number): number
                    case .string(let text): Double(text)
                    default: nil
                    }
                if let number, number.isFinite, number >= 0, number < 1e9, number == number.rounded() {
                    listed.append("AADSTS\(Int(number))")
                }
            }
        }
        if let known = listed.first(where: { entra[$0] != nil }) { return known }
        if let first = listed.first { return first }
        guard let description else { return nil }
        let text = description.drop(while: { $0 == " " })
        guard text.hasPrefix("AADSTS") else { return nil }
        let digits = text.dropFirst(6).prefix(while: { $0.isASCII && $0.isNumber })
        guard !digits.isEmpty, digits.count <= 9, text.dropFirst(6 + digits.count).first == ":" else { return nil }
        return "AADSTS" + digits
    }

    /// The sentence a hint ends with, its command spelled for `profile`.
    public static func followUp(_ followUp: FollowUp?, for profile: ProfileName) -> String? {
        switch followUp {
        case .signIn: "Run '\(CommandHint.login(profile))' to sign in again."
        case .signInInteractively: "Sign in again interactively: '\(CommandHint.login(profile))'."
        case .newSecret:
            "Give the client's new secret with '\(CommandHint.tokenctl(profile, "login --client-secret-stdin"))' (on standard input): a profile with a session keeps it, and the next refresh uses the new secret."
        case .forgetSecret:
            "A secret stored by an earlier login is removed, with the profile, by '\(CommandHint.tokenctl(profile, "logout --forget"))'."
        case nil: nil
        }
    }
}
