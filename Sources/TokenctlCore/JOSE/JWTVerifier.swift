import TokenctlEssentials

/// The JWS algorithms tokenctl accepts. `none` and the HMAC family (HS*) are never accepted:
/// a public client has no shared key, and accepting them lets anyone forge a token.
public enum JWSAlgorithm: String, Sendable, CaseIterable {
    case rs256 = "RS256"
    case ps256 = "PS256"
    case es256 = "ES256"
    case edDSA = "EdDSA"
}

public enum JWTError: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    case unsupportedAlgorithm(String)
    case noMatchingKey(String?)
    /// The key the header's `kid` names cannot make this signature: its `alg`, `use` or key type differs.
    case keyMismatch(kid: String, alg: String)
    case invalidKey(String)
    case invalidKeySet(String)
    case badSignature
    case claim(String)
    /// OpenSSL's libcrypto cannot be loaded (the reason names it): no signature can be checked.
    case cryptoUnavailable(String)

    public var description: String {
        switch self {
        case .malformed(let why): "the token is malformed: \(why)"
        case .unsupportedAlgorithm(let alg):
            "the token is signed with '\(TerminalText.short(alg))'; only RS256, PS256, ES256 and EdDSA are accepted"
        case .noMatchingKey(let kid):
            "no key in the issuer's JWKS matches the token" + (kid.map { " (kid '\(TerminalText.short($0))')" } ?? "")
        case .keyMismatch(let kid, let alg):
            "the issuer's key '\(TerminalText.short(kid))' cannot make a '\(TerminalText.short(alg))' signature (its alg, use or key type differs)"
        case .invalidKey(let why): "unusable key in the issuer's JWKS: \(why)"
        case .invalidKeySet(let why): why
        case .badSignature: "the token's signature does not verify against the issuer's keys"
        case .claim(let why): why
        case .cryptoUnavailable(let why): "the token's signature cannot be checked: \(why)"
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

/// Compact JWS verification (RFC 7515 §5.2) against a JWK Set with RS256, PS256, ES256 (RFC 7518
/// §3.3–3.5) or EdDSA with Ed25519 (RFC 8037).
public enum JWTVerifier {
    public static func verify(_ token: String, keys: JSONWebKeySet) throws(JWTError) -> VerifiedJWT {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("expected three dot-separated parts, got \(parts.count)") }
        guard let headerBytes = UnverifiedJWT.base64URLDecode(String(parts[0])),
            let header = JSONValue.parseObject(headerBytes)
        else {
            throw .malformed("the header is not base64url-encoded JSON")
        }
        guard let payloadBytes = UnverifiedJWT.base64URLDecode(String(parts[1])),
            let claims = JSONValue.parseObject(payloadBytes)
        else {
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
        let candidates = try candidateKeys(keys, keyID: keyID, algorithm: algorithm)
        // libcrypto is loaded here, on first use (Sources/CCrypto).
        if let reason = OpenSSL.unavailableReason { throw .cryptoUnavailable(reason) }
        let derSignature = try derSignature(signature, algorithm: algorithm)
        var lastKeyError: JWTError?
        for candidate in candidates {
            let key: OpenSSL.PublicKey
            do { key = try candidate.publicKey() } catch {
                lastKeyError = error
                continue
            }
            if verifies(key, algorithm: algorithm, message: signingInput, signature: derSignature) {
                return VerifiedJWT(header: header, claims: claims, algorithm: algorithm, keyID: keyID)
            }
        }
        if let lastKeyError, candidates.count == 1 { throw lastKeyError }
        throw .badSignature
    }

    /// The keys of `keys` that may have signed: those named by `keyID` (when the header has one)
    /// that can verify `algorithm`.
    static func candidateKeys(_ keys: JSONWebKeySet, keyID: String?, algorithm: JWSAlgorithm) throws(JWTError)
        -> [JSONWebKey]
    {
        var candidates = keys.keys
        if let keyID {
            candidates = candidates.filter { $0.keyID == keyID }
            // The named key exists but is not for this algorithm: a substituted header, not a rotation.
            if !candidates.isEmpty, !candidates.contains(where: { $0.canVerify(algorithm) }) {
                throw .keyMismatch(kid: keyID, alg: algorithm.rawValue)
            }
        }
        candidates = candidates.filter { $0.canVerify(algorithm) }
        guard !candidates.isEmpty else { throw .noMatchingKey(keyID) }
        return candidates
    }

    /// The signature as libcrypto verifies it: JOSE carries an ES256 signature as r || s, and
    /// OpenSSL verifies a DER ECDSA-Sig-Value; the others as they are.
    static func derSignature(_ signature: [UInt8], algorithm: JWSAlgorithm) throws(JWTError) -> [UInt8] {
        switch algorithm {
        case .rs256, .ps256, .edDSA:
            return signature
        case .es256:
            guard let der = OpenSSL.derECDSASignature(raw: signature) else {
                throw .malformed("an ES256 signature is 64 bytes (r || s)")
            }
            return der
        }
    }

    /// Whether `signature` over `message` verifies with `key` by `algorithm`.
    static func verifies(_ key: OpenSSL.PublicKey, algorithm: JWSAlgorithm, message: [UInt8], signature: [UInt8])
        -> Bool
    {
        switch algorithm {
        case .rs256, .es256: OpenSSL.verifySHA256(key: key, message: message, signature: signature)
        case .ps256: OpenSSL.verifyRSAPSSSHA256(key: key, message: message, signature: signature)
        case .edDSA: OpenSSL.verifyEd25519(key: key, message: message, signature: signature)
        }
    }
}
