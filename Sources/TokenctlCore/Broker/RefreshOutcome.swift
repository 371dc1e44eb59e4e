import TokenctlEssentials

/// How one token endpoint exchange ended: the failure classes of tokenctl, in one place.
///
/// The body decides: an answer's `error` member is read first, whatever the status and whether
/// the body is JSON or form-encoded (`EndpointAnswer`); GitHub sends its errors with HTTP 200
/// (https://docs.github.com/en/apps/oauth-apps/maintaining-oauth-apps/troubleshooting-oauth-app-access-token-request-errors).
///
/// | response                                                  | class     |
/// |-----------------------------------------------------------|-----------|
/// | 2xx with a valid token set                                | success   |
/// | a response over the size cap (1 MiB)                      | grant ended |
/// | timeout, DNS/connect/TLS/reset errors                     | transient |
/// | 429 (honouring Retry-After)                               | transient |
/// | 408, 500, 502, 503, 504 (any body)                        | transient |
/// | any other status with `error` (2xx too): `invalid_grant`, GitHub's `bad_refresh_token`, … | grant ended |
/// | `error` that says the client or its registration is refused, not the grant (`ProviderErrorClasses`: any `invalid_client`, `unauthorized_client` with 401 or a client-credentials text, GitHub's `incorrect_client_credentials`, Entra's AADSTS7000215, …) | client refused (78, session kept) |
/// | `error` that says the server cannot answer now (`temporarily_unavailable`, Entra's AADSTS90024, …) | transient |
/// | 2xx without `error` and without a usable access token, or not an object | unusable tokens (76, session kept) |
/// | 2xx whose refresh token is unusable (`UnusableTokens`)    | unusable tokens |
/// | a redirect (3xx, any body) to another host: a captive portal or a network's sign-in page | not the server's verdict, may pass (75, session kept) |
/// | 511 Network Authentication Required (RFC 6585 §6), any body | not the server's verdict, may pass (75, session kept) |
/// | a redirect (3xx) on the same host, or without a Location  | not the server's verdict (76, session kept) |
/// | 407 Proxy Authentication Required (RFC 9110 §15.5.8), any body | not the server's verdict (76, session kept) |
/// | 501, 505 and any other 5xx not listed above, any body     | not the server's verdict (76, session kept) |
/// | any other 4xx without `error` whose body is not empty and neither JSON nor form-encoded (an HTML or text page: a proxy, a web firewall, a gateway) | not the server's verdict (76, session kept) |
/// | anything else: a 4xx with an empty body (strict servers such as glewlwyd answer a dead refresh token with an empty 400) or with JSON or a form without `error`; a 2xx with an unusable ID token or scope | grant ended |
///
/// Only a terminal outcome may end a session (RFC 6749 §5.2 errors are the server saying
/// the grant is dead); everything transient keeps it, and so do unusable tokens: the server
/// accepted the grant, and a rotating one has already spent the refresh token it was sent.
/// An answer that is not the server's verdict keeps it too: RFC 6749 §5.2 has the token
/// endpoint itself answer an error as JSON with `error`, so an HTML page, a redirect or a
/// proxy's status is something else in the path speaking, as a 200 tokenctl cannot read is.
public enum RefreshOutcome: Equatable, Sendable {
    case success(TokenResponse, serverDate: Double?)
    /// A 200 JSON answer tokenctl cannot use as a whole, though the server did not end the grant.
    case unusableTokens(UnusableTokens)
    case grantEnded(GrantEndReason)
    /// An OAuth error that refuses the client (its id or secret) or its registration, not the
    /// grant: the session is kept, and the configuration must change (`ProviderErrorClasses`,
    /// exit 78).
    case clientRefused(GrantEndReason)
    case transient(TransientReason, retryAfter: Double?)
    /// An answer that is not the token endpoint's verdict on the grant (a proxy's page, a
    /// redirect to a captive portal): the session is kept, exit 75 when it may pass, else 76.
    case notTheServersVerdict(ForeignAnswer)

    /// - Parameters:
    ///   - endpoint: the URL the request went to, to tell a redirect to another host from one on
    ///     the same host (nil: every absolute redirect counts as another host).
    ///   - redaction: the secrets the request carried and the session holds: every text of the
    ///     answer kept in the outcome (an `error_description`, a code, a content type, a host)
    ///     is scrubbed of them here, where such texts enter, before anything shows or logs them.
    public static func classify(
        _ result: Result<HTTPResponse, HTTPTransportError>, now: Double, endpoint: String? = nil,
        redaction: SecretRedaction = .none
    ) -> RefreshOutcome {
        let response: HTTPResponse
        switch result {
        case .failure(let error) where error.kind == .responseTooLarge:
            // A token endpoint answering megabytes is not a network hiccup: an unusable answer.
            return .grantEnded(.unusableResponse(error.message))
        case .failure(let error):
            return .transient(.transport(error.kind, error.message, advice: error.advice), retryAfter: nil)
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
            return oauthError(code, description, in: response, object: object, now: now, redaction: redaction)
        }
        if let foreign = ForeignAnswer(response, object: object, endpoint: endpoint, redaction: redaction) {
            return .notTheServersVerdict(foreign)
        }
        guard (200..<300).contains(response.status) else {
            return .grantEnded(
                .unexpectedStatus(response.status, contentType: redaction.scrub(response.header("content-type"))))
        }
        // A 2xx without an error and without an access token: the server did not do its part,
        // but it did not end the grant either (a rotating one may have spent the refresh token).
        guard let object else { return .unusableTokens(UnusableTokens(problem: .notJSONObject, refreshToken: .absent)) }
        return tokens(object, in: response, redaction: redaction)
    }

    /// An answer's OAuth error (RFC 6749 §5.2), by its row in `ProviderErrorClasses`: a refused
    /// client, a server that cannot answer now, or the end of the grant.
    private static func oauthError(
        _ code: String, _ description: String?, in response: HTTPResponse, object: [String: JSONValue]?, now: Double,
        redaction: SecretRedaction
    ) -> RefreshOutcome {
        let (row, providerCode) = ProviderErrorClasses.match(
            code: code, description: description, errorCodes: object?["error_codes"], status: response.status)
        let reason = GrantEndReason.oauthError(
            status: response.status, code: redaction.scrub(code),
            description: description.map { TerminalText.short(redaction.scrub($0)) }, providerCode: providerCode)
        switch row?.errorClass {
        case .configuration?:
            return .clientRefused(reason)
        case .transient(let minimumBackoff)?:
            let asked = retryAfter(response, now: now)
            let wait = minimumBackoff.map { max($0, asked ?? 0) } ?? asked
            return .transient(.oauthError(reason), retryAfter: wait)
        default:
            return .grantEnded(reason)
        }
    }

    /// A 2xx answer's tokens (RFC 6749 §5.1): usable, or unusable without the grant ending.
    private static func tokens(_ object: [String: JSONValue], in response: HTTPResponse, redaction: SecretRedaction)
        -> RefreshOutcome
    {
        do {
            switch try TokenResponse.parseAnswer(object: object) {
            case .usable(let tokens):
                return .success(tokens, serverDate: response.serverDate)
            case .unusableAccessToken(let problem, let refreshToken, let idToken):
                return .unusableTokens(
                    UnusableTokens(
                        problem: problem.redacting(redaction),
                        refreshToken: refreshToken.map { .rotated($0) } ?? .absent,
                        idToken: idToken))
            }
        } catch {
            if error.field == "refresh_token" {
                return .unusableTokens(
                    UnusableTokens(problem: error.redacting(redaction), refreshToken: .unusable, idToken: nil))
            }
            return .grantEnded(.unusableResponse(redaction.scrub(error.description)))
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

/// An answer to a token request that is not the token endpoint's verdict (see the table of
/// `RefreshOutcome`): what answered, so that the message can say so, and whether waiting may
/// help.
public struct ForeignAnswer: Equatable, Sendable, CustomStringConvertible {
    public enum Kind: Equatable, Sendable {
        /// A redirect (3xx); `host`: where to, when it names another host than the endpoint's.
        case redirect(toHost: String?)
        /// 407: a proxy asks for credentials.
        case proxyAuthentication
        /// 511: the network wants a sign-in first (a captive portal).
        case networkAuthentication
        /// A 5xx that is not retried (501, 505, …).
        case serverFailure
        /// A 4xx with a page that is not an OAuth answer (HTML, text).
        case page
    }

    public var kind: Kind
    public var status: Int
    public var contentType: String?

    public init(kind: Kind, status: Int, contentType: String? = nil) {
        self.kind = kind
        self.status = status
        self.contentType = contentType
    }

    /// The answer's class, or nil when it may be the token endpoint's own verdict.
    init?(_ response: HTTPResponse, object: [String: JSONValue]?, endpoint: String?, redaction: SecretRedaction = .none)
    {
        let status = response.status
        let contentType = response.header("content-type").map { TerminalText.short(redaction.scrub($0)) }
        switch status {
        case 300..<400:
            let location = response.header("location")
            let target = location.flatMap(Self.authority(of:))
            let own = endpoint.flatMap(Self.authority(of:))
            let elsewhere = target.flatMap { $0 == own ? nil : TerminalText.short(redaction.scrub($0)) }
            self.init(kind: .redirect(toHost: elsewhere), status: status, contentType: contentType)
        case 407: self.init(kind: .proxyAuthentication, status: status, contentType: contentType)
        case 511: self.init(kind: .networkAuthentication, status: status, contentType: contentType)
        case 500..<600: self.init(kind: .serverFailure, status: status, contentType: contentType)
        case 400..<500 where object == nil && !response.body.allSatisfy(Self.isBlank):
            self.init(kind: .page, status: status, contentType: contentType)
        default: return nil
        }
    }

    private static func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    /// The `host[:port]` of an absolute http(s) URL, lowercased, without user information; nil
    /// for a relative one.
    static func authority(of url: String) -> String? {
        let lowered = url.trimmingCharacters(in: " \t").lowercased()
        let rest: Substring
        if lowered.hasPrefix("https://") {
            rest = lowered.dropFirst(8)
        } else if lowered.hasPrefix("http://") {
            rest = lowered.dropFirst(7)
        } else if lowered.hasPrefix("//") {
            rest = lowered.dropFirst(2)
        } else {
            return nil
        }
        var authority = rest.prefix(while: { $0 != "/" && $0 != "?" && $0 != "#" })
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        return authority.isEmpty ? nil : String(authority)
    }

    /// Whether it may pass without a change to tokenctl's configuration: a captive portal lets
    /// the request through once the network's sign-in is done (exit 75; else 76).
    public var mayPass: Bool {
        switch kind {
        case .redirect(let host): host != nil
        case .networkAuthentication: true
        case .proxyAuthentication, .serverFailure, .page: false
        }
    }

    /// What answered, as far as the answer shows.
    public var description: String {
        let what = "HTTP \(status)" + (contentType.map { " (\($0))" } ?? "")
        switch kind {
        case .redirect(let host?):
            return
                "\(what), a redirect to \(host): a captive portal or a network's sign-in page answered, not the token endpoint"
        case .redirect(nil):
            return "\(what), a redirect: the token endpoint's address no longer leads to it"
        case .proxyAuthentication:
            return "\(what): a proxy asks for credentials"
        case .networkAuthentication:
            return "\(what): the network asks for a sign-in first (a captive portal)"
        case .serverFailure:
            return "\(what) without an OAuth error: the server, or a gateway in front of it, failed"
        case .page:
            return "\(what) without an OAuth error: a page, as a proxy, a web firewall or a gateway in the path answers"
        }
    }

    /// What to do, after "the session is kept" (no command: it depends on the network).
    public var advice: Suggestion {
        switch kind {
        case .redirect(_?), .networkAuthentication:
            "Sign in to the network (open any web page in a browser), then try again."
        case .redirect(nil):
            "Check the profile's token endpoint: log in again with the right \(options: .login([.tokenEndpoint(.omitted)])), or ask the server's operator where it moved."
        case .proxyAuthentication:
            "Give the proxy's credentials in https_proxy (http://USER:PASSWORD@PROXY:PORT), or exempt the issuer with no_proxy."
        case .serverFailure:
            "Try again later; if it lasts, tell the server's operator."
        case .page:
            "Check the network path to the token endpoint (a proxy: https_proxy and no_proxy), then try again."
        }
    }

    /// A short class name for logs and `refresh --all` lines.
    public var className: String {
        if case .redirect(_?) = kind { return "redirect-elsewhere-\(status)" }
        return "not-oauth-\(status)"
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

public enum GrantEndReason: Equatable, Sendable, CustomStringConvertible {
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
    /// No usable HTTP response; `advice` says what to change when trying again cannot help
    /// (`HTTPTransportError.Kind.isSettled`).
    case transport(HTTPTransportError.Kind, String, advice: Suggestion? = nil)
    case rateLimited
    case serverError(Int)
    case lockHeldTooLong
    case deadlineExceeded(String)
    /// An OAuth error saying the server cannot answer now (`ProviderErrorClasses`: RFC 6749's
    /// `temporarily_unavailable`, Entra's throttling codes).
    case oauthError(GrantEndReason)

    public var description: String {
        switch self {
        case .oauthError(let reason): reason.description
        case .transport(_, let message, _): message
        case .rateLimited: "the server is rate-limiting requests (HTTP 429)"
        case .serverError(let status): "the server failed with HTTP \(status)"
        case .lockHeldTooLong: "another tokenctl process has been refreshing this profile for too long"
        case .deadlineExceeded(let last): "gave up before the deadline; last error: \(last)"
        }
    }

    /// Whether the request may have reached the server and been acted on (a refresh token
    /// rotated) although no answer came: a timeout or a reset after connecting. Not for
    /// failures before anything was sent (DNS, connect, TLS) or for answers (429, 5xx).
    public var requestMayHaveReachedServer: Bool {
        switch self {
        case .transport(let kind, _, _): kind == .timeout || kind == .connectionReset || kind == .other
        case .deadlineExceeded(let last): last != "no time left"
        case .rateLimited, .serverError, .lockHeldTooLong, .oauthError: false
        }
    }

    public var className: String {
        switch self {
        case .transport(let kind, _, _): kind.rawValue
        case .rateLimited: "rate-limited"
        case .serverError(let status): "http-\(status)"
        case .lockHeldTooLong: "lock-timeout"
        case .deadlineExceeded: "deadline"
        case .oauthError(let reason): reason.className
        }
    }
}
