import Testing
import TokenctlCore
import TokenctlEssentials

private func parse(_ text: String) throws(FlatJSONObjectError) -> FlatJSONObject {
    try FlatJSONObject(parsing: Array(text.utf8))
}

/// The problem a malformed input is rejected for (nil when it parses, or fails otherwise).
private func problem(_ bytes: [UInt8]) -> FlatJSONObjectError.Problem? {
    do throws(FlatJSONObjectError) {
        _ = try FlatJSONObject(parsing: bytes)
        return nil
    } catch {
        if case .malformed(let problem, _) = error { return problem }
        return nil
    }
}

private func problem(_ text: String) -> FlatJSONObjectError.Problem? { problem(Array(text.utf8)) }

/// The only string member's value of `{"k": <literal>}`, where `literal` is raw bytes.
private func stringValue(_ literal: [UInt8]) throws(FlatJSONObjectError) -> String? {
    try FlatJSONObject(parsing: Array(#"{"k":"#.utf8) + literal + [UInt8(ascii: "}")]).string("k")
}

private func stringValue(_ literal: String) throws(FlatJSONObjectError) -> String? {
    try stringValue(Array(literal.utf8))
}

/// A document using every feature the reader accepts.
private let richDocument = #"""
     { "access_token" : "at.\"x\"\\\/\b\f\n\r\t\u0041\u00e9\ud834\udd1e é𝄞" ,
    	"n":-12.5e+3,"zero":0,"t":true,"f":false,"nothing":null,"e":"" }
    """#

@Suite("Flat JSON object: structure")
struct FlatJSONObjectStructureTests {
    @Test("members in order, all scalar types")
    func members() throws {
        let object = try parse(richDocument)
        #expect(object.members.map(\.key) == ["access_token", "n", "zero", "t", "f", "nothing", "e"])
        #expect(object["n"] == .number(-12500))
        #expect(object["zero"] == .number(0))
        #expect(object["t"] == .bool(true))
        #expect(object["f"] == .bool(false))
        #expect(object["nothing"] == .null)
        #expect(object["e"] == .string(""))
        #expect(object["absent"] == nil)
        #expect(object["access_token"] == .string("at.\"x\"\\/\u{8}\u{C}\n\r\tAé𝄞 é𝄞"))
    }

    @Test("empty object, with and without whitespace")
    func emptyObject() throws {
        #expect(try parse("{}").members.isEmpty)
        #expect(try parse(" \t\r\n{ \t\r\n} \t\r\n").members.isEmpty)
    }

    @Test("space, tab, CR and LF between every token")
    func whitespace() throws {
        let ws = " \t\r\n"
        let text =
            ws + "{" + ws + #""a""# + ws + ":" + ws + "1" + ws + "," + ws + #""b""# + ws + ":" + ws + #""x""# + ws
            + "," + ws + #""c""# + ws + ":" + ws + "null" + ws + "}" + ws
        let object = try parse(text)
        #expect(object["a"] == .number(1))
        #expect(object["b"] == .string("x"))
        #expect(object["c"] == .null)
    }

    @Test(
        "no other whitespace: form feed, vertical tab, NBSP, U+2028, BOM",
        arguments: ["\u{0C}", "\u{0B}", "\u{A0}", "\u{2028}", "\u{FEFF}"])
    func otherWhitespace(space: String) {
        #expect(problem(space + "{}") == .expectedObject)
        #expect(problem("{" + space + "}") == .expectedKey)
        #expect(problem(#"{"a":"# + space + "1}") == .expectedValue)
        #expect(problem("{}" + space) == .trailingContent)
    }

    @Test(
        "nothing but whitespace after the closing brace",
        arguments: ["{}x", "{}{}", "{} 1", "{}\u{0}", #"{"a":1}}"#, #"{"a":1},"#])
    func trailingContent(text: String) {
        #expect(problem(text) == .trailingContent)
    }

    @Test("not an object at all", arguments: ["[]", "1", #""s""#, "null", "true", "x"])
    func notAnObject(text: String) {
        #expect(problem(text) == .expectedObject)
    }

    @Test("empty or blank input ends unexpectedly")
    func emptyInput() {
        #expect(problem("") == .unexpectedEnd)
        #expect(problem(" \n\t ") == .unexpectedEnd)
    }

    @Test("syntax errors name the problem")
    func syntaxErrors() {
        #expect(problem(#"{"a"}"#) == .expectedColon)
        #expect(problem(#"{"a" 1}"#) == .expectedColon)
        #expect(problem(#"{"a":}"#) == .expectedValue)
        #expect(problem(#"{"a":1,}"#) == .expectedKey)
        #expect(problem("{,}") == .expectedKey)
        #expect(problem("{a:1}") == .expectedKey)
        #expect(problem("{'a':1}") == .expectedKey)
        #expect(problem("{1:1}") == .expectedKey)
        #expect(problem(#"{"a":1 "b":2}"#) == .expectedCommaOrBrace)
        #expect(problem(#"{"a":1;"b":2}"#) == .expectedCommaOrBrace)
        #expect(problem(#"{"a":'x'}"#) == .expectedValue)
        #expect(problem(#"{"a":1"#) == .unexpectedEnd)
    }

    @Test("literals are exact", arguments: ["True", "FALSE", "nul", "nulls", "tru", "fals", "nil", "undefined"])
    func badLiterals(literal: String) {
        #expect(problem(#"{"a":"# + literal + "}") != nil)
        #expect(throws: FlatJSONObjectError.self) { try parse(#"{"a":"# + literal + "}") }
    }

    @Test(
        "a nested object or array is validated and kept only as .nested",
        arguments: ["{}", "[]", "[1]", #"{"b":1}"#, "[[]]", #"[{"c":[null,true,"x",1e3]}]"#])
    func nestedValues(nested: String) throws {
        #expect(try parse(#"{"a":"# + nested + "}")["a"] == .nested)
        #expect(try parse(#"{"a":1,"unknown":"# + nested + "}")["a"] == .number(1))
    }

    @Test(
        "malformed or too deep nesting is an error",
        arguments: ["{", "[1,]", #"{"b"}"#, #"{"b":}"#, "[1 2]", #"[{"b":1,}]"#])
    func badNesting(nested: String) {
        #expect(problem(#"{"a":"# + nested + "}") != nil)
        #expect(
            problem(#"{"a":"# + String(repeating: "[", count: 33) + String(repeating: "]", count: 33) + "}")
                == .nestedValue)
        #expect(problem(#"{"a":"# + String(repeating: "[", count: 32) + String(repeating: "]", count: 32) + "}") == nil)
    }

    @Test("duplicate keys are rejected, also when spelled with escapes")
    func duplicateKeys() throws {
        #expect(problem(#"{"a":1,"a":2}"#) == .duplicateKey)
        #expect(problem(#"{"a":1,"a":1}"#) == .duplicateKey)
        #expect(problem(#"{"a":null,"b":2,"a":"x"}"#) == .duplicateKey)
        #expect(problem(#"{"a":1,"\u0061":2}"#) == .duplicateKey)
        #expect(problem(#"{"":1,"":2}"#) == .duplicateKey)
        // Keys compare by scalars: precomposed and decomposed "é" are two keys.
        let object = try parse(#"{"é":1,"e\u0301":2}"#)
        #expect(object["é"] == .number(1))
        #expect(object["e\u{301}"] == .number(2))
    }

    @Test("error offsets point at the offending byte")
    func offsets() {
        #expect(throws: FlatJSONObjectError.malformed(.invalidNumber, offset: 6)) { try parse(#"{"a":01}"#) }
        #expect(throws: FlatJSONObjectError.malformed(.duplicateKey, offset: 7)) { try parse(#"{"a":1,"a":2}"#) }
        #expect(throws: FlatJSONObjectError.malformed(.invalidEscape, offset: 6)) { try parse(#"{"a":"\q"}"#) }
        #expect(throws: FlatJSONObjectError.malformed(.unpairedSurrogate, offset: 7)) { try parse(#"{"a":"x\ud800"}"#) }
        #expect(throws: FlatJSONObjectError.malformed(.expectedCommaOrBrace, offset: 7)) { try parse(#"{"a":1 2}"#) }
        #expect(throws: FlatJSONObjectError.malformed(.trailingContent, offset: 3)) { try parse("{} x") }
        #expect(throws: FlatJSONObjectError.malformed(.unexpectedEnd, offset: 5)) { try parse(#"{"a":"#) }
        #expect(throws: FlatJSONObjectError.malformed(.numberOutOfRange, offset: 5)) { try parse(#"{"a":1e999}"#) }
    }

    @Test("every proper prefix of a valid document throws (and never crashes)")
    func truncation() throws {
        let bytes = Array(richDocument.utf8)
        _ = try FlatJSONObject(parsing: bytes)
        let closingBrace = try #require(bytes.lastIndex(of: UInt8(ascii: "}")))
        // Past the closing brace only trailing whitespace would be cut, and that is still valid.
        for length in 0...closingBrace {
            let prefix = Array(bytes[..<length])
            #expect(throws: FlatJSONObjectError.self, "prefix of \(length) bytes") {
                try FlatJSONObject(parsing: prefix)
            }
        }
    }

    @Test("random corruption of a valid document never crashes")
    func corruption() {
        var random = SplitMix64(seed: 0x5EED)
        let bytes = Array(richDocument.utf8)
        for _ in 0..<5000 {
            var corrupted = bytes
            for _ in 0...Int(random.next() % 3) {
                let position = Int(random.next() % UInt64(corrupted.count))
                switch random.next() % 3 {
                case 0: corrupted[position] = UInt8(truncatingIfNeeded: random.next())
                case 1: corrupted.remove(at: position)
                default: corrupted.insert(UInt8(truncatingIfNeeded: random.next()), at: position)
                }
            }
            _ = try? FlatJSONObject(parsing: corrupted)
        }
    }
}

@Suite("Flat JSON object: strings")
struct FlatJSONObjectStringTests {
    @Test("every escape")
    func escapes() throws {
        #expect(try stringValue(#""\"""#) == "\"")
        #expect(try stringValue(#""\\""#) == "\\")
        #expect(try stringValue(#""\/""#) == "/")
        #expect(try stringValue(#""\b""#) == "\u{08}")
        #expect(try stringValue(#""\f""#) == "\u{0C}")
        #expect(try stringValue(#""\n""#) == "\n")
        #expect(try stringValue(#""\r""#) == "\r")
        #expect(try stringValue(#""\t""#) == "\t")
        #expect(try stringValue(#""\u0000\u001F\u0041\u00e9\u20AC\uFFFF\uffff""#) == "\u{0}\u{1F}Aé€\u{FFFF}\u{FFFF}")
        #expect(try stringValue(#""a\"b\\c\/d\ne""#) == "a\"b\\c/d\ne")
        #expect(try stringValue(#""\\u0041""#) == "\\u0041")
    }

    @Test(
        "invalid escapes",
        arguments: [
            #""\a""#, #""\x41""#, #""\U0041""#, #""\'""#, #""\u12""#, #""\u12G4""#, #""\u-123""#, #""\ ""#,
            "\"\\\u{0}\"",
        ])
    func invalidEscapes(literal: String) {
        #expect(throws: FlatJSONObjectError.self) { try stringValue(literal) }
        #expect(problem(#"{"k":"# + literal + "}") == .invalidEscape)
    }

    @Test("surrogate pairs in \\u escapes combine into one scalar")
    func surrogatePairs() throws {
        #expect(try stringValue(#""\ud834\udd1e""#) == "𝄞")
        #expect(try stringValue(#""\uD834\uDD1E""#) == "𝄞")
        #expect(try stringValue(#""\ud800\udc00\udbff\udfff""#) == "\u{10000}\u{10FFFF}")
        #expect(try stringValue(#""x\ud83d\ude00y""#) == "x😀y")
        #expect(try stringValue(#""\ud834\udd1e""#)?.unicodeScalars.count == 1)
    }

    @Test(
        "lone or mis-ordered surrogates are rejected",
        arguments: [
            #""\ud834""#, #""\ud834x""#, #""\ud834\u0041""#, #""\ud834\ud834""#, #""\udd1e""#, #""\udd1e\ud834""#,
            #""\udc00""#, #""\udfff""#, #""\ud834\n""#, #""\ud834\\udd1e""#,
        ])
    func loneSurrogates(literal: String) {
        #expect(problem(#"{"k":"# + literal + "}") == .unpairedSurrogate)
    }

    @Test("raw control characters are rejected; DEL and above are not")
    func controlCharacters() throws {
        for byte in UInt8(0)..<0x20 {
            #expect(
                problem(Array(#"{"k":"a"#.utf8) + [byte] + Array(#"b"}"#.utf8)) == .controlCharacter, "byte \(byte)")
            #expect(
                problem(Array(#"{"a"#.utf8) + [byte] + Array(#"":1}"#.utf8)) == .controlCharacter,
                "byte \(byte) in a key")
        }
        #expect(try stringValue([0x22, 0x7F, 0x22]) == "\u{7F}")
        #expect(try stringValue([0x22, 0x20, 0x22]) == " ")
    }

    @Test("valid UTF-8 at every length and boundary")
    func validUTF8() throws {
        let samples: [String] = [
            "é", "€", "𝄞", "\u{80}", "\u{7FF}", "\u{800}", "\u{D7FF}", "\u{E000}", "\u{FFFF}", "\u{10000}",
            "\u{10FFFF}", "naïve 日本 🙂",
        ]
        for sample in samples {
            #expect(try stringValue("\"" + sample + "\"") == sample)
            #expect(try parse("{\"" + sample + "\":1}").members.first?.key == sample)
        }
    }

    @Test(
        "invalid UTF-8 is rejected, in values and keys",
        arguments: [
            [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xC2], [0xC2, 0x41], [0xC3, 0xC3],
            [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF], [0xE2, 0x82], [0xE2, 0x82, 0x41], [0xED, 0xA0, 0x80],
            [0xED, 0xBF, 0xBF],
            [0xF0, 0x80, 0x80, 0x80], [0xF0, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80], [0xF0, 0x9D, 0x84],
            [0xF5, 0x80, 0x80, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80], [0xFE], [0xFF],
        ] as [[UInt8]])
    func invalidUTF8(sequence: [UInt8]) {
        #expect(problem(Array(#"{"k":"a"#.utf8) + sequence + Array(#"b"}"#.utf8)) == .invalidUTF8)
        #expect(problem(Array(#"{"a"#.utf8) + sequence + Array(#"":1}"#.utf8)) == .invalidUTF8)
        #expect(problem(sequence + Array("{}".utf8)) == .expectedObject)
    }

    @Test("error descriptions never contain a string member's value")
    func noSecretsInErrors() {
        let secret = "s3cr3t-T0KEN"
        let documents: [String] = [
            #"{"k":"s3cr3t-T0KEN\q"}"#, #"{"k":"s3cr3t-T0KEN"#, #"{"k":"s3cr3t-T0KEN"x"#, #"{"k":"s3cr3t-T0KEN"}x"#,
            #"{"k":"s3cr3t-T0KEN","k":"s3cr3t-T0KEN"}"#, #"{"k":"s3cr3t-T0KEN\ud800"}"#,
            #"{"k":"s3cr3t-T0KEN","n":{]}"#,
            #"{"k":"s3cr3t-T0KEN","n":s3cr3t-T0KEN}"#, #"{"s3cr3t-T0KEN"}"#, #"{"k":"s3cr3t-T0KEN" "#,
        ]
        for document in documents {
            do throws(FlatJSONObjectError) {
                _ = try parse(document)
                Issue.record("accepted: document \(documents.firstIndex(of: document)!)")
            } catch {
                #expect(!error.description.contains(secret))
                #expect(!String(describing: error).contains(secret))
                #expect(!String(reflecting: error).contains(secret))
            }
        }
        var withControl = Array(#"{"k":"s3cr3t-T0KEN"#.utf8)
        withControl += [0x01, 0x22, 0x7D]
        #expect(throws: FlatJSONObjectError.self) { try FlatJSONObject(parsing: withControl) }
        // A type error names the caller's key, not the value.
        do throws(FlatJSONObjectError) {
            _ = try parse(#"{"k":"s3cr3t-T0KEN"}"#).requiredNumber("k")
            Issue.record("a string was read as a number")
        } catch {
            #expect(error == .wrongType(key: "k", expected: "a number", offset: 5))
            #expect(!error.description.contains(secret))
        }
    }
}

@Suite("Flat JSON object: numbers")
struct FlatJSONObjectNumberTests {
    @Test(
        "the RFC 8259 grammar is accepted",
        arguments: [
            ("0", 0), ("-0", -0.0), ("1", 1), ("-1", -1), ("10", 10), ("1.5", 1.5), ("-0.5", -0.5), ("0.0", 0),
            ("0.125", 0.125),
            ("1e5", 1e5), ("1E5", 1e5), ("1e+5", 1e5), ("1e-5", 1e-5), ("1.5e-300", 1.5e-300), ("0e0", 0),
            ("-0E-0", -0.0),
            ("1e300", 1e300), ("1795968606.123456", 1795968606.123456), ("1764425000.25", 1764425000.25),
            ("5e-324", .leastNonzeroMagnitude), ("3e-324", .leastNonzeroMagnitude),
            ("2.2250738585072014e-308", .leastNormalMagnitude), ("0e-400", 0), ("0.0000e999", 0), ("-0.0e-999", -0.0),
            ("1.7976931348623157e308", .greatestFiniteMagnitude),
            ("123456789012345678901234567890", 123456789012345678901234567890.0),
            ("11111111111111111111", 11_111_111_111_111_110_656),
        ] as [(String, Double)])
    func accepted(text: String, expected: Double) throws {
        let value = try parse(#"{"n":"# + text + "}").number("n")
        #expect(value == expected)
        #expect(value?.sign == expected.sign)
        #expect(try parse(#"{"n": "# + text + " }").number("n") == expected)
    }

    @Test(
        "anything else is rejected",
        arguments: [
            "+1", "01", "-01", "00", "-00", "0.5.1", ".5", "-.5", "1.", "1.e5", "1e", "1e+", "1e-", "1E", "-", "--1",
            "- 1", "1 2",
            "NaN", "nan", "Infinity", "-Infinity", "inf", "0x10", "0X10", "1_000", "1,5", "1ee5", "1e5.5", "1e++5",
            "1.5e",
            "\u{661}", "１",
        ])
    func rejected(text: String) {
        #expect(throws: FlatJSONObjectError.self) { try parse(#"{"n":"# + text + "}") }
    }

    @Test(
        "numbers beyond Double's range are rejected, not infinite or zero",
        arguments: [
            "1e309", "-1e309", "1e999999999999", "2e308", "1.8e308", "1e-400", "-1e-400", "2e-324", "0.0001e-999999",
        ])
    func outOfRange(text: String) {
        #expect(problem(#"{"n":"# + text + "}") == .numberOutOfRange)
    }
}

@Suite("Flat JSON object: typed accessors")
struct FlatJSONObjectAccessorTests {
    let object: FlatJSONObject

    init() throws {
        object = try parse(#"{"s":"text","n":42.5,"b":true,"z":null}"#)
    }

    @Test("absent or null reads as nil")
    func optional() throws {
        #expect(try object.string("s") == "text")
        #expect(try object.number("n") == 42.5)
        #expect(try object.bool("b") == true)
        #expect(try object.string("z") == nil)
        #expect(try object.number("z") == nil)
        #expect(try object.bool("z") == nil)
        #expect(try object.string("absent") == nil)
        #expect(try object.number("absent") == nil)
    }

    @Test("a value of another type is an error")
    func wrongType() {
        #expect(throws: FlatJSONObjectError.wrongType(key: "n", expected: "a string", offset: 16)) {
            try object.string("n")
        }
        #expect(throws: FlatJSONObjectError.wrongType(key: "b", expected: "a string", offset: 25)) {
            try object.requiredString("b")
        }
        #expect(throws: FlatJSONObjectError.wrongType(key: "s", expected: "a number", offset: 5)) {
            try object.number("s")
        }
        #expect(throws: FlatJSONObjectError.wrongType(key: "b", expected: "a number", offset: 25)) {
            try object.requiredNumber("b")
        }
        #expect(throws: FlatJSONObjectError.wrongType(key: "n", expected: "true or false", offset: 16)) {
            try object.bool("n")
        }
    }

    @Test("required members must be present and not null")
    func required() throws {
        #expect(try object.requiredString("s") == "text")
        #expect(try object.requiredNumber("n") == 42.5)
        #expect(throws: FlatJSONObjectError.missing(key: "z")) { try object.requiredString("z") }
        #expect(throws: FlatJSONObjectError.missing(key: "absent")) { try object.requiredNumber("absent") }
        #expect(FlatJSONObjectError.missing(key: "absent").description == "'absent' is missing or null")
    }
}
