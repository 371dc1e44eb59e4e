import TokenctlEssentials

/// Who the client is at the token, revocation and device endpoints: a public client (its
/// `client_id` in the form), or a confidential one with a secret sent as HTTP Basic
/// (`client_secret_basic`) or in the form (`client_secret_post`), RFC 6749 §2.3.1.
public struct ClientCredentials: Sendable, Equatable {
    public var clientID: String
    public var secret: String?
    public var method: ClientAuthenticationMethod?

    public init(clientID: String, secret: String? = nil, method: ClientAuthenticationMethod? = nil) {
        self.clientID = clientID
        self.secret = secret
        self.method = secret == nil ? nil : (method ?? .clientSecretBasic)
    }

    /// A form request to `endpoint` carrying `fields` and this client's authentication.
    public func formRequest(_ endpoint: String, _ fields: [(String, String)]) -> HTTPRequest {
        var fields = fields
        var headers: [(name: String, value: String)] = []
        switch (method, secret) {
        case (.clientSecretBasic?, let secret?):
            // §2.3.1: both parts form-encoded before Basic (base64) encoding.
            let pair = FormEncoding.escape(clientID) + ":" + FormEncoding.escape(secret)
            headers.append(("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()))
            fields.append(("client_id", clientID))
        case (.clientSecretPost?, let secret?):
            fields.append(("client_id", clientID))
            fields.append(("client_secret", secret))
        default:
            fields.append(("client_id", clientID))
        }
        return HTTPRequest.form(endpoint, fields, headers: headers)
    }

    /// The method to use with a server advertising `supported` (`nil`: not advertised, which
    /// RFC 8414 §2 defines as client_secret_basic).
    public static func preferredMethod(supported: [String]?) throws(TokenctlError) -> ClientAuthenticationMethod {
        guard let supported else { return .clientSecretBasic }
        if supported.contains(ClientAuthenticationMethod.clientSecretBasic.rawValue) { return .clientSecretBasic }
        if supported.contains(ClientAuthenticationMethod.clientSecretPost.rawValue) { return .clientSecretPost }
        throw TokenctlError(
            .configuration,
            "the server supports none of client_secret_basic and client_secret_post for client authentication (it advertises: \(supported.map(TerminalText.short).joined(separator: ", ")))"
        )
    }
}
