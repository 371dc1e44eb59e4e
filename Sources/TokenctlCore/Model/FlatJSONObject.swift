import TokenctlEssentials

/// One JSON object whose member values are all scalars (string, number, `true`/`false`, `null`),
/// read strictly by RFC 8259 without Foundation.
///
/// It exists for the stored token set: `JSONDecoder`'s first decode in a process costs ~0.4–0.5 ms
/// (generic metadata and protocol-conformance scans), paid by every `tokenctl token` that falls
/// back to the Secret Service. This reader is plain byte scanning over the input.
///
/// Strict rather than lenient, because the input holds tokens and is never hand-written:
/// - whitespace is space, tab, CR and LF only; nothing but whitespace may follow the object;
/// - strings must be valid UTF-8 without raw control characters; `\u` escapes must pair their
///   UTF-16 surrogates (a lone or mis-ordered surrogate is an error, never U+FFFD);
/// - numbers follow the RFC grammar exactly and must fit a `Double`: one that would round to
///   infinity, or a non-zero one that would round to zero, is an error (as in `JSONDecoder`);
/// - a nested object or array is validated as JSON (at most 32 levels deep) and kept only as
///   `.nested`, so that a token set written by a newer tokenctl, with members this one does not
///   know, still reads; a known member holding one is a type error;
/// - a key given twice is an error: which one would win is not defined by the RFC (§4).
///
/// Keys compare by their exact Unicode scalars (RFC 8259 §8.3), not by canonical equivalence.
/// Members are kept in an array, looked up and checked for duplicates linearly (quadratic in
/// the member count): a token set has about ten, and a Dictionary's String hashing would cost
/// more to page in than it saves.
///
/// Errors carry a byte offset and a fixed description, never any of the input: it holds tokens.
public struct FlatJSONObject: Sendable, Equatable {
    /// A member's value.
    public enum Value: Sendable, Equatable {
        case string(String)
        case number(Double)
        case bool(Bool)
        case null
        /// An object or array, validated and skipped (its content is not kept).
        case nested
    }

    /// A member, with the byte offset of its value (for errors about its type).
    public struct Member: Sendable, Equatable {
        public let key: String
        public let value: Value
        public let offset: Int
    }

    /// The members in document order.
    public let members: [Member]

    /// Parse `bytes`, which must hold exactly one JSON object of scalar members.
    public init(parsing bytes: [UInt8]) throws(FlatJSONObjectError) {
        var reader = Reader(bytes: bytes)
        members = try reader.object()
    }

    /// The member named `key`, if present.
    public func member(_ key: String) -> Member? {
        members.first { $0.key.utf8.elementsEqual(key.utf8) }
    }

    /// The value of `key`, if present (`.null` when the member is `null`).
    public subscript(key: String) -> Value? { member(key)?.value }

    /// The string member `key`; nil when absent or `null`.
    ///
    /// - Throws: `.wrongType` when the member holds something else than a string.
    public func string(_ key: String) throws(FlatJSONObjectError) -> String? {
        try typed(key, expected: "a string") { if case .string(let value) = $0 { value } else { nil } }
    }

    /// The number member `key`; nil when absent or `null`.
    ///
    /// - Throws: `.wrongType` when the member holds something else than a number.
    public func number(_ key: String) throws(FlatJSONObjectError) -> Double? {
        try typed(key, expected: "a number") { if case .number(let value) = $0 { value } else { nil } }
    }

    /// The boolean member `key`; nil when absent or `null`.
    ///
    /// - Throws: `.wrongType` when the member holds something else than `true` or `false`.
    public func bool(_ key: String) throws(FlatJSONObjectError) -> Bool? {
        try typed(key, expected: "true or false") { if case .bool(let value) = $0 { value } else { nil } }
    }

    /// The member `key` as `value` reads it; nil when absent or `null`, `.wrongType` (saying
    /// what was `expected`) when `value` cannot read it.
    private func typed<T>(_ key: String, expected: String, _ value: (Value) -> T?) throws(FlatJSONObjectError) -> T? {
        guard let member = member(key) else { return nil }
        if case .null = member.value { return nil }
        guard let typed = value(member.value) else {
            throw .wrongType(key: key, expected: expected, offset: member.offset)
        }
        return typed
    }

    /// The string member `key`, which must be present and not `null`.
    public func requiredString(_ key: String) throws(FlatJSONObjectError) -> String {
        guard let value = try string(key) else { throw .missing(key: key) }
        return value
    }

    /// The number member `key`, which must be present and not `null`.
    public func requiredNumber(_ key: String) throws(FlatJSONObjectError) -> Double {
        guard let value = try number(key) else { throw .missing(key: key) }
        return value
    }
}

/// Why bytes are not a flat JSON object, or why a member is not what the caller asked for.
///
/// Descriptions hold fixed text, byte offsets and the caller's own key names only: never any
/// part of the input, which holds tokens.
public enum FlatJSONObjectError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The input is not one JSON object of scalar members; reading stopped at byte `offset`.
    case malformed(Problem, offset: Int)
    /// A required member is absent or `null`.
    case missing(key: String)
    /// The member's value (at byte `offset`) is of another type.
    case wrongType(key: String, expected: String, offset: Int)

    /// What was wrong with the input.
    public enum Problem: String, Sendable {
        case unexpectedEnd = "unexpected end of input"
        case expectedObject = "expected '{'"
        case expectedKey = "expected a string key"
        case expectedColon = "expected ':'"
        case expectedCommaOrBrace = "expected ',' or '}'"
        case expectedValue = "expected a value"
        case trailingContent = "content after the object"
        case nestedValue = "nested objects or arrays deeper than 32 levels"
        case duplicateKey = "duplicate key"
        case invalidLiteral = "invalid literal"
        case invalidNumber = "invalid number"
        case numberOutOfRange = "number out of range"
        case controlCharacter = "unescaped control character in a string"
        case invalidEscape = "invalid escape sequence"
        case unpairedSurrogate = "unpaired UTF-16 surrogate in a \\u escape"
        case invalidUTF8 = "invalid UTF-8"
    }

    public var description: String {
        switch self {
        case .malformed(let problem, let offset): "invalid JSON at byte \(offset): \(problem.rawValue)"
        case .missing(let key): "'\(key)' is missing or null"
        case .wrongType(let key, let expected, let offset): "'\(key)' (byte \(offset)) is not \(expected)"
        }
    }
}

/// The scanner: one pass over the bytes, an index, no look-back.
private struct Reader {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private func fail(_ problem: FlatJSONObjectError.Problem, at offset: Int? = nil) -> FlatJSONObjectError {
        .malformed(problem, offset: offset ?? index)
    }

    /// The current byte, or `.unexpectedEnd`.
    private func require() throws(FlatJSONObjectError) -> UInt8 {
        guard index < bytes.count else { throw fail(.unexpectedEnd) }
        return bytes[index]
    }

    /// RFC 8259 §2: space, horizontal tab, line feed, carriage return. Nothing else.
    private mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    mutating func object() throws(FlatJSONObjectError) -> [FlatJSONObject.Member] {
        skipWhitespace()
        guard try require() == UInt8(ascii: "{") else { throw fail(.expectedObject) }
        index += 1
        var members: [FlatJSONObject.Member] = []
        skipWhitespace()
        if try require() == UInt8(ascii: "}") {
            index += 1
        } else {
            while true {
                skipWhitespace()
                let keyOffset = index
                guard try require() == UInt8(ascii: "\"") else { throw fail(.expectedKey) }
                let key = try string()
                if members.contains(where: { $0.key.utf8.elementsEqual(key.utf8) }) {
                    throw fail(.duplicateKey, at: keyOffset)
                }
                skipWhitespace()
                guard try require() == UInt8(ascii: ":") else { throw fail(.expectedColon) }
                index += 1
                skipWhitespace()
                let valueOffset = index
                members.append(FlatJSONObject.Member(key: key, value: try value(), offset: valueOffset))
                skipWhitespace()
                let separator = try require()
                index += 1
                if separator == UInt8(ascii: "}") { break }
                guard separator == UInt8(ascii: ",") else { throw fail(.expectedCommaOrBrace, at: index - 1) }
            }
        }
        skipWhitespace()
        guard index == bytes.count else { throw fail(.trailingContent) }
        return members
    }

    private mutating func value() throws(FlatJSONObjectError) -> FlatJSONObject.Value {
        switch try require() {
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            try skipNested(depth: 1)
            return .nested
        default: throw fail(.expectedValue)
        }
    }

    /// The object or array at `index`, validated and stepped over; deeper than 32 levels is an
    /// error (`.nestedValue`), so the recursion is bounded.
    private mutating func skipNested(depth: Int) throws(FlatJSONObjectError) {
        guard depth <= 32 else { throw fail(.nestedValue) }
        let isObject = try require() == UInt8(ascii: "{")
        let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
        index += 1
        skipWhitespace()
        if try require() == close {
            index += 1
            return
        }
        while true {
            skipWhitespace()
            if isObject {
                guard try require() == UInt8(ascii: "\"") else { throw fail(.expectedKey) }
                _ = try string()
                skipWhitespace()
                guard try require() == UInt8(ascii: ":") else { throw fail(.expectedColon) }
                index += 1
                skipWhitespace()
            }
            switch try require() {
            case UInt8(ascii: "{"), UInt8(ascii: "["): try skipNested(depth: depth + 1)
            default: _ = try value()
            }
            skipWhitespace()
            let separator = try require()
            index += 1
            if separator == close { return }
            guard separator == UInt8(ascii: ",") else { throw fail(.expectedCommaOrBrace, at: index - 1) }
        }
    }

    private mutating func literal(_ word: String) throws(FlatJSONObjectError) {
        let start = index
        for expected in word.utf8 {
            guard try require() == expected else { throw fail(.invalidLiteral, at: start) }
            index += 1
        }
    }

    // MARK: Numbers

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// One or more digits.
    private mutating func digits() throws(FlatJSONObjectError) {
        guard Reader.isDigit(try require()) else { throw fail(.invalidNumber) }
        while let byte = current, Reader.isDigit(byte) { index += 1 }
    }

    /// `-? (0 | [1-9][0-9]*) (\.[0-9]+)? ([eE][+-]?[0-9]+)?`, validated here and converted by
    /// `Double(_:)` only afterwards (it alone would take "+1", ".5", "0x1p3", "nan" or "inf").
    /// Out of range: rounding to infinity, or a non-zero number rounding to zero ("1e-400").
    private mutating func number() throws(FlatJSONObjectError) -> Double {
        let start = index
        var nonZero = false
        if current == UInt8(ascii: "-") { index += 1 }
        if try require() == UInt8(ascii: "0") {
            index += 1
            if let byte = current, Reader.isDigit(byte) { throw fail(.invalidNumber) } // leading zero
        } else {
            try digits()
            nonZero = true
        }
        if current == UInt8(ascii: ".") {
            index += 1
            let fraction = index
            try digits()
            nonZero = nonZero || bytes[fraction..<index].contains { $0 != UInt8(ascii: "0") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            try digits()
        }
        guard let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)), value.isFinite,
            value != 0 || !nonZero
        else {
            throw fail(.numberOutOfRange, at: start)
        }
        return value
    }

    // MARK: Strings

    /// A string starting at the opening quote, unescaped.
    private mutating func string() throws(FlatJSONObjectError) -> String {
        index += 1 // the opening quote
        var text: [UInt8] = []
        var runStart = index // plain bytes not yet copied into `text`
        while true {
            let byte = try require()
            switch byte {
            case UInt8(ascii: "\""):
                text += bytes[runStart..<index]
                index += 1
                // Every byte was validated as UTF-8 or produced from a scalar: no repair happens.
                return String(decoding: text, as: UTF8.self)
            case UInt8(ascii: "\\"):
                text += bytes[runStart..<index]
                try escape(into: &text)
                runStart = index
            case 0x00..<0x20:
                throw fail(.controlCharacter)
            case 0x20..<0x80:
                index += 1
            default:
                try skipUTF8Sequence()
            }
        }
    }

    /// One escape sequence starting at the backslash, appended to `text` as UTF-8.
    private mutating func escape(into text: inout [UInt8]) throws(FlatJSONObjectError) {
        let start = index
        index += 1 // the backslash
        let byte = try require()
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(byte)
        case UInt8(ascii: "b"): text.append(0x08)
        case UInt8(ascii: "f"): text.append(0x0C)
        case UInt8(ascii: "n"): text.append(0x0A)
        case UInt8(ascii: "r"): text.append(0x0D)
        case UInt8(ascii: "t"): text.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try hex4())
            if (0xDC00...0xDFFF).contains(scalar) { throw fail(.unpairedSurrogate, at: start) }
            if (0xD800...0xDBFF).contains(scalar) {
                // A high surrogate must be followed at once by an escaped low surrogate.
                guard try require() == UInt8(ascii: "\\") else { throw fail(.unpairedSurrogate, at: start) }
                index += 1
                guard try require() == UInt8(ascii: "u") else { throw fail(.unpairedSurrogate, at: start) }
                index += 1
                let low = UInt32(try hex4())
                guard (0xDC00...0xDFFF).contains(low) else { throw fail(.unpairedSurrogate, at: start) }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            // Not a surrogate by now, so always a valid scalar.
            guard let unicodeScalar = Unicode.Scalar(scalar) else { throw fail(.invalidEscape, at: start) }
            UTF8.encode(unicodeScalar) { text.append($0) }
        default:
            throw fail(.invalidEscape, at: start)
        }
    }

    /// Four hex digits of a `\u` escape.
    private mutating func hex4() throws(FlatJSONObjectError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = try require()
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail(.invalidEscape)
            }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }

    /// One multi-byte UTF-8 sequence, checked by the Unicode well-formedness table (Unicode
    /// §3.9, table 3-7): no overlong forms, no encoded surrogates, nothing above U+10FFFF.
    private mutating func skipUTF8Sequence() throws(FlatJSONObjectError) {
        let start = index
        let lead = bytes[index]
        let count: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: count = 2
        case 0xE0:
            count = 3
            secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: count = 3
        case 0xED:
            count = 3
            secondRange = 0x80...0x9F
        case 0xF0:
            count = 4
            secondRange = 0x90...0xBF
        case 0xF1...0xF3: count = 4
        case 0xF4:
            count = 4
            secondRange = 0x80...0x8F
        default: throw fail(.invalidUTF8)
        }
        index += 1
        for position in 1..<count {
            let byte = try require()
            guard (position == 1 ? secondRange : 0x80...0xBF).contains(byte) else {
                throw fail(.invalidUTF8, at: start)
            }
            index += 1
        }
    }
}
