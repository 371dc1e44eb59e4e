import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// Every hint written in the sources holds to `Hint.problems`: commands in single quotes, no
/// sentence's end inside them, and a whole hint ends with its full stop, so a user who copies a
/// command gets the command alone ("…--components=secrets Nothing was sent to the
/// server."). Hints composed at run time from provider parts are checked in TokenctlCoreTests
/// (HintTests).
@Suite("Hints in the sources: commands quoted, sentences ended")
struct HintSourceTests {
    /// A hint literal: the argument after `hint:` (or assigned to a `hint`), or a part given to
    /// `Hint.sentences`; `whole` when it is the entire argument.
    static func hintLiterals() -> [(literal: SwiftSourceText.Literal, whole: Bool)] {
        var found: [(SwiftSourceText.Literal, Bool)] = []
        for file in SwiftSourceText.all {
            var outerEnd = 0
            for literal in file.literals {
                // A literal inside another's interpolation ("'\(program: "keyctl show @u")'") is part of it.
                if literal.start < outerEnd { continue }
                outerEnd = literal.end
                let before = file.codeBefore(literal.start)
                let after = file.codeAfter(literal.end)
                let labelled =
                    before.hasSuffix("hint:") || before.hasSuffix("hint =") || before.hasSuffix("Hint =")
                    || before.hasSuffix("Hint: Suggestion =") || before.hasSuffix("hint: Suggestion =")
                let sentence = ["Hint.sentences", "Suggestion.sentences"].contains(
                    file.enclosingCalls(literal.start, levels: 1).first?.name)
                // Also the branches of a ternary after `hint:` ("hint: interactive ? "A" : "B"").
                let branch = before.range(of: #"hint: [A-Za-z.]+ \?( "X" :)?$"#, options: .regularExpression) != nil
                if labelled || sentence || branch {
                    found.append((literal, after == ")" || after == ","))
                } else if let wholeValue = assignedHint(in: file, before: literal.start, names: hintNames(in: file)) {
                    // A hint built in a local value first ("let login = "Run '…'."; … hint: login").
                    found.append((literal, wholeValue && after != "+" && after != "."))
                }
            }
        }
        return found
    }

    /// The names of values a file gives as a hint, and whether as a whole hint: `hint: login`
    /// (whole), `hint: kept + ", …"` (its start), or a bare name among the parts of
    /// `Hint.sentences(why, "…")` (whole).
    static func hintNames(in file: SwiftSourceText) -> [String: Bool] {
        let code = String(file.code)
        var names: [String: Bool] = [:]
        func add(_ name: String, whole: Bool) {
            guard !["hint", "nil", "true", "false"].contains(name) else { return }
            names[name] = (names[name] ?? true) && whole
        }
        for match in code.matches(of: /hint:\s*([a-z][A-Za-z0-9]*)\s*([,)+])/) {
            add(String(match.output.1), whole: match.output.2 != "+")
        }
        for match in code.matches(of: /(?:Hint|Suggestion)\.sentences\(([^()]*)\)/) {
            for part in match.output.1.split(separator: ",") {
                let word = part.trimmingCharacters(in: .whitespacesAndNewlines)
                if word.wholeMatch(of: /[a-z][A-Za-z0-9]*/) != nil { add(word, whole: true) }
            }
        }
        return names
    }

    /// Whether the literal at `position` is the value of a `let`/`var` named in `names` (the
    /// value itself, or either branch of `let x = c ? "…" : "…"`): whether that value is a whole
    /// hint, or nil when the literal is no such value.
    static func assignedHint(in file: SwiftSourceText, before position: Int, names: [String: Bool]) -> Bool? {
        guard !names.isEmpty else { return nil }
        let code = file.codeBefore(position, count: 240)
        guard
            let match = code.firstMatch(
                of:
                    /(?:let|var)\s+([a-z][A-Za-z0-9]*)(?:\s*:\s*(?:String|Suggestion)\??)?\s*=(?:\s*|(?:[^;{}=]|[!=<>]=)*?\?(?:\s+:)?)$/
            )
        else { return nil }
        return names[String(match.output.1)]
    }

    @Test("every hint literal quotes its commands, and a whole one ends with its full stop")
    func hintLiteralsAreWellFormed() throws {
        let hints = Self.hintLiterals()
        // The scan finds the hints (77 when this was written); a broken lexer must not pass by finding none.
        try #require(hints.count > 60, "found only \(hints.count) hint literals")
        for (literal, whole) in hints {
            let text = literal.text(standingIn: Self.standIn)
            let problems = Hint.problems(in: text, terminated: whole)
            #expect(
                problems.isEmpty,
                "\(literal.path):\(literal.line) \(literal.path):\(literal.line): \(problems): \(text)")
        }
    }

    /// What an interpolation of a hint stands for in the rule's eyes: a typed command (tokenctl's,
    /// or another program's) as a command line, so that one outside quotes is caught; options
    /// named in a sentence as an option; anything else as a word.
    static func standIn(_ source: String) -> String {
        let code = source.trimmingCharacters(in: .whitespaces)
        if code.hasPrefix("tokenctl:") || code.hasPrefix("SuggestedCommand") || code.hasPrefix("program:") {
            return "tokenctl status --all"
        }
        return code.hasPrefix("options:") ? "--option" : "X"
    }

    @Test("a typed command in a hint stands for a command line: outside quotes it is caught")
    func typedCommandsStandForCommandLines() {
        let file = SwiftSourceText(
            path: "Typed.swift",
            text: #"""
                throw TokenctlError(.loginRequired, "x", hint: "Run \(tokenctl: profile, .login([])) again.")
                throw TokenctlError(.loginRequired, "x", hint: "Run '\(tokenctl: profile, .login([]))' again.")
                throw TokenctlError(.loginRequired, "x", hint: "Give it with \(options: .login([.tokenEndpoint(.omitted)])).")
                """#)
        let texts = file.literals.filter { file.codeBefore($0.start).hasSuffix("hint:") }.map {
            $0.text(standingIn: Self.standIn)
        }
        #expect(texts.count == 3)
        #expect(!Hint.problems(in: texts[0]).isEmpty, "\(texts[0])")
        #expect(Hint.problems(in: texts[1]).isEmpty, "\(texts[1])")
        #expect(Hint.problems(in: texts[2]).isEmpty, "\(texts[2])")
    }

    @Test("the scan sees a hint built in a local value first, both branches of a choice, and its problems")
    func scanSeesHintsInLocalValues() {
        let file = SwiftSourceText(
            path: "Local.swift",
            text: #"""
                let login = "Run 'tokenctl login' to sign in again"
                let consequence =
                    rotated
                    ? "Run 'tokenctl login --device Nothing was sent."
                    : "The session is kept."
                let other = "not a hint"
                throw TokenctlError(.loginRequired, "not one either", hint: login)
                throw TokenctlError(.loginRequired, "x", hint: Hint.sentences(why, consequence))
                """#)
        #expect(Self.hintNames(in: file) == ["login": true, "consequence": true, "why": true])
        let found = file.literals.compactMap { literal in
            Self.assignedHint(in: file, before: literal.start, names: Self.hintNames(in: file)).map { _ in
                literal.text()
            }
        }
        #expect(
            found == [
                "Run 'tokenctl login' to sign in again", "Run 'tokenctl login --device Nothing was sent.",
                "The session is kept.",
            ])
        #expect(found.prefix(2).allSatisfy { !Hint.problems(in: $0).isEmpty }, "both are caught")
    }

    @Test("the scan sees a hint that breaks the rule (a command run on by the next sentence)")
    func scanCatchesABrokenHint() {
        let file = SwiftSourceText(
            path: "Broken.swift",
            text: #"""
                throw TokenctlError(.storeUnavailable, "x", hint: "Create one: printf %s \"$P\" | gnome-keyring-daemon --unlock --components=secrets Nothing was sent to the server.")
                """#)
        let literal = file.literals[1]
        #expect(file.codeBefore(literal.start).hasSuffix("hint:"))
        #expect(!Hint.problems(in: literal.text()).isEmpty)
    }
}
