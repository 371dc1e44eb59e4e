import TokenctlEssentials

/// OAuth error answers whose meaning is not RFC 6749 §5.2's "the grant is dead", or that only
/// some providers send, as tokenctl's error classes: the tables of rows, a row per code or text
/// (RFC 6749's own here, each provider's in its file in `Providers/`, citing its source,
/// gathered from `Provider.all`), read by `RefreshOutcome.classify` (the class) and by
/// `TokenBroker` and the login flows (the hint). An answer no row matches is classed by its
/// `error` as §5.2 says: the grant ended.
///
/// A row is found by what the answer itself says, whichever server sent it (a profile names
/// no provider): a provider's own code (Entra's AADSTS code, from `error_codes`, else the
/// `AADSTSnnnn:` prefix of `error_description`), then the `error` code, then, for
/// `invalid_grant`, the exact `error_description` (Keycloak's and Google's texts).
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
        public var hint: Suggestion?
        public var followUp: FollowUp?
        /// The hint instead of `hint` for a session whose scope has `offline_access` (an offline
        /// session ends for other reasons than an online one).
        public var offlineSessionHint: Suggestion?

        init(
            _ errorClass: ErrorClass, _ provider: String, hint: Suggestion? = nil, followUp: FollowUp? = nil,
            offlineSessionHint: Suggestion? = nil
        ) {
            self.errorClass = errorClass
            self.provider = provider
            self.hint = hint
            self.followUp = followUp ?? Self.defaultFollowUp(errorClass)
            self.offlineSessionHint = offlineSessionHint
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

    /// Rows by a provider's own code (Entra's `AADSTSnnnn`), of every provider.
    public static let providerCodes: [String: Row] = gathered(\.byProviderCode)

    /// Rows by the answer's `error` code.
    public static let codes: [String: Row] = [
        // RFC 6749 §5.2, from any server: it cannot handle the request now.
        "temporarily_unavailable": Row(.transient(minimumBackoff: nil), "any"),
        // RFC 6749 §5.2: client authentication failed (Dex: 401 "Invalid client credentials.").
        "invalid_client": clientCredentialsRefused,
    ].merging(gathered(\.byCode)) { standard, _ in standard }

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

    /// The hint of `row` for a session whose scope is `sessionScope`: its offline session's
    /// hint when the session asked for `offline_access` (Keycloak's idle texts).
    public static func hint(_ row: Row?, sessionScope: String?) -> Suggestion? {
        guard let row else { return nil }
        if let offline = row.offlineSessionHint, let sessionScope,
            ScopeWords.words(sessionScope).contains("offline_access")
        {
            return offline
        }
        return row.hint
    }

    /// `invalid_grant` rows by the exact `error_description`, of every provider.
    public static let invalidGrantTexts: [String: Row] = gathered(\.byInvalidGrantText)

    /// Every provider's rows of one table; GitHub OAuth Apps and GitHub Apps share theirs.
    private static func gathered<Value>(_ table: KeyPath<ProviderErrorRows, [String: Value]>) -> [String: Value] {
        Provider.all.reduce(into: [:]) { gathered, provider in
            gathered.merge(provider.errorRows[keyPath: table]) { first, _ in first }
        }
    }

    // MARK: Matching

    /// The row for an error answer, and the provider's own code it carried (Entra's
    /// `AADSTSnnnn`), if any.
    public static func match(code: String, description: String?, errorCodes: JSONValue?, status: Int? = nil) -> (
        row: Row?, providerCode: String?
    ) {
        let providerCode = providerCode(errorCodes: errorCodes, description: description)
        return (row(code: code, description: description, providerCode: providerCode, status: status), providerCode)
    }

    /// The row for a classified answer's parts (`status`: its HTTP status, when known).
    public static func row(code: String, description: String?, providerCode: String?, status: Int? = nil) -> Row? {
        if let providerCode, let row = providerCodes[providerCode] { return row }
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
    public static func row(_ reason: GrantEndReason) -> Row? {
        guard case .oauthError(let status, let code, let description, let providerCode) = reason else { return nil }
        return row(code: code, description: description, providerCode: providerCode, status: status)
    }

    /// Whether an answer says the grant is dead whatever was asked for (RFC 6749 §5.2's
    /// `invalid_grant`, a refused client, and the rows that end the session), as opposed to a
    /// refusal of what a narrowed refresh asked for.
    public static func endsGrant(_ reason: GrantEndReason) -> Bool {
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
    /// the session's own refresh their row applies (Entra's AADSTS65001: no consent for that
    /// scope or resource). Of every provider.
    public static let targetRefusals: [String: Suggestion] = gathered(\.targetRefusals)

    /// Whether a narrowed refresh's refusal refuses the target (exit 64, as `invalid_scope`
    /// does), and with which hint.
    public static func refusesTarget(_ reason: GrantEndReason) -> (refused: Bool, hint: Suggestion?) {
        guard case .oauthError(_, let code, _, let providerCode) = reason else { return (false, nil) }
        if let providerCode, let hint = targetRefusals[providerCode] { return (true, hint) }
        return (["invalid_scope", "invalid_target", "invalid_request"].contains(code), nil)
    }

    /// A provider's own code in an error answer (Entra's `AADSTSnnnn`), the first a provider finds.
    static func providerCode(errorCodes: JSONValue?, description: String?) -> String? {
        for provider in Provider.all {
            if let code = provider.errorRows.providerCode?(errorCodes, description) { return code }
        }
        return nil
    }

    /// The sentence a hint ends with, its command spelled for `profile`.
    public static func followUp(_ followUp: FollowUp?, for profile: ProfileName) -> Suggestion? {
        switch followUp {
        case .signIn: "Run '\(tokenctl: profile, .login([]))' to sign in again."
        case .signInInteractively: "Sign in again interactively: '\(tokenctl: profile, .login([]))'."
        case .newSecret:
            "Give the client's new secret with '\(tokenctl: profile, .login([.clientSecretStdin]))' (on standard input): a profile with a session keeps it, and the next refresh uses the new secret."
        case .forgetSecret:
            "A secret stored by an earlier login is removed, with the profile, by '\(tokenctl: profile, .logout([.forget]))'."
        case nil: nil
        }
    }
}
