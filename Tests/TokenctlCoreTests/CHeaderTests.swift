import Foundation
import Testing

/// tokenctl's C headers (every `.h` under `Sources/C*/`) only declare: function bodies and state
/// live in the targets' `.c` files. A body in a header was emitted again by every
/// Swift module that imported it (with cross-module optimization, also by the modules that
/// inline TokenctlCore's code), so a `static` variable in it existed once per module. This reads
/// each header without its comments, string literals and preprocessor directives (a macro's
/// replacement text is not code until it is expanded) and fails on a function body, a `static`
/// declaration, a variable initialized at file scope, or an expansion of the loader's define macro.
@Suite("C headers declare; bodies and state are in .c files")
struct CHeaderTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources").standardized

    /// Every file under `Sources/C*/` whose name ends with `suffix`, relative to Sources.
    static func files(endingWith suffix: String) throws -> [String] {
        let targets = try FileManager.default.contentsOfDirectory(atPath: sources.path).filter { $0.hasPrefix("C") }
            .sorted()
        return try targets.flatMap { target in
            try #require(FileManager.default.enumerator(atPath: sources.appendingPathComponent(target).path))
                .compactMap { $0 as? String }.filter { $0.hasSuffix(suffix) }.sorted().map { "\(target)/\($0)" }
        }
    }

    /// `text` with comments, string and character literals and preprocessor directives (with
    /// their continuation lines) blanked out; newlines are kept, so line numbers still hold.
    static func code(_ text: String) -> String {
        let characters = Array(text)
        var output: [Character] = []
        var index = 0
        var lineStart = true // nothing but blanks since the last newline (outside comments)
        while index < characters.count {
            let character = characters[index]
            let next: Character? = index + 1 < characters.count ? characters[index + 1] : nil
            if character == "/" && next == "/" {
                while index < characters.count && characters[index] != "\n" {
                    output.append(" ")
                    index += 1
                }
            } else if character == "/" && next == "*" {
                output.append(contentsOf: "  ")
                index += 2
                while index < characters.count
                    && !(characters[index] == "*" && index + 1 < characters.count && characters[index + 1] == "/")
                {
                    output.append(characters[index] == "\n" ? "\n" : " ")
                    index += 1
                }
                output.append(contentsOf: "  ")
                index += 2
            } else if character == "\"" || character == "'" {
                output.append(character)
                index += 1
                while index < characters.count && characters[index] != character && characters[index] != "\n" {
                    if characters[index] == "\\" {
                        output.append(" ")
                        index += 1
                    }
                    if index < characters.count {
                        output.append(" ")
                        index += 1
                    }
                }
                if index < characters.count {
                    output.append(characters[index])
                    index += 1
                }
                lineStart = false
            } else if character == "#" && lineStart {
                // A directive runs to the first newline not escaped by a backslash.
                while index < characters.count && !(characters[index] == "\n" && characters[index - 1] != "\\") {
                    output.append(characters[index] == "\n" ? "\n" : " ")
                    index += 1
                }
            } else {
                output.append(character)
                index += 1
                if character == "\n" { lineStart = true } else if !character.isWhitespace { lineStart = false }
            }
        }
        return String(output)
    }

    /// What in a header's text is not a declaration: "line N: why".
    static func problems(in text: String) -> [String] {
        let code = Self.code(text)
        var found: [String] = []
        func line(_ offset: Int) -> Int { code.prefix(offset).filter { $0 == "\n" }.count + 1 }
        let checks: [(pattern: String, why: String)] = [
            // A declarator's closing parenthesis (or its attributes') followed by a brace.
            (#"\)\s*\{"#, "a function body"),
            (#"(?<![\w#])static\b"#, "a static function or variable"),
            (#"(?<![\w#])TOKENCTL_LAZY_DEFINE\s*\("#, "the loader's define macro (bodies and state)"),
        ]
        for check in checks {
            let expression = try! NSRegularExpression(pattern: check.pattern)
            for match in expression.matches(in: code, range: NSRange(code.startIndex..., in: code)) {
                let offset = code.distance(from: code.startIndex, to: Range(match.range, in: code)!.lowerBound)
                found.append("line \(line(offset)): \(check.why)")
            }
        }
        // A variable defined with a value at file scope (an `=` outside every brace and parenthesis).
        var depth = 0
        for (offset, character) in code.enumerated() {
            if "{(".contains(character) {
                depth += 1
            } else if "})".contains(character) {
                depth -= 1
            } else if character == "=" && depth == 0 {
                found.append("line \(line(offset)): a variable defined at file scope")
            }
        }
        return found
    }

    @Test("no header under Sources/C*/ has a function body or state")
    func headersDeclare() throws {
        let headers = try Self.files(endingWith: ".h")
        #expect(headers.count >= 8, "\(headers)")
        var found: [String] = []
        for header in headers {
            let text = try String(contentsOf: Self.sources.appendingPathComponent(header), encoding: .utf8)
            found += Self.problems(in: text).map { "Sources/\(header) \($0)" }
        }
        #expect(
            found.isEmpty,
            "C headers must only declare (bodies and state go in the target's .c file):\n\(found.joined(separator: "\n"))"
        )
    }

    @Test("each lazily loaded library's table and loader are defined in exactly one .c file")
    func oneDefinitionPerLibrary() throws {
        func prefixes(_ macro: String, in files: [String]) throws -> [String] {
            let expression = try NSRegularExpression(pattern: "(?m)^\\s*" + macro + "\\(\\s*(\\w+)\\s*,")
            return try files.flatMap { file -> [String] in
                let text = try String(contentsOf: Self.sources.appendingPathComponent(file), encoding: .utf8)
                return expression.matches(in: text, range: NSRange(text.startIndex..., in: text)).map {
                    (text as NSString).substring(with: $0.range(at: 1))
                }
            }
        }
        let declared = try prefixes("TOKENCTL_LAZY_DECLARE", in: Self.files(endingWith: ".h")).sorted()
        let defined = try prefixes("TOKENCTL_LAZY_DEFINE", in: Self.files(endingWith: ".c")).sorted()
        #expect(
            declared == ["tokenctl_crypto", "tokenctl_curl", "tokenctl_gcrypt", "tokenctl_qrencode", "tokenctl_ssl"])
        #expect(defined == declared)
    }

    @Test("the check finds a body, static state and a definition in a header, and passes declarations")
    func checkCanFail() {
        let declarations = """
            #define TOKENCTL_X(a) static inline int a(void) { return 1; } \\
                int b = 2;
            // static inline int f(void) { return 0; }
            struct tokenctl_pair { int first; int second; };
            enum tokenctl_kind { tokenctl_one = 1 };
            typedef size_t (*tokenctl_callback)(char *data, size_t size);
            const char *tokenctl_name(const char *text /* ) { */);
            TOKENCTL_LAZY_DECLARE(tokenctl_curl, TOKENCTL_CURL_FUNCTIONS)
            """
        #expect(Self.problems(in: declarations) == [])
        #expect(Self.problems(in: "int tokenctl_one(void)\n{\n    return 1;\n}\n") == ["line 1: a function body"])
        #expect(
            Self.problems(in: "static inline int tokenctl_one(void) { return 1; }\n")
                == ["line 1: a function body", "line 1: a static function or variable"])
        #expect(
            Self.problems(in: "__attribute__((weak)) pthread_mutex_t *m(void) {\n    return 0;\n}\n") == [
                "line 1: a function body"
            ])
        #expect(Self.problems(in: "\nstatic pthread_mutex_t mutex;\n") == ["line 2: a static function or variable"])
        #expect(Self.problems(in: "int tokenctl_count = 0;\n") == ["line 1: a variable defined at file scope"])
        #expect(
            Self.problems(in: "TOKENCTL_LAZY_DEFINE(tokenctl_curl, F, \"libcurl.so.4\", (void)0)\n")
                == ["line 1: the loader's define macro (bodies and state)"])
    }
}
