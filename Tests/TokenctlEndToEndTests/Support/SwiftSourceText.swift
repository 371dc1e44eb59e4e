import Foundation
import TokenctlTestSupport

/// The string literals of tokenctl's Swift sources, found by a small lexer, for the tests that
/// hold what the program prints to the manual and to the hint rules: each literal's text
/// between interpolations, where it is, and the code around it with every literal blanked out
/// (so that parentheses and labels can be read without strings getting in the way).
struct SwiftSourceText {
    struct Literal {
        /// The literal's text pieces between interpolations (escapes decoded).
        var pieces: [String]
        /// Where the opening quote is, in `SwiftSourceText.code`.
        var start: Int
        /// Just after the closing quote.
        var end: Int
        var path: String
        var line: Int
        /// The source of each interpolation, between its parentheses.
        var interpolations: [String] = []

        /// The text with each interpolation replaced by `placeholder`.
        func text(placeholder: String = "X") -> String { pieces.joined(separator: placeholder) }

        /// The text with each interpolation replaced by what `stand` gives for its source.
        func text(standingIn stand: (String) -> String) -> String {
            var text = pieces.first ?? ""
            for (index, piece) in pieces.dropFirst().enumerated() {
                text += stand(index < interpolations.count ? interpolations[index] : "") + piece
            }
            return text
        }
    }

    let path: String
    /// The file with every literal (and the interpolations in it) replaced by spaces.
    let code: [Character]
    let literals: [Literal]

    static let sourcesRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sources")

    /// Every Swift file under Sources/.
    static let all: [SwiftSourceText] = {
        let enumerator = FileManager.default.enumerator(at: sourcesRoot, includingPropertiesForKeys: nil)
        var files: [SwiftSourceText] = []
        while let url = enumerator?.nextObject() as? URL {
            guard url.pathExtension == "swift", let text = try? String(contentsOf: url, encoding: .utf8) else {
                continue
            }
            files.append(
                SwiftSourceText(path: url.path.replacingOccurrences(of: sourcesRoot.path + "/", with: ""), text: text))
        }
        return files.sorted { $0.path < $1.path }
    }()

    init(path: String, text: String) {
        self.path = path
        let characters = Array(text)
        var code = characters
        var literals: [Literal] = []
        var index = 0
        func line(at position: Int) -> Int { characters[..<position].reduce(1) { $0 + ($1 == "\n" ? 1 : 0) } }
        func blank(_ range: Range<Int>) {
            for position in range where code[position] != "\n" { code[position] = " " }
        }
        /// Lex a literal whose opening quote is at `open`; returns the index after it.
        func literal(at open: Int) -> Int {
            var hashes = 0
            var position = open
            while characters[position] == "#" {
                hashes += 1
                position += 1
            }
            let multiline =
                position + 2 < characters.count && characters[position + 1] == "\"" && characters[position + 2] == "\""
            position += multiline ? 3 : 1
            let escape = "\\" + String(repeating: "#", count: hashes)
            let closing = (multiline ? "\"\"\"" : "\"") + String(repeating: "#", count: hashes)
            var pieces: [String] = []
            var interpolations: [String] = []
            var current = ""
            func matches(_ text: String, at position: Int) -> Bool {
                let needle = Array(text)
                return position + needle.count <= characters.count
                    && Array(characters[position..<(position + needle.count)]) == needle
            }
            while position < characters.count {
                if matches(closing, at: position) {
                    position += closing.count
                    break
                }
                if matches(escape, at: position) {
                    let after = position + escape.count
                    guard after < characters.count else { break }
                    switch characters[after] {
                    case "(":
                        // An interpolation: skip a balanced expression, lexing the literals in it.
                        pieces.append(current)
                        current = ""
                        var depth = 1
                        var inner = after + 1
                        while inner < characters.count && depth > 0 {
                            let character = characters[inner]
                            if character == "\""
                                || (character == "#" && inner + 1 < characters.count && characters[inner + 1] == "\"")
                            {
                                inner = literal(at: inner)
                                continue
                            }
                            if character == "(" { depth += 1 }
                            if character == ")" { depth -= 1 }
                            inner += 1
                        }
                        interpolations.append(String(characters[(after + 1)..<max(after + 1, inner - 1)]))
                        position = inner
                        continue
                    case "n": current.append("\n")
                    case "t": current.append("\t")
                    case "0": current.append("\0")
                    case "u":
                        var scalar = ""
                        var cursor = after + 2
                        while cursor < characters.count && characters[cursor] != "}" {
                            scalar.append(characters[cursor])
                            cursor += 1
                        }
                        if let value = UInt32(scalar, radix: 16), let unicode = Unicode.Scalar(value) {
                            current.append(Character(unicode))
                        }
                        position = cursor + 1
                        continue
                    case "\n": break // a multi-line literal's line continuation
                    default: current.append(characters[after])
                    }
                    position = after + 1
                    continue
                }
                current.append(characters[position])
                position += 1
            }
            pieces.append(current)
            if multiline {
                // Drop the indentation of the closing delimiter's line from each line, roughly.
                pieces = pieces.map {
                    $0.split(separator: "\n", omittingEmptySubsequences: false).map { $0.drop { $0 == " " } }.joined(
                        separator: "\n")
                }
            }
            literals.append(
                Literal(
                    pieces: pieces, start: open, end: position, path: path, line: line(at: open),
                    interpolations: interpolations))
            return position
        }
        while index < characters.count {
            let character = characters[index]
            let next = index + 1 < characters.count ? characters[index + 1] : " "
            if character == "/" && next == "/" {
                while index < characters.count && characters[index] != "\n" { index += 1 }
            } else if character == "/" && next == "*" {
                index += 2
                while index + 1 < characters.count && !(characters[index] == "*" && characters[index + 1] == "/") {
                    index += 1
                }
                index += 2
            } else if character == "\"" || (character == "#" && (next == "\"" || next == "#")) {
                let end = literal(at: index)
                blank(index..<min(end, characters.count))
                index = end
            } else {
                index += 1
            }
        }
        self.code = code
        self.literals = literals.sorted { $0.start < $1.start }
    }

    /// The code just before `position` (blanks skipped), up to `count` characters.
    func codeBefore(_ position: Int, count: Int = 40) -> String {
        var end = position
        while end > 0 && code[end - 1].isWhitespace { end -= 1 }
        return String(code[max(0, end - count)..<end])
    }

    /// The first code character after `position` that is not a blank.
    func codeAfter(_ position: Int) -> Character? {
        var index = position
        while index < code.count && code[index].isWhitespace { index += 1 }
        return index < code.count ? code[index] : nil
    }

    /// The calls whose parentheses hold `position`, innermost first: the name before each
    /// unmatched `(` (e.g. "TokenctlError", "Hint.sentences") and the code from it to
    /// `position`; at most `levels` of them, and none beyond a `{` that is not closed.
    func enclosingCalls(_ position: Int, levels: Int = 4) -> [(name: String, opening: Int)] {
        var calls: [(name: String, opening: Int)] = []
        var depth = 0
        var index = position - 1
        while index >= 0 && calls.count < levels {
            let character = code[index]
            if character == ")" || character == "]" { depth += 1 }
            if character == "}" { depth += 1 }
            if character == "{" {
                if depth == 0 { break }
                depth -= 1
            }
            if character == "(" || character == "[" {
                if depth == 0 {
                    var nameEnd = index
                    while nameEnd > 0 && code[nameEnd - 1] == " " { nameEnd -= 1 }
                    var nameStart = nameEnd
                    while nameStart > 0
                        && (code[nameStart - 1].isLetter || code[nameStart - 1].isNumber || code[nameStart - 1] == "."
                            || code[nameStart - 1] == "_")
                    { nameStart -= 1 }
                    calls.append((String(code[nameStart..<nameEnd]), index))
                } else {
                    depth -= 1
                }
            }
            index -= 1
        }
        return calls
    }
}
