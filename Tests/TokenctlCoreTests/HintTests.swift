import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

/// Hints are read by people who copy the commands in them: a command stands in quotes and its
/// sentence ends before the next one starts ("…--components=secrets Nothing was sent to the
/// server." copied the words after it). These are the hints composed at run time, from
/// provider-specific parts; the literal hints in the sources are scanned by
/// HintSourceTests (end-to-end target).
@Suite("Hints: commands quoted, sentences ended")
struct HintTests {
    static let programs: [KeyringProgram] = [.gnomeKeyring, .keePassXC, .kWallet, .other("secretd"), .unknown]

    /// Every keyring program's hint, alone and as the store and login compose it.
    static var composedHints: [String] {
        var hints = [KeyringProgram.startAnyHint, SecretServiceStore.noBusHint]
        for program in programs {
            hints += [program.unlockHint, program.perItemUnlockHint, program.noDefaultCollectionHint]
        }
        var composed: [Suggestion] = []
        for hint in hints {
            // The store's locked-keyring hint, and login's pre-check, which drops "The session is kept."
            let stored = Suggestion.sentences(hint, "The session is kept.")!
            composed += [
                hint, stored, Suggestion.sentences(stored.replacingSessionKept(), "Nothing was sent to the server.")!,
                Suggestion.sentences(hint.replacingSessionKept(), "Nothing was sent to the server.")!,
            ]
        }
        for refusal: DPoPBinding.Refusal in [.downgraded, .wrongConfirmation("x"), .unrequested] {
            composed.append(Suggestion.sentences("Nothing was stored.", DPoPBinding.hint(.default, refusal))!)
            composed.append(DPoPBinding.hint(ProfileName(rawValue: "work")!, refusal))
        }
        return composed.map(\.rendered)
    }

    @Test("every composed hint quotes its commands and ends each sentence")
    func composedHintsAreWellFormed() {
        for hint in Self.composedHints {
            #expect(Hint.problems(in: hint).isEmpty, "\(Hint.problems(in: hint)): \(hint)")
        }
    }

    @Test(
        "the rule catches what it is for: an unquoted command run on by the next sentence, a period inside the quotes, no final stop"
    )
    func ruleCatchesTheDefects() {
        let old =
            "Create one, e.g. by unlocking gnome-keyring once: printf %s \"$PASSWORD\" | gnome-keyring-daemon --replace --unlock --components=secrets Nothing was sent to the server."
        #expect(!Hint.problems(in: old).isEmpty)
        #expect(!Hint.problems(in: "Run 'tokenctl login.' Then try again.").isEmpty)
        #expect(!Hint.problems(in: "Run 'tokenctl login'").isEmpty)
        #expect(
            !Hint.problems(in: "Sign it in first: tokenctl --profile work login --issuer URL --client-id ID").isEmpty)
        #expect(!Hint.problems(in: "Run 'tokenctl status").isEmpty)
        // What is fine: prose naming the program, apostrophes, quoted commands mid-sentence.
        #expect(Hint.problems(in: "Run tokenctl inside your login session; the server's answer is kept.").isEmpty)
        #expect(Hint.problems(in: "'tokenctl status' shows it as pending. It is lost on reboot.").isEmpty)
        #expect(Hint.problems(in: "Run 'printf %s \"$PASSWORD\" | gnome-keyring-daemon --unlock'.").isEmpty)
    }

    @Test("sentences: each part ends with its stop, one space between, nil parts skipped")
    func sentences() {
        #expect(
            Hint.sentences("Run 'tokenctl login'", "Nothing was sent to the server.")
                == "Run 'tokenctl login'. Nothing was sent to the server.")
        #expect(Hint.sentences(nil, "Nothing was stored.") == "Nothing was stored.")
        #expect(Hint.sentences(nil, "") == nil)
        #expect(Hint.sentences("Try again?", "Or not.") == "Try again? Or not.")
    }

    @Test("a suggestion's sentences join as Hint.sentences joins text; a command part never ends a sentence")
    func suggestionSentences() {
        let profile = ProfileName(rawValue: "work")!
        let run: Suggestion = "Run '\(tokenctl: profile, .login([]))'"
        #expect(
            Suggestion.sentences(run, "Nothing was sent to the server.")?.rendered
                == Hint.sentences("Run 'tokenctl --profile work login'", "Nothing was sent to the server."))
        #expect(Suggestion.sentences(nil, "Nothing was stored.") == "Nothing was stored.")
        #expect(Suggestion.sentences(nil, "") == nil)
        #expect(Suggestion.sentences("Try again?", "Or not.") == "Try again? Or not.")
        let bare = Suggestion(parts: [.command(.login(profile))])
        #expect(
            Suggestion.sentences(bare, "Then try again.")?.rendered == "tokenctl --profile work login. Then try again.")
        #expect(
            Suggestion("Unlock it. The session is kept.").replacingSessionKept() == "Unlock it.",
            "the store's last sentence goes")
        #expect(Suggestion("Restart it; the session is kept.").replacingSessionKept() == "Restart it.")
    }
}
