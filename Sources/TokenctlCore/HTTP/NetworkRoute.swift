import TokenctlEssentials

/// The network settings of one profile (tokenctl.conf(5)): its CA bundle and its proxy keys.
/// Each request resolves them, with the environment, into a `NetworkRoute`.
public struct NetworkSettings: Sendable, Equatable {
    /// `cacert` (or `login --cacert`): the CA bundle that replaces the system's for every
    /// request of the profile.
    public var caBundle: String?
    /// `proxy`: the proxy for every request of the profile, loopback included, over the
    /// environment's.
    public var proxy: String?
    /// `no_proxy`: the hosts that skip the proxy, over the environment's `no_proxy`/`NO_PROXY`.
    public var noProxy: String?
    /// `proxy_cacert`: the CA bundle an `https://` proxy's own certificate is checked against
    /// (default: the profile's `cacert`, else the system's).
    public var proxyCABundle: String?
    /// `proxy_user`: the user name for the profile's `proxy`; its password is kept in the
    /// Secret Service (`ProxyAccount`) and sent to that proxy only.
    public var proxyUser: String?
    /// The profile these are of, for the hints that name a command (nil: the default profile).
    public var profile: ProfileName?

    public init(caBundle: String? = nil, proxy: String? = nil, noProxy: String? = nil, proxyCABundle: String? = nil) {
        self.caBundle = caBundle
        self.proxy = proxy
        self.noProxy = noProxy
        self.proxyCABundle = proxyCABundle
    }

    /// The account whose password the Secret Service keeps: the profile's proxy and `proxy_user`.
    public var proxyAccount: ProxyAccount? {
        guard let proxy, let proxyUser, let endpoint = ProxyEndpoint(proxy) else { return nil }
        return ProxyAccount(proxy: endpoint.authority, user: proxyUser)
    }
}

/// A user of a proxy that asks for Basic credentials (RFC 9110 §11.7.1), its password kept in
/// the Secret Service as an item of its own (`kind=proxy-password`, `proxy=HOST:PORT`,
/// `user=NAME`): shared by every profile that names the same proxy and user.
public struct ProxyAccount: Sendable, Hashable, CustomStringConvertible {
    /// `HOST:PORT` as the profile's `proxy` key names it (lower case).
    public var proxy: String
    public var user: String

    /// "user alice at proxy.example:3128"
    public var description: String { "user \(user) at \(proxy)" }
}

/// A proxy URL split as libcurl reads one (a URL without a scheme is `http://`), its user
/// name and password apart, percent-decoded: the proxy goes to libcurl without them
/// (CURLOPT_PROXY) and they go as CURLOPT_PROXYUSERNAME / CURLOPT_PROXYPASSWORD, so that no
/// description, message or `-v` line can carry them.
public struct ProxyEndpoint: Sendable, Equatable, CustomStringConvertible {
    /// `scheme://host:port`, no user information, no path.
    public var url: String
    public var username: String?
    public var password: String?

    /// Nil for an empty text, or one with a blank, a control or a non-ASCII character.
    public init?(_ text: String) {
        var rest = Substring(text.trimmingCharacters(in: " \t"))
        guard !rest.isEmpty, rest.allSatisfy({ $0.isASCII && $0 > " " && $0 != "\u{7F}" }) else { return nil }
        var scheme = "http"
        if let split = NetworkRoute.splitScheme(rest) {
            scheme = split.scheme.lowercased()
            rest = split.rest
        }
        if let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) { rest = rest[..<slash] }
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = userinfo.firstIndex(of: ":") {
                username = Self.percentDecoded(userinfo[..<colon])
                password = Self.percentDecoded(userinfo[userinfo.index(after: colon)...])
            } else {
                username = Self.percentDecoded(userinfo)
            }
        }
        url = "\(scheme)://\(rest)"
    }

    /// The proxy for messages: its URL without credentials.
    public var description: String { url }

    public var isHTTPS: Bool { url.hasPrefix("https://") }

    /// `host:port` (lower case), without the scheme.
    public var authority: String {
        NetworkRoute.splitScheme(Substring(url)).map { $0.rest.lowercased() } ?? url.lowercased()
    }

    private static func percentDecoded(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%"), utf8.count >= 2,
                let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// How one request goes out: directly or through which proxy, and which CA bundle verifies
/// the server, each with where the setting came from. tokenctl decides this itself and sets
/// CURLOPT_PROXY, CURLOPT_NOPROXY and CURLOPT_CAINFO/CAPATH explicitly, so that libcurl's own
/// reading of the environment never decides anything, and so that messages can name it.
public struct NetworkRoute: Sendable, Equatable, CustomStringConvertible {
    public var proxy: ProxyEndpoint?
    /// Where the proxy, or the decision to go direct, came from: "profile key 'proxy'",
    /// "https_proxy", "no_proxy entry 'example.com'", "loopback"...
    public var proxySource: String?
    /// The CA bundle file (CURLOPT_CAINFO) and directory (CURLOPT_CAPATH) tokenctl sets; both
    /// nil: libcurl's built-in default.
    public var caFile: String?
    public var caDirectory: String?
    /// Where the CA setting came from: "profile key 'cacert'", "SSL_CERT_FILE"...
    public var caSource: String?
    /// CURLOPT_PROXY_CAINFO for an `https://` proxy.
    public var proxyCAFile: String?
    /// The profile's proxy with its `proxy_user`: the password is the Secret Service's
    /// (`CurlHTTPClient` reads it before the request).
    public var proxyAccount: ProxyAccount?

    /// The route of a request to `url`.
    ///
    /// - The profile's `proxy` applies to every request, loopback included, unless `no_proxy`
    ///   (the profile's, else the environment's) names the host.
    /// - Otherwise the environment's variable for the URL's scheme, as libcurl reads them:
    ///   `http_proxy` (lower case only) for `http://`, `https_proxy` then `HTTPS_PROXY` for
    ///   `https://`, then `all_proxy`, `ALL_PROXY`; `no_proxy` then `NO_PROXY`. Requests to
    ///   `localhost`, 127.0.0.0/8 and ::1 never go through a proxy from the environment.
    /// - CA: the profile's `cacert`; else `SSL_CERT_FILE` and `SSL_CERT_DIR`, as the curl tool
    ///   and OpenSSL honour them (libcurl itself does not); else libcurl's default.
    public static func resolve(url: String, settings: NetworkSettings, environment: Environment) -> NetworkRoute {
        var route = NetworkRoute()
        if let caBundle = settings.caBundle {
            route.caFile = caBundle
            route.caSource = "profile key 'cacert'"
        } else {
            route.caFile = environment["SSL_CERT_FILE"]
            route.caDirectory = environment["SSL_CERT_DIR"]
            route.caSource =
                [route.caFile.map { _ in "SSL_CERT_FILE" }, route.caDirectory.map { _ in "SSL_CERT_DIR" }]
                .compactMap { $0 }.joined(separator: ", ")
            if route.caSource == "" { route.caSource = nil }
        }
        route.proxyCAFile = settings.proxyCABundle ?? settings.caBundle
        let (scheme, host) = schemeAndHost(of: url)
        let fromProfile = settings.proxy != nil
        let candidate: (value: String, source: String)?
        if let proxy = settings.proxy {
            candidate = (proxy, "profile key 'proxy'")
        } else {
            let names = scheme == "http" ? ["http_proxy"] : ["\(scheme)_proxy", "\(scheme.uppercased())_PROXY"]
            candidate =
                (names + ["all_proxy", "ALL_PROXY"]).lazy.compactMap { name in
                    environment[name].map { ($0, name) }
                }.first
        }
        guard let candidate else { return route }
        let noProxy: (value: String, source: String)? =
            settings.noProxy.map { ($0, "profile key 'no_proxy'") }
            ?? ["no_proxy", "NO_PROXY"].lazy.compactMap { name in environment[name].map { ($0, name) } }.first
        if let noProxy, let entry = noProxyMatch(host: host, list: noProxy.value) {
            route.proxySource = "\(noProxy.source) entry '\(entry)'"
            return route
        }
        if !fromProfile, isLoopback(host) {
            route.proxySource = "loopback (never through \(candidate.source))"
            return route
        }
        guard var proxy = ProxyEndpoint(candidate.value) else { return route }
        if fromProfile, let account = settings.proxyAccount {
            proxy.username = account.user
            route.proxyAccount = account
        }
        route.proxy = proxy
        route.proxySource = candidate.source
        return route
    }

    /// "proxy http://p:3128 (https_proxy), CA file /etc/ca.pem (profile key 'cacert')": never
    /// credentials.
    public var description: String {
        var parts: [String] = []
        if let proxy {
            parts.append("proxy \(proxy) (\(proxySource ?? ""))")
            if let proxyAccount {
                parts.append("proxy user \(proxyAccount.user) (its password from the Secret Service)")
            }
        } else {
            parts.append("no proxy" + (proxySource.map { " (\($0))" } ?? ""))
        }
        if caFile != nil || caDirectory != nil {
            let stores = [caFile.map { "CA file \($0)" }, caDirectory.map { "CA directory \($0)" }].compactMap { $0 }
            parts.append(stores.joined(separator: ", ") + (caSource.map { " (\($0))" } ?? ""))
        } else {
            parts.append("the system's CA certificates")
        }
        if let proxy, proxy.isHTTPS {
            parts.append("proxy CA file \(proxyCAFile ?? "the system's")")
        }
        return parts.joined(separator: ", ")
    }

    /// The URL's scheme (lower case) and host (lower case, IPv6 without brackets).
    static func schemeAndHost(of url: String) -> (scheme: String, host: String) {
        guard let split = splitScheme(Substring(url)) else { return ("http", "") }
        let scheme = split.scheme.lowercased()
        var authority = split.rest
        if let end = authority.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            authority = authority[..<end]
        }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            return (scheme, authority[authority.index(after: authority.startIndex)..<close].lowercased())
        }
        if let colon = authority.lastIndex(of: ":") { authority = authority[..<colon] }
        return (scheme, authority.lowercased())
    }

    /// `scheme` and the rest of `scheme://rest`; nil without a scheme.
    static func splitScheme(_ text: Substring) -> (scheme: Substring, rest: Substring)? {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://"),
            text[..<colon].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        else { return nil }
        return (text[..<colon], text[text.index(colon, offsetBy: 3)...])
    }

    /// localhost (and its subdomains, RFC 6761 §6.3), 127.0.0.0/8 and ::1.
    static func isLoopback(_ host: String) -> Bool {
        var name = Substring(host)
        if name.hasSuffix(".") { name = name.dropLast() }
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        if let address = ipv4(name) { return address >> 24 == 127 }
        return name == "::1" || name == "0:0:0:0:0:0:0:1"
    }

    /// The entry of a NO_PROXY list that matches `host`, read as libcurl 7.88.1 reads it:
    /// entries separated by commas or blanks; the whole list `*` matches every host; a name
    /// matches itself and its subdomains (a leading and a trailing dot ignored; no wildcards,
    /// no ports); an IPv4 address or CIDR range matches only URLs with an IPv4 literal; an
    /// IPv6 address only that literal (an IPv6 range matched nothing in libcurl 7.88.1).
    public static func noProxyMatch(host: String, list: String) -> String? {
        let trimmed = list.trimmingCharacters(in: " \t")
        if trimmed == "*" { return "*" }
        let hostIPv4 = ipv4(Substring(host))
        let hostIsIPv6 = host.contains(":")
        var name = Substring(host)
        if hostIPv4 == nil, !hostIsIPv6, name.hasSuffix(".") { name = name.dropLast() }
        let entries = list.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
        for entry in entries {
            if let hostIPv4 {
                let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
                guard let network = ipv4(parts[0]) else { continue }
                var bits = 32
                if parts.count == 2 {
                    // atoi: leading digits, anything else 0 (then a whole-address match).
                    bits = Int(parts[1].prefix(while: { $0.isASCII && $0.isNumber })) ?? 0
                    if bits == 0 { bits = 32 }
                }
                guard bits <= 32 else { continue }
                let mask: UInt32 = bits == 0 ? 0 : ~UInt32(0) << UInt32(32 - bits)
                if hostIPv4 & mask == network & mask { return String(entry) }
            } else if hostIsIPv6 {
                if entry.lowercased() == host { return String(entry) }
            } else {
                var token = entry
                if token.hasSuffix(".") { token = token.dropLast() }
                if token.hasPrefix(".") { token = token.dropFirst() }
                guard !token.isEmpty else { continue }
                let lowered = token.lowercased()
                if lowered == name { return String(entry) }
                if lowered.count < name.count, name.hasSuffix("." + lowered) { return String(entry) }
            }
        }
        return nil
    }

    /// A dotted-quad IPv4 address (four decimal numbers of at most 255), as inet_pton reads it.
    static func ipv4(_ text: Substring) -> UInt32? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var value: UInt32 = 0
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ $0.isASCII && $0.isNumber }),
                let number = UInt32(part), number <= 255, part.count == 1 || part.first != "0"
            else { return nil }
            value = value << 8 | number
        }
        return value
    }
}
