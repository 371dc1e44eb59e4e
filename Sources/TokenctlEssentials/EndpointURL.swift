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
        guard let schemeEnd = string.firstRange(of: "://") else { throw .notAbsolute(string) }
        let scheme = string[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "https" || scheme == "http" else { throw .unsupportedScheme(string) }
        let rest = string[schemeEnd.upperBound...]
        guard !rest.contains("#") else { throw .hasFragment(string) }
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        guard !authority.contains("@") else { throw .hasUserInfo(string) }
        var host: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw .notAbsolute(string) }
            host = authority[authority.startIndex...close]
        } else {
            host = authority.prefix { $0 != ":" }
        }
        guard !host.isEmpty else { throw .notAbsolute(string) }
        let port = authority.dropFirst(host.count)
        if !port.isEmpty {
            let digits = port.dropFirst()
            guard port.first == ":", !digits.isEmpty, digits.allSatisfy({ $0 >= "0" && $0 <= "9" }), let number = Int(digits), number <= 65535 else {
                throw .invalidPort(string)
            }
        }
        host = Substring(host.lowercased())
        if scheme == "http", !EndpointURL.isLoopback(String(host)) { throw .plainHTTPToRemoteHost(string) }
        self.string = string
        self.scheme = scheme
        self.host = String(host)
    }

    /// Whether `host` names this machine: `localhost`, `127.0.0.0/8` or `[::1]`.
    public static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in UInt8(part) != nil }
    }

    /// The URL without a trailing slash, for joining well-known paths (RFC 8414 §3).
    public var withoutTrailingSlash: String {
        string.hasSuffix("/") ? String(string.dropLast()) : string
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
