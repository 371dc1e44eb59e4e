import TokenctlEssentials

/// Text that came from a server (an `error_description`, an `error_uri`, an error code, a
/// content type, a redirect's host) with every secret of the exchange taken out before it is
/// shown, logged, put in an event or sent over the forward socket: some servers echo the
/// request they refuse, refresh token and all.
///
/// Each secret, its form encoding (as it travelled, RFC 6749 Appendix B) and its percent
/// encoding with lower-case hex become `[redacted]`, and so does every run of 16 bytes or more
/// of any of them, so that a secret cut short or quoted in part is caught too (a text cut to
/// 200 characters may end in the middle of one). Secrets shorter than 8 bytes are left alone:
/// redacting them would garble ordinary words.
public struct SecretRedaction: Sendable {
    public static let marker = "[redacted]"
    /// The shortest run of a secret that is redacted on its own.
    static let window = 16
    static let shortestSecret = 8
    /// Text is read this far, at most: what is shown of it is far shorter.
    static let readLimit = 8192

    /// Every `window`-byte run of every secret (and of its encodings).
    private var runs: Set<[UInt8]> = []
    /// Secrets (and encodings) shorter than `window`, redacted only whole.
    private var shortSecrets: [[UInt8]] = []

    public static let none = SecretRedaction()

    public init() {}

    public init(_ secrets: [String?]) { add(secrets) }

    /// The secrets of an outgoing request: the values of the form fields that carry a grant or
    /// a client credential (RFC 6749 §2.3.1, §4.1.3, §6; RFC 7636 §4.5; RFC 8628 §3.4; RFC 7009
    /// §2.1; RFC 7523 §2.1, §2.2; RFC 8693 §2.1), and the credentials of its `Authorization`
    /// (the Basic pair decoded: RFC 7617 §2) and `DPoP` headers.
    public init(request: HTTPRequest) {
        var secrets: [String?] = []
        if let body = request.body {
            let text = String(decoding: body, as: UTF8.self)
            for (name, value) in FormEncoding.decode(text) where Self.secretFields.contains(name) {
                secrets.append(value)
            }
        }
        for header in request.headers {
            switch header.name.lowercased() {
            case "authorization":
                let parts = header.value.split(separator: " ", maxSplits: 1)
                guard parts.count == 2 else {
                    secrets.append(header.value)
                    continue
                }
                let credential = String(parts[1])
                secrets.append(credential)
                if parts[0].lowercased() == "basic", let decoded = Data(base64Encoded: credential) {
                    let pair = String(decoding: decoded, as: UTF8.self)
                    if let colon = pair.firstIndex(of: ":") {
                        // §2.3.1 of RFC 6749: the secret was form-encoded before Basic encoding.
                        let secret = String(pair[pair.index(after: colon)...])
                        secrets.append(secret)
                        secrets.append(FormEncoding.unescape(secret))
                    }
                }
            case "dpop":
                secrets.append(header.value)
            default:
                continue
            }
        }
        add(secrets)
    }

    /// The form fields whose values are secrets.
    static let secretFields: Set<String> = [
        "refresh_token", "client_secret", "code", "code_verifier", "device_code", "client_assertion", "assertion",
        "subject_token", "actor_token", "token", "password",
    ]

    /// This redaction and `secrets` too.
    public func adding(_ secrets: [String?]) -> SecretRedaction {
        var copy = self
        copy.add(secrets)
        return copy
    }

    public var isEmpty: Bool { runs.isEmpty && shortSecrets.isEmpty }

    private mutating func add(_ secrets: [String?]) {
        for secret in secrets {
            guard let secret, secret.utf8.count >= Self.shortestSecret else { continue }
            for form in Set([secret, FormEncoding.escape(secret), Self.percentEncodedLowercase(secret)]) {
                let bytes = Array(form.utf8)
                if bytes.count < Self.window {
                    if !shortSecrets.contains(bytes) { shortSecrets.append(bytes) }
                    continue
                }
                for start in 0...(bytes.count - Self.window) {
                    runs.insert(Array(bytes[start..<(start + Self.window)]))
                }
            }
        }
    }

    /// `text` with every secret, and every run of 16 bytes or more of one, as `[redacted]`.
    public func scrub(_ text: String) -> String {
        guard !isEmpty else { return text }
        let bytes = Array(text.utf8.prefix(Self.readLimit))
        var hidden = [Bool](repeating: false, count: bytes.count)
        var any = false
        if bytes.count >= Self.window {
            for start in 0...(bytes.count - Self.window)
            where runs.contains(Array(bytes[start..<(start + Self.window)])) {
                for index in start..<(start + Self.window) { hidden[index] = true }
                any = true
            }
        }
        for secret in shortSecrets where bytes.count >= secret.count {
            for start in 0...(bytes.count - secret.count)
            where bytes[start..<(start + secret.count)].elementsEqual(secret) {
                for index in start..<(start + secret.count) { hidden[index] = true }
                any = true
            }
        }
        guard any else { return text.utf8.count > Self.readLimit ? String(decoding: bytes, as: UTF8.self) : text }
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if hidden[index] {
                result += Array(Self.marker.utf8)
                while index < bytes.count && hidden[index] { index += 1 }
            } else {
                result.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// Optional text scrubbed.
    public func scrub(_ text: String?) -> String? { text.map { scrub($0) } }

    /// Percent encoding with lower-case hex digits (RFC 3986 §2.1 allows either case).
    static func percentEncodedLowercase(_ text: String) -> String {
        FormEncoding.escape(text).replacing("+", with: "%20").lowercasedHexEscapes()
    }
}

extension String {
    /// `%2F` as `%2f`: the hex digits of every percent escape in lower case.
    fileprivate func lowercasedHexEscapes() -> String {
        var result = ""
        var escaping = 0
        for character in self {
            if character == "%" {
                escaping = 2
                result.append(character)
            } else if escaping > 0 {
                escaping -= 1
                result += character.lowercased()
            } else {
                result.append(character)
            }
        }
        return result
    }
}
