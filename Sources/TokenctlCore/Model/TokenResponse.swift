import TokenctlEssentials

/// A successful token endpoint response (RFC 6749 §5.1), checked before anything is stored.
public struct TokenResponse: Equatable, Sendable {
    public var accessToken: String
    public var tokenType: String
    public var expiresIn: Double?
    public var refreshToken: String?
    public var idToken: String?
    /// Space-separated, whatever separators the server used (`ScopeWords.normalized`).
    public var scope: String?
    /// When the server says it issued the token, on its clock (GitLab's `created_at`, epoch
    /// seconds): the expiry is then `created_at + expires_in`, not the arrival plus `expires_in`.
    public var createdAt: Double? = nil
    /// How long the refresh token lives, in seconds from the answer (GitHub App user tokens'
    /// `refresh_token_expires_in`, about six months), when the server says.
    public var refreshTokenExpiresIn: Double? = nil

    /// Parse and validate a 200 body.
    ///
    /// - Throws: `TokenResponseError` when the body is not a JSON object, lacks a usable
    ///   `access_token`, or carries a token that would corrupt an HTTP header downstream.
    public static func parse(_ body: [UInt8]) throws(TokenResponseError) -> TokenResponse {
        switch try parseAnswer(body) {
        case .usable(let response): return response
        case .unusableAccessToken(let problem, _, _): throw problem
        }
    }

    /// What a 200 body holds, telling an unusable access token apart from an unusable answer:
    /// a rotating server has spent the refresh token it was sent by the time it answers, so a
    /// usable refresh token in an answer whose access token cannot be used must still be kept.
    ///
    /// - Throws: `TokenResponseError` when the body is not a JSON object, or its refresh token,
    ///   ID token or scope cannot be used (`TokenResponseError.field` names which).
    public static func parseAnswer(_ body: [UInt8]) throws(TokenResponseError) -> TokenAnswer {
        guard let object = JSONValue.parseObject(body) else { throw .notJSONObject }
        return try parseAnswer(object: object)
    }

    /// The same, from an answer's members (`EndpointAnswer.object`: JSON or form-encoded).
    public static func parseAnswer(object: [String: JSONValue]) throws(TokenResponseError) -> TokenAnswer {
        func optionalString(_ key: String) throws(TokenResponseError) -> String? {
            switch object[key] {
            case nil, .null?: return nil
            case .string(let value)?: return value.isEmpty ? nil : value
            default: throw .invalidField(key)
            }
        }
        // The refresh token first: it is what must survive an unusable access token.
        let refreshToken = try optionalString("refresh_token")
        if let refreshToken { try validateToken(refreshToken, field: "refresh_token") }
        let idToken = try optionalString("id_token")
        if let idToken { try validateToken(idToken, field: "id_token") }
        let scope = ScopeWords.normalized(try optionalString("scope"))
        // Only a plausible time (after 2001, within the stored bounds) is believed; anything
        // else is ignored, not refused: the answer may have rotated the refresh token.
        let createdAt = EndpointAnswer.seconds(object["created_at"]).flatMap { (1e9...1e11).contains($0) ? $0 : nil }
        // The same for the refresh token's lifetime: a number or a numeric string (early GitHub App answers).
        let refreshTokenExpiresIn = EndpointAnswer.seconds(object["refresh_token_expires_in"]).flatMap {
            $0.isFinite && $0 > 0 ? min($0, maximumLifetime) : nil
        }
        do {
            let (accessToken, tokenType, expiresIn) = try accessTokenFields(object)
            return .usable(
                TokenResponse(
                    accessToken: accessToken, tokenType: tokenType, expiresIn: expiresIn,
                    refreshToken: refreshToken, idToken: idToken, scope: scope, createdAt: createdAt,
                    refreshTokenExpiresIn: refreshToken == nil ? nil : refreshTokenExpiresIn))
        } catch {
            return .unusableAccessToken(error, refreshToken: refreshToken, idToken: idToken)
        }
    }

    /// `access_token`, `token_type` and `expires_in`: what makes the access token usable.
    private static func accessTokenFields(_ object: [String: JSONValue]) throws(TokenResponseError) -> (
        String, String, Double?
    ) {
        guard case .string(let accessToken)? = object["access_token"] else { throw .missingAccessToken }
        try validateToken(accessToken, field: "access_token")
        var tokenType = "Bearer"
        if let value = object["token_type"] {
            guard case .string(let type) = value else { throw .invalidField("token_type") }
            // Bearer tokens (RFC 6750) and DPoP-bound ones (RFC 9449 §5; whether one was asked
            // for is the caller's check, `DPoPBinding`); the type is case-insensitive (RFC 6749 §5.1).
            switch type.lowercased() {
            case "bearer": tokenType = "Bearer"
            case "dpop": tokenType = "DPoP"
            default: throw .unsupportedTokenType(type)
            }
        }
        var expiresIn: Double?
        switch object["expires_in"] {
        case nil, .null?: break
        case .number(let seconds)?: expiresIn = seconds
        case .string(let text)?: // some servers quote it
            guard let seconds = Double(text) else { throw .invalidField("expires_in") }
            expiresIn = seconds
        default: throw .invalidField("expires_in")
        }
        // Clamped, not refused: this response has already rotated the refresh token, and a
        // "never" of ten years or more (or a negative lifetime) must not cost the session.
        if let seconds = expiresIn {
            guard !seconds.isNaN else { throw .invalidField("expires_in") }
            expiresIn = seconds.clamped(to: 0...TokenResponse.maximumLifetime)
        }
        return (accessToken, tokenType, expiresIn)
    }

    /// The longest access-token lifetime tokenctl believes (ten years); longer ones are clamped.
    public static let maximumLifetime: Double = 10 * 365 * 86400

    /// A token must be visible ASCII: whitespace or control characters would corrupt the
    /// `Authorization` header of whatever script uses it.
    public static func validateToken(_ token: String, field: String) throws(TokenResponseError) {
        guard !token.isEmpty else { throw .emptyToken(field) }
        guard token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .invalidTokenCharacters(field) }
        guard token.utf8.count <= 64 * 1024 else { throw .invalidField(field) }
    }
}

/// A 200 token answer that is a JSON object with a usable refresh token (or none).
public enum TokenAnswer: Equatable, Sendable {
    /// Everything in it can be used.
    case usable(TokenResponse)
    /// Its access token cannot be used (missing, not a string, empty, with whitespace or
    /// control characters, too large, or of an unsupported type or lifetime); its refresh
    /// token, when it has one, can.
    case unusableAccessToken(TokenResponseError, refreshToken: String?, idToken: String?)
}

public enum TokenResponseError: Error, Equatable, CustomStringConvertible {
    case notJSONObject
    case missingAccessToken
    case emptyToken(String)
    case invalidTokenCharacters(String)
    case invalidField(String)
    case unsupportedTokenType(String)

    /// The member of the answer at fault (nil: the answer as a whole).
    public var field: String? {
        switch self {
        case .notJSONObject: nil
        case .missingAccessToken: "access_token"
        case .unsupportedTokenType: "token_type"
        case .emptyToken(let field), .invalidTokenCharacters(let field), .invalidField(let field): field
        }
    }

    public var description: String {
        switch self {
        case .notJSONObject: "the token endpoint's answer is not a JSON object"
        case .missingAccessToken: "the token endpoint's answer has no access_token"
        case .emptyToken(let field): "the token endpoint's answer has an empty \(field)"
        case .invalidTokenCharacters(let field):
            "the token endpoint's \(field) contains whitespace or control characters"
        case .invalidField(let field): "the token endpoint's answer has an invalid \(field)"
        case .unsupportedTokenType(let type):
            "the token endpoint issued a '\(TerminalText.short(type))' token; tokenctl supports Bearer and DPoP tokens"
        }
    }
}

extension TokenResponseError {
    /// The error with the server's text in it (an unsupported `token_type`) scrubbed.
    func redacting(_ redaction: SecretRedaction) -> TokenResponseError {
        if case .unsupportedTokenType(let type) = self { return .unsupportedTokenType(redaction.scrub(type)) }
        return self
    }
}
