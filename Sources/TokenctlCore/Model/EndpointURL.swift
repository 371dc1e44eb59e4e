import TokenctlEssentials

/// A checked absolute URL for an issuer or endpoint.
///
/// `https` always; plain `http` only to a loopback host (RFC 8252 §8.3 spirit: nothing
/// secret crosses a network in clear text). Kept free of Foundation so the hot-path front
/// can validate configuration without it.
public struct EndpointURL: Hashable, Sendable, CustomStringConvertible {
    public let string: String
    public let scheme: String
    public let host: String

    public init(_ string: String) throws(EndpointURLError) {
        guard !string.isEmpty else { throw .empty }
        guard string.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .invalidCharacters(string) }
        // Visible ASCII from here on: bytes, so no Unicode tables are paged in (the static front
        // checks the profile's URLs on every `token` hit).
        let bytes = Array(string.utf8)
        func lowercased(_ part: ArraySlice<UInt8>) -> String {
            String(
                decoding: part.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 + 32 : $0 }, as: UTF8.self)
        }
        guard let schemeEnd = EndpointURL.firstRange(of: Array("://".utf8), in: bytes) else {
            throw .notAbsolute(string)
        }
        let scheme = lowercased(bytes[..<schemeEnd])
        guard scheme == "https" || scheme == "http" else { throw .unsupportedScheme(string) }
        let rest = bytes[(schemeEnd + 3)...]
        guard !rest.contains(UInt8(ascii: "#")) else { throw .hasFragment(string) }
        let authority = rest.prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") }
        guard !authority.contains(UInt8(ascii: "@")) else { throw .hasUserInfo(string) }
        var host: ArraySlice<UInt8>
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { throw .notAbsolute(string) }
            host = authority[authority.startIndex...close]
        } else {
            host = authority.prefix { $0 != UInt8(ascii: ":") }
        }
        guard !host.isEmpty else { throw .notAbsolute(string) }
        let port = authority.dropFirst(host.count)
        if !port.isEmpty {
            let digits = port.dropFirst()
            guard port.first == UInt8(ascii: ":"), let number = EndpointURL.decimal(digits), number <= 65535 else {
                throw .invalidPort(string)
            }
        }
        let hostText = lowercased(host)
        if scheme == "http", !EndpointURL.isLoopback(hostText) { throw .plainHTTPToRemoteHost(string) }
        self.string = string
        self.scheme = scheme
        self.host = hostText
    }

    private static func firstRange(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        return (0...(haystack.count - needle.count)).first { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    /// Whether `host` names this machine: `localhost`, `127.0.0.0/8` or `[::1]`.
    ///
    /// An IPv4 literal is four canonical decimal octets: the resolver reads `127.0.0.010` as
    /// octal and `127.0.0.09` not as an address at all but as a name to look up in DNS, so a
    /// leading zero makes a host that is not (certainly) the loopback.
    public static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "[::1]" { return true }
        let parts = Array(host.utf8).split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0].elementsEqual("127".utf8) else { return false }
        return parts.allSatisfy { part in
            (part.count == 1 || part.first != UInt8(ascii: "0")) && (decimal(part).map { $0 <= 255 } ?? false)
        }
    }

    /// Whether `authority` — a host with an optional `:port`, as git's credential protocol
    /// gives it (`127.0.0.1:8080`, `[::1]:8080`, `localhost`) — names this machine: an IPv4
    /// literal in 127.0.0.0/8, the IPv6 literal `[::1]` or the exact name `localhost`, and
    /// nothing more (`127.0.0.1.example.com`, `[::1].example.com` and `127.example` are
    /// other hosts). The host is compared without regard to case; a port must be decimal
    /// and at most 65535.
    public static func isLoopbackAuthority(_ authority: String) -> Bool {
        let bytes = Array(authority.utf8)
        let hostEnd: Int
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return false }
            hostEnd = close + 1
        } else {
            hostEnd = bytes.firstIndex(of: UInt8(ascii: ":")) ?? bytes.count
        }
        let port = bytes[hostEnd...]
        if !port.isEmpty {
            guard port.first == UInt8(ascii: ":"), let number = decimal(port.dropFirst()), number <= 65535 else {
                return false
            }
        }
        let host = bytes[..<hostEnd].map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 + 32 : $0 }
        return isLoopback(String(decoding: host, as: UTF8.self))
    }

    /// The value of a non-empty run of ASCII digits (saturating far above any port), else nil.
    private static func decimal(_ digits: some Collection<UInt8>) -> Int? {
        guard !digits.isEmpty else { return nil }
        var value = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0") && digit <= UInt8(ascii: "9") else { return nil }
            value = min(value * 10 + Int(digit - UInt8(ascii: "0")), 1 << 20)
        }
        return value
    }

    /// The URL without a trailing slash, for joining well-known paths (RFC 8414 §3).
    public var withoutTrailingSlash: String {
        string.hasSuffix("/") ? String(string.dropLast()) : string
    }

    /// Whether `a` and `b` name the same issuer: equal, or equal apart from one trailing slash
    /// (how OIDC Discovery §4.3 and ID-token `iss` checks compare them).
    public static func sameIssuer(_ a: String, _ b: String) -> Bool {
        func trimmed(_ text: String) -> String { text.hasSuffix("/") ? String(text.dropLast()) : text }
        return a == b || trimmed(a) == trimmed(b)
    }

    public var description: String { string }
}

public enum EndpointURLError: Error, Equatable, CustomStringConvertible {
    case empty
    case invalidCharacters(String)
    case notAbsolute(String)
    case unsupportedScheme(String)
    case hasFragment(String)
    case hasUserInfo(String)
    case invalidPort(String)
    case plainHTTPToRemoteHost(String)

    public var description: String {
        switch self {
        case .empty: "the URL is empty"
        case .invalidCharacters(let url): "'\(url)' contains spaces or control characters"
        case .notAbsolute(let url): "'\(url)' is not an absolute URL (expected https://host/...)"
        case .unsupportedScheme(let url): "'\(url)' must use https:// (http:// is allowed only for loopback hosts)"
        case .hasFragment(let url): "'\(url)' must not contain a fragment (#...)"
        case .hasUserInfo(let url): "'\(url)' must not contain user information (user@host)"
        case .invalidPort(let url): "'\(url)' has an invalid port"
        case .plainHTTPToRemoteHost(let url): "'\(url)' uses plain http:// to a host that is not loopback; use https://"
        }
    }
}
