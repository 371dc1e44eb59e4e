import TokenctlEssentials

/// How one token endpoint exchange ended: the failure classes of tokenctl, in one place.
///
/// The body decides (PROVIDERS.md): an answer's `error` member is read first, whatever the
/// status and whether the body is JSON or form-encoded (`EndpointAnswer`); GitHub sends its
/// errors with HTTP 200.
///
/// | response                                                  | class     |
/// |-----------------------------------------------------------|-----------|
/// | 2xx with a valid token set                                | success   |
/// | a response over the size cap (1 MiB)                      | terminal  |
/// | timeout, DNS/connect/TLS/reset errors                     | transient |
/// | 429 (honouring Retry-After)                               | transient |
/// | 408, 500, 502, 503, 504 (any body)                        | transient |
/// | any other status with `error` (2xx too): `invalid_grant`, GitHub's `bad_refresh_token`, … | terminal  |
/// | `error` that says the client or its registration is refused, not the grant (`ProviderErrorClasses`: GitHub's `incorrect_client_credentials`, Entra's AADSTS7000218, …) | client refused (78, session kept) |
/// | `error` that says the server cannot answer now (`temporarily_unavailable`, Entra's AADSTS90024, …) | transient |
/// | 2xx without `error` and without a usable access token, or not an object | unusable tokens (76, session kept) |
/// | 2xx whose refresh token is unusable (`UnusableTokens`)    | unusable tokens |
/// | anything else (other 4xx, empty 400, HTML 4xx, 2xx with an unusable ID token or scope) | terminal  |
///
/// Only a terminal outcome may end a session (RFC 6749 §5.2 errors are the server saying
/// the grant is dead); everything transient keeps it, and so do unusable tokens: the server
/// accepted the grant, and a rotating one has already spent the refresh token it was sent.
public enum RefreshOutcome: Equatable, Sendable {
    case success(TokenResponse, serverDate: Double?)
    /// A 200 JSON answer tokenctl cannot use as a whole, though the server did not end the grant.
    case unusableTokens(UnusableTokens)
    case terminal(TerminalReason)
    /// An OAuth error that refuses the client (its id or secret) or its registration, not the
    /// grant: the session is kept, and the configuration must change (`ProviderErrorClasses`,
    /// exit 78).
    case clientRefused(TerminalReason)
    case transient(TransientReason, retryAfter: Double?)

    public static func classify(_ result: Result<HTTPResponse, HTTPTransportError>, now: Double) -> RefreshOutcome {
        let response: HTTPResponse
        switch result {
        case .failure(let error) where error.kind == .responseTooLarge:
            // A token endpoint answering megabytes is not a network hiccup: an unusable answer.
            return .terminal(.unusableResponse(error.message))
        case .failure(let error):
            return .transient(.transport(error.kind, error.message), retryAfter: nil)
        case .success(let value):
            response = value
        }
        if response.isTransientFailure {
            return .transient(
                response.status == 429 ? .rateLimited : .serverError(response.status),
                retryAfter: retryAfter(response, now: now))
        }
        let object = EndpointAnswer.object(response)
        if let (code, description) = EndpointAnswer.error(in: object) {
            let (row, providerCode) = ProviderErrorClasses.match(
                code: code, description: description, errorCodes: object?["error_codes"])
            let reason = TerminalReason.oauthError(
                status: response.status, code: code, description: description.map(TerminalText.short),
                providerCode: providerCode)
            switch row?.errorClass {
            case .configuration?:
                return .clientRefused(reason)
            case .transient(let minimumBackoff)?:
                let asked = retryAfter(response, now: now)
                let wait = minimumBackoff.map { max($0, asked ?? 0) } ?? asked
                return .transient(.oauthError(reason), retryAfter: wait)
            default:
                return .terminal(reason)
            }
        }
        guard (200..<300).contains(response.status) else {
            return .terminal(.unexpectedStatus(response.status, contentType: response.header("content-type")))
        }
        // A 2xx without an error and without an access token: the server did not do its part,
        // but it did not end the grant either (a rotating one may have spent the refresh token).
        guard let object else { return .unusableTokens(UnusableTokens(problem: .notJSONObject, refreshToken: .absent)) }
        do {
            switch try TokenResponse.parseAnswer(object: object) {
            case .usable(let tokens):
                return .success(tokens, serverDate: response.serverDate)
            case .unusableAccessToken(let problem, let refreshToken, let idToken):
                return .unusableTokens(
                    UnusableTokens(
                        problem: problem, refreshToken: refreshToken.map { .rotated($0) } ?? .absent, idToken: idToken))
            }
        } catch {
            if error.field == "refresh_token" {
                return .unusableTokens(UnusableTokens(problem: error, refreshToken: .unusable, idToken: nil))
            }
            return .terminal(.unusableResponse(error.description))
        }
    }

    /// `Retry-After` as delay-seconds or an HTTP-date (RFC 9110 §10.2.3), in seconds from `now`.
    public static func retryAfter(_ response: HTTPResponse, now: Double) -> Double? {
        guard let value = response.header("retry-after") else { return nil }
        if let seconds = Double(value), seconds >= 0 { return seconds }
        if let date = HTTPDate.parse(value) {
            // The date is on the server's clock; correct it by the server's own Date header.
            let serverNow = response.serverDate ?? now
            return max(0, date - serverNow)
        }
        return nil
    }
}

/// A 200 JSON answer to a token request with an access token or a refresh token tokenctl
/// cannot use (a login cannot go on with it; a refresh keeps what it can, see `TokenBroker`).
public struct UnusableTokens: Equatable, Sendable, CustomStringConvertible {
    /// The answer's refresh token.
    public enum RefreshToken: Equatable, Sendable {
        /// A usable one: the server rotated, and the one sent is spent on a rotating server.
        case rotated(String)
        /// None: the one sent stays valid (RFC 6749 §6), unless the server broke that rule.
        case absent
        /// One that cannot be used (not a string, whitespace or control characters, too large).
        case unusable
    }

    /// What cannot be used.
    public var problem: TokenResponseError
    public var refreshToken: RefreshToken
    /// The answer's ID token, when the access token is what could not be used.
    public var idToken: String?

    public init(problem: TokenResponseError, refreshToken: RefreshToken, idToken: String? = nil) {
        self.problem = problem
        self.refreshToken = refreshToken
        self.idToken = idToken
    }

    /// Never a token: only what is wrong with the answer.
    public var description: String { problem.description }

    /// A short class name for logs and `refresh --all` lines.
    public var className: String { refreshToken == .unusable ? "unusable-refresh-token" : "unusable-access-token" }
}

public enum TerminalReason: Equatable, Sendable, CustomStringConvertible {
    /// An RFC 6749 §5.2 error, e.g. `invalid_grant`, with the provider's own code for it
    /// (Entra's `AADSTS70043`), if the answer carried one.
    case oauthError(status: Int, code: String, description: String?, providerCode: String? = nil)
    /// A status tokenctl cannot interpret (other 4xx, an empty 400, a redirect, HTML…).
    case unexpectedStatus(Int, contentType: String?)
    /// A 200 without a usable token set.
    case unusableResponse(String)

    public var description: String {
        switch self {
        case .oauthError(let status, let code, let description, let providerCode):
            "the server answered \(status) \(TerminalText.short(code))"
                + (providerCode.flatMap { description?.hasPrefix($0) == true ? nil : " (\($0))" } ?? "")
                + (description.map { ": \($0)" } ?? "")
        case .unexpectedStatus(let status, let contentType):
            "the server answered HTTP \(status)" + (contentType.map { " (\(TerminalText.short($0)))" } ?? "")
                + " without an OAuth error"
        case .unusableResponse(let message):
            message
        }
    }

    /// A short class name for logs and `refresh --all` lines.
    public var className: String {
        switch self {
        case .oauthError(_, let code, _, let providerCode):
            TerminalText.short(code) + (providerCode.map { " \($0)" } ?? "")
        case .unexpectedStatus(let status, _): "http-\(status)"
        case .unusableResponse: "unusable-response"
        }
    }
}

public enum TransientReason: Equatable, Sendable, CustomStringConvertible {
    case transport(HTTPTransportError.Kind, String)
    case rateLimited
    case serverError(Int)
    case lockTimeout
    case deadlineExceeded(String)
    /// An OAuth error saying the server cannot answer now (`ProviderErrorClasses`: RFC 6749's
    /// `temporarily_unavailable`, Entra's throttling codes).
    case oauthError(TerminalReason)

    public var description: String {
        switch self {
        case .oauthError(let reason): reason.description
        case .transport(_, let message): message
        case .rateLimited: "the server is rate-limiting requests (HTTP 429)"
        case .serverError(let status): "the server failed with HTTP \(status)"
        case .lockTimeout: "another tokenctl process has been refreshing this profile for too long"
        case .deadlineExceeded(let last): "gave up before the deadline; last error: \(last)"
        }
    }

    /// Whether the request may have reached the server and been acted on (a refresh token
    /// rotated) although no answer came: a timeout or a reset after connecting. Not for
    /// failures before anything was sent (DNS, connect, TLS) or for answers (429, 5xx).
    public var requestMayHaveReachedServer: Bool {
        switch self {
        case .transport(let kind, _): kind == .timeout || kind == .connectionReset || kind == .other
        case .deadlineExceeded(let last): last != "no time left"
        case .rateLimited, .serverError, .lockTimeout, .oauthError: false
        }
    }

    public var className: String {
        switch self {
        case .transport(let kind, _): kind.rawValue
        case .rateLimited: "rate-limited"
        case .serverError(let status): "http-\(status)"
        case .lockTimeout: "lock-timeout"
        case .deadlineExceeded: "deadline"
        case .oauthError(let reason): reason.className
        }
    }
}
