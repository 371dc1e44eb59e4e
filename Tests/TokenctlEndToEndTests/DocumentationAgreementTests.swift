import Foundation
import Testing

/// The options each command's `--help` lists are the ones tokenctl(1) documents for it, in its
/// SYNOPSIS and in its COMMANDS entry: a new option cannot land undocumented, nor a removed one
/// stay in the manual.
@Suite("End to end: --help agrees with tokenctl(1)")
struct DocumentationAgreementTests {
    static let commands = ["login", "token", "refresh", "logout", "status", "events", "doctor", "schedule", "git-credential", "exec"]
    /// Global options, documented once in the manual's DESCRIPTION.
    static let global: Set<String> = ["--profile", "--verbose", "--help", "-v", "-h"]

    static let manual: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("man/tokenctl.1"), encoding: .utf8)) ?? ""
    }()

    /// `--name` words in mdoc `Fl` arguments: `Fl -all | -orphans` names --all and --orphans;
    /// `Fl -issuer Ar url Fl -client-id Ar id` names --issuer and --client-id.
    static func flags(inMdocLine line: String) -> Set<String> {
        var names = Set<String>()
        var afterFl = false
        for word in line.split(whereSeparator: { " |".contains($0) }) {
            if word == "Fl" { afterFl = true; continue }
            if word.first?.isUppercase == true && word.count == 2 { afterFl = false; continue }  // Ar, Cm, Op, It…
            guard afterFl, word.hasPrefix("-"), !word.hasPrefix("--") else { continue }
            let name = "-" + word.prefix { $0 == "-" || $0.isLetter }
            if name.count > 3 { names.insert(String(name)) }
        }
        return names
    }

    /// The options in the COMMANDS entry `.Ss command` (its `.It Fl` tags).
    static func manualEntryOptions(_ command: String) -> Set<String> {
        let lines = manual.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(of: ".Ss \(command)") else { return [] }
        var names = Set<String>()
        for line in lines[(start + 1)...] {
            if line.hasPrefix(".Ss ") || line.hasPrefix(".Sh ") { break }
            if line.hasPrefix(".It Fl ") { names.formUnion(flags(inMdocLine: line)) }
        }
        return names
    }

    /// The options in the SYNOPSIS lines of `command` (from `.Cm command` to the next `.Nm`).
    static func synopsisOptions(_ command: String) -> Set<String> {
        let lines = manual.split(separator: "\n").map(String.init)
        guard let top = lines.firstIndex(of: ".Sh SYNOPSIS"), let end = lines[top...].firstIndex(of: ".Sh DESCRIPTION") else { return [] }
        var names = Set<String>()
        var inside = false
        for line in lines[top..<end] {
            if line == ".Nm" { inside = false }
            if line == ".Cm \(command)" { inside = true }
            if inside, line.contains("Fl ") { names.formUnion(flags(inMdocLine: line)) }
        }
        return names
    }

    @Test("each command's --help options = its SYNOPSIS options = its COMMANDS entry options", arguments: commands)
    func optionsAgree(command: String) throws {
        try #require(!Self.manual.isEmpty, "man/tokenctl.1 is readable")
        let sandbox = try Sandbox()
        let help = try sandbox.tokenctl("help", command)
        #expect(help.status == 0, "\(help)")
        var listed = Set<String>()
        var inOptions = false
        for line in help.stdout.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("OPTIONS:") { inOptions = true; continue }
            guard inOptions, line.hasPrefix("  -") else { continue }
            // "  -v, --verbose  Explain…", "  --port <port>  With --browser: …": the names come first.
            for word in line.dropFirst(2).split(separator: " ").prefix(while: { $0.hasPrefix("-") || $0.hasPrefix("<") }) where word.hasPrefix("--") {
                listed.insert(String(word.trimmingCharacters(in: CharacterSet(charactersIn: ","))))
            }
        }
        listed.subtract(Self.global)
        try #require(!listed.isEmpty, "help lists options: \(help.stdout)")
        let entry = Self.manualEntryOptions(command).subtracting(Self.global)
        let synopsis = Self.synopsisOptions(command).subtracting(Self.global)
        #expect(listed == entry, "--help only: \(listed.subtracting(entry).sorted()); manual entry only: \(entry.subtracting(listed).sorted())")
        #expect(listed == synopsis, "--help only: \(listed.subtracting(synopsis).sorted()); SYNOPSIS only: \(synopsis.subtracting(listed).sorted())")
    }
}
