/// The forward protocol, version 1: what a remote `tokenctl` (over `ssh -R`, in a container)
/// asks the machine that holds the session, and what that machine answers. One request and one
/// answer per connection; both are text, bounded, and end with an empty line, so neither side
/// needs the other to close first.
///
///     tokenctl-forward-v1 request          tokenctl-forward-v1 token
///     profile=work                         profile=work
///     scope=repo:read                      token_type=Bearer
///     min_ttl=60                           access_token=…
///     command=token                        obtained_at=1764771234.5
///     (empty line)                         expires_at=1764774834
///                                          served_by=laptop
///                                          (empty line)
///
/// or, refused or failed, `tokenctl-forward-v1 error` with `status=` (the exit status the client
/// returns: 77, 75, 69, …), `message=` and optionally `hint=`. Values are printable ASCII
/// (0x20–0x7E), at most `maximumValueLength` bytes; keys are lower-case and appear once. A
/// request with a key this version does not know is refused (the serving side decides what is
/// handed out); an answer's unknown keys are ignored (a newer serving side may say more).
/// A request of another version gets a v1 `error` answer with status 69 naming the versions.
public enum ForwardProtocol {
    public static let version = 1
    public static let requestLine = "tokenctl-forward-v1 request"
    public static let tokenLine = "tokenctl-forward-v1 token"
    public static let errorLine = "tokenctl-forward-v1 error"
    /// A request is small: a profile, a target, a DPoP request's URL.
    public static let maximumRequestSize = 16 * 1024
    /// An answer holds one access token and maybe a DPoP proof (a JWT each).
    public static let maximumAnswerSize = 64 * 1024
    public static let maximumValueLength = 12 * 1024
    /// The variable naming the socket on the client side (`docker run -e …`, an ssh session).
    public static let socketVariable: StaticString = "TOKENCTL_FORWARD_SOCKET"
    /// The file name of the well-known client-side socket in the runtime directory
    /// (`$XDG_RUNTIME_DIR/tokenctl-forward.sock`, else `/run/user/UID/tokenctl-forward.sock`):
    /// the remote end of `ssh -R`, used when TOKENCTL_FORWARD_SOCKET is unset.
    public static let wellKnownName = "tokenctl-forward.sock"
    /// The file name of the serving side's socket in the lock directory
    /// (`/run/user/UID/tokenctl/forward.sock`).
    public static let servingName = "forward.sock"

    /// The `key=value` lines of a message after its first line, in order, and that first line;
    /// nil unless the whole message is well formed (one trailing empty line, values printable).
    public static func fields(_ bytes: [UInt8], limit: Int) -> (first: String, fields: [(String, String)])? {
        guard bytes.count <= limit, bytes.count >= 2, bytes[bytes.count - 1] == 0x0A, bytes[bytes.count - 2] == 0x0A
        else { return nil }
        var lines: [ArraySlice<UInt8>] = bytes.dropLast(2).split(separator: 0x0A, omittingEmptySubsequences: false)
        guard !lines.isEmpty else { return nil }
        let first = lines.removeFirst()
        guard first.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        var fields: [(String, String)] = []
        for line in lines {
            guard let equals = line.firstIndex(of: UInt8(ascii: "=")) else { return nil }
            let key = line[line.startIndex..<equals]
            let value = line[(equals + 1)...]
            guard !key.isEmpty, key.count <= 32,
                key.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || $0 == UInt8(ascii: "_") }),
                value.count <= maximumValueLength, value.allSatisfy({ $0 >= 0x20 && $0 < 0x7F })
            else { return nil }
            let name = String(decoding: key, as: UTF8.self)
            guard !fields.contains(where: { $0.0 == name }) else { return nil }
            fields.append((name, String(decoding: value, as: UTF8.self)))
        }
        return (String(decoding: first, as: UTF8.self), fields)
    }

    /// A message: the first line, the fields whose value is set, the empty line.
    static func message(_ first: String, _ fields: [(String, String?)]) -> [UInt8] {
        var text = first + "\n"
        for (key, value) in fields {
            guard let value else { continue }
            text += key + "=" + value + "\n"
        }
        text += "\n"
        return Array(text.utf8)
    }

    /// A `token_fingerprint` value: the 32 bytes of a SHA-256 digest as lower-case hex.
    public static func fingerprint(of digest: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        for byte in digest { bytes += [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]] }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether `value` can travel as a field value.
    public static func isValue(_ value: String) -> Bool {
        value.utf8.count <= maximumValueLength && value.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }

    /// `value` made safe to travel: control and non-ASCII characters become `?`, then cut.
    public static func sanitized(_ value: String, limit: Int = 2048) -> String {
        var bytes = value.utf8.map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }
        if bytes.count > limit { bytes = Array(bytes.prefix(limit)) }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Why a message is not a valid one.
public struct ForwardProtocolError: Error, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// What the client asks for.
public struct ForwardRequest: Equatable, Sendable {
    public var profile: String
    public var scope: String?
    public var audience: String?
    public var resource: String?
    /// Whole seconds the token must stay valid (the client's `--min-ttl`); nil: the default.
    public var minimumTimeToLive: Int?
    /// `token --force`: the caller's server rejected the token; refresh even if it looks valid.
    public var force = false
    /// A DPoP proof for this request, signed on the serving side (`token --format dpop`).
    public var proofMethod: String?
    public var proofURL: String?
    public var proofNonce: String?
    /// The client command (token, exec, git-credential, status): for the serving side's log only.
    public var command: String?
    /// With `force`: `token_fingerprint`, the lower-case hex SHA-256 of the access token the
    /// client's server rejected (`ForwardProtocol.fingerprint(of:)`), never the token itself.
    /// The serving side refreshes only while that is still its current token.
    public var tokenFingerprint: String?

    public init(profile: String) { self.profile = profile }

    public static let keys = [
        "profile", "scope", "audience", "resource", "min_ttl", "force", "dpop_method", "dpop_url", "dpop_nonce",
        "command", "token_fingerprint",
    ]

    public func encoded() -> [UInt8] {
        ForwardProtocol.message(
            ForwardProtocol.requestLine,
            [
                ("profile", profile), ("scope", scope), ("audience", audience), ("resource", resource),
                ("min_ttl", minimumTimeToLive.map(String.init)), ("force", force ? "1" : nil),
                ("dpop_method", proofMethod), ("dpop_url", proofURL), ("dpop_nonce", proofNonce),
                ("command", command), ("token_fingerprint", tokenFingerprint),
            ])
    }

    /// A request as the serving side reads it.
    ///
    /// - Throws: what is wrong, in words fit for the client's terminal and the event log.
    public static func decode(_ bytes: [UInt8]) throws(ForwardProtocolError) -> ForwardRequest {
        guard let (first, fields) = ForwardProtocol.fields(bytes, limit: ForwardProtocol.maximumRequestSize) else {
            throw ForwardProtocolError("the request is not a tokenctl forward request")
        }
        guard first == ForwardProtocol.requestLine else {
            if first.hasPrefix("tokenctl-forward-v") && first.hasSuffix(" request") {
                throw ForwardProtocolError(
                    "the request is of forward protocol '\(ForwardProtocol.sanitized(String(first.prefix(40))))'; this tokenctl speaks v1 only"
                )
            }
            throw ForwardProtocolError("the request is not a tokenctl forward request")
        }
        func value(_ key: String) -> String? { fields.first { $0.0 == key }?.1 }
        for (key, _) in fields where !keys.contains(key) {
            throw ForwardProtocolError("the request has a field this tokenctl does not know: '\(key)'")
        }
        guard let profile = value("profile"), !profile.isEmpty else {
            throw ForwardProtocolError("the request names no profile")
        }
        var request = ForwardRequest(profile: profile)
        request.scope = value("scope")
        request.audience = value("audience")
        request.resource = value("resource")
        if let text = value("min_ttl") {
            guard text.utf8.count <= 8, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let seconds = Int(text),
                seconds <= 31_536_000
            else { throw ForwardProtocolError("min_ttl must be whole seconds, at most 31536000") }
            request.minimumTimeToLive = seconds
        }
        if let text = value("force") {
            guard text == "1" else { throw ForwardProtocolError("force must be 1") }
            request.force = true
        }
        request.proofMethod = value("dpop_method")
        request.proofURL = value("dpop_url")
        request.proofNonce = value("dpop_nonce")
        guard (request.proofMethod == nil) == (request.proofURL == nil),
            request.proofNonce == nil || request.proofURL != nil
        else { throw ForwardProtocolError("a DPoP proof needs both dpop_method and dpop_url") }
        request.command = value("command")
        if let text = value("token_fingerprint") {
            guard text.utf8.count == 64,
                text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
            else { throw ForwardProtocolError("token_fingerprint must be 64 lower-case hex digits") }
            request.tokenFingerprint = text
        }
        return request
    }
}

/// What the serving side answers.
public enum ForwardAnswer: Equatable, Sendable {
    case token(ForwardedToken)
    case failure(ForwardFailure)

    public func encoded() -> [UInt8] {
        switch self {
        case .token(let token):
            return ForwardProtocol.message(
                ForwardProtocol.tokenLine,
                [
                    ("profile", token.profile), ("token_type", token.tokenType), ("access_token", token.accessToken),
                    ("obtained_at", ForwardedToken.format(token.obtainedAt)),
                    ("expires_at", token.statesNoExpiry ? "never" : token.expiresAt.map(ForwardedToken.format)),
                    ("issued_lifetime", token.issuedLifetime.map(ForwardedToken.format)),
                    ("scope", token.scope), ("dpop_proof", token.dpopProof), ("served_by", token.servedBy),
                    ("git_username", token.gitUsername), ("serving_session", token.servingSession),
                ])
        case .failure(let failure):
            return ForwardProtocol.message(
                ForwardProtocol.errorLine,
                [
                    ("status", String(failure.status)), ("message", ForwardProtocol.sanitized(failure.message)),
                    ("hint", failure.hint.map { ForwardProtocol.sanitized($0) }),
                    ("served_by", failure.servedBy.map { ForwardProtocol.sanitized($0, limit: 255) }),
                ])
        }
    }

    /// An answer as the client reads it.
    public static func decode(_ bytes: [UInt8]) throws(ForwardProtocolError) -> ForwardAnswer {
        guard let (first, fields) = ForwardProtocol.fields(bytes, limit: ForwardProtocol.maximumAnswerSize) else {
            throw ForwardProtocolError("the answer is not a tokenctl forward answer")
        }
        func value(_ key: String) -> String? { fields.first { $0.0 == key }?.1 }
        switch first {
        case ForwardProtocol.tokenLine:
            guard let profile = value("profile"), let tokenType = value("token_type"),
                let accessToken = value("access_token"), !accessToken.isEmpty,
                accessToken.utf8.allSatisfy({ $0 > 0x20 }), !tokenType.isEmpty,
                tokenType.utf8.allSatisfy({ $0 > 0x20 }),
                let obtainedText = value("obtained_at"), let obtainedAt = ForwardedToken.time(obtainedText)
            else { throw ForwardProtocolError("the answer's token is incomplete or malformed") }
            var token = ForwardedToken(
                profile: profile, accessToken: accessToken, tokenType: tokenType, obtainedAt: obtainedAt)
            if let text = value("expires_at") {
                if text == "never" {
                    token.statesNoExpiry = true
                } else {
                    guard let expiry = ForwardedToken.time(text) else {
                        throw ForwardProtocolError("the answer's expires_at is not a time")
                    }
                    token.expiresAt = expiry
                }
            }
            if let text = value("issued_lifetime") {
                guard let lifetime = ForwardedToken.time(text) else {
                    throw ForwardProtocolError("the answer's issued_lifetime is not a duration")
                }
                token.issuedLifetime = lifetime
            }
            token.scope = value("scope")
            token.dpopProof = value("dpop_proof")
            token.servedBy = value("served_by")
            token.gitUsername = value("git_username")
            token.servingSession = value("serving_session").flatMap {
                $0.utf8.count == 16 && $0.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
                    ? $0 : nil
            }
            return .token(token)
        case ForwardProtocol.errorLine:
            guard let statusText = value("status"), statusText.utf8.count <= 3,
                statusText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let status = Int32(statusText),
                status >= 1, status <= 125, let message = value("message")
            else { throw ForwardProtocolError("the answer's error is incomplete or malformed") }
            return .failure(
                ForwardFailure(status: status, message: message, hint: value("hint"), servedBy: value("served_by")))
        default:
            if first.hasPrefix("tokenctl-forward-v") {
                throw ForwardProtocolError(
                    "the serving side speaks another forward protocol ('\(ForwardProtocol.sanitized(String(first.prefix(40))))'); this tokenctl speaks v1"
                )
            }
            throw ForwardProtocolError("the answer is not a tokenctl forward answer")
        }
    }
}

/// An access token handed out over the forward: never a refresh or ID token.
public struct ForwardedToken: Equatable, Sendable {
    /// The profile's name on the serving side.
    public var profile: String
    public var accessToken: String
    public var tokenType: String
    public var obtainedAt: Double
    public var expiresAt: Double?
    public var issuedLifetime: Double?
    /// No stated expiry (`HotCacheEntry.statesNoExpiry`).
    public var statesNoExpiry = false
    /// The scope the token was asked for, if a narrower one than the session's.
    public var scope: String?
    /// The DPoP proof for the request the client named.
    public var dpopProof: String?
    /// The serving host's name, for `status` ("forwarded from …").
    public var servedBy: String?
    /// The profile's `git_username`, for `git-credential` on the client.
    public var gitUsername: String?
    /// Which session on which host handed the token out (`sessionIdentity`), for `status`;
    /// optional (an older serving side sends none).
    public var servingSession: String?

    public init(profile: String, accessToken: String, tokenType: String, obtainedAt: Double) {
        self.profile = profile
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.obtainedAt = obtainedAt
    }

    /// A stable, non-secret name of a serving session: 16 hex digits of FNV-1a 64 over the
    /// serving host's name, the session's issuer and client ID and the profile's name. Not a
    /// security boundary (the client checks who serves by SO_PEERCRED); it tells two serving
    /// sides apart in `status`.
    public static func sessionIdentity(host: String, issuer: String, clientID: String, profile: String) -> String {
        var hash = FNV1a64()
        for part in [host, issuer, clientID, profile] {
            hash.update(part)
            hash.update([0])
        }
        return hash.hexDigest
    }

    /// Seconds since the epoch with at most 3 decimals, as the hot cache writes them.
    static func format(_ value: Double) -> String {
        let milliseconds = Int64(saturating: (max(0, min(value, 1e11)) * 1000).rounded(.down))
        let fraction = milliseconds % 1000
        guard fraction != 0 else { return String(milliseconds / 1000) }
        let digits = String(fraction)
        return String(milliseconds / 1000) + "." + String(repeating: "0", count: 3 - digits.count) + digits
    }

    /// A time as `format` writes it: 1–11 digits, optionally `.` and 1–3 digits.
    static func time(_ text: String) -> Double? {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, (1...11).contains(whole.count),
            whole.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
        else { return nil }
        var value = Double(Int64(whole)!)
        if parts.count == 2 {
            let fraction = parts[1]
            guard (1...3).contains(fraction.count), fraction.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                return nil
            }
            value += Double(Int64(fraction)!) / (fraction.count == 1 ? 10 : fraction.count == 2 ? 100 : 1000)
        }
        return value
    }
}

/// A refusal or failure on the serving side, with the exit status the client returns.
public struct ForwardFailure: Equatable, Sendable {
    public var status: Int32
    public var message: String
    public var hint: String?
    public var servedBy: String?

    public init(status: Int32, message: String, hint: String? = nil, servedBy: String? = nil) {
        self.status = status
        self.message = message
        self.hint = hint
        self.servedBy = servedBy
    }
}
