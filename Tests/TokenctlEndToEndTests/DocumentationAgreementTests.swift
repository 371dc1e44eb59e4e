import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// tokenctl's exit statuses, for this target (Swift Testing has an `ExitStatus` of its own).
typealias ExitStatus = TokenctlEssentials.ExitStatus

/// The manual pages against the program: every command has its page `man/tokenctl-COMMAND.1`
/// and every such page a command; each page's one-line description is the command's help
/// abstract, its SYNOPSIS the help's usage line and its OPTIONS exactly the options its help
/// lists; tokenctl(1) lists every command with that abstract; tokenctl.conf(5) documents exactly
/// the keys the profile parser accepts; every page renders without a warning; and the README
/// stays a first reading (at most 15,000 bytes).
@Suite("End to end: --help agrees with the manual pages")
struct DocumentationAgreementTests {
    static let commands = [
        "login", "token", "refresh", "logout", "status", "events", "doctor", "schedule", "git-credential", "exec",
        "forward", "key", "keyring", "proxy-password", "completion",
    ]

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The text of `man/NAME`, or "" when it cannot be read.
    static func page(_ name: String) -> String {
        (try? String(contentsOf: root.appendingPathComponent("man/" + name), encoding: .utf8)) ?? ""
    }

    /// The overview, tokenctl(1).
    static let manual = page("tokenctl.1")

    /// Every page in man/, by file name.
    static var pageNames: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("man").path)) ?? []).sorted()
    }

    static func lines(_ text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// The lines of section `.Sh name` of `text`, up to the next `.Sh`.
    static func section(_ name: String, of text: String) -> [String] {
        let all = lines(text)
        guard let start = all.firstIndex(of: ".Sh \(name)") else { return [] }
        let end = all[(start + 1)...].firstIndex { $0.hasPrefix(".Sh ") } ?? all.endIndex
        return Array(all[(start + 1)..<end])
    }

    /// Option names in an mdoc line's `Fl` arguments: `.It Fl v , Fl -verbose` names -v and
    /// --verbose; `Fl -scope Ar scopes , Fl -audience Ar audience` names --scope and --audience.
    static func flags(inMdocLine line: String) -> Set<String> {
        var names = Set<String>()
        var afterFl = false
        for word in line.split(whereSeparator: { " |".contains($0) }) {
            if word == "Fl" {
                afterFl = true
                continue
            }
            if word.first?.isUppercase == true && word.count == 2 {
                afterFl = false
                continue
            } // Ar, Cm, Op, It…
            guard afterFl, let first = word.first, first == "-" || first.isLetter else { continue }
            let name = "-" + word.prefix { $0 == "-" || $0.isLetter }
            if name.count >= 2 { names.insert(String(name)) }
        }
        return names
    }

    /// The options a page's OPTIONS section documents: the tags (`.It Fl …`) of its list.
    static func documentedOptions(_ text: String) -> Set<String> {
        var names = Set<String>()
        var depth = 0
        for line in section("OPTIONS", of: text) {
            if line.hasPrefix(".Bl") { depth += 1 }
            if line.hasPrefix(".El") { depth -= 1 }
            if depth == 1, line.hasPrefix(".It Fl ") { names.formUnion(flags(inMdocLine: line)) }
        }
        return names
    }

    /// A SYNOPSIS in the help's notation: `.Op Fl -profile Ar name` is `[--profile <name>]`,
    /// `.Cm bash | zsh | fish` is `bash|zsh|fish`; an `Op` lasts to the end of its line.
    static func usageText(ofSynopsis synopsis: [String]) -> String {
        var words: [String] = []
        for line in synopsis where line.hasPrefix(".") {
            var closing = 0
            var macro = ""
            for word in line.dropFirst().split(separator: " ").map(String.init) {
                if word.count == 2, word.first!.isUppercase, word.last!.isLowercase {
                    macro = word
                    if word == "Op" {
                        words.append("[")
                        closing += 1
                    }
                    continue
                }
                switch macro {
                case _ where word == "|": words.append(word)
                case "Fl": words.append("-" + word)
                case "Ar": words.append(word == "..." ? "…" : "<\(word)>")
                default: words.append(word)
                }
            }
            words += Array(repeating: "]", count: closing)
        }
        var text = words.joined(separator: " ")
        // `Ar argument ...` is `<argument>…`.
        for (spaced, tight) in [("[ ", "["), (" ]", "]"), (" | ", "|"), ("> …", ">…")] {
            text = text.replacingOccurrences(of: spaced, with: tight)
        }
        return text
    }

    /// The help's usage line in the same spacing: no blanks inside brackets or around `|`.
    static func normalizedUsage(_ usage: String) -> String {
        var text = usage
        for (spaced, tight) in [("[ ", "["), (" ]", "]"), (" | ", "|")] {
            text = text.replacingOccurrences(of: spaced, with: tight)
        }
        return text
    }

    struct Help {
        var abstract = ""
        var usage = ""
        var options = Set<String>()
    }

    /// `tokenctl help COMMAND`: its OVERVIEW, its USAGE line (after "USAGE: ") and the names
    /// of its OPTIONS.
    static func help(_ command: String, sandbox: Sandbox) throws -> Help {
        let result = try sandbox.tokenctl("help", command)
        #expect(result.status == 0, "\(result)")
        var help = Help()
        var inOptions = false
        for line in result.stdout.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("OVERVIEW: ") { help.abstract = String(line.dropFirst("OVERVIEW: ".count)) }
            if line.hasPrefix("USAGE: ") { help.usage = String(line.dropFirst("USAGE: ".count)) }
            if line.hasPrefix("OPTIONS:") {
                inOptions = true
                continue
            }
            guard inOptions, line.hasPrefix("  -") else { continue }
            // "  -v, --verbose  Explain…", "  --port <port>  With --browser: …": the names come first.
            for word in line.dropFirst(2).split(separator: " ").prefix(while: { $0.hasPrefix("-") || $0.hasPrefix("<") }
            ) where word.hasPrefix("-") {
                help.options.insert(String(word.trimmingCharacters(in: CharacterSet(charactersIn: ","))))
            }
        }
        return help
    }

    @Test(
        "every command has its page man/tokenctl-COMMAND.1, every such page is a command, and tokenctl(1) lists each with its abstract"
    )
    func everyCommandHasAPage() throws {
        let sandbox = try Sandbox()
        let overview = try sandbox.tokenctl("help")
        #expect(overview.status == 0, "\(overview)")
        var listed: [String] = []
        var inCommands = false
        for line in overview.stdout.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("SUBCOMMANDS:") {
                inCommands = true
                continue
            }
            if inCommands && line.isEmpty { break }
            guard inCommands, line.hasPrefix("  "), !line.hasPrefix("   "), let name = line.split(separator: " ").first
            else { continue }
            if name != "help" { listed.append(String(name)) }
        }
        #expect(listed == Self.commands, "tokenctl help lists \(listed)")
        let pages = Self.pageNames.filter { $0.hasPrefix("tokenctl-") && $0.hasSuffix(".1") }.map {
            String($0.dropFirst("tokenctl-".count).dropLast(2))
        }
        #expect(
            Set(pages) == Set(listed),
            "pages without a command: \(Set(pages).subtracting(listed).sorted()); commands without a page: \(Set(listed).subtracting(pages).sorted())"
        )
        #expect(
            Set(Self.pageNames) == Set(pages.map { "tokenctl-\($0).1" } + ["tokenctl.1", "tokenctl.conf.5"]),
            "man/ holds \(Self.pageNames)")

        // tokenctl(1), COMMANDS: `.It Cm NAME`, the abstract on the next line, then `.Xr tokenctl-NAME 1`.
        let commandsSection = Self.section("COMMANDS", of: Self.manual)
        for command in listed {
            let help = try Self.help(command, sandbox: sandbox)
            guard let tag = commandsSection.firstIndex(of: ".It Cm \(command)"), tag + 3 < commandsSection.count else {
                Issue.record("tokenctl(1) COMMANDS has no entry '.It Cm \(command)'")
                continue
            }
            #expect(
                commandsSection[tag + 1] == help.abstract,
                "tokenctl(1) says '\(commandsSection[tag + 1])' of \(command); its help '\(help.abstract)'")
            #expect(
                commandsSection[(tag + 1)...].prefix(4).contains(".Xr tokenctl-\(command) 1 ."),
                "tokenctl(1) points \(command) to tokenctl-\(command)(1)")
        }
    }

    @Test("each command's page has the help's abstract, usage line and options", arguments: commands)
    func pageAgreesWithHelp(command: String) throws {
        let text = Self.page("tokenctl-\(command).1")
        try #require(!text.isEmpty, "man/tokenctl-\(command).1 is readable")
        let sandbox = try Sandbox()
        let help = try Self.help(command, sandbox: sandbox)
        try #require(!help.options.isEmpty && !help.usage.isEmpty, "help parsed: \(help)")

        let name = Self.section("NAME", of: text)
        #expect(name.first == ".Nm tokenctl-\(command)", "NAME: \(name)")
        let description = name.first { $0.hasPrefix(".Nd ") }.map { String($0.dropFirst(4)) } ?? ""
        #expect(description + "." == help.abstract, "the page says '\(description)'; its help '\(help.abstract)'")

        let synopsis = Self.usageText(ofSynopsis: Self.section("SYNOPSIS", of: text))
        #expect(
            synopsis == Self.normalizedUsage(help.usage),
            "SYNOPSIS reads '\(synopsis)'; the help's usage line '\(help.usage)'")

        let documented = Self.documentedOptions(text)
        #expect(
            documented == help.options,
            "--help only: \(help.options.subtracting(documented).sorted()); page only: \(documented.subtracting(help.options).sorted())"
        )
    }

    @Test("tokenctl.conf(5) documents exactly the keys the profile parser accepts")
    func confPageListsEveryKey() throws {
        let text = Self.page("tokenctl.conf.5")
        try #require(!text.isEmpty, "man/tokenctl.conf.5 is readable")
        var documented: [String] = []
        var depth = 0
        for line in Self.section("KEYS", of: text) {
            if line.hasPrefix(".Bl") { depth += 1 }
            if line.hasPrefix(".El") { depth -= 1 }
            if depth == 1, line.hasPrefix(".It Cm "), let key = line.split(separator: " ").dropFirst(2).first {
                documented.append(String(key))
            }
        }
        try #require(documented.count >= 2, "KEYS parsed: \(documented)")
        #expect(
            documented == ProfileConfiguration.keys,
            "page only: \(Set(documented).subtracting(ProfileConfiguration.keys).sorted()); parser only: \(Set(ProfileConfiguration.keys).subtracting(documented).sorted()); or another order"
        )
        // What the parser does with each documented key, and with one it does not know.
        func value(_ key: String) -> String {
            switch key {
            case "dpop", "dpop_allow_bearer", "forward": "true"
            case "token_endpoint_auth_method": "client_secret_basic"
            case "provider": "github"
            case "grant": "client-credentials"
            case "assertion_audience": "https://login.example.com/token"
            case "cacert": "/etc/ssl/certs/ca-certificates.crt"
            case _ where key.hasSuffix("_endpoint") || key == "jwks_uri": "https://login.example.com/\(key)"
            default: "value"
            }
        }
        let base = "issuer = https://login.example.com\nclient_id = cli\n"
        for key in documented where key != "issuer" && key != "client_id" {
            #expect(throws: Never.self, "the parser accepts '\(key)'") {
                // proxy_user names the user of the profile's own proxy.
                let proxy = key == "proxy_user" ? "proxy = http://proxy.example:3128\n" : ""
                _ = try ProfileConfiguration.parse(base + proxy + "\(key) = \(value(key))\n", path: "test.conf")
            }
        }
        #expect(throws: ConfigurationError.self) {
            _ = try ProfileConfiguration.parse(base + "client_secret = value\n", path: "test.conf")
        }
    }

    @Test("PROVIDERS in tokenctl-login(1) has an entry for every preset 'tokenctl help providers' lists, and no other")
    func providersSectionListsEveryPreset() throws {
        let sandbox = try Sandbox()
        let help = try sandbox.tokenctl("help", "providers")
        #expect(help.status == 0, "\(help)")
        var documented: [String] = []
        for line in Self.section("PROVIDERS", of: Self.page("tokenctl-login.1")) where line.hasPrefix(".It Cm ") {
            documented += line.dropFirst(".It ".count).split(separator: " ").filter { $0 != "Cm" && $0 != "," }
                .map(String.init)
        }
        #expect(documented == Provider.names, "the man page's entries: \(documented)")
        for name in Provider.names { #expect(help.stdout.contains("\n  \(name) ("), "help providers lists \(name)") }
    }

    @Test("every page renders without a warning (groff -mandoc -ww) and names the same version")
    func pagesRender() throws {
        let groff = "/usr/bin/groff"
        try #require(FileManager.default.isExecutableFile(atPath: groff), "groff is installed (Debian: groff-base)")
        let version = Self.lines(Self.manual).first { $0.hasPrefix(".Os ") }
        try #require(version != nil, "tokenctl(1) has an .Os line")
        for name in Self.pageNames {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: groff)
            process.arguments = [
                "-mandoc", "-Tutf8", "-ww", "-z", Self.root.appendingPathComponent("man/" + name).path,
            ]
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            let output = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0 && output.isEmpty, "\(name): \(output)")
            #expect(
                Self.lines(Self.page(name)).first { $0.hasPrefix(".Os ") } == version,
                "\(name) names the version of tokenctl(1)")
        }
    }

    @Test("README.md is a first reading: at most 15,000 bytes")
    func readmeIsShort() throws {
        let bytes = try Data(contentsOf: Self.root.appendingPathComponent("README.md")).count
        try #require(bytes > 1_000, "README.md is readable")
        #expect(bytes <= 15_000, "README.md is \(bytes) bytes")
    }
}

/// DIAGNOSTICS (of every page) and EXIT STATUS (of tokenctl(1)) against the code that produces
/// them: every exit status the manual lists is an `ExitStatus` (and every `ExitStatus` is listed) with the same meaning;
/// every message DIAGNOSTICS lists is written in the sources (a literal, or the fixed parts of
/// an interpolated one), and the exit status it documents is the one its producer exits with
/// (the `TokenctlError` kind it is thrown as, through `TokenctlError.exitStatus`).
@Suite("The manual pages' DIAGNOSTICS and tokenctl(1) EXIT STATUS agree with the code")
struct DiagnosticsAgreementTests {
    static var manualLines: [String] {
        DocumentationAgreementTests.manual.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

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
            if line.hasPrefix(".") {
                words = words.filter {
                    !($0.first == "." || ($0.count == 2 && $0.first!.isUppercase && $0.last!.isLowercase))
                }
            }
            return words
        }
    }

    static func significantWords(_ text: String) -> Set<String> {
        let stop: Set<String> = [
            "this", "that", "with", "from", "when", "here", "only", "what", "does", "were", "been", "also",
        ]
        return Set(
            text.lowercased().split(whereSeparator: { !$0.isLetter }).map(String.init).filter {
                $0.count >= 4 && !stop.contains($0)
            })
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
            if line.hasPrefix(".El") {
                depth -= 1
                if depth == 0 { break }
            }
            if depth == 1, line.hasPrefix(".It ") {
                let tag = line.dropFirst(4).split(separator: " ")
                let codes = tag.compactMap { Int32($0) }
                let name = tag.firstIndex(of: "Dv").map { String(tag[$0 + 1]) }
                var body: [String] = []
                var next = index + 1
                while next < lines.count, !(lines[next].hasPrefix(".It ") || lines[next].hasPrefix(".El")) {
                    body.append(lines[next])
                    next += 1
                }
                for code in codes { entries.append((code, name, plainWords(body).joined(separator: " "))) }
            }
            index += 1
        }
        return entries
    }

    /// `ExitStatus`'s doc comments, read from its source: the words before the first ":" after
    /// the sysexits name, up to the first full stop or parenthesis.
    static func statusMeanings() -> [Int32: String] {
        let path = "TokenctlEssentials/System/ExitStatus.swift"
        guard let file = SwiftSourceText.all.first(where: { $0.path.hasSuffix(path) }) else { return [:] }
        var meanings: [Int32: String] = [:]
        var comment = ""
        for line in String(file.code).split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line.hasPrefix("///") {
                comment += " " + line.dropFirst(3)
                continue
            }
            if line.hasPrefix("case "), let equals = line.firstIndex(of: "="),
                let code = Int32(line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces))
            {
                var meaning = comment.trimmingCharacters(in: .whitespaces)
                if let colon = meaning.range(of: #"^EX_[A-Z]+: "#, options: .regularExpression) {
                    meaning.removeSubrange(colon)
                }
                if let colon = meaning.range(of: #"^`[a-z]+`: "#, options: .regularExpression) {
                    meaning.removeSubrange(colon)
                }
                meanings[code] = String(meaning.prefix { $0 != "." && $0 != "(" && $0 != ";" })
            }
            comment = ""
        }
        return meanings
    }

    @Test(
        "every exit status EXIT STATUS lists is an ExitStatus with its sysexits name and meaning, and every ExitStatus is listed"
    )
    func exitStatusesAgree() throws {
        let documented = Self.documentedStatuses()
        try #require(documented.count >= 8, "EXIT STATUS parsed: \(documented)")
        let meanings = Self.statusMeanings()
        #expect(
            Set(documented.map(\.code)) == Set(ExitStatus.allCases.map(\.rawValue)),
            "manual only: \(Set(documented.map(\.code)).subtracting(ExitStatus.allCases.map(\.rawValue)).sorted()); code only: \(Set(ExitStatus.allCases.map(\.rawValue)).subtracting(documented.map(\.code)).sorted())"
        )
        for entry in documented {
            guard let status = ExitStatus(rawValue: entry.code) else { continue }
            if let name = entry.name {
                #expect(name == status.name, "\(entry.code): the manual says \(name), the code \(status.name)")
            }
            let meaning = try #require(meanings[entry.code], "no doc comment for \(entry.code)")
            let missing = Self.significantWords(meaning).subtracting(Self.significantWords(entry.text))
            #expect(
                missing.isEmpty,
                "\(entry.code): ExitStatus says '\(meaning)'; the manual lacks \(missing.sorted()): \(entry.text)")
        }
    }

    // MARK: DIAGNOSTICS

    struct Entry {
        var page: String
        var message: String
        var exit: Int32?
        var line: Int
    }

    /// `Exit 75`, `exit 77`, `exits 69` in `text`: the first.
    static func exitStatus(in text: String) -> Int32? {
        guard let range = text.range(of: #"\b[Ee]xits? [0-9]+\b"#, options: .regularExpression) else { return nil }
        return Int32(text[range].split(separator: " ").last!)
    }

    /// The messages of every page's DIAGNOSTICS (the `.It` tags of its lists, but the doctor's check names),
    /// each with the exit status its entry documents, else the one its list's paragraph or its
    /// subsection ("All of them exit 69") gives.
    static func diagnostics() -> [Entry] {
        DocumentationAgreementTests.pageNames.flatMap(diagnostics(inPage:))
    }

    /// The messages of the DIAGNOSTICS section of the page `man/NAME`, if it has one.
    static func diagnostics(inPage name: String) -> [Entry] {
        let all = DocumentationAgreementTests.lines(DocumentationAgreementTests.page(name))
        guard let start = all.firstIndex(of: ".Sh DIAGNOSTICS") else { return [] }
        let lines = DocumentationAgreementTests.section("DIAGNOSTICS", of: DocumentationAgreementTests.page(name))
        let base = start + 2
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
            for (message, line) in pending {
                entries.append(Entry(page: name, message: message, exit: own ?? listDefaults.last ?? nil, line: line))
            }
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
                    let subsectionDefault = all.range(of: #"All of them exits? [0-9]+"#, options: .regularExpression)
                        .flatMap { exitStatus(in: String(all[$0])) }
                    listDefaults.append(
                        exitStatus(in: plainWords(paragraph).joined(separator: " ")) ?? subsectionDefault)
                } else {
                    body.append(line)
                    listDefaults.append(listDefaults.last ?? nil)
                }
                continue
            }
            if line.hasPrefix(".El") {
                if listDefaults.count == 1 {
                    flush()
                    paragraph = []
                } else {
                    body.append(line)
                }
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
                if subsection != "Doctor checks", let first = tag.split(separator: " ").first,
                    !(first.count == 2 && first.first!.isUppercase && first.last!.isLowercase)
                {
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
            let standIn =
                token == "\u{1}"
                || (!letters.isEmpty && !letters.contains("_") && letters.allSatisfy(\.isUppercase)
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
        guard let file = SwiftSourceText.all.first(where: { $0.path.hasSuffix("Model/TokenctlError.swift") }) else {
            return [:]
        }
        let code = String(file.code)
        guard let start = code.range(of: "public var exitStatus: ExitStatus {") else { return [:] }
        var table: [String: ExitStatus] = [:]
        for line in code[start.upperBound...].split(separator: "\n").prefix(12) {
            let text = line.trimmingCharacters(in: .whitespaces)
            guard text.hasPrefix("case "), let colon = text.lastIndex(of: ":") else { continue }
            let target = text[text.index(after: colon)...].trimmingCharacters(in: CharacterSet(charactersIn: " ."))
            guard let status = ExitStatus.allCases.first(where: { "\($0)" == target }) else { continue }
            for kind in text.dropFirst(5)[..<colon].split(separator: ",") {
                table[kind.trimmingCharacters(in: CharacterSet(charactersIn: " ."))] = status
            }
        }
        return table
    }

    /// The exit status a literal's message leaves with: from the error it is thrown as.
    static func producerStatus(
        _ literal: SwiftSourceText.Literal, in file: SwiftSourceText, kinds: [String: ExitStatus]
    ) -> Int32? {
        for call in file.enclosingCalls(literal.start, levels: 6) {
            let after = String(file.code[(call.opening + 1)..<min(file.code.count, call.opening + 60)])
                .trimmingCharacters(in: .whitespacesAndNewlines)
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
        let storeConversion = SwiftSourceText.all.contains {
            $0.path.hasSuffix("Model/TokenctlError.swift")
                && String($0.code).contains("error.reason == .deadline ? .transient : .storeUnavailable")
        }
        #expect(
            storeConversion,
            "TokenctlError.init(StoreError) maps .deadline to .transient and every other reason to .storeUnavailable")
        // An interpolated literal also matches a message the manual spells out for one of its
        // values ("no \(what) on standard input": "no refresh token on standard input").
        let patterns: [(SwiftSourceText.Literal, SwiftSourceText, NSRegularExpression)] = SwiftSourceText.all.flatMap {
            file in
            file.literals.filter { $0.pieces.count > 1 && $0.pieces.joined().count >= 12 }.compactMap { literal in
                let pattern =
                    "^" + literal.pieces.map(NSRegularExpression.escapedPattern).joined(separator: ".+?") + "$"
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
                Issue.record(
                    "\(entry.page):\(entry.line): '\(entry.message)' is in no source literal (looked for \(parts))")
                continue
            }
            guard let documented = entry.exit else { continue }
            let statuses = Set(
                matches.filter { $0.slack == best }.compactMap {
                    Self.producerStatus($0.literal, in: $0.file, kinds: kinds)
                })
            guard !statuses.isEmpty else { continue }
            checked += 1
            let places = matches.filter { $0.slack == best }.map { "\($0.literal.path):\($0.literal.line)" }
            #expect(
                statuses.contains(documented),
                "\(entry.page):\(entry.line): '\(entry.message)' is documented to exit \(documented); its producer exits \(statuses.sorted()) (\(places))"
            )
        }
        // Most messages are thrown as a typed error whose status can be read.
        #expect(checked >= 50, "only \(checked) documented exit statuses could be checked against their producers")
    }
}
