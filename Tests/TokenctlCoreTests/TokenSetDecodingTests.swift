import Testing
import TokenctlEssentials

@testable import TokenctlCore

/// `TokenSet.decode` reads the stored secret with `FlatJSONObject` instead of `JSONDecoder`; these
/// tests hold its reading step (`decodeUnvalidated`) to the Codable decoding's results, bit for
/// bit, and check what `validated()` then refuses or clamps.
@Suite("TokenSet decoding without JSONDecoder")
struct TokenSetDecodingTests {
    /// What the Codable decoding (the previous `TokenSet.decode`) makes of `bytes`.
    private func codableDecode(_ bytes: [UInt8]) throws -> TokenSet {
        try JSONDecoder().decode(TokenSet.self, from: Data(bytes))
    }

    @Test("generated token sets: decode(encoded()) is the set, and what JSONDecoder reads")
    func differential() throws {
        var random = SplitMix64(seed: 2024)
        var compared = 0
        for round in 0..<600 {
            let original = TokenSet.random(&random, round: round)
            let bytes = try original.encoded()
            let decoded = try TokenSet.decodeUnvalidated(bytes)
            #expect(decoded == original, "round \(round)")
            #expect(decoded.isIdentical(to: original), "round \(round): a double's bits differ")
            let viaCodable = try codableDecode(bytes)
            #expect(decoded.isIdentical(to: viaCodable), "round \(round): JSONDecoder reads something else")
            compared += 1
        }
        #expect(compared == 600)
    }

    @Test("the generator covers what it must: escapes, astral characters, nils, extreme doubles")
    func generatorCoverage() throws {
        var random = SplitMix64(seed: 2024)
        var text = ""
        var nilRefreshTokens = 0
        for round in 0..<600 {
            let set = TokenSet.random(&random, round: round)
            text += String(decoding: try set.encoded(), as: UTF8.self)
            if set.refreshToken == nil { nilRefreshTokens += 1 }
        }
        for needle in [
            #"\""#, #"\\"#, #"\/"#, #"\n"#, #"\u0000"#, #"\u001f"#, "é", "𝄞", "1e+300", "-0.5", "1795968606.123456",
            ":-0,", ":0,",
        ] {
            #expect(text.lowercased().contains(needle), "no \(needle) in any generated document")
        }
        #expect(nilRefreshTokens > 50 && nilRefreshTokens < 550)
    }

    @Test("hand-written documents: reordered keys, whitespace, unknown members, escapes, nulls", arguments: handWritten)
    func handWrittenDocuments(document: String) throws {
        let bytes = Array(document.utf8)
        let decoded = try TokenSet.decodeUnvalidated(bytes)
        #expect(decoded.isIdentical(to: try codableDecode(bytes)))
    }

    @Test("the hand-written documents decode to what they say")
    func handWrittenValues() throws {
        let first = try TokenSet.decodeUnvalidated(Array(handWritten[0].utf8))
        #expect(first.accessToken == "at-1")
        #expect(first.tokenType == "Bearer")
        #expect(first.refreshToken == "rt \"quoted\" / \\ é𝄞")
        #expect(first.expiresAt == 1_700_003_600.5)
        #expect(first.issuedLifetime == 3600)
        #expect(first.obtainedAt == 1_700_000_000)
        #expect(first.serverClockOffset == -3)
        #expect(first.subject == nil)
        let minimal = try TokenSet.decodeUnvalidated(Array(handWritten[2].utf8))
        #expect(
            minimal
                == TokenSet(
                    accessToken: "a", tokenType: "DPoP", refreshToken: nil, expiresAt: nil, issuedLifetime: nil,
                    obtainedAt: 0))
    }

    @Test("rejected like the Codable decoding: missing, null or mistyped members, not JSON", arguments: rejectedByBoth)
    func rejections(document: String) {
        let bytes = Array(document.utf8)
        #expect(throws: FlatJSONObjectError.self) { try TokenSet.decode(bytes) }
        #expect(throws: (any Error).self) { try codableDecode(bytes) }
    }

    @Test("errors name the member, never its value")
    func errors() {
        #expect(throws: FlatJSONObjectError.missing(key: "access_token")) {
            try TokenSet.decode(Array(#"{"token_type":"Bearer","obtained_at":1}"#.utf8))
        }
        #expect(throws: FlatJSONObjectError.missing(key: "obtained_at")) {
            try TokenSet.decode(Array(#"{"access_token":"a","token_type":"Bearer","obtained_at":null}"#.utf8))
        }
        #expect(throws: FlatJSONObjectError.wrongType(key: "refresh_token", expected: "a string", offset: 58)) {
            try TokenSet.decode(Array(#"{"access_token":"a","token_type":"Bearer","refresh_token":12345}"#.utf8))
        }
        do throws(FlatJSONObjectError) {
            _ = try TokenSet.decode(
                Array(#"{"access_token":"secret-at","token_type":"Bearer","obtained_at":"secret-ts"}"#.utf8))
            Issue.record("a string obtained_at was accepted")
        } catch {
            #expect(!error.description.contains("secret"))
        }
    }

    @Test(
        "a set written by a newer version reads: unknown members holding objects or arrays are skipped",
        arguments: [
            #"{"access_token":"a","token_type":"Bearer","obtained_at":1,"future":{"x":[1,{"y":null}]}}"#,
            #"{"access_token":"a","token_type":"Bearer","obtained_at":1,"future":[]}"#,
            #"{"future":{},"access_token":"a","token_type":"Bearer","obtained_at":1}"#,
        ])
    func newerVersion(document: String) throws {
        let bytes = Array(document.utf8)
        #expect(try TokenSet.decode(bytes).accessToken == "a")
        #expect(try TokenSet.decodeUnvalidated(bytes).isIdentical(to: try codableDecode(bytes)))
    }

    @Test("a known member holding an object or array, or nesting beyond 32 levels, is an error")
    func nestedWhereNotAllowed() {
        #expect(throws: FlatJSONObjectError.self) {
            try TokenSet.decode(Array(#"{"access_token":{},"token_type":"Bearer","obtained_at":1}"#.utf8))
        }
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        #expect(throws: FlatJSONObjectError.self) {
            try TokenSet.decode(
                Array((#"{"access_token":"a","token_type":"Bearer","obtained_at":1,"x":"# + deep + "}").utf8))
        }
    }

    @Test(
        "a stored set is checked as a server's answer is: no line break, control character or empty access token",
        arguments: [
            #"{"access_token":"at_x\r\nX-Injected: 1","token_type":"Bearer","obtained_at":1}"#,
            #"{"access_token":"","token_type":"Bearer","obtained_at":1}"#,
            #"{"access_token":"a b","token_type":"Bearer","obtained_at":1}"#,
            #"{"access_token":"a","token_type":"Bearer\r\nX: 1","obtained_at":1}"#,
            #"{"access_token":"a","token_type":"Bearer","obtained_at":1,"refresh_token":"r\n"}"#,
            #"{"access_token":"é","token_type":"Bearer","obtained_at":1}"#,
        ])
    func storedSetValidated(document: String) {
        #expect(throws: FlatJSONObjectError.self) { try TokenSet.decode(Array(document.utf8)) }
    }

    @Test("absurd stored times are clamped when read, so nothing later traps on them")
    func absurdTimesClamped() throws {
        for value in ["1e19", "-1e19", "1e308", "-1e308"] {
            let set = try TokenSet.decode(
                Array(
                    (#"{"access_token":"a","token_type":"Bearer","obtained_at":"# + value + #","expires_at":"# + value
                        + #","last_refresh_at":"# + value + #","issued_lifetime":"# + value
                        + #","server_clock_offset":"# + value + "}").utf8))
            for time in [set.obtainedAt, set.expiresAt!, set.lastRefreshAt!] { #expect(time >= 0 && time <= 1e11) }
            #expect(set.issuedLifetime! >= 0 && set.issuedLifetime! <= TokenResponse.maximumLifetime)
            _ = set.timeLeft(at: 1_700_000_000)
            _ = set.isFresh(at: 1_700_000_000, minimumTimeToLive: 60)
            _ = Timestamp.iso8601(set.expiresAt!)
        }
        #expect(
            try TokenSet.decode(
                Array(#"{"access_token":"a","token_type":"Bearer","obtained_at":1,"refresh_token":""}"#.utf8)
            ).refreshToken == nil)
    }

    /// Deliberately stricter than JSONDecoder, which takes these (the first of duplicate keys
    /// wins, a byte-order mark is skipped, a comma may end the object). `TokenSet.encoded()`
    /// writes none of them.
    @Test(
        "stricter than JSONDecoder: duplicate keys, a byte-order mark, a trailing comma",
        arguments: [
            #"{"access_token":"a","token_type":"Bearer","obtained_at":1,"access_token":"b"}"#,
            "\u{FEFF}" + #"{"access_token":"a","token_type":"Bearer","obtained_at":1}"#,
            #"{"access_token":"a","token_type":"Bearer","obtained_at":1,}"#,
        ])
    func stricterThanJSONDecoder(document: String) {
        #expect(throws: FlatJSONObjectError.self) { try TokenSet.decode(Array(document.utf8)) }
    }
}

private let handWritten: [String] = [
    // Keys in reverse order, whitespace everywhere, an escaped key, unknown members of every kind.
    """
     {
    \t"subject" : null ,
    \t"server_clock_offset":-3,
    \t"scope":null,
    \t"refresh_token" : "rt \\"quoted\\" \\/ \\\\ \\u00e9\\ud834\\udd1e",
    \t"obtained_at":1.7e9,
    \t"last_refresh_at": null,
    \t"issued_lifetime":3600,
    \t"future_flag": true, "future_count": 7, "future_text": "x", "future_null": null, "future_off": false,
    \t"expires_at":1700003600.5E0,
    \t"id_token":null,
    \t"token_type":"Bearer",
    \t"acc\\u0065ss_token":"at-1"
    }\r\n
    """,
    // Compact, sorted like the encoder writes, with every optional member present.
    #"{"access_token":"eyJ.eyJ.sig","expires_at":1795968606.123456,"id_token":"id","issued_lifetime":0,"last_refresh_at":-0.5,"obtained_at":1e300,"refresh_token":"","scope":"openid offline_access","server_clock_offset":-1E-3,"subject":"alice","token_type":"Bearer"}"#,
    // Required members only.
    #"{"token_type":"DPoP","obtained_at":0,"access_token":"a"}"#,
    // Control characters and non-ASCII in escapes and raw.
    #"{"access_token":"\u0000\u001F\b\f\n\r\t","token_type":"é𝄞€","obtained_at":-0,"subject":"\uD83D\uDE00😀"}"#,
]

private let rejectedByBoth: [String] = [
    "", "not json", "{}", "[]", "null",
    #"{"token_type":"Bearer","obtained_at":1}"#,
    #"{"access_token":"a","obtained_at":1}"#,
    #"{"access_token":"a","token_type":"Bearer"}"#,
    #"{"access_token":null,"token_type":"Bearer","obtained_at":1}"#,
    #"{"access_token":"a","token_type":null,"obtained_at":1}"#,
    #"{"access_token":"a","token_type":"Bearer","obtained_at":null}"#,
    #"{"access_token":1,"token_type":"Bearer","obtained_at":1}"#,
    #"{"access_token":"a","token_type":"Bearer","obtained_at":"1"}"#,
    #"{"access_token":"a","token_type":"Bearer","obtained_at":true}"#,
    #"{"access_token":"a","token_type":"Bearer","obtained_at":1,"refresh_token":false}"#,
    #"{"access_token":"a","token_type":"Bearer","obtained_at":1,"expires_at":"2"}"#,
    #"{"access_token":"a","token_type":"Bearer","obtained_at":1,"subject":0}"#,
    #"{"access_token":"a","token_type":"Bearer","obtained_at":1,"scope":["openid"]}"#,
    #"{"access_token":"a","token_type":"Bearer","obtained_at":1e400}"#,
    #"{"access_token":"a","token_type":"Bearer","obtained_at":01}"#,
    #"{"access_token":"a\ud800","token_type":"Bearer","obtained_at":1}"#,
    #"{"access_token":"a","token_type":"Bearer","obtained_at":1} x"#,
    #"{"access_token":"a","token_type":"Bearer","obtained_at":1"#,
]

// MARK: Generation

extension TokenSet {
    /// Equal, with every double bit for bit (so -0 and 0 differ, which `==` would not see).
    func isIdentical(to other: TokenSet) -> Bool {
        func same(_ a: Double?, _ b: Double?) -> Bool { a?.bitPattern == b?.bitPattern }
        return self == other && same(expiresAt, other.expiresAt) && same(issuedLifetime, other.issuedLifetime)
            && same(obtainedAt, other.obtainedAt) && same(lastRefreshAt, other.lastRefreshAt)
            && same(serverClockOffset, other.serverClockOffset) && same(scopeNarrowedAt, other.scopeNarrowedAt)
            && targetedTokens.count == other.targetedTokens.count
            && zip(targetedTokens, other.targetedTokens).allSatisfy { a, b in
                same(a.expiresAt, b.expiresAt) && same(a.issuedLifetime, b.issuedLifetime)
                    && same(a.obtainedAt, b.obtainedAt)
            }
    }

    /// A token set with each optional member nil about a third of the time, strings built from
    /// pieces that need escaping or are outside ASCII, and doubles from a table of extremes or
    /// random bit patterns.
    static func random(_ random: inout SplitMix64, round: Int) -> TokenSet {
        func string() -> String {
            (0..<Int(random.next() % 6)).map { _ in stringPieces[Int(random.next() % UInt64(stringPieces.count))] }
                .joined()
        }
        func optionalString() -> String? { random.next() % 3 == 0 ? nil : string() }
        func double() -> Double {
            if random.next() % 4 == 0 {
                let bits = Double(bitPattern: random.next())
                return bits.isFinite ? bits : 1
            }
            return doubles[Int(random.next() % UInt64(doubles.count))]
        }
        func optionalDouble() -> Double? { random.next() % 3 == 0 ? nil : double() }
        return TokenSet(
            accessToken: string(), tokenType: string(), refreshToken: optionalString(), idToken: optionalString(),
            scope: optionalString(), expiresAt: optionalDouble(), issuedLifetime: optionalDouble(),
            obtainedAt: double(),
            lastRefreshAt: optionalDouble(), serverClockOffset: optionalDouble(), subject: optionalString(),
            // Every third set carries tokens for other targets (token --scope …).
            targetedTokens: round % 3 == 0
                ? (0..<Int(random.next() % 4)).map { index in
                    TargetedToken(
                        target: targets[(index + Int(random.next() % 3)) % targets.count], accessToken: string(),
                        tokenType: string(),
                        grantedScope: optionalString(), expiresAt: optionalDouble(), issuedLifetime: optionalDouble(),
                        obtainedAt: double())
                } : [],
            scopeNarrowedAt: round % 5 == 0 ? double() : nil)
    }
}

private let stringPieces: [String] = [
    "a", "eyJhbGciOiJSUzI1NiJ9", "Bearer", " ", "\"", "\\", "/", "\\\"", "\u{0}", "\u{1}", "\u{1F}", "\n", "\r\n", "\t",
    "\u{8}", "\u{C}",
    "\u{7F}", "\u{80}", "é", "e\u{301}", "€", "𝄞", "😀", "\u{FFFF}", "\u{FEFF}", "\u{2028}", "\u{10FFFF}", "日本",
    "\\u0041", "null", "}",
]

private let targets: [TokenTarget] = [
    try! TokenTarget(scope: "read", audience: nil, resource: nil),
    try! TokenTarget(scope: "read write", audience: "api", resource: nil),
    try! TokenTarget(scope: nil, audience: nil, resource: "https://r.test/ urn:x:y"),
    try! TokenTarget(scope: nil, audience: "a\"b", resource: nil),
]

private let doubles: [Double] = [
    0, -0.0, -0.5, 0.5, 1, 3600, 1e300, -1e300, 1795968606.123456, 1_700_000_000, 1_764_425_000.25, 0.1, 1e-7,
    .leastNonzeroMagnitude,
    2.2250738585072014e-308, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .ulpOfOne, 9_007_199_254_740_992,
    123456789.000001,
]

/// A small deterministic generator (SplitMix64), so failures reproduce.
struct SplitMix64 {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
