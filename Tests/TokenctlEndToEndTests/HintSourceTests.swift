import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials

/// Every hint written in the sources holds to `Hint.problems`: commands in single quotes, no
/// sentence's end inside them, and a whole hint ends with its full stop, so a user who copies a
/// command gets the command alone (issue 24: "…--components=secrets Nothing was sent to the
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
                // A literal inside another's interpolation ("'\(CommandHint.tokenctl(p, "token"))'") is part of it.
                if literal.start < outerEnd { continue }
                outerEnd = literal.end
                let before = file.codeBefore(literal.start)
                let after = file.codeAfter(literal.end)
                let labelled = before.hasSuffix("hint:") || before.hasSuffix("hint =") || before.hasSuffix("Hint =")
                let sentence = file.enclosingCalls(literal.start, levels: 1).first?.name == "Hint.sentences"
                // Also the branches of a ternary after `hint:` ("hint: interactive ? "A" : "B"").
                let branch = before.range(of: #"hint: [A-Za-z.]+ \?( "X" :)?$"#, options: .regularExpression) != nil
                guard labelled || sentence || branch else { continue }
                found.append((literal, (labelled || sentence || branch) && (after == ")" || after == ",")))
            }
        }
        return found
    }

    @Test("every hint literal quotes its commands, and a whole one ends with its full stop")
    func hintLiteralsAreWellFormed() throws {
        let hints = Self.hintLiterals()
        // The scan finds the hints (77 when this was written); a broken lexer must not pass by finding none.
        try #require(hints.count > 60, "found only \(hints.count) hint literals")
        for (literal, whole) in hints {
            let text = literal.text(placeholder: "X")
            let problems = Hint.problems(in: text, terminated: whole)
            #expect(
                problems.isEmpty,
                "\(literal.path):\(literal.line) \(literal.path):\(literal.line): \(problems): \(text)")
        }
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
