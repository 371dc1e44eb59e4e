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
    /// Refuse an ID token carrying a `nonce` when none was sent: in the device flow, which
    /// sends none, a nonce means the token was issued for another sign-in.
    public var refusesUnsolicitedNonce = false
    /// How `iss` is matched: exactly, unless the profile's provider preset says otherwise.
    public var issuerRule = IssuerRule.exact

    public init(issuer: String, clientID: String, nonce: String?, now: Double, leeway: Double = 300) {
        self.issuer = issuer
        self.clientID = clientID
        self.nonce = nonce
        self.now = now
        self.leeway = leeway
    }
}

public enum IDTokenValidation {
    /// OpenID Connect Core 1.0 §12.2: an ID token that comes with a refresh must name the same
    /// issuer and subject as the one the session holds, and be meant for this client. (Its
    /// signature is not checked here: the token came straight from the token endpoint over the
    /// connection tokenctl made, as at login without keys, §3.1.3.7 item 6.)
    ///
    /// - Parameter previous: the claims of the ID token stored with the session, if any.
    /// - Throws: `JWTError.claim` naming the failed check.
    public static func validateRefreshed(
        _ claims: [String: JSONValue], previous: [String: JSONValue]?, issuer: String, clientID: String,
        issuerRule: IssuerRule = .exact
    ) throws(JWTError) {
        guard let newIssuer = claims["iss"]?.stringValue,
            issuerRule.acceptsTokenIssuer(newIssuer, claims: claims, configured: issuer)
        else {
            throw .claim(
                "the refreshed ID token was issued by '\(TerminalText.short(claims["iss"]?.stringValue ?? "nobody"))', not '\(issuer)'"
            )
        }
        if let oldIssuer = previous?["iss"]?.stringValue, oldIssuer != newIssuer {
            throw .claim("the refreshed ID token names another issuer than the session's")
        }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let audience)?: audiences = [audience]
        case .array(let items)?: audiences = items.compactMap(\.stringValue)
        default: audiences = []
        }
        guard audiences.contains(clientID) else { throw .claim("the refreshed ID token is for another client") }
        if let oldSubject = previous?["sub"]?.stringValue, claims["sub"]?.stringValue != oldSubject {
            throw .claim("the refreshed ID token is about another user (its 'sub' differs from the session's)")
        }
    }

    /// Check `iss`, `aud`/`azp`, `exp`, `iat` and `nonce`.
    ///
    /// - Throws: `JWTError.claim` naming the failed check.
    public static func validate(_ claims: [String: JSONValue], _ expected: IDTokenExpectations) throws(JWTError) {
        guard let issuer = claims["iss"]?.stringValue else { throw .claim("the ID token has no 'iss' claim") }
        guard expected.issuerRule.acceptsTokenIssuer(issuer, claims: claims, configured: expected.issuer) else {
            throw .claim(
                "the ID token was issued by '\(TerminalText.short(issuer))', not \(expected.issuerRule.describeExpected(expected.issuer))"
            )
        }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let audience)?: audiences = [audience]
        case .array(let items)?: audiences = items.compactMap(\.stringValue)
        default: throw .claim("the ID token has no 'aud' claim")
        }
        guard audiences.contains(expected.clientID) else {
            throw .claim(
                "the ID token is for another client (aud: \(audiences.map(TerminalText.short).joined(separator: ", ")))"
            )
        }
        let authorizedParty = claims["azp"]?.stringValue
        if audiences.count > 1, authorizedParty == nil {
            throw .claim("the ID token has several audiences but no 'azp' claim")
        }
        if let authorizedParty, authorizedParty != expected.clientID {
            throw .claim(
                "the ID token's authorized party (azp) is '\(TerminalText.short(authorizedParty))', not this client")
        }
        guard case .number(let expiry)? = claims["exp"] else { throw .claim("the ID token has no numeric 'exp' claim") }
        guard expiry + expected.leeway > expected.now else { throw .claim("the ID token has expired") }
        guard case .number(let issuedAt)? = claims["iat"] else {
            throw .claim("the ID token has no numeric 'iat' claim")
        }
        guard issuedAt - expected.leeway <= expected.now else {
            throw .claim("the ID token was issued in the future ('iat' is ahead of the clock)")
        }
        if let nonce = expected.nonce {
            guard let received = claims["nonce"]?.stringValue else {
                throw .claim("the ID token has no 'nonce' although one was sent")
            }
            guard received == nonce else {
                throw .claim("the ID token's nonce does not match the one sent (possible replay)")
            }
        } else if expected.refusesUnsolicitedNonce, claims["nonce"] != nil {
            throw .claim(
                "the ID token carries a 'nonce' although this sign-in sent none (it was issued for another sign-in)")
        }
    }
}
