import TokenctlEssentials

/// A JSON Web Key (RFC 7517) as far as tokenctl uses it: RSA, P-256 and Ed25519 (OKP, RFC 8037) public keys.
public struct JSONWebKey: Equatable, Sendable {
    public var keyType: String
    public var keyID: String?
    public var use: String?
    public var algorithm: String?
    public var modulus: String?
    public var exponent: String?
    public var curve: String?
    public var x: String?
    public var y: String?

    public init(object: [String: JSONValue]) {
        keyType = object["kty"]?.stringValue ?? ""
        keyID = object["kid"]?.stringValue
        use = object["use"]?.stringValue
        algorithm = object["alg"]?.stringValue
        modulus = object["n"]?.stringValue
        exponent = object["e"]?.stringValue
        curve = object["crv"]?.stringValue
        x = object["x"]?.stringValue
        y = object["y"]?.stringValue
    }

    /// Whether this key may verify a signature made with `algorithm` (RFC 7517 §4.2, §4.4).
    func canVerify(_ signatureAlgorithm: JWSAlgorithm) -> Bool {
        if let use, use != "sig" { return false }
        if let algorithm, algorithm != signatureAlgorithm.rawValue { return false }
        switch signatureAlgorithm {
        case .rs256, .ps256: return keyType == "RSA"
        case .es256: return keyType == "EC" && curve == "P-256"
        case .edDSA: return keyType == "OKP" && curve == "Ed25519"
        }
    }

    /// The OpenSSL public key.
    func publicKey() throws(JWTError) -> OpenSSL.PublicKey {
        func bytes(_ field: String?, _ name: String) throws(JWTError) -> [UInt8] {
            guard let field, let decoded = UnverifiedJWT.base64URLDecode(field), !decoded.isEmpty else {
                throw .invalidKey("the \(keyType) key \(keyID.map { "'\($0)' " } ?? "")has no usable '\(name)'")
            }
            return decoded
        }
        do {
            switch keyType {
            case "RSA":
                let key = try OpenSSL.rsaPublicKey(modulus: try bytes(modulus, "n"), exponent: try bytes(exponent, "e"))
                // RFC 7518 §3.3: RS256 keys are at least 2048 bits.
                guard key.bits >= 2048 else { throw JWTError.invalidKey("the RSA key is shorter than 2048 bits") }
                return key
            case "EC":
                let x = try bytes(x, "x")
                let y = try bytes(y, "y")
                guard curve == "P-256", x.count == 32, y.count == 32 else {
                    throw JWTError.invalidKey("the EC key is not a P-256 key")
                }
                return try OpenSSL.p256PublicKey(x: x, y: y)
            case "OKP":
                // RFC 8037 §2: the raw 32-byte public key in 'x'.
                let x = try bytes(x, "x")
                guard curve == "Ed25519", x.count == 32 else {
                    throw JWTError.invalidKey("the OKP key is not an Ed25519 key")
                }
                return try OpenSSL.ed25519PublicKey(x)
            default:
                throw JWTError.invalidKey("unsupported key type '\(TerminalText.short(keyType))'")
            }
        } catch let error as JWTError {
            throw error
        } catch {
            throw .invalidKey("OpenSSL rejected the key: \(error)")
        }
    }
}

/// A JWK Set document (RFC 7517 §5).
public struct JSONWebKeySet: Equatable, Sendable {
    public var keys: [JSONWebKey]

    public init(keys: [JSONWebKey]) { self.keys = keys }

    public static func parse(_ bytes: [UInt8]) throws(JWTError) -> JSONWebKeySet {
        guard let object = JSONValue.parseObject(bytes), case .array(let items)? = object["keys"] else {
            throw .invalidKeySet("the JWKS is not a JSON object with a 'keys' array")
        }
        return JSONWebKeySet(
            keys: items.compactMap { item in
                guard case .object(let key) = item else { return nil }
                return JSONWebKey(object: key)
            })
    }
}
