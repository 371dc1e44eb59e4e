/// An HTTP request as the core builds it.
public struct HTTPRequest: Sendable, Equatable {
    public enum Method: String, Sendable {
        case get = "GET"
        case post = "POST"
        /// With a body: GitHub's token revocation (`DELETE /applications/{client_id}/token`).
        case delete = "DELETE"
    }

    public var method: Method
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]?
    /// The certificate (and its private key) to present on the TLS connection (RFC 8705 §2),
    /// given to libcurl from memory; nil for none.
    public var clientCertificate: ClientCertificate?

    public init(method: Method, url: String, headers: [(name: String, value: String)] = [], body: [UInt8]? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    public static func == (lhs: HTTPRequest, rhs: HTTPRequest) -> Bool {
        lhs.method == rhs.method && lhs.url == rhs.url && lhs.body == rhs.body
            && lhs.clientCertificate == rhs.clientCertificate
            && lhs.headers.map { "\($0.name):\($0.value)" } == rhs.headers.map { "\($0.name):\($0.value)" }
    }

    /// A GET of a JSON document (discovery, JWKS).
    public static func getJSON(_ url: String) -> HTTPRequest {
        HTTPRequest(method: .get, url: url, headers: [("Accept", "application/json")])
    }

    /// A form POST (application/x-www-form-urlencoded), as token and revocation endpoints take.
    public static func form(_ url: String, _ fields: [(String, String)], headers: [(name: String, value: String)] = [])
        -> HTTPRequest
    {
        HTTPRequest(
            method: .post, url: url,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")] + headers,
            body: Array(FormEncoding.encode(fields).utf8)
        )
    }
}

/// An HTTP response. Header names are lower-cased; a repeated header keeps its last value.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var headers: [String: String]
    public var body: [UInt8]

    /// Statuses that mean "try again later" (408 Request Timeout, RFC 6585 429, and the 5xx a
    /// proxy or an overloaded server answers): the one rule `RefreshOutcome` and every other endpoint call classify by.
    public static let transientStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    public var isTransientFailure: Bool { Self.transientStatuses.contains(status) }

    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The server's clock, from its `Date` header (RFC 9110 §6.6.1).
    public var serverDate: Double? { header("date").flatMap(HTTPDate.parse) }
}

/// A request that got no usable HTTP response.
public struct HTTPTransportError: Error, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case timeout, resolve, connect, tls, connectionReset, responseTooLarge, invalidURL, other
        /// The proxy refused its credentials (407): the configuration must change.
        case proxyAuthentication = "proxy-authentication"
        /// The server's (or an https:// proxy's) certificate did not verify, or the CA bundle
        /// cannot be read: the configuration must change.
        case certificate
        /// An https:// proxy's own certificate did not verify.
        case proxyCertificate = "proxy-certificate"
        /// A secret the request needs (the proxy's password) could not be read from the Secret
        /// Service (locked, not running): nothing was sent.
        case secretService = "secret-service"

        /// How a command that failed on this one ends: 78 (EX_CONFIG) when only a change of
        /// configuration helps, 69 (EX_UNAVAILABLE) when the Secret Service could not give what
        /// the request needs, as for every store that cannot be read; else 75 (transient).
        public var commandFailure: TokenctlError.Kind {
            switch self {
            case .proxyAuthentication, .certificate, .proxyCertificate: .configuration
            case .secretService: .storeUnavailable
            case .timeout, .resolve, .connect, .tls, .connectionReset, .responseTooLarge, .invalidURL, .other:
                .transient
            }
        }

        /// Whether trying the same again within the command cannot pass: nothing was sent, and
        /// the command ends with `commandFailure`.
        public var isSettled: Bool { commandFailure != .transient }
    }

    public var kind: Kind
    public var message: String
    /// What to change, for the errors that need a change of configuration.
    public var advice: Suggestion?

    public init(_ kind: Kind, _ message: String, advice: Suggestion? = nil) {
        self.kind = kind
        self.message = message
        self.advice = advice
    }

    /// The message (what to change is the hint of the error made from it: `tokenctlError`).
    public var description: String { message }

    /// How to trust the CA of an https:// proxy's certificate that did not verify.
    static let proxyCertificateAdvice: Suggestion =
        "Name the CA that issued the proxy's certificate with 'proxy_cacert = PATH' in the profile file (tokenctl.conf(5))."

    /// How to trust the CA of a server's certificate that did not verify.
    static let certificateAdvice: Suggestion =
        "If you trust the CA that issued it, put its certificate (PEM) in a file and name it with 'cacert = PATH' in the profile file, or run '\(tokenctl: .default, .login([.caBundle(.placeholder)]))' again."

    /// The error of a command that failed on this one (`Kind.commandFailure`): 78 when only a
    /// change of configuration helps (a proxy's 407, a certificate that does not verify), 69 when
    /// the Secret Service could not give the proxy's password, else 75.
    public func tokenctlError(_ what: String, hint: Suggestion?) -> TokenctlError {
        TokenctlError(kind.commandFailure, "\(what): \(message)", hint: Suggestion.sentences(advice, hint))
    }
}

/// Sends HTTP requests. The real one is `CurlHTTPClient`.
public protocol HTTPClient: Sendable {
    /// Send `request`, giving up after `timeout` seconds in all.
    func send(_ request: HTTPRequest, timeout: Double) async throws(HTTPTransportError) -> HTTPResponse
    /// Send `request`, giving up on connecting after `connectTimeout` seconds and on the whole
    /// exchange after `timeout`.
    func send(_ request: HTTPRequest, timeout: Double, connectTimeout: Double) async throws(HTTPTransportError)
        -> HTTPResponse
}

extension HTTPClient {
    public func send(_ request: HTTPRequest, timeout: Double, connectTimeout: Double) async throws(HTTPTransportError)
        -> HTTPResponse
    {
        try await send(request, timeout: timeout)
    }
}

/// application/x-www-form-urlencoded (HTML form encoding, RFC 6749 appendix B).
public enum FormEncoding {
    public static func encode(_ fields: [(String, String)]) -> String {
        fields.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    public static func escape(_ string: String) -> String {
        var result = ""
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "_"), UInt8(ascii: "~"):
                result.unicodeScalars.append(UnicodeScalar(byte))
            case UInt8(ascii: " "):
                result += "+"
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                result += "%"
                result.unicodeScalars.append(UnicodeScalar(hex[Int(byte >> 4)]))
                result.unicodeScalars.append(UnicodeScalar(hex[Int(byte & 0xF)]))
            }
        }
        return result
    }
}
