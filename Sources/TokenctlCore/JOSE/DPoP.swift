import TokenctlEssentials

/// DPoP (RFC 9449) building blocks: a session's P-256 key and the proofs it signs: the key's
/// stored form, its public JWK and RFC 7638 thumbprint, `htu` normalisation and the proof JWT,
/// checked against an independent verifier (Python `cryptography`, DPoPTests). The proofs go
/// on the wire through `DPoPHTTPClient`; `DPoPBinding` checks what the server issued.
public struct DPoPKey: Sendable, Equatable {
    /// The private scalar (32 bytes) and the public point (65 bytes, 0x04 x y).
    let scalar: [UInt8]
    let point: [UInt8]

    /// A new key pair from libgcrypt's generator.
    public static func generate() throws(GcryptError) -> DPoPKey {
        let generated = try Gcrypt.generateP256()
        return DPoPKey(scalar: generated.scalar, point: generated.point)
    }

    /// The key as stored with the session: `d.x.y`, each base64url (a secret: never on disk,
    /// never in the hot cache).
    public var stored: String {
        [scalar, Array(point[1..<33]), Array(point[33..<65])].map(Base64URL.encode).joined(separator: ".")
    }

    /// A key read back from `stored`: its form only (`storedParts`). Whether the point is the
    /// scalar's is `checked()`'s question: a libgcrypt scalar multiplication, ~1 ms, that the hot
    /// path (`token --format dpop`) skips, since a key that is not a pair only makes proofs the
    /// server refuses; a refresh, which spends the refresh token, asks it first.
    public init(stored: String) throws(GcryptError) {
        guard let parts = Self.storedParts(stored) else {
            throw GcryptError("DPoP key", reason: "not a stored DPoP key")
        }
        self.init(scalar: parts[0], point: [4] + parts[1] + parts[2])
    }

    /// Whether `stored` is in the stored form, without loading a crypto library: what reading a
    /// stored set checks.
    public static func isStoredForm(_ stored: String) -> Bool { storedParts(stored) != nil }

    /// d, x and y of the stored form: three parts of 32 bytes each, in canonical base64url (as
    /// `stored` writes them: a part whose unused bits are set decodes, but would not read back
    /// as written; found by the FlatJSON fuzz target).
    private static func storedParts(_ stored: String) -> [[UInt8]]? {
        let texts = stored.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard texts.count == 3 else { return nil }
        let parts = texts.compactMap { text in
            UnverifiedJWT.base64URLDecode(text).flatMap { $0.count == 32 && Base64URL.encode($0) == text ? $0 : nil }
        }
        return parts.count == 3 ? parts : nil
    }

    /// This key, once libgcrypt has checked that its point is its scalar's.
    public func checked() throws(GcryptError) -> DPoPKey {
        try Gcrypt.checkP256(scalar: scalar, point: point)
        return self
    }

    init(scalar: [UInt8], point: [UInt8]) {
        self.scalar = scalar
        self.point = point
    }

    /// The public key as a JWK, members in RFC 7638's lexicographic order (so this text is also
    /// the thumbprint's input).
    public var publicJWK: String {
        "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"\(Base64URL.encode(Array(point[1..<33])))\",\"y\":\"\(Base64URL.encode(Array(point[33..<65])))\"}"
    }

    /// The JWK SHA-256 thumbprint (RFC 7638), base64url: what `cnf.jkt` must say (empty only
    /// without libgcrypt, which libsecret itself needs).
    public var thumbprint: String { Base64URL.encode((try? Gcrypt.sha256(Array(publicJWK.utf8))) ?? []) }

    /// An ES256 signature of `message` (raw r || s).
    func sign(_ message: [UInt8]) throws(GcryptError) -> [UInt8] {
        try Gcrypt.signES256(scalar: scalar, point: point, message: message)
    }
}

public enum DPoPProof {
    /// RFC 9449 §4.2 `htu`: the URI without query and fragment, scheme and host lower-cased;
    /// nil for anything that is not an absolute http(s) URI.
    public static func htu(_ url: String) -> String? {
        let withoutFragment = url.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let withoutQuery = withoutFragment.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        guard let schemeEnd = withoutQuery.firstRange(of: "://") else { return nil }
        let scheme = withoutQuery[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "https" || scheme == "http" else { return nil }
        let rest = withoutQuery[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        return scheme + "://" + authority.lowercased() + rest[authorityEnd...]
    }

    /// A proof for one request: header `typ` dpop+jwt, `alg` ES256, `jwk` (public); claims
    /// `jti`, `htm`, `htu`, `iat`, and `ath` (base64url SHA-256 of the access token) and
    /// `nonce` when given.
    public static func make(
        key: DPoPKey, method: String, url: String, issuedAt: Int, jti: String = SecureRandom.token(),
        accessToken: String? = nil, nonce: String? = nil
    ) throws(GcryptError) -> String {
        guard let htu = htu(url) else { throw GcryptError("DPoP proof", reason: "not an http(s) URL for a DPoP proof") }
        let header = JSONText.object([
            ("typ", .string("dpop+jwt")), ("alg", .string("ES256")), ("jwk", JSONText.Value(raw: key.publicJWK)),
        ])
        var claims: [(String, JSONText.Value)] = [
            ("jti", .string(jti)), ("htm", .string(method.uppercased())), ("htu", .string(htu)),
            ("iat", .number(issuedAt)),
        ]
        if let accessToken {
            claims.append(("ath", .string(Base64URL.encode(try Gcrypt.sha256(Array(accessToken.utf8))))))
        }
        if let nonce { claims.append(("nonce", .string(nonce))) }
        let signingInput =
            Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(JSONText.object(claims).utf8))
        return signingInput + "." + Base64URL.encode(try key.sign(Array(signingInput.utf8)))
    }
}

extension TokenSet {
    /// The session's DPoP key (nil: a bearer session), as an error to show when it is not one.
    ///
    /// - Parameter checked: also check that its point is its scalar's (`DPoPKey.checked()`, a
    ///   scalar multiplication): before a refresh spends the refresh token, not on the hot path.
    public func dpopSigningKey(of profile: ProfileName, checked: Bool) throws(TokenctlError) -> DPoPKey? {
        guard let dpopKey else { return nil }
        do {
            let key = try DPoPKey(stored: dpopKey)
            return checked ? try key.checked() : key
        } catch {
            throw TokenctlError(
                .unexpected, "cannot use the DPoP key of profile '\(profile)': \(error)",
                hint:
                    "The session is kept. If libgcrypt20 is installed, the stored key is damaged: run '\(tokenctl: profile, .login([]))' again."
            )
        }
    }
}
