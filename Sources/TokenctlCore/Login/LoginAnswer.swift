import TokenctlEssentials

/// What a token endpoint's answer to a login's exchange means: the tokens, or the error to
/// report (nothing was stored), by the same classes a refresh uses (`RefreshOutcome`).
enum LoginAnswer {
    /// The server refused the client (its id or secret), not the grant: 78, with the row's fix.
    static func clientRefused(_ reason: GrantEndReason, profile: ProfileName) -> TokenctlError {
        let row = ProviderErrorClasses.row(reason)
        return TokenctlError(
            .configuration, "the server refused the client: \(reason)",
            hint: Suggestion.sentences(
                "Nothing was stored.", row?.hint,
                row?.followUp == .forgetSecret ? ProviderErrorClasses.followUp(.forgetSecret, for: profile) : nil))
    }

    static func successOrThrow(
        _ outcome: RefreshOutcome, what: String, profile: ProfileName
    ) throws(TokenctlError) -> (TokenResponse, Double?) {
        switch outcome {
        case .success(let response, let serverDate):
            return (response, serverDate)
        case .grantEnded(let reason):
            throw TokenctlError(
                .loginRequired, "the server did not accept \(what): \(reason)",
                hint: Suggestion.sentences("Nothing was stored.", ProviderErrorClasses.row(reason)?.hint))
        case .clientRefused(let reason):
            throw clientRefused(reason, profile: profile)
        case .unusableTokens(let answer):
            // Accepted, but answered against the protocol: 76, as a refresh's unusable answer.
            throw TokenctlError(
                .protocolError, "the server accepted \(what) but its answer is unusable: \(answer)",
                hint: "Nothing was stored; a session signed in before is kept.")
        case .notTheServersVerdict(let answer):
            throw TokenctlError(
                answer.mayPass ? .transient : .protocolError,
                "the token endpoint did not answer the exchange of \(what): \(answer)",
                hint: Suggestion.sentences("Nothing was stored; a session signed in before is kept.", answer.advice))
        case .transient(.oauthError(let reason), _):
            throw TokenctlError(
                .transient, "the server could not take \(what) now: \(reason)",
                hint: Suggestion.sentences(
                    ProviderErrorClasses.row(reason)?.hint,
                    "Nothing was stored; run the same login command again later."))
        case .transient(.transport(let kind, let message, let advice), _) where kind.isSettled:
            throw TokenctlError(
                kind.commandFailure, "could not reach the token endpoint: \(message)",
                hint: Suggestion.sentences(advice, "Nothing was stored."))
        case .transient(let reason, _):
            throw TokenctlError(
                .transient, "could not reach the token endpoint: \(reason)",
                hint: "Nothing was stored; try again later.")
        }
    }
}
