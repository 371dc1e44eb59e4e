import TokenctlEssentials

/// What a checked refresh answer leads to: the store action, the event and the message, one
/// row per kind of answer (`of`); `TokenBroker.carryOut` does what a row says.
///
/// | answer | store action | event | exit |
/// |---|---|---|---|
/// | success | store the refreshed set (the session's, or the target's token) | `tokenRefreshed` | 0 |
/// | a DPoP binding the profile cannot use | keep the session | `dpopDowngradeRefused` | 78 |
/// | the DPoP proof refused | keep the session | `refreshFailed` | 1 |
/// | a narrowed refresh's target refused | keep the session | `refreshFailed` | 64, or 1 |
/// | unusable tokens with a rotated refresh token | keep the refresh token, the access token marked expired | `refreshFailed` | 76 |
/// | unusable tokens, no usable rotated refresh token | keep the session | `refreshFailed` | 76 |
/// | the client refused | keep the session | `refreshFailed` | 78 |
/// | grant ended, blocked by a policy | keep the session | `refreshFailed` | 77 |
/// | grant ended | end the session (if it still holds the refresh token sent) | `sessionEnded` | 77 |
/// | not the server's verdict | keep the session | `refreshFailed` | 75, or 76 |
/// | transient | keep the session | `refreshFailed` | 75 |
struct RefreshConsequence: Equatable, Sendable {
    enum StoreAction: Equatable, Sendable {
        /// Store the set the answer brings and hand it out.
        case storeRefreshed(TokenResponse, serverDate: Double?)
        /// Keep the rotated refresh token (and checked ID token) of an answer whose access token
        /// cannot be used, with the session's access token marked expired.
        case keepRotatedRefreshToken(String, idToken: String?)
        /// Leave the stored session as it is.
        case keepSession
        /// Delete the session, if it still holds the refresh token that was sent.
        case endSession
    }

    var action: StoreAction
    var event: SessionEvent
    /// The event's reason (a failure class).
    var reason: String?
    /// What the refresh throws; nil when it succeeded.
    var error: TokenctlError?

    /// The row for `answer`, a refresh of `target` on `profile`, whose session has `sessionScope`.
    static func of(_ answer: CheckedRefreshAnswer, profile: ProfileName, target: TokenTarget, sessionScope: String?)
        -> RefreshConsequence
    {
        switch answer {
        case .bindingRefused(let refusal):
            // Not stored: a token the profile cannot use safely must not replace the session.
            return RefreshConsequence(
                action: .keepSession, event: .dpopDowngradeRefused, reason: refusal.eventReason,
                error: TokenctlError(
                    .configuration, "refused the refreshed tokens of profile '\(profile)': \(refusal)",
                    hint: Suggestion.sentences(
                        "The stored session was not replaced, but the server may count its refresh token as used.",
                        DPoPBinding.hint(profile, refusal))))
        case .proofRefused(let reason):
            // The server refused the proof, not the grant: nothing was spent.
            return failure(
                reason.className, .unexpected, "the server refused the DPoP proof of profile '\(profile)': \(reason)",
                hint: "The session is kept. A proof carries the time: check the system clock, then try again.")
        case .targetRefused(let reason):
            // The server refused this target (invalid_scope, invalid_target, …), not the grant:
            // the session stays, and the refresh token was not spent.
            let (refusedTarget, why) = ProviderErrorClasses.refusesTarget(reason)
            return failure(
                reason.className, refusedTarget ? .invalidInput : .unexpected,
                "the server refused a token for \(target) on profile '\(profile)': \(reason)",
                hint: Suggestion.sentences(
                    why, "The session is kept; '\(tokenctl: profile, .token([]))' still serves its own token.")
            )
        case .outcome(.success(let response, let serverDate)):
            return RefreshConsequence(
                action: .storeRefreshed(response, serverDate: serverDate), event: .tokenRefreshed)
        case .outcome(.unusableTokens(let answer)):
            return unusable(answer, profile: profile)
        case .outcome(.clientRefused(let reason)):
            return clientRefused(reason, profile: profile)
        case .outcome(.grantEnded(let reason)):
            return grantEnded(reason, profile: profile, sessionScope: sessionScope)
        case .outcome(.notTheServersVerdict(let answer)):
            // Something in the path answered, not the token endpoint: nothing says the grant
            // is dead, so the session stays (see `RefreshOutcome`).
            return failure(
                answer.className, answer.mayPass ? .transient : .protocolError,
                "the refresh of profile '\(profile)' was not answered by the token endpoint: \(answer)",
                hint: Suggestion.sentences("The session is kept.", answer.advice))
        case .outcome(.transient(let reason, _)):
            return transient(reason, profile: profile)
        }
    }

    /// A failure that keeps the session, recorded as `refreshFailed`.
    private static func failure(_ reason: String, _ kind: TokenctlError.Kind, _ message: String, hint: Suggestion?)
        -> RefreshConsequence
    {
        RefreshConsequence(
            action: .keepSession, event: .refreshFailed, reason: reason, error: TokenctlError(kind, message, hint: hint)
        )
    }

    /// A 200 answer whose access or refresh token cannot be used: the server accepted the
    /// grant, so the session is not ended. A usable rotated refresh token is kept (like any
    /// rotation: on a rotating server the one sent is spent); without one, the stored session
    /// is left as it is. Either way the answer is reported (EX_PROTOCOL).
    private static func unusable(_ answer: UnusableTokens, profile: ProfileName) -> RefreshConsequence {
        let message = "the server's answer to the refresh of profile '\(profile)' is unusable: \(answer)"
        switch answer.refreshToken {
        case .rotated(let refreshToken):
            return RefreshConsequence(
                action: .keepRotatedRefreshToken(refreshToken, idToken: answer.idToken), event: .refreshFailed,
                reason: answer.className,
                error: TokenctlError(.protocolError, message, hint: keptRotatedHint(pending: nil)))
        case .absent:
            return failure(
                answer.className, .protocolError, message,
                hint:
                    "The answer carried no new refresh token, so the stored one is kept (RFC 6749 §6): the session is kept, and the next command refreshes with it again."
            )
        case .unusable:
            return failure(
                answer.className, .protocolError, message,
                hint:
                    "tokenctl cannot keep that refresh token, so the stored session is left as it was: if the server rotated its refresh token, the session is lost and the next command will say so."
            )
        }
    }

    /// The hint of an unusable answer whose rotated refresh token was kept; `pending`: the
    /// Secret Service could not take it, and only the rotation journal holds it.
    static func keptRotatedHint(pending: StoreError?) -> Suggestion {
        let whereKept =
            pending.map {
                " (in the kernel keyring's rotation journal for now: the Secret Service could not take it, \($0.message); the next tokenctl command that can writes it there)"
            } ?? ""
        return
            "The server rotated the refresh token, and tokenctl kept the new one without this answer's access token\(whereKept): the session is kept, and the next command refreshes again."
    }

    /// The client or its registration is refused, not the grant: nothing was spent, the
    /// session stays, and no login is asked for (it would be refused the same way).
    private static func clientRefused(_ reason: GrantEndReason, profile: ProfileName) -> RefreshConsequence {
        let row = ProviderErrorClasses.row(reason)
        return failure(
            reason.className, .configuration, "the server refused the client of profile '\(profile)': \(reason)",
            hint: Suggestion.sentences(
                "The session is kept.", row?.hint,
                ProviderErrorClasses.followUp(row.map(\.followUp) ?? .newSecret, for: profile)))
    }

    /// The server's refusal of the grant: the session ends, unless a policy refuses the refresh.
    private static func grantEnded(_ reason: GrantEndReason, profile: ProfileName, sessionScope: String?)
        -> RefreshConsequence
    {
        let row = ProviderErrorClasses.row(reason)
        if row?.errorClass == .blockedByPolicy {
            // A policy refuses the refresh (Entra's Conditional Access), not the grant: a new
            // login would be refused too, so the session stays for when the policy allows it.
            return failure(
                reason.className, .loginRequired,
                "the server refused to refresh the session of profile '\(profile)': \(reason)",
                hint: Suggestion.sentences(row?.hint, "The session is kept."))
        }
        // Another writer may have replaced the item meanwhile: only what was sent is deleted.
        return RefreshConsequence(
            action: .endSession, event: .sessionEnded, reason: reason.className,
            error: TokenctlError(
                .loginRequired, "the server ended the session of profile '\(profile)': \(reason)",
                hint: Suggestion.sentences(
                    ProviderErrorClasses.hint(row, sessionScope: sessionScope),
                    ProviderErrorClasses.followUp(row.map(\.followUp) ?? .signIn, for: profile))))
    }

    /// A transient failure: the session is kept, unless the request may have reached a server
    /// that rotated the refresh token meanwhile (the next command says so).
    private static func transient(_ reason: TransientReason, profile: ProfileName) -> RefreshConsequence {
        let message = "could not refresh profile '\(profile)': \(reason)"
        if case .oauthError(let oauthReason) = reason {
            // The server answered that it cannot now: it spent nothing.
            return failure(
                oauthReason.className, .transient, "could not refresh profile '\(profile)': \(oauthReason)",
                hint: Suggestion.sentences(
                    ProviderErrorClasses.row(oauthReason)?.hint, "The session is kept; try again later."))
        }
        if case .transport(let kind, _, let advice) = reason, kind.isSettled {
            // A proxy that refuses its credentials, a certificate that does not verify, a proxy
            // password the Secret Service cannot give: nothing reached the token endpoint, and
            // trying again will not help.
            return failure(
                reason.className, kind.commandFailure, message,
                hint: Suggestion.sentences(advice, "The session is kept."))
        }
        if reason.requestMayHaveReachedServer {
            return failure(
                reason.className, .transient, message,
                hint:
                    "The refresh request was sent but no answer came back in time: if the server rotated the refresh token meanwhile, the session is lost and '\(tokenctl: profile, .token([]))' will say so; otherwise it is kept. Try again later."
            )
        }
        return failure(reason.className, .transient, message, hint: "The session is kept; try again later.")
    }
}
