import Foundation
import Testing
import TokenctlEssentials

/// tokenctl's exit statuses, for this target (Swift Testing has an `ExitStatus` of its own).
typealias ExitStatus = TokenctlEssentials.ExitStatus

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

/// DIAGNOSTICS and EXIT STATUS against the code that produces them: every exit status the
/// manual lists is an `ExitStatus` (and every `ExitStatus` is listed) with the same meaning;
/// every message DIAGNOSTICS lists is written in the sources (a literal, or the fixed parts of
/// an interpolated one), and the exit status it documents is the one its producer exits with
/// (the `TokenctlError` kind it is thrown as, through `TokenctlError.exitStatus`).
@Suite("tokenctl(1) DIAGNOSTICS and EXIT STATUS agree with the code")
struct DiagnosticsAgreementTests {
    static var manualLines: [String] { DocumentationAgreementTests.manual.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) }

    /// The lines of section `name` (from `.Sh name` to the next `.Sh`).
    static func section(_ name: String) -> [String] {
        let lines = manualLines
        guard let start = lines.firstIndex(of: ".Sh \(name)") else { return [] }
        let end = lines[(start + 1)...].firstIndex { $0.hasPrefix(".Sh ") } ?? lines.endIndex
        return Array(lines[(start + 1)..<end])
    }

    /// Words of mdoc text without the macros (".Ql foo ," → "foo ,").
    static func plainWords(_ lines: [String]) -> [String] {
        lines.flatMap { line -> [String] in
            var words = line.split(separator: " ").map(String.init)
            if line.hasPrefix(".") { words = words.filter { !($0.first == "." || ($0.count == 2 && $0.first!.isUppercase && $0.last!.isLowercase)) } }
            return words
        }
    }

    static func significantWords(_ text: String) -> Set<String> {
        let stop: Set<String> = ["this", "that", "with", "from", "when", "here", "only", "what", "does", "were", "been", "also"]
        return Set(text.lowercased().split(whereSeparator: { !$0.isLetter }).map(String.init).filter { $0.count >= 4 && !stop.contains($0) })
    }

    // MARK: EXIT STATUS

    /// The documented statuses: `.It 64 Pq Dv EX_USAGE` and the words of its entry.
    static func documentedStatuses() -> [(code: Int32, name: String?, text: String)] {
        let lines = section("EXIT STATUS")
        var entries: [(Int32, String?, String)] = []
        var depth = 0
        var index = 0
        while index < lines.count {
            let line = lines[index]
            if line.hasPrefix(".Bl") { depth += 1 }
            if line.hasPrefix(".El") { depth -= 1; if depth == 0 { break } }
            if depth == 1, line.hasPrefix(".It ") {
                let tag = line.dropFirst(4).split(separator: " ")
                let codes = tag.compactMap { Int32($0) }
                let name = tag.firstIndex(of: "Dv").map { String(tag[$0 + 1]) }
                var body: [String] = []
                var next = index + 1
                while next < lines.count, !(lines[next].hasPrefix(".It ") || lines[next].hasPrefix(".El")) { body.append(lines[next]); next += 1 }
                for code in codes { entries.append((code, name, plainWords(body).joined(separator: " "))) }
            }
            index += 1
        }
        return entries
    }

    /// `ExitStatus`'s doc comments, read from its source: the words before the first ":" after
    /// the sysexits name, up to the first full stop or parenthesis.
    static func statusMeanings() -> [Int32: String] {
        guard let file = SwiftSourceText.all.first(where: { $0.path.hasSuffix("TokenctlEssentials/ExitStatus.swift") }) else { return [:] }
        var meanings: [Int32: String] = [:]
        var comment = ""
        for line in String(file.code).split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line.hasPrefix("///") { comment += " " + line.dropFirst(3); continue }
            if line.hasPrefix("case "), let equals = line.firstIndex(of: "="), let code = Int32(line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)) {
                var meaning = comment.trimmingCharacters(in: .whitespaces)
                if let colon = meaning.range(of: #"^EX_[A-Z]+: "#, options: .regularExpression) { meaning.removeSubrange(colon) }
                if let colon = meaning.range(of: #"^`[a-z]+`: "#, options: .regularExpression) { meaning.removeSubrange(colon) }
                meanings[code] = String(meaning.prefix { $0 != "." && $0 != "(" && $0 != ";" })
            }
            comment = ""
        }
        return meanings
    }

    @Test("every exit status EXIT STATUS lists is an ExitStatus with its sysexits name and meaning, and every ExitStatus is listed")
    func exitStatusesAgree() throws {
        let documented = Self.documentedStatuses()
        try #require(documented.count >= 8, "EXIT STATUS parsed: \(documented)")
        let meanings = Self.statusMeanings()
        #expect(Set(documented.map(\.code)) == Set(ExitStatus.allCases.map(\.rawValue)),
                "manual only: \(Set(documented.map(\.code)).subtracting(ExitStatus.allCases.map(\.rawValue)).sorted()); code only: \(Set(ExitStatus.allCases.map(\.rawValue)).subtracting(documented.map(\.code)).sorted())")
        for entry in documented {
            guard let status = ExitStatus(rawValue: entry.code) else { continue }
            if let name = entry.name { #expect(name == status.name, "\(entry.code): the manual says \(name), the code \(status.name)") }
            let meaning = try #require(meanings[entry.code], "no doc comment for \(entry.code)")
            let missing = Self.significantWords(meaning).subtracting(Self.significantWords(entry.text))
            #expect(missing.isEmpty, "\(entry.code): ExitStatus says '\(meaning)'; the manual lacks \(missing.sorted()): \(entry.text)")
        }
    }

    // MARK: DIAGNOSTICS

    struct Entry {
        var message: String
        var exit: Int32?
        var line: Int
    }

    /// `Exit 75`, `exit 77`, `exits 69` in `text`: the first.
    static func exitStatus(in text: String) -> Int32? {
        guard let range = text.range(of: #"\b[Ee]xits? [0-9]+\b"#, options: .regularExpression) else { return nil }
        return Int32(text[range].split(separator: " ").last!)
    }

    /// The messages of DIAGNOSTICS (the `.It` tags of its lists, but the doctor's check names),
    /// each with the exit status its entry documents, else the one its list's paragraph or its
    /// subsection ("All of them exit 69") gives.
    static func diagnostics() -> [Entry] {
        let lines = section("DIAGNOSTICS")
        let base = (manualLines.firstIndex(of: ".Sh DIAGNOSTICS") ?? 0) + 2
        var entries: [Entry] = []
        var subsection = ""
        var intro: [String] = []
        var paragraph: [String] = []
        var listDefaults: [Int32?] = []
        var pending: [(String, Int)] = []
        var body: [String] = []
        // A table (.Bl -column) lists answers and classes, not messages.
        var columns = false
        func flush() {
            let own = exitStatus(in: plainWords(body).joined(separator: " "))
            for (message, line) in pending { entries.append(Entry(message: message, exit: own ?? listDefaults.last ?? nil, line: line)) }
            pending = []
            body = []
        }
        for (offset, line) in lines.enumerated() {
            if line.hasPrefix(".Ss ") {
                subsection = String(line.dropFirst(4))
                intro = []
                paragraph = []
                continue
            }
            if line.hasPrefix(".Bl") {
                if listDefaults.isEmpty {
                    columns = line.contains("-column")
                    let all = plainWords(intro).joined(separator: " ")
                    let subsectionDefault = all.range(of: #"All of them exits? [0-9]+"#, options: .regularExpression).flatMap { exitStatus(in: String(all[$0])) }
                    listDefaults.append(exitStatus(in: plainWords(paragraph).joined(separator: " ")) ?? subsectionDefault)
                } else {
                    body.append(line)
                    listDefaults.append(listDefaults.last ?? nil)
                }
                continue
            }
            if line.hasPrefix(".El") {
                if listDefaults.count == 1 { flush(); paragraph = [] } else { body.append(line) }
                listDefaults.removeLast()
                continue
            }
            if listDefaults.isEmpty {
                if line == ".Pp" { paragraph = [] } else { paragraph.append(line) }
                intro.append(line)
                continue
            }
            if listDefaults.count == 1, line.hasPrefix(".It "), !columns {
                if !body.isEmpty { flush() }
                let tag = String(line.dropFirst(4))
                // Tags that are macros (.It Em answer Ta …) and the doctor's check names are no messages.
                if subsection != "Doctor checks", let first = tag.split(separator: " ").first, !(first.count == 2 && first.first!.isUppercase && first.last!.isLowercase) {
                    pending.append((tag, base + offset))
                }
                continue
            }
            body.append(line)
        }
        return entries
    }

    /// Capitals that are literal text in a message (HTTP), not a value's stand-in (NAME, N).
    static let literalCapitals: Set<String> = ["HTTP", "PKCE", "JWKS", "ID", "JSON", "GET", "DNS", "TLS"]

    /// The fixed parts of a documented message, in order: what is left between its stand-ins
    /// (NAME, PROVIDER, N, UID in /run/user/UID/bus, "...").
    static func fixedParts(_ message: String) -> [String] {
        let text = message.replacingOccurrences(of: "...", with: "\u{1}")
        var tokens: [String] = []
        var word = ""
        for character in text {
            if character == " " || character == "/" || character == "\u{1}" {
                if !word.isEmpty { tokens.append(word) }
                word = ""
                tokens.append(String(character))
            } else {
                word.append(character)
            }
        }
        if !word.isEmpty { tokens.append(word) }
        var parts: [String] = []
        var current = ""
        for token in tokens {
            let letters = token.filter { $0.isLetter || $0 == "_" }
            let standIn = token == "\u{1}" || (!letters.isEmpty && !letters.contains("_") && letters.allSatisfy(\.isUppercase)
                && !literalCapitals.contains(letters) && (letters.count >= 2 || letters == "N" || letters == "M"))
            if standIn {
                // The punctuation around a stand-in ("'NAME':") stays with the fixed text.
                current += token.prefix { !$0.isLetter && $0 != "\u{1}" }
                parts.append(current)
                current = String(token.reversed().prefix { !$0.isLetter && $0 != "\u{1}" }.reversed())
            } else {
                current += token
            }
        }
        parts.append(current)
        let trim = CharacterSet(charactersIn: " '\"():;,.")
        return parts.map { $0.trimmingCharacters(in: trim) }.filter { $0.contains { $0.isLetter } }
    }

    /// Whether `parts` occur in `text` in order.
    static func contains(_ text: String, inOrder parts: [String]) -> Bool {
        var rest = text[...]
        for part in parts {
            guard let range = rest.range(of: part) else { return false }
            rest = rest[range.upperBound...]
        }
        return true
    }

    /// `TokenctlError.exitStatus`, read from its switch: kind name → ExitStatus.
    static func kindStatuses() -> [String: ExitStatus] {
        guard let file = SwiftSourceText.all.first(where: { $0.path.hasSuffix("Model/TokenctlError.swift") }) else { return [:] }
        let code = String(file.code)
        guard let start = code.range(of: "public var exitStatus: ExitStatus {") else { return [:] }
        var table: [String: ExitStatus] = [:]
        for line in code[start.upperBound...].split(separator: "\n").prefix(12) {
            let text = line.trimmingCharacters(in: .whitespaces)
            guard text.hasPrefix("case "), let colon = text.lastIndex(of: ":") else { continue }
            let target = text[text.index(after: colon)...].trimmingCharacters(in: CharacterSet(charactersIn: " ."))
            guard let status = ExitStatus.allCases.first(where: { "\($0)" == target }) else { continue }
            for kind in text.dropFirst(5)[..<colon].split(separator: ",") { table[kind.trimmingCharacters(in: CharacterSet(charactersIn: " ."))] = status }
        }
        return table
    }

    /// The exit status a literal's message leaves with: from the error it is thrown as.
    static func producerStatus(_ literal: SwiftSourceText.Literal, in file: SwiftSourceText, kinds: [String: ExitStatus]) -> Int32? {
        for call in file.enclosingCalls(literal.start, levels: 6) {
            let after = String(file.code[(call.opening + 1)..<min(file.code.count, call.opening + 60)]).trimmingCharacters(in: .whitespacesAndNewlines)
            let kind = after.hasPrefix(".") ? String(after.dropFirst().prefix { $0.isLetter }) : nil
            switch call.name {
            case "TokenctlError":
                return kind.flatMap { kinds[$0]?.rawValue }
            case "StoreError":
                // TokenctlError.init(StoreError): the command's deadline is a transient failure
                // (75), every other reason the store being unavailable (69).
                return kind == "deadline" ? kinds["transient"]?.rawValue : kinds["storeUnavailable"]?.rawValue
            case "UsageError":
                return ExitStatus.usage.rawValue
            case "ConfigurationError":
                return kinds["configuration"]?.rawValue
            default:
                continue
            }
        }
        return nil
    }

    @Test("every DIAGNOSTICS message is in the sources, and exits as documented")
    func diagnosticsAgree() throws {
        let entries = Self.diagnostics()
        try #require(entries.count > 70, "DIAGNOSTICS parsed: \(entries.count) messages")
        let kinds = Self.kindStatuses()
        try #require(kinds.count >= 6, "TokenctlError.exitStatus read: \(kinds)")
        // The producer's own derivation, so that the table above cannot drift from it unseen.
        let storeConversion = SwiftSourceText.all.contains { $0.path.hasSuffix("Model/TokenctlError.swift") && String($0.code).contains("error.reason == .deadline ? .transient : .storeUnavailable") }
        #expect(storeConversion, "TokenctlError.init(StoreError) maps .deadline to .transient and every other reason to .storeUnavailable")
        // An interpolated literal also matches a message the manual spells out for one of its
        // values ("no \(what) on standard input": "no refresh token on standard input").
        let patterns: [(SwiftSourceText.Literal, SwiftSourceText, NSRegularExpression)] = SwiftSourceText.all.flatMap { file in
            file.literals.filter { $0.pieces.count > 1 && $0.pieces.joined().count >= 12 }.compactMap { literal in
                let pattern = "^" + literal.pieces.map(NSRegularExpression.escapedPattern).joined(separator: ".+?") + "$"
                return (try? NSRegularExpression(pattern: pattern)).map { (literal, file, $0) }
            }
        }
        var checked = 0
        for entry in entries {
            let parts = Self.fixedParts(entry.message)
            let fixedLength = parts.reduce(0) { $0 + $1.count }
            var matches: [(literal: SwiftSourceText.Literal, file: SwiftSourceText, slack: Int)] = []
            for file in SwiftSourceText.all {
                for literal in file.literals {
                    let text = literal.text(placeholder: "\u{1}")
                    guard Self.contains(text, inOrder: parts) else { continue }
                    matches.append((literal, file, text.count - fixedLength))
                }
            }
            let whole = NSRange(entry.message.startIndex..., in: entry.message)
            for (literal, file, pattern) in patterns where pattern.firstMatch(in: entry.message, range: whole) != nil {
                if !matches.contains(where: { $0.literal.path == literal.path && $0.literal.start == literal.start }) {
                    matches.append((literal, file, abs(literal.pieces.joined().count - fixedLength)))
                }
            }
            guard let best = matches.map(\.slack).min() else {
                Issue.record("tokenctl.1:\(entry.line): '\(entry.message)' is in no source literal (looked for \(parts))")
                continue
            }
            guard let documented = entry.exit else { continue }
            let statuses = Set(matches.filter { $0.slack == best }.compactMap { Self.producerStatus($0.literal, in: $0.file, kinds: kinds) })
            guard !statuses.isEmpty else { continue }
            checked += 1
            let places = matches.filter { $0.slack == best }.map { "\($0.literal.path):\($0.literal.line)" }
            #expect(statuses.contains(documented), "tokenctl.1:\(entry.line): '\(entry.message)' is documented to exit \(documented); its producer exits \(statuses.sorted()) (\(places))")
        }
        // Most messages are thrown as a typed error whose status can be read.
        #expect(checked >= 50, "only \(checked) documented exit statuses could be checked against their producers")
    }
}
