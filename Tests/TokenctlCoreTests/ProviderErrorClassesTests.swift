import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

private let now: Double = 1_700_000_000

private func classify(_ response: HTTPResponse) -> RefreshOutcome {
    RefreshOutcome.classify(.success(response), now: now)
}

/// An Entra error body (learn.microsoft.com): 400 JSON, the AADSTS code in
/// `error_codes` and at the start of `error_description`, whose lines end with "\r\n".
private func entra(_ error: String, _ code: Int, _ text: String, listed: Bool = true, prefixed: Bool = true)
    -> HTTPResponse
{
    let description =
        (prefixed ? "AADSTS\(code): " : "")
        + "\(text)\\r\\nTrace ID: 0b3d7f1e-1a2b-4c5d-8e9f-000000000001\\r\\nCorrelation ID: 5e6f7a8b-0000-4000-8000-000000000002\\r\\nTimestamp: 2026-12-03 15:00:00Z"
    let codes = listed ? #", "error_codes": [\#(code)]"# : ""
    return .json(
        400,
        #"{"error": "\#(error)", "error_description": "\#(description)"\#(codes), "timestamp": "2026-12-03 15:00:00Z", "trace_id": "0b3d7f1e", "correlation_id": "5e6f7a8b", "error_uri": "https://login.microsoftonline.com/error?code=\#(code)"}"#
    )
}

private func row(_ outcome: RefreshOutcome) -> ProviderErrorClasses.Row? {
    switch outcome {
    case .grantEnded(let reason), .clientRefused(let reason), .transient(.oauthError(let reason), _):
        ProviderErrorClasses.row(reason)
    default: nil
    }
}

/// The provider error-class table: one class per row, found from what the
/// answer says (Entra's `error_codes` or description prefix, the `error` code, Keycloak's and
/// Google's `invalid_grant` texts).
@Suite("Provider error classes")
struct ProviderErrorClassesTests {
    @Test(
        "Entra sign-in-again codes are terminal (77), named in the class name",
        arguments: [50173, 700082, 70008, 700084, 70043, 50132, 50133, 54005, 50089, 70000])
    func entraSignInAgain(code: Int) {
        let outcome = classify(entra("invalid_grant", code, "The grant is dead."))
        guard case .grantEnded(let reason) = outcome else {
            Issue.record("expected terminal, got \(outcome)")
            return
        }
        #expect(reason.className == "invalid_grant AADSTS\(code)")
        #expect(ProviderErrorClasses.row(reason)?.errorClass == .signInAgain)
        #expect(ProviderErrorClasses.endsGrant(reason))
    }

    @Test(
        "Entra interaction codes are terminal (77) with 'sign in again interactively'",
        arguments: [50076, 50079, 50078, 65001, 50058])
    func entraInteraction(code: Int) {
        let outcome = classify(entra("interaction_required", code, "MFA is needed."))
        guard case .grantEnded = outcome else {
            Issue.record("expected terminal, got \(outcome)")
            return
        }
        #expect(row(outcome)?.errorClass == .interactionNeeded)
        let followUp = ProviderErrorClasses.followUp(row(outcome)?.followUp, for: .default)
        #expect(followUp?.rendered == "Sign in again interactively: 'tokenctl login'.")
    }

    @Test("Entra AADSTS53003 is a Conditional Access block: 77, and its hint does not ask to log in")
    func entraConditionalAccess() throws {
        let outcome = classify(entra("invalid_grant", 53003, "Access has been blocked by Conditional Access policies."))
        guard case .grantEnded(let reason) = outcome else {
            Issue.record("expected terminal, got \(outcome)")
            return
        }
        let found = try #require(ProviderErrorClasses.row(reason))
        #expect(found.errorClass == .blockedByPolicy)
        #expect(found.followUp == nil)
        #expect(found.hint?.rendered.contains("Conditional Access") == true)
        #expect(found.hint?.rendered.contains("tokenctl login") == false)
        #expect(!ProviderErrorClasses.endsGrant(reason))
    }

    @Test(
        "Entra configuration codes refuse the client (78, session kept), never 'sign in again'",
        arguments: [7_000_218, 700025, 50011, 70004, 700016, 50194, 70011, 9_002_313])
    func entraConfiguration(code: Int) throws {
        let outcome = classify(entra(code == 70011 ? "invalid_scope" : "invalid_client", code, "Fix the app."))
        guard case .clientRefused = outcome else {
            Issue.record("expected clientRefused, got \(outcome)")
            return
        }
        let found = try #require(row(outcome))
        #expect(found.errorClass == .configuration)
        #expect(found.hint?.rendered.isEmpty == false)
        #expect(found.followUp != .signIn && found.followUp != .signInInteractively)
    }

    @Test("Entra AADSTS7000218 and 700025 say how to fix the registration and the secret")
    func entraSecretHints() {
        let missing = row(classify(entra("invalid_client", 7_000_218, "The request body must contain client_secret.")))
        #expect(missing?.hint?.rendered.contains("enable public client flows") == true)
        #expect(missing?.hint?.rendered.contains("Mobile and desktop applications") == true)
        let extra = row(classify(entra("invalid_client", 700025, "Client is public so neither secret nor assertion")))
        #expect(extra?.hint?.rendered.contains("log in again without --client-secret-stdin") == true)
        #expect(
            ProviderErrorClasses.followUp(extra?.followUp, for: ProfileName(rawValue: "work")!)?.rendered.contains(
                "'tokenctl --profile work logout --forget'") == true)
    }

    @Test(
        "Entra transient codes and temporarily_unavailable are transient (75); AADSTS50196 waits at least 60 s",
        arguments: [
            ("temporarily_unavailable", 90024, nil), ("temporarily_unavailable", 50033, nil),
            ("invalid_request", 90006, nil), ("temporarily_unavailable", 90055, nil),
            ("invalid_request", 50196, 60.0),
        ] as [(String, Int, Double?)])
    func entraTransient(error: String, code: Int, wait: Double?) {
        let outcome = classify(entra(error, code, "Try later."))
        guard case .transient(.oauthError(let reason), let retryAfter) = outcome else {
            Issue.record("expected transient, got \(outcome)")
            return
        }
        #expect(retryAfter == wait)
        #expect(reason.className == "\(error) AADSTS\(code)")
        #expect(!TransientReason.oauthError(reason).requestMayHaveReachedServer)
    }

    @Test("temporarily_unavailable from any server is transient, and its Retry-After is honoured")
    func temporarilyUnavailableAnywhere() {
        #expect(
            classify(.json(400, #"{"error":"temporarily_unavailable"}"#, headers: ["retry-after": "7"]))
                == .transient(
                    .oauthError(.oauthError(status: 400, code: "temporarily_unavailable", description: nil)),
                    retryAfter: 7))
        // A longer Retry-After than AADSTS50196's minimum wins.
        guard
            case .transient(_, let retryAfter) = classify(
                .json(
                    400, #"{"error":"invalid_request","error_codes":[50196]}"#, headers: ["retry-after": "300"]))
        else {
            Issue.record("expected transient")
            return
        }
        #expect(retryAfter == 300)
    }

    @Test("the AADSTS code is found in error_codes alone, and in the description prefix alone")
    func entraCodeSources() {
        let listedOnly = classify(entra("invalid_grant", 700082, "Expired.", listed: true, prefixed: false))
        #expect(row(listedOnly)?.errorClass == .signInAgain)
        if case .grantEnded(let reason) = listedOnly {
            #expect(reason.className == "invalid_grant AADSTS700082")
            // Named in the message when the description does not start with it.
            #expect(reason.description.hasPrefix("the server answered 400 invalid_grant (AADSTS700082): Expired."))
        }
        let prefixOnly = classify(entra("invalid_client", 7_000_218, "Needs a secret.", listed: false, prefixed: true))
        guard case .clientRefused(let reason) = prefixOnly else {
            Issue.record("expected clientRefused, got \(prefixOnly)")
            return
        }
        #expect(reason.className == "invalid_client AADSTS7000218")
        #expect(reason.description.hasPrefix("the server answered 400 invalid_client: AADSTS7000218: Needs a secret."))
        // Not a prefix: a code elsewhere in the text, or without its colon, is not read.
        #expect(ProviderErrorClasses.providerCode(errorCodes: nil, description: "see AADSTS7000218: x") == nil)
        #expect(ProviderErrorClasses.providerCode(errorCodes: nil, description: "AADSTS7000218 x") == nil)
        // error_codes wins, and the first code the table knows is taken.
        #expect(
            ProviderErrorClasses.providerCode(
                errorCodes: .array([.number(70016), .number(90024)]), description: "AADSTS700082: x")
                == "AADSTS90024")
        #expect(
            ProviderErrorClasses.providerCode(errorCodes: .array([.number(70016)]), description: nil) == "AADSTS70016")
    }

    @Test("an Entra code the table does not know leaves the answer to its error: authorization_pending stays pending")
    func unknownEntraCode() {
        let outcome = classify(entra("authorization_pending", 70016, "Pending."))
        guard case .grantEnded(let reason) = outcome else {
            Issue.record("expected terminal, got \(outcome)")
            return
        }
        #expect(ProviderErrorClasses.row(reason) == nil)
        guard case .oauthError(_, let code, _, let providerCode) = reason else { return }
        #expect(code == "authorization_pending" && providerCode == "AADSTS70016")
    }

    @Test("Entra's \\r\\n line breaks are shown as one space, never glued words")
    func entraLineBreaks() {
        guard
            case .grantEnded(.oauthError(_, _, let description?, _)) = classify(
                entra("invalid_grant", 70043, "Expired."))
        else {
            Issue.record("expected an OAuth error with a description")
            return
        }
        #expect(description.hasPrefix("AADSTS70043: Expired. Trace ID: 0b3d7f1e"), "\(description)")
        #expect(!description.contains("Expired.Trace"))
        #expect(!description.contains("  "))
        #expect(TerminalText.short("a\r\n\r\nb\tc \r\nd\n") == "a b c d")
        #expect(TerminalText.short("\r\nx") == "x")
        #expect(TerminalText.short("a\u{1B}b") == "ab", "other control characters are still dropped")
    }

    @Test(
        "Keycloak's invalid_grant texts end the session (77) with a hint naming the likely cause",
        arguments: [
            ("Token is not active", "SSO Session Idle"), ("Session not active", "SSO Session Idle"),
            ("Client session not active", "SSO Session Idle"), ("Refresh token expired", "SSO Session Idle"),
            ("Stale token", "not-before"), ("Stale refresh token", "already used"),
            ("Maximum allowed refresh token reuse exceeded", "already used"),
        ])
    func keycloakTexts(text: String, cause: String) throws {
        let outcome = classify(.json(400, #"{"error":"invalid_grant","error_description":"\#(text)"}"#))
        guard case .grantEnded(let reason) = outcome else {
            Issue.record("expected terminal, got \(outcome)")
            return
        }
        let found = try #require(ProviderErrorClasses.row(reason))
        #expect(found.errorClass == .signInAgain && found.provider == "Keycloak")
        #expect(found.hint?.rendered.contains(cause) == true, "\(found)")
        #expect(reason.className == "invalid_grant")
    }

    @Test("Google's 'Token has been expired or revoked.' ends the session (77) with the Testing publishing status hint")
    func googleExpiredOrRevoked() throws {
        let outcome = classify(
            .json(400, #"{"error":"invalid_grant","error_description":"Token has been expired or revoked."}"#))
        guard case .grantEnded(let reason) = outcome else {
            Issue.record("expected terminal, got \(outcome)")
            return
        }
        let found = try #require(ProviderErrorClasses.row(reason))
        #expect(found.hint?.rendered.contains("\"Testing\" publishing status") == true)
        #expect(found.hint?.rendered.contains("7 days") == true)
        // Only invalid_grant's texts: the same words with another code are not Google's row.
        #expect(
            ProviderErrorClasses.row(code: "invalid_request", description: "Token is not active", providerCode: nil)
                == nil)
    }

    @Test(
        "GitHub's rows are in the same table: bad_refresh_token 77, incorrect_client_credentials 78 with a new-secret hint"
    )
    func gitHubRows() {
        #expect(ProviderErrorClasses.codes["bad_refresh_token"]?.errorClass == .signInAgain)
        let refused = ProviderErrorClasses.codes["incorrect_client_credentials"]
        #expect(refused?.errorClass == .configuration && refused?.followUp == .newSecret)
    }

    @Test("every row's hint, with its follow-up for a named profile, holds to the hint rules")
    func hintsAreWellFormed() {
        let rows =
            Array(ProviderErrorClasses.providerCodes.values) + Array(ProviderErrorClasses.codes.values)
            + Array(ProviderErrorClasses.invalidGrantTexts.values)
        for found in rows {
            for profile in [ProfileName.default, ProfileName(rawValue: "work")!] {
                for words in [found.hint, found.offlineSessionHint] {
                    let hint = Suggestion.sentences(
                        "The session is kept.", words, ProviderErrorClasses.followUp(found.followUp, for: profile)
                    )?.rendered
                    #expect(Hint.problems(in: hint ?? "").isEmpty, "\(Hint.problems(in: hint ?? "")): \(hint ?? "")")
                }
            }
        }
    }
}
