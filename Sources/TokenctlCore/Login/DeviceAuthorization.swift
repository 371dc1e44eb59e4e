import TokenctlEssentials

/// The device authorization response (RFC 8628 §3.2), checked before anything is shown.
public struct DeviceAuthorization: Sendable, Equatable {
    public var deviceCode: String
    public var userCode: String
    public var verificationURI: String
    public var verificationURIComplete: String?
    /// Seconds the codes stay valid.
    public var expiresIn: Double
    /// Seconds to wait between polls (default 5, §3.2).
    public var interval: Double
    /// The server's own instructions for the user (Entra's localized `message`), when it sent
    /// any: printable, control characters removed.
    public var message: String? = nil

    /// Whether `code` can be shown as the code to type: printable (no control, format or line
    /// separator character, so no escape sequence or reordering reaches the terminal), spaces
    /// only between other characters ("WDJB MJHT", as some servers format it), at most 64
    /// characters (RFC 8628 §6.1 suggests 8 or so).
    static func isUserCode(_ code: String) -> Bool {
        guard !code.isEmpty, code.count <= 64, code.first != " ", code.last != " " else { return false }
        return code.unicodeScalars.allSatisfy { scalar in
            if scalar == " " { return true }
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .spaceSeparator, .surrogate, .privateUse,
                .unassigned:
                return false
            default: return true
            }
        }
    }

    /// Parse a 200 body.
    ///
    /// - Throws: a `TokenctlError` naming what is missing or unusable.
    public static func parse(_ body: [UInt8], endpoint: String) throws(TokenctlError) -> DeviceAuthorization {
        try parse(JSONValue.parseObject(body), endpoint: endpoint)
    }

    /// Parse an answer's members (`EndpointAnswer.object`: JSON or form-encoded; nil: neither).
    public static func parse(_ object: [String: JSONValue]?, endpoint: String) throws(TokenctlError)
        -> DeviceAuthorization
    {
        func problem(_ what: String) -> TokenctlError {
            TokenctlError(
                .loginRequired, "the device authorization endpoint \(endpoint) answered without \(what)",
                hint: "Nothing was stored.")
        }
        guard let object else { throw problem("a JSON object") }
        // Text shown on the terminal must not carry control characters (escape sequences).
        func printable(_ key: String) -> String? {
            guard let value = object[key]?.stringValue, !value.isEmpty, value.utf8.count <= 2048,
                value.unicodeScalars.allSatisfy({
                    $0.value > 0x20 && $0.value != 0x7F && !(0x80...0x9F).contains($0.value)
                })
            else { return nil }
            return value
        }
        guard let deviceCode = object["device_code"]?.stringValue, !deviceCode.isEmpty else {
            throw problem("a device_code")
        }
        guard let userCode = object["user_code"]?.stringValue, isUserCode(userCode) else {
            throw problem("a usable user_code")
        }
        // Or a provider's own spelling (`Provider.verificationURIAliases`: Google's pre-RFC one).
        let uri = (["verification_uri"] + Provider.verificationURIAliases).lazy.compactMap(printable).first
        guard let uri, (try? EndpointURL(uri)) != nil else {
            throw problem("a usable verification_uri (https://…)")
        }
        var complete = printable("verification_uri_complete")
        if let candidate = complete, (try? EndpointURL(candidate)) == nil { complete = nil }
        func seconds(_ key: String, default value: Double) -> Double {
            switch object[key] {
            case .number(let number)?: number
            case .string(let text)?: Double(text) ?? value
            default: value
            }
        }
        let expiresIn = seconds("expires_in", default: 600)
        let interval = seconds("interval", default: 5)
        guard expiresIn.isFinite, expiresIn > 0 else { throw problem("a positive expires_in") }
        // Shown as one paragraph: control characters (escape sequences, line breaks) become spaces.
        let message = object["message"]?.stringValue.map { text in
            String(
                String.UnicodeScalarView(
                    text.unicodeScalars.prefix(1000).map {
                        $0.value < 0x20 || (0x7F...0x9F).contains($0.value) ? " " : $0
                    })
            )
            .trimmingCharacters(in: " ")
        }.flatMap { $0.isEmpty ? nil : $0 }
        return DeviceAuthorization(
            deviceCode: deviceCode, userCode: userCode, verificationURI: uri, verificationURIComplete: complete,
            expiresIn: min(expiresIn, 3600), interval: interval.isFinite ? min(max(interval, 1), 60) : 5,
            message: message)
    }
}

/// The waits between device-flow polls: RFC 8628 §3.5 and what the providers do (GitHub's
/// `slow_down` adds 5 s: https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#device-flow).
///
/// Every wait keeps a safety margin over the interval (20%, 40% after a `slow_down`, as gh's
/// cli/oauth does): a poll that reaches the server early by its clock (a VM's clock running
/// fast, a delayed previous answer) earns a `slow_down`. `slow_down` adds 5 seconds (§3.5), or
/// raises the interval to the server's `interval` when that is larger (GitHub sends one).
public struct DevicePollSchedule: Equatable, Sendable {
    /// The interval the server asks for, in seconds.
    public private(set) var interval: Double
    /// The fraction of the interval added to every wait.
    public private(set) var margin: Double = 0.2
    /// How many `slow_down` answers came.
    public private(set) var slowDowns = 0
    /// No interval beyond this is believed (a hostile `interval` must not stall a login for days).
    public static let maximumInterval: Double = 300

    public init(interval: Double) {
        self.interval = interval.isFinite ? min(max(interval, 1), Self.maximumInterval) : 5
    }

    /// The wait before the next poll, after `transientFailures` failed polls in a row (doubled
    /// for each, at most 16 times: §3.5's back-off on connection problems).
    public func wait(afterTransientFailures transientFailures: Int = 0) -> Double {
        interval * (1 + margin) * Double(1 << min(max(transientFailures, 0), 4))
    }

    /// A `slow_down` answer, with the interval it carried (nil: none).
    public mutating func slowDown(serverInterval: Double?) {
        var next = interval + 5
        if let serverInterval, serverInterval.isFinite, serverInterval > next { next = serverInterval }
        interval = min(next, Self.maximumInterval)
        margin = 0.4
        slowDowns += 1
    }
}
