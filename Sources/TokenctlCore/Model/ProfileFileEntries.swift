import TokenctlEssentials

/// A configuration problem: exit status 78 (EX_CONFIG).
public struct ConfigurationError: Error, Equatable, CustomStringConvertible {
    public let path: String
    public let line: Int?
    public let message: String

    public init(path: String, line: Int?, message: String) {
        self.path = path
        self.line = line
        self.message = message
    }

    public var description: String {
        if let line { return "\(path):\(line): \(message)" }
        return "\(path): \(message)"
    }
}

/// The entries of a profile file, each key's value and line, and what each kind of value means.
struct ProfileFileEntries {
    let path: String
    private var values: [(key: String, value: String, line: Int)] = []

    /// The syntax is ProfileFileSyntax's, the one reader the front's hot path uses too; here
    /// each key gets its meaning and each error its message. Bytes and small arrays, not
    /// Characters and a Dictionary: the static front reads this file on every `token` hit.
    init(_ text: String, path: String) throws(ConfigurationError) {
        self.path = path
        var values: [(key: String, value: String, line: Int)] = []
        var failure: ConfigurationError?
        let keys = ProfileConfiguration.keys
        let bytes = Array(text.utf8)
        let malformedLine = bytes.withUnsafeBufferPointer { file in
            ProfileFileSyntax.scan(file) { entry in
                let key = String(decoding: file[entry.key], as: UTF8.self)
                let value = String(decoding: file[entry.value], as: UTF8.self)
                guard keys.contains(key) else {
                    let hint = closestMatch(to: key, in: keys).map { " (did you mean '\($0)'?)" } ?? ""
                    failure = ConfigurationError(path: path, line: entry.line, message: "unknown key '\(key)'\(hint)")
                    return false
                }
                guard !values.contains(where: { $0.key == key }) else {
                    failure = ConfigurationError(path: path, line: entry.line, message: "'\(key)' is set twice")
                    return false
                }
                guard value.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else {
                    failure = ConfigurationError(
                        path: path, line: entry.line, message: "'\(key)' contains control characters")
                    return false
                }
                values.append((key, value, entry.line))
                return true
            }
        }
        if let failure { throw failure }
        if let malformedLine {
            throw ConfigurationError(path: path, line: malformedLine, message: "expected 'key = value'")
        }
        self.values = values
    }

    func entry(_ key: String) -> (value: String, line: Int)? {
        values.first { $0.key == key }.map { ($0.value, $0.line) }
    }

    /// A text value; nil when the key is missing or empty.
    func text(_ key: String) -> String? {
        entry(key).flatMap { $0.value.isEmpty ? nil : $0.value }
    }

    func url(_ key: String) throws(ConfigurationError) -> EndpointURL? {
        guard let entry = entry(key) else { return nil }
        do { return try EndpointURL(entry.value) } catch {
            throw ConfigurationError(path: path, line: entry.line, message: "\(key): \(error)")
        }
    }

    /// `true` or `false`; missing or empty: false.
    func flag(_ key: String) throws(ConfigurationError) -> Bool {
        guard let entry = entry(key) else { return false }
        switch entry.value {
        case "true": return true
        case "false", "": return false
        default:
            throw ConfigurationError(
                path: path, line: entry.line, message: "\(key): expected true or false, not '\(entry.value)'")
        }
    }

    /// Words separated by spaces or tabs; nil when the key is missing or empty.
    func words(_ key: String) -> [String]? {
        guard let entry = entry(key), !entry.value.isEmpty else { return nil }
        return entry.value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    }

    /// `key` as one of `Value`'s raw values; nil when missing or empty. `expected` lists them
    /// for the message.
    func choice<Value: RawRepresentable<String>>(
        _ key: String, expected: String
    ) throws(ConfigurationError) -> Value? {
        guard let entry = entry(key), !entry.value.isEmpty else { return nil }
        guard let value = Value(rawValue: entry.value) else {
            throw ConfigurationError(
                path: path, line: entry.line, message: "\(key): expected \(expected), not '\(entry.value)'")
        }
        return value
    }

    /// `token_endpoint_auth_method`; nil when missing or empty.
    func authMethod() throws(ConfigurationError) -> ClientAuthenticationMethod? {
        try choice(
            "token_endpoint_auth_method",
            expected: "one of \(ClientAuthenticationMethod.names.joined(separator: ", "))")
    }

    /// `grant`; nil when missing or empty.
    func grant() throws(ConfigurationError) -> MachineGrant? {
        try choice("grant", expected: MachineGrant.allCases.map(\.rawValue).joined(separator: " or "))
    }

    /// `proxy`: a proxy URL without credentials (a file is no place for a password); nil
    /// when missing or empty.
    func proxy() throws(ConfigurationError) -> String? {
        guard let entry = entry("proxy"), !entry.value.isEmpty else { return nil }
        guard ProxyEndpoint(entry.value) != nil else {
            throw ConfigurationError(
                path: path, line: entry.line, message: "proxy: not a proxy URL (expected [SCHEME://]HOST:PORT)")
        }
        guard !entry.value.contains("@") else {
            throw ConfigurationError(
                path: path, line: entry.line,
                message:
                    "proxy: no user name or password here (the file is no place for a password); name the user with 'proxy_user' and keep the password in the Secret Service (tokenctl.conf(5)), or give both in the https_proxy variable's URL"
            )
        }
        return entry.value
    }

    /// `proxy_user`: a user name for the profile's own `proxy` (Basic credentials, RFC 7617 §2:
    /// no colon); nil when missing or empty.
    func proxyUser(hasProxy: Bool) throws(ConfigurationError) -> String? {
        guard let entry = entry("proxy_user"), !entry.value.isEmpty else { return nil }
        guard !entry.value.contains(":"), !entry.value.contains(" "), !entry.value.contains("\t") else {
            throw ConfigurationError(
                path: path, line: entry.line, message: "proxy_user: a user name has no colon or blank")
        }
        guard hasProxy else {
            throw ConfigurationError(
                path: path, line: entry.line,
                message:
                    "proxy_user: names the user of the profile's proxy, and the file has no 'proxy' key (its password is sent to that proxy only)"
            )
        }
        return entry.value
    }

    /// `provider`; nil when missing or empty.
    func provider() throws(ConfigurationError) -> Provider? {
        guard let entry = entry("provider"), !entry.value.isEmpty else { return nil }
        guard let provider = Provider(rawValue: entry.value) else {
            let hint = closestMatch(to: entry.value, in: Provider.names).map { " (did you mean '\($0)'?)" } ?? ""
            throw ConfigurationError(
                path: path, line: entry.line,
                message:
                    "provider: unknown provider '\(entry.value)'\(hint); known: \(Provider.names.joined(separator: ", "))"
            )
        }
        return provider
    }
}
