import Testing
import TokenctlEssentials

@testable import TokenctlCore

private let profile = ProfileName(rawValue: "work")!

private func consequence(
    _ answer: CheckedRefreshAnswer, target: TokenTarget = .session, sessionScope: String? = "openid read"
) -> RefreshConsequence {
    RefreshConsequence.of(answer, profile: profile, target: target, sessionScope: sessionScope)
}

private func oauthError(_ code: String, status: Int = 400, providerCode: String? = nil) -> GrantEndReason {
    .oauthError(status: status, code: code, description: nil, providerCode: providerCode)
}

/// What a checked refresh answer leads to, one test per row of the table in
/// `RefreshConsequence`'s doc comment: the store action, the event and its reason, and the
/// error's kind, message and hint.
@Suite("RefreshConsequence.of")
struct RefreshConsequenceTests {
    @Test("success → store the refreshed set, tokenRefreshed, no error (the session's and a target's alike)")
    func successRow() throws {
        let response = TokenResponse(accessToken: "a", tokenType: "Bearer", expiresIn: 60, refreshToken: "r")
        for target in [TokenTarget.session, try TokenTarget(scope: "read", audience: nil, resource: nil)] {
            let row = consequence(.outcome(.success(response, serverDate: 5)), target: target)
            #expect(row.action == .storeRefreshed(response, serverDate: 5))
            #expect(row.event == .tokenRefreshed)
            #expect(row.reason == nil)
            #expect(row.error == nil)
        }
    }

    @Test("a DPoP binding the profile cannot use → keep the session, dpopDowngradeRefused, 78")
    func bindingRefusedRow() {
        let row = consequence(.bindingRefused(.downgraded))
        #expect(row.action == .keepSession)
        #expect(row.event == .dpopDowngradeRefused)
        #expect(row.reason == "bearer")
        #expect(row.error?.kind == .configuration)
        #expect(row.error?.exitStatus == .configuration)
        #expect(
            row.error?.message == "refused the refreshed tokens of profile 'work': \(DPoPBinding.Refusal.downgraded)")
        #expect(row.error?.hint?.rendered.hasPrefix("The stored session was not replaced") == true)
        #expect(row.error?.hint?.rendered.contains("dpop_allow_bearer = true") == true)
    }

    @Test("the DPoP proof refused → keep the session, refreshFailed, exit 1")
    func proofRefusedRow() {
        let reason = oauthError("invalid_dpop_proof")
        let row = consequence(.proofRefused(reason))
        #expect(row.action == .keepSession)
        #expect(row.event == .refreshFailed)
        #expect(row.reason == reason.className)
        #expect(row.error?.kind == .unexpected)
        #expect(row.error?.message == "the server refused the DPoP proof of profile 'work': \(reason)")
        #expect(
            row.error?.hint == "The session is kept. A proof carries the time: check the system clock, then try again.")
    }

    @Test("a narrowed refresh's target refused → keep the session, refreshFailed, 64 for invalid_scope")
    func targetRefusedRow() throws {
        let target = try TokenTarget(scope: "read", audience: nil, resource: nil)
        let reason = oauthError("invalid_scope")
        let row = consequence(.targetRefused(reason), target: target)
        #expect(row.action == .keepSession)
        #expect(row.event == .refreshFailed)
        #expect(row.reason == reason.className)
        #expect(row.error?.kind == .invalidInput)
        #expect(row.error?.message == "the server refused a token for \(target) on profile 'work': \(reason)")
        #expect(row.error?.hint?.rendered.contains("The session is kept;") == true)
        #expect(consequence(.targetRefused(oauthError("server_said_no")), target: target).error?.kind == .unexpected)
    }

    @Test("unusable tokens with a rotated refresh token → keep that refresh token, refreshFailed, 76")
    func unusableRotatedRow() {
        let answer = UnusableTokens(problem: .missingAccessToken, refreshToken: .rotated("rt-2"), idToken: "id")
        let row = consequence(.outcome(.unusableTokens(answer)))
        #expect(row.action == .keepRotatedRefreshToken("rt-2", idToken: "id"))
        #expect(row.event == .refreshFailed)
        #expect(row.reason == "unusable-access-token")
        #expect(row.error?.kind == .protocolError)
        #expect(row.error?.message == "the server's answer to the refresh of profile 'work' is unusable: \(answer)")
        #expect(row.error?.hint == RefreshConsequence.keptRotatedHint(pending: nil))
        #expect(
            row.error?.hint?.rendered.contains("tokenctl kept the new one without this answer's access token:") == true)
        let pending = RefreshConsequence.keptRotatedHint(pending: StoreError(.locked, "the collection is locked"))
        #expect(pending.rendered.contains("in the kernel keyring's rotation journal for now"))
        #expect(pending.rendered.contains("the collection is locked"))
    }

    @Test("unusable tokens without a usable rotated refresh token → keep the session, refreshFailed, 76")
    func unusableKeptRow() {
        for (refreshToken, words) in [
            (UnusableTokens.RefreshToken.absent, "the stored one is kept (RFC 6749 §6)"),
            (.unusable, "tokenctl cannot keep that refresh token"),
        ] {
            let answer = UnusableTokens(problem: .missingAccessToken, refreshToken: refreshToken)
            let row = consequence(.outcome(.unusableTokens(answer)))
            #expect(row.action == .keepSession)
            #expect(row.event == .refreshFailed)
            #expect(row.reason == answer.className)
            #expect(row.error?.kind == .protocolError)
            #expect(row.error?.hint?.rendered.contains(words) == true)
        }
    }

    @Test("the client refused → keep the session, refreshFailed, 78")
    func clientRefusedRow() {
        let reason = oauthError("invalid_client", status: 401)
        let row = consequence(.outcome(.clientRefused(reason)))
        #expect(row.action == .keepSession)
        #expect(row.event == .refreshFailed)
        #expect(row.reason == reason.className)
        #expect(row.error?.kind == .configuration)
        #expect(row.error?.message == "the server refused the client of profile 'work': \(reason)")
        #expect(row.error?.hint?.rendered.hasPrefix("The session is kept.") == true)
    }

    @Test("terminal, blocked by a policy (Entra's AADSTS53003) → keep the session, refreshFailed, 77")
    func blockedByPolicyRow() {
        let reason = oauthError("invalid_grant", providerCode: "AADSTS53003")
        let row = consequence(.outcome(.grantEnded(reason)))
        #expect(row.action == .keepSession)
        #expect(row.event == .refreshFailed)
        #expect(row.reason == reason.className)
        #expect(row.error?.kind == .loginRequired)
        #expect(row.error?.message == "the server refused to refresh the session of profile 'work': \(reason)")
        #expect(row.error?.hint?.rendered.contains("Conditional Access") == true)
        #expect(row.error?.hint?.rendered.hasSuffix("The session is kept.") == true)
    }

    @Test("terminal → end the session, sessionEnded, 77 (an ID token refused is terminal too)")
    func grantEndedRow() {
        for reason in [oauthError("invalid_grant"), .unusableResponse("the refreshed ID token is not a JWT")] {
            let row = consequence(.outcome(.grantEnded(reason)))
            #expect(row.action == .endSession)
            #expect(row.event == .sessionEnded)
            #expect(row.reason == reason.className)
            #expect(row.error?.kind == .loginRequired)
            #expect(row.error?.message == "the server ended the session of profile 'work': \(reason)")
            #expect(
                row.error?.hint?.rendered.contains(SuggestedCommand.login(profile).rendered) == true,
                "\(row.error?.hint?.rendered ?? "")")
        }
    }

    @Test("not the server's verdict → keep the session, refreshFailed, 75 when it may pass, else 76")
    func notTheServersVerdictRow() {
        for (answer, kind) in [
            (ForeignAnswer(kind: .networkAuthentication, status: 511), TokenctlError.Kind.transient),
            (ForeignAnswer(kind: .proxyAuthentication, status: 407), .protocolError),
        ] {
            let row = consequence(.outcome(.notTheServersVerdict(answer)))
            #expect(row.action == .keepSession)
            #expect(row.event == .refreshFailed)
            #expect(row.reason == answer.className)
            #expect(row.error?.kind == kind)
            #expect(
                row.error?.message == "the refresh of profile 'work' was not answered by the token endpoint: \(answer)")
            #expect(row.error?.hint?.rendered.hasPrefix("The session is kept.") == true)
        }
    }

    @Test("transient → keep the session, refreshFailed, 75; a request that may have arrived says what that means")
    func transientRow() {
        let refused = TransientReason.transport(.connect, "refused")
        let row = consequence(.outcome(.transient(refused, retryAfter: nil)))
        #expect(row.action == .keepSession)
        #expect(row.event == .refreshFailed)
        #expect(row.reason == refused.className)
        #expect(row.error?.kind == .transient)
        #expect(row.error?.message == "could not refresh profile 'work': refused")
        #expect(row.error?.hint == "The session is kept; try again later.")

        let timedOut = consequence(.outcome(.transient(.transport(.timeout, "timed out"), retryAfter: nil)))
        #expect(
            timedOut.error?.hint?.rendered.hasPrefix("The refresh request was sent but no answer came back in time")
                == true)

        // A proxy password the Secret Service cannot give: nothing was sent, and the store's
        // own exit (69) and hint, as for every store that cannot be read.
        let locked = TransientReason.transport(.secretService, "the collection is locked", advice: "Unlock it.")
        let keyring = consequence(.outcome(.transient(locked, retryAfter: nil)))
        #expect(keyring.action == .keepSession)
        #expect(keyring.reason == "secret-service")
        #expect(keyring.error?.kind == .storeUnavailable)
        #expect(keyring.error?.hint == "Unlock it. The session is kept.")
        #expect(!locked.requestMayHaveReachedServer)

        let unavailable = oauthError("temporarily_unavailable", status: 503)
        let oauth = consequence(.outcome(.transient(.oauthError(unavailable), retryAfter: 2)))
        #expect(oauth.action == .keepSession)
        #expect(oauth.reason == unavailable.className)
        #expect(oauth.error?.kind == .transient)
        #expect(oauth.error?.message == "could not refresh profile 'work': \(unavailable)")
        #expect(oauth.error?.hint?.rendered.hasSuffix("The session is kept; try again later.") == true)
    }
}
