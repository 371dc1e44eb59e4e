import Foundation
import Testing
import TokenctlTestSupport

/// The core says what went wrong in its own words and names tokenctl's commands only as typed
/// values (`Suggestion`, `SuggestedCommand`); the command layer spells them from its command
/// table. So no string literal in Sources/TokenctlCore holds `--NAME` for a long option of that
/// table, apart from the few below, none of which is a hint.
@Suite("The core speaks no argv: tokenctl's options are not in its string literals")
struct HintConfinementTests {
    /// What may still name one of tokenctl's options in the core, and why.
    static let allowed: [(file: String, text: String, why: String)] = [
        (
            "Status/Doctor/IssuerCheck.swift", "time ran out (--timeout)",
            "a check's detail, not a hint: names the option whose time ran out"
        ),
        (
            "Store/SecretService/SecretServiceStore+Connection.swift", "time ran out (--timeout)",
            "an error message, not a hint: names the option whose time ran out"
        ),
        ("Broker/Refresh/RefreshRequest.swift", "--force: '", "a verbose narration, not a hint"),
        (
            "System/UnattendedKeyring.swift", "# Installed by 'tokenctl keyring setup --unattended'",
            "the comment line written into the unit file that marks it as tokenctl's (a file's content, not a hint)"
        ),
        ("System/UnattendedKeyring.swift", "--help", "systemd-creds' own --help (whether it has --user)"),
        ("Model/Hint.swift", "--", "the hint rule's words that make 'tokenctl' a command (--profile, --version)"),
        ("Providers/ProviderPreset.swift", "--", "the preset's errors about the login options given (messages)"),
        ("Providers/Entra.swift", "--tenant", "the preset's errors about --tenant (messages) and its help text"),
        ("Providers/", "\n", "a provider's help text ('tokenctl help providers'), which names login's options"),
    ]

    /// `file`'s string literals that name an option of `names`: the literal's line and text.
    static func offences(in file: SwiftSourceText, names: Set<String>) -> [(line: Int, text: String)] {
        var found: [(Int, String)] = []
        for literal in file.literals {
            let text = literal.text(placeholder: "…")
            let named = text.matches(of: /--[a-z][a-z0-9-]*/).map { String($0.output) }
            if named.contains(where: names.contains) { found.append((literal.line, text)) }
        }
        return found
    }

    @Test("no string literal in Sources/TokenctlCore names an option of the command table, but the listed ones")
    func coreLiteralsNameNoOption() throws {
        let names = CommandTable.longOptionNames
        try #require(names.contains("--no-revoke") && names.contains("--profile") && names.count > 40)
        let core = SwiftSourceText.all.filter { $0.path.hasPrefix("TokenctlCore/") }
        try #require(core.count > 80, "found only \(core.count) Swift files of the core")
        var used = Set<Int>()
        var left = 0
        for file in core {
            for (line, text) in Self.offences(in: file, names: names) {
                let relative = String(file.path.dropFirst("TokenctlCore/".count))
                if let entry = Self.allowed.indices.first(where: {
                    relative.hasPrefix(Self.allowed[$0].file) && text.contains(Self.allowed[$0].text)
                }) {
                    used.insert(entry)
                    left += 1
                    continue
                }
                Issue.record(
                    "\(file.path):\(line): a tokenctl option in a core string literal (give a typed `Suggestion` instead): \(text)"
                )
            }
        }
        for index in Self.allowed.indices where !used.contains(index) {
            Issue.record("nothing left for the allowance \(Self.allowed[index]): remove it")
        }
        print("tokenctl options left in core string literals: \(left)")
    }

    @Test("the scan finds an option in a literal, also beside an interpolation, and not another program's")
    func scanFindsOptions() {
        let file = SwiftSourceText(
            path: "TokenctlCore/Bad.swift",
            text: #"""
                let a = "Run 'tokenctl logout --no-revoke', then \(next)."
                let b = "Run '\(program: "gnome-keyring-daemon --start --components=secrets")'."
                let c = "Give it with --token-endpoint=\(url)."
                """#)
        let names: Set<String> = ["--no-revoke", "--token-endpoint", "--profile"]
        #expect(Self.offences(in: file, names: names).map(\.line) == [1, 3])
    }
}
