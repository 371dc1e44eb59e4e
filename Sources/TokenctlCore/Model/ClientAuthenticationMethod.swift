import TokenctlEssentials

/// Client authentication at the token endpoint, by the names of the IANA "OAuth Token Endpoint
/// Authentication Methods" registry: a confidential client's methods, and `none`, a public
/// client's (RFC 7591 §2), which a machine profile names for a platform grant.
public enum ClientAuthenticationMethod: String, Sendable, Equatable, CaseIterable {
    /// HTTP Basic with the form-encoded client id and secret (RFC 6749 §2.3.1).
    case clientSecretBasic = "client_secret_basic"
    /// `client_id` and `client_secret` in the form body (RFC 6749 §2.3.1).
    case clientSecretPost = "client_secret_post"
    /// An assertion signed with HMAC keyed by the client secret (RFC 7523 §2.2, OIDC Core §9).
    case clientSecretJWT = "client_secret_jwt"
    /// An assertion signed with the client's private key (RFC 7523 §2.2, OIDC Core §9).
    case privateKeyJWT = "private_key_jwt"
    /// A certificate from a CA the server trusts, matched on its subject (RFC 8705 §2.1).
    case tlsClientAuth = "tls_client_auth"
    /// A self-signed certificate registered with the client (RFC 8705 §2.2).
    case selfSignedTLSClientAuth = "self_signed_tls_client_auth"
    /// No client authentication: a public client, its `client_id` in the form (RFC 7591 §2,
    /// RFC 6749 §3.2.1). A machine profile takes it for the JWT bearer grant (RFC 7523 §3.1:
    /// "authentication of the client is optional") and token exchange (RFC 8693 §2.1), never for
    /// client credentials (RFC 6749 §4.4: "MUST only be used by confidential clients"). Not
    /// named `none`, which `Optional`'s own case would shadow in comparisons.
    case publicClient = "none"

    /// Whether the method needs the client secret (kept in the Secret Service).
    public var usesSecret: Bool { [.clientSecretBasic, .clientSecretPost, .clientSecretJWT].contains(self) }
    /// Whether the client presents a certificate on the TLS connection (RFC 8705 §2).
    public var usesCertificate: Bool { self == .tlsClientAuth || self == .selfSignedTLSClientAuth }
    /// Whether the client sends a signed assertion (RFC 7523 §2.2).
    public var usesAssertion: Bool { self == .clientSecretJWT || self == .privateKeyJWT }
    /// Whether the client authenticates at all (every method but `none`).
    public var authenticates: Bool { self != .publicClient }
    /// Every name, for messages.
    public static let names = allCases.map(\.rawValue)
}

/// The grant a machine profile gets its access tokens with.
public enum MachineGrant: String, Sendable, Equatable, CaseIterable {
    /// RFC 6749 §4.4: the client's own credentials, no person and no refresh token.
    case clientCredentials = "client-credentials"
    /// RFC 8693 §2.1: the token in `subject_token_file` exchanged for one of this server's.
    case tokenExchange = "token-exchange"
    /// RFC 7523 §2.1: the JWT in `assertion_file` as the authorization grant.
    case jwtBearer = "jwt-bearer"

    /// The `grant_type` a request of this grant sends.
    public var grantType: String {
        switch self {
        case .clientCredentials: "client_credentials"
        case .tokenExchange: "urn:ietf:params:oauth:grant-type:token-exchange"
        case .jwtBearer: "urn:ietf:params:oauth:grant-type:jwt-bearer"
        }
    }

    /// Whether a public client (`none`) may use the grant: the platform's token is the grant,
    /// and client authentication is optional (RFC 7523 §3.1) or the deployment's (RFC 8693
    /// §2.1); the client credentials grant is a confidential client's only (RFC 6749 §4.4).
    public var allowsPublicClient: Bool { self != .clientCredentials }
}
