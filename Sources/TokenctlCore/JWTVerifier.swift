/// The JWS algorithms tokenctl accepts. `none` and the HMAC family (HS*) are never accepted:
/// a public client has no shared key, and accepting them lets anyone forge a token.
public enum JWSAlgorithm: String, Sendable, CaseIterable {
    case rs256 = "RS256"
    case es256 = "ES256"
}

public enum JWTError: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    case unsupportedAlgorithm(String)
    case noMatchingKey(String?)
    case invalidKey(String)
    case invalidKeySet(String)
    case badSignature
    case claim(String)

    public var description: String {
        switch self {
        case .malformed(let why): "the token is malformed: \(why)"
        case .unsupportedAlgorithm(let alg): "the token is signed with '\(RefreshOutcome.sanitized(alg))'; only RS256 and ES256 are accepted"
        case .noMatchingKey(let kid): "no key in the issuer's JWKS matches the token" + (kid.map { " (kid '\(RefreshOutcome.sanitized($0))')" } ?? "")
        case .invalidKey(let why): "unusable key in the issuer's JWKS: \(why)"
        case .invalidKeySet(let why): why
        case .badSignature: "the token's signature does not verify against the issuer's keys"
        case .claim(let why): why
        }
    }
}

/// A JWS whose signature verified: its protected header and claims.
public struct VerifiedJWT: Sendable, Equatable {
    public var header: [String: JSONValue]
    public var claims: [String: JSONValue]
    public var algorithm: JWSAlgorithm
    public var keyID: String?
}

/// Compact JWS verification (RFC 7515 §5.2) against a JWK Set with RS256 or ES256 (RFC 7518 §3.3, §3.4).
public enum JWTVerifier {
    public static func verify(_ token: String, keys: JSONWebKeySet) throws(JWTError) -> VerifiedJWT {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("expected three dot-separated parts, got \(parts.count)") }
        guard let headerBytes = UnverifiedJWT.base64URLDecode(String(parts[0])), let header = JSONValue.parseObject(headerBytes) else {
            throw .malformed("the header is not base64url-encoded JSON")
        }
        guard let payloadBytes = UnverifiedJWT.base64URLDecode(String(parts[1])), let claims = JSONValue.parseObject(payloadBytes) else {
            throw .malformed("the payload is not base64url-encoded JSON")
        }
        guard let algorithmName = header["alg"]?.stringValue else { throw .malformed("the header has no 'alg'") }
        guard let algorithm = JWSAlgorithm(rawValue: algorithmName) else { throw .unsupportedAlgorithm(algorithmName) }
        // RFC 7515 §4.1.11: a critical extension we do not understand makes the JWS invalid.
        if header["crit"] != nil { throw .malformed("the header has 'crit' extensions tokenctl does not understand") }
        guard let signature = UnverifiedJWT.base64URLDecode(String(parts[2])), !signature.isEmpty else {
            throw .malformed("the signature is not base64url-encoded")
        }
        let signingInput = Array((parts[0] + "." + parts[1]).utf8)
        let keyID = header["kid"]?.stringValue
        var candidates = keys.keys.filter { $0.canVerify(algorithm) }
        if let keyID { candidates = candidates.filter { $0.keyID == keyID } }
        guard !candidates.isEmpty else { throw .noMatchingKey(keyID) }

        let derSignature: [UInt8]
        switch algorithm {
        case .rs256:
            derSignature = signature
        case .es256:
            // JOSE carries r || s; OpenSSL verifies a DER ECDSA-Sig-Value.
            guard let der = OpenSSL.derECDSASignature(raw: signature) else { throw .malformed("an ES256 signature is 64 bytes (r || s)") }
            derSignature = der
        }
        var lastKeyError: JWTError?
        for candidate in candidates {
            let key: OpenSSL.PublicKey
            do { key = try candidate.publicKey() } catch {
                lastKeyError = error
                continue
            }
            if OpenSSL.verifySHA256(key: key, message: signingInput, signature: derSignature) {
                return VerifiedJWT(header: header, claims: claims, algorithm: algorithm, keyID: keyID)
            }
        }
        if let lastKeyError, candidates.count == 1 { throw lastKeyError }
        throw .badSignature
    }
}
