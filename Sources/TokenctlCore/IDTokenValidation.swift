import TokenctlEssentials
/// The ID token checks of OpenID Connect Core 1.0 §3.1.3.7 that tokenctl makes at login.
public struct IDTokenExpectations: Sendable {
    public var issuer: String
    public var clientID: String
    /// The nonce sent in the authorization request, when one was sent.
    public var nonce: String?
    /// Now on the server's clock (local clock corrected by the observed offset).
    public var now: Double
    /// Tolerated clock difference for `exp` and `iat`.
    public var leeway: Double

    public init(issuer: String, clientID: String, nonce: String?, now: Double, leeway: Double = 300) {
        self.issuer = issuer
        self.clientID = clientID
        self.nonce = nonce
        self.now = now
        self.leeway = leeway
    }
}

public enum IDTokenValidation {
    /// Check `iss`, `aud`/`azp`, `exp`, `iat` and `nonce`.
    ///
    /// - Throws: `JWTError.claim` naming the failed check.
    public static func validate(_ claims: [String: JSONValue], _ expected: IDTokenExpectations) throws(JWTError) {
        guard let issuer = claims["iss"]?.stringValue else { throw .claim("the ID token has no 'iss' claim") }
        guard EndpointURL.sameIssuer(issuer, expected.issuer) else {
            throw .claim("the ID token was issued by '\(RefreshOutcome.sanitized(issuer))', not '\(expected.issuer)'")
        }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let audience)?: audiences = [audience]
        case .array(let items)?: audiences = items.compactMap(\.stringValue)
        default: throw .claim("the ID token has no 'aud' claim")
        }
        guard audiences.contains(expected.clientID) else {
            throw .claim("the ID token is for another client (aud: \(audiences.map(RefreshOutcome.sanitized).joined(separator: ", ")))")
        }
        let authorizedParty = claims["azp"]?.stringValue
        if audiences.count > 1, authorizedParty == nil {
            throw .claim("the ID token has several audiences but no 'azp' claim")
        }
        if let authorizedParty, authorizedParty != expected.clientID {
            throw .claim("the ID token's authorized party (azp) is '\(RefreshOutcome.sanitized(authorizedParty))', not this client")
        }
        guard case .number(let expiry)? = claims["exp"] else { throw .claim("the ID token has no numeric 'exp' claim") }
        guard expiry + expected.leeway > expected.now else { throw .claim("the ID token has expired") }
        guard case .number(let issuedAt)? = claims["iat"] else { throw .claim("the ID token has no numeric 'iat' claim") }
        guard issuedAt - expected.leeway <= expected.now else { throw .claim("the ID token was issued in the future ('iat' is ahead of the clock)") }
        if let nonce = expected.nonce {
            guard let received = claims["nonce"]?.stringValue else { throw .claim("the ID token has no 'nonce' although one was sent") }
            guard received == nonce else { throw .claim("the ID token's nonce does not match the one sent (possible replay)") }
        }
    }
}
