/// What an access token is for, when a call asks for less or other than the session's own
/// (`token --scope S --audience A --resource URI`): the scopes (a subset of the session's, RFC
/// 6749 §6), an `audience` parameter (Auth0 and others) and resource indicators (RFC 8707).
/// Each distinct target has its own access token, obtained from the session's refresh token and
/// cached like the session's own; `TokenTarget.session` (nothing given) is the session's own.
///
/// Scopes and resources are sets: `--scope "b a"` and `--scope "a  b"` are one target. The
/// canonical form (sorted, each word once) is what is stored and compared.
public struct TokenTarget: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let scopes: [String]
    public let audience: String?
    public let resources: [String]

    /// The session's own access token.
    public static let session = TokenTarget(uncheckedScopes: [], audience: nil, resources: [])

    public var isSession: Bool { scopes.isEmpty && audience == nil && resources.isEmpty }

    /// Limits on what a call may ask for (they bound the hot-cache key and payload).
    public static let maximumWords = 32
    public static let maximumValueLength = 1024

    private init(uncheckedScopes: [String], audience: String?, resources: [String]) {
        self.scopes = uncheckedScopes
        self.audience = audience
        self.resources = resources
    }

    /// A target from the options as given (each `nil` when not given).
    ///
    /// - Throws: `TokenTargetError` naming the option and what is wrong with it.
    public init(scope: String?, audience: String?, resource: String?) throws(TokenTargetError) {
        // The checks are TokenTargetSyntax's, the ones the front's hit makes on the same bytes.
        func words(_ value: String?, _ part: TokenTargetSyntax.Part, _ option: String, expected: String)
            throws(TokenTargetError) -> [String]
        {
            guard var value else { return [] }
            let problem = value.withUTF8 { TokenTargetSyntax.check($0, part) }
            switch problem {
            case nil: break
            case .empty?: throw TokenTargetError(option: option, reason: "empty")
            case .tooLong?:
                throw TokenTargetError(option: option, reason: "longer than \(TokenTarget.maximumValueLength) bytes")
            case .tooManyWords?:
                throw TokenTargetError(option: option, reason: "more than \(TokenTarget.maximumWords) values")
            case .invalidWord(let start, let end)?:
                let word = String(decoding: Array(value.utf8)[start..<end], as: UTF8.self)
                throw TokenTargetError(
                    option: option,
                    reason: "'\(TerminalText.printable(word, limit: 64, replacement: "?"))' is not \(expected)")
            }
            return part == .audience ? [value] : Array(Set(value.split(separator: " ").map(String.init))).sorted()
        }
        let scopes = try words(
            scope, .scope, "--scope", expected: "a scope (RFC 6749 §3.3: visible ASCII except '\"' and '\\')")
        let resources = try words(
            resource, .resource, "--resource", expected: "an absolute URI without a fragment (RFC 8707)")
        let audiences = try words(audience, .audience, "--audience", expected: "one value of visible ASCII (no spaces)")
        self.init(uncheckedScopes: scopes, audience: audiences.first, resources: resources)
    }

    // MARK: Stored form

    /// The fields as stored (in a token set and a hot-cache payload): space-separated words,
    /// `nil` for a part not given.
    public var scopeField: String? { scopes.isEmpty ? nil : scopes.joined(separator: " ") }
    public var resourceField: String? { resources.isEmpty ? nil : resources.joined(separator: " ") }

    /// A target read back from its stored fields, checked as the options are; `nil` when they
    /// are not a valid target or not in canonical form (sorted, each word once).
    public init?(storedScope: String?, audience: String?, resource: String?) {
        func canonical(_ value: String?, _ part: TokenTargetSyntax.Part) -> Bool {
            guard var value else { return true }
            return value.withUTF8 { TokenTargetSyntax.isCanonical($0, part) }
        }
        guard canonical(storedScope, .scope), canonical(audience, .audience), canonical(resource, .resource) else {
            return nil
        }
        // Canonical includes every check the options get, and the words are already sorted and
        // distinct: taken as they are.
        func words(_ value: String?) -> [String] { value.map { $0.split(separator: " ").map(String.init) } ?? [] }
        self.init(uncheckedScopes: words(storedScope), audience: audience, resources: words(resource))
    }

    /// The order-independent digest that names this target's hot-cache key (see
    /// `TokenTargetSyntax.digest`); nil for the session's own token.
    public var digest: UInt64? {
        guard !isSession else { return nil }
        var scope = scopeField ?? ""
        var audience = self.audience ?? ""
        var resource = resourceField ?? ""
        return scope.withUTF8 { s in
            audience.withUTF8 { a in
                resource.withUTF8 { r in
                    TokenTargetSyntax.digest(
                        scope: self.scopes.isEmpty ? nil : s, audience: self.audience == nil ? nil : a,
                        resource: self.resources.isEmpty ? nil : r)
                }
            }
        }
    }

    /// For people: `scope 'a b', audience 'api', resource 'https://r'`.
    public var description: String {
        var parts: [String] = []
        if let scopeField { parts.append("scope '\(scopeField)'") }
        if let audience { parts.append("audience '\(audience)'") }
        if let resourceField { parts.append("resource '\(resourceField)'") }
        return parts.isEmpty ? "the session's own scope" : parts.joined(separator: ", ")
    }

    public static func < (lhs: TokenTarget, rhs: TokenTarget) -> Bool {
        (lhs.scopeField ?? "", lhs.audience ?? "", lhs.resourceField ?? "") < (
            rhs.scopeField ?? "", rhs.audience ?? "", rhs.resourceField ?? ""
        )
    }
}

/// A `--scope`, `--audience` or `--resource` value that cannot name a target.
public struct TokenTargetError: Error, Equatable, CustomStringConvertible {
    public let option: String
    public let reason: String
    public var description: String { "Invalid value for '\(option)': \(reason)." }
}

/// The byte-level part of `TokenTarget` that the static front shares with the engine: the
/// digest of a target as given on the command line, and set equality of word lists.
public enum TokenTargetSyntax {
    public typealias Bytes = UnsafeBufferPointer<UInt8>

    /// A digest of the target that does not depend on word order or spacing: the wrapping sum,
    /// over every word, of a mixed FNV-1a 64 of (part tag, word). Words given twice count
    /// twice, so `--scope "a a"` is another key than `--scope a`: a miss the engine then serves
    /// under the canonical key. Not secret, not a MAC: payloads are checked on every read.
    public static func digest(scope: Bytes?, audience: Bytes?, resource: Bytes?) -> UInt64 {
        var sum: UInt64 = 0
        func add(_ tag: UInt8, _ bytes: Bytes, start: Int, end: Int) {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            func update(_ byte: UInt8) {
                hash ^= UInt64(byte)
                hash &*= 0x0000_0100_0000_01B3
            }
            update(tag)
            update(0)
            for index in start..<end { update(bytes[index]) }
            // splitmix64's finalizer, so that sums of related words do not cancel.
            hash = (hash ^ (hash >> 30)) &* 0xbf58_476d_1ce4_e5b9
            hash = (hash ^ (hash >> 27)) &* 0x94d0_49bb_1331_11eb
            sum &+= hash ^ (hash >> 31)
        }
        if let scope { forEachWord(scope) { add(UInt8(ascii: "s"), scope, start: $0, end: $1) } }
        if let audience { add(UInt8(ascii: "a"), audience, start: 0, end: audience.count) }
        if let resource { forEachWord(resource) { add(UInt8(ascii: "r"), resource, start: $0, end: $1) } }
        return sum
    }

    /// The three parts of a target, each with its own word rules.
    public enum Part: Sendable, Equatable { case scope, audience, resource }

    public enum Problem: Equatable {
        case empty, tooLong, tooManyWords
        case invalidWord(start: Int, end: Int)
    }

    /// Whether a value as given is one the part accepts; nil when it is. Scopes and resources
    /// are space-separated words (RFC 6749 §3.3 scope-tokens; RFC 8707 absolute URIs without a
    /// fragment); an audience is one word of visible ASCII. At most `TokenTarget.maximumWords`
    /// words (repeats counted) and `TokenTarget.maximumValueLength` bytes.
    public static func check(_ value: Bytes, _ part: Part) -> Problem? {
        guard value.count <= TokenTarget.maximumValueLength else { return .tooLong }
        var words = 0
        var problem: Problem?
        forEachWord(value) { start, end in
            words += 1
            if problem == nil && !isWord(value, start, end, part) { problem = .invalidWord(start: start, end: end) }
        }
        if words == 0 { return .empty }
        if let problem { return problem }
        if part == .audience {
            // One value: a space anywhere in it is part of it, and invalid.
            for index in 0..<value.count where value[index] == 0x20 { return .invalidWord(start: 0, end: value.count) }
        }
        return words > TokenTarget.maximumWords ? .tooManyWords : nil
    }

    /// Whether a stored value is valid and canonical: words separated by one space, strictly
    /// ascending (byte order, which is String order for ASCII), none repeated.
    public static func isCanonical(_ value: Bytes, _ part: Part) -> Bool {
        guard check(value, part) == nil else { return false }
        var previous: (start: Int, end: Int)?
        var ordered = true
        var expectedStart = 0
        forEachWord(value) { start, end in
            if start != expectedStart { ordered = false } // a space before the first, or two between
            expectedStart = end + 1
            if let previous {
                let (a, b) = (previous.end - previous.start, end - start)
                let common = min(a, b)
                let order =
                    common == 0 ? 0 : memcmp(value.baseAddress! + previous.start, value.baseAddress! + start, common)
                if order > 0 || (order == 0 && a >= b) { ordered = false }
            }
            previous = (start, end)
        }
        return ordered && expectedStart == value.count + 1
    }

    static func isWord(_ bytes: Bytes, _ start: Int, _ end: Int, _ part: Part) -> Bool {
        switch part {
        case .scope:
            // scope-token: %x21 / %x23-5B / %x5D-7E.
            for index in start..<end {
                let byte = bytes[index]
                guard byte == 0x21 || (0x23...0x5B).contains(byte) || (0x5D...0x7E).contains(byte) else { return false }
            }
            return true
        case .audience:
            for index in start..<end where bytes[index] <= 0x20 || bytes[index] >= 0x7F { return false }
            return true
        case .resource:
            // An absolute URI (a scheme: a letter, then letters, digits, '+', '-', '.'; a colon;
            // something after it), visible ASCII, no fragment.
            var colon: Int?
            for index in start..<end {
                let byte = bytes[index]
                guard byte > 0x20, byte < 0x7F, byte != UInt8(ascii: "#") else { return false }
                if colon == nil && byte == UInt8(ascii: ":") { colon = index }
            }
            guard let colon, colon > start, colon + 1 < end, bytes[start].isASCIILetter else { return false }
            for index in start..<colon {
                let byte = bytes[index]
                guard
                    byte.isASCIILetter || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                        || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
                else { return false }
            }
            return true
        }
    }

    /// Calls `body(start, end)` for each run of non-space bytes.
    public static func forEachWord(_ bytes: Bytes, _ body: (Int, Int) -> Void) {
        var index = 0
        while index < bytes.count {
            while index < bytes.count && bytes[index] == UInt8(ascii: " ") { index += 1 }
            let start = index
            while index < bytes.count && bytes[index] != UInt8(ascii: " ") { index += 1 }
            if index > start { body(start, index) }
        }
    }

    /// Whether two space-separated lists hold the same set of words.
    public static func sameWords(_ a: Bytes, _ b: Bytes) -> Bool {
        func contained(_ x: Bytes, in y: Bytes) -> Bool {
            var all = true
            forEachWord(x) { xs, xe in
                guard all else { return }
                var found = false
                forEachWord(y) { ys, ye in
                    if !found && ye - ys == xe - xs
                        && (xe == xs || memcmp(x.baseAddress! + xs, y.baseAddress! + ys, xe - xs) == 0)
                    {
                        found = true
                    }
                }
                all = found
            }
            return all
        }
        return contained(a, in: b) && contained(b, in: a)
    }
}

extension UInt8 {
    fileprivate var isASCIILetter: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
