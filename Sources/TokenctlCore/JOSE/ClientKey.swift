import TokenctlEssentials

/// A client's key pair for private_key_jwt (RFC 7523 §2.2) and, with a certificate, mTLS
/// (RFC 8705): EC P-256 (ES256) or RSA (RS256, PS256), kept in the Secret Service, inside a TPM
/// 2.0 (the TPM-wrapped blob, useless on another TPM), or in files another program rotates.
public struct ClientKey: ClientAssertionSigner, Equatable {
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        case ec
        case rsa
    }

    /// Where the private key lives.
    public enum Location: Sendable, Equatable {
        /// In the Secret Service.
        case keyring
        /// Inside the TPM: the wrapped blob is in tokenctl's state directory, in this file.
        case tpm(blobFile: String)
        /// In a file named by the profile (`key_file`), read on every use.
        case file(String)
    }

    /// A profile's key slots: the key in use, and the one `key rotate` made that is not yet promoted.
    public enum Slot: String, Sendable, Equatable, CaseIterable {
        case current
        case next
    }

    public var kind: Kind
    public var location: Location
    public var certificate: ClientCertificate?
    /// When the key was made or imported (nil for a key file).
    public var created: Date?
    /// The public key as a JWK, members in RFC 7638's order (also the thumbprint's input).
    public let publicJWK: String
    /// The RFC 7638 JWK SHA-256 thumbprint, base64url.
    public let thumbprint: String
    /// The public key, DER SubjectPublicKeyInfo.
    let publicKeyDER: [UInt8]
    /// PKCS#8 PEM of a software key, the TPM-wrapped blob of a TPM key. A secret (for a TPM key,
    /// useless without that TPM): never printed, logged or written outside the Secret Service
    /// (a TPM blob: tokenctl's 0600 file).
    let privateKeyPEM: [UInt8]

    public var keyID: String? { thumbprint }
    public var isTPM: Bool { if case .tpm = location { true } else { false } }
    public var algorithms: [String] {
        switch kind {
        case .ec: ["ES256"]
        // The tpm2 provider (tpm2-openssl 1.1.1) refuses RSASSA-PSS with the 32-byte salt PS256
        // needs (RFC 7518 §3.5) against a TPM (measured with swtpm): a TPM RSA key signs RS256 only.
        case .rsa: isTPM ? ["RS256"] : ["RS256", "PS256"]
        }
    }

    /// A key from its private PEM (PKCS#8 or traditional; a TPM key's blob when `location` is `.tpm`).
    public init(
        privateKeyPEM: [UInt8], location: Location, certificatePEM: [UInt8]? = nil, created: Date? = nil
    ) throws(TokenctlError) {
        let home: OpenSSL.KeyHome = if case .tpm = location { .tpm } else { .software }
        let key = try Self.load(privateKeyPEM, home: home)
        try self.init(key: key, privateKeyPEM: privateKeyPEM, location: location, created: created)
        if let certificatePEM { try attach(certificatePEM: certificatePEM) }
    }

    private init(key: OpenSSL.PrivateKey, privateKeyPEM: [UInt8], location: Location, created: Date?)
        throws(TokenctlError)
    {
        let der: [UInt8]
        let parameters: OpenSSL.PublicParameters
        do {
            der = try OpenSSL.publicKeyDER(key)
            parameters = try OpenSSL.publicParameters(der: der)
        } catch {
            throw TokenctlError(.invalidInput, "cannot use this private key: \(error)")
        }
        switch parameters {
        case .p256:
            kind = .ec
        case .rsa(let n, _):
            guard n.count * 8 >= 2048 else {
                throw TokenctlError(
                    .invalidInput, "the RSA key has \(n.count * 8) bits; RFC 7518 §3.3 asks for at least 2048")
            }
            kind = .rsa
        }
        publicJWK = Self.canonicalJWK(parameters)
        thumbprint = Self.thumbprint(ofCanonicalJWK: publicJWK)
        publicKeyDER = der
        self.privateKeyPEM = privateKeyPEM
        self.location = location
        self.created = created
    }

    /// The public JWK with only the required members, in lexicographic order, without
    /// whitespace: RFC 7638 §3.2's input to the thumbprint.
    static func canonicalJWK(_ parameters: OpenSSL.PublicParameters) -> String {
        switch parameters {
        case .p256(let x, let y):
            JSONText.object([
                ("crv", .string("P-256")), ("kty", .string("EC")), ("x", .string(Base64URL.encode(x))),
                ("y", .string(Base64URL.encode(y))),
            ])
        case .rsa(let n, let e):
            JSONText.object([
                ("e", .string(Base64URL.encode(e))), ("kty", .string("RSA")), ("n", .string(Base64URL.encode(n))),
            ])
        }
    }

    /// The RFC 7638 thumbprint: base64url SHA-256 of the canonical JWK.
    static func thumbprint(ofCanonicalJWK jwk: String) -> String { Base64URL.encode(OpenSSL.sha256(Array(jwk.utf8))) }

    private static func load(_ pem: [UInt8], home: OpenSSL.KeyHome) throws(TokenctlError) -> OpenSSL.PrivateKey {
        if home == .software, let reason = OpenSSL.unavailableReason {
            throw TokenctlError(.serviceUnavailable, reason)
        }
        do { return try OpenSSL.readPrivateKey(pem: pem, home: home) } catch {
            if home == .tpm { throw TPMAccess.error(error) }
            throw TokenctlError(
                .invalidInput,
                "not a private key in PEM (PKCS#8, or traditional EC or RSA; an encrypted key must be decrypted first): \(error)"
            )
        }
    }

    /// A new key pair: P-256 for `.ec`, RSA of `rsaBits` (2048 or 3072) for `.rsa`; inside the
    /// TPM when `location` is `.tpm`, else in memory (then kept in the Secret Service).
    public static func generate(_ kind: Kind, rsaBits: Int = 2048, location: Location, now: Date)
        throws(TokenctlError) -> ClientKey
    {
        let home: OpenSSL.KeyHome = if case .tpm = location { .tpm } else { .software }
        if home == .software, let reason = OpenSSL.unavailableReason {
            throw TokenctlError(.serviceUnavailable, reason)
        }
        do {
            let key = try OpenSSL.generateKey(rsaBits: kind == .rsa ? rsaBits : nil, home: home)
            let pem = try OpenSSL.privateKeyPEM(key)
            return try ClientKey(key: key, privateKeyPEM: pem, location: location, created: now)
        } catch let error as OpenSSLError {
            if home == .tpm { throw TPMAccess.error(error) }
            throw TokenctlError(.unexpected, "cannot make a key pair: \(error)")
        } catch let error as TokenctlError {
            throw error
        } catch {
            throw TokenctlError(.unexpected, "cannot make a key pair: \(error)")
        }
    }

    /// Attach a certificate (PEM or DER) that must be for this key.
    public mutating func attach(certificatePEM bytes: [UInt8]) throws(TokenctlError) {
        let info = try CertificateInfo(bytes)
        guard info.matches(self) else {
            throw TokenctlError(
                .invalidInput,
                "the certificate (\(TerminalText.short(info.subject))) is not for this key: its public key differs")
        }
        certificate = ClientCertificate(
            certificatePEM: info.pem, privateKey: isTPM ? .tpm(blob: privateKeyPEM) : .pem(privateKeyPEM),
            thumbprint: info.thumbprint,
            subject: info.subject, notAfter: info.notAfter)
    }

    /// A self-signed certificate for this key, subject and issuer `CN=<commonName>`, valid from
    /// now for `lifetime` seconds (RFC 8705 §2.2's self_signed_tls_client_auth).
    public func selfSignedCertificate(commonName: String, lifetime: Int = 365 * 86400) throws(TokenctlError)
        -> [UInt8]
    {
        let key = try Self.load(privateKeyPEM, home: isTPM ? .tpm : .software)
        do {
            let der = try OpenSSL.selfSignedCertificate(key, commonName: commonName, lifetime: lifetime)
            return try CertificateInfo(der).pem
        } catch let error as OpenSSLError {
            if isTPM { throw TPMAccess.error(error) }
            throw TokenctlError(.unexpected, "cannot make the certificate: \(error)")
        } catch let error as TokenctlError {
            throw error
        } catch {
            throw TokenctlError(.unexpected, "cannot make the certificate: \(error)")
        }
    }

    /// The public key as PEM (SubjectPublicKeyInfo): never the private part, also for a TPM key.
    public var publicKeyPEM: String {
        let body = Data(publicKeyDER).base64EncodedString()
        var lines = ["-----BEGIN PUBLIC KEY-----"]
        var index = body.startIndex
        while index < body.endIndex {
            let end = body.index(index, offsetBy: 64, limitedBy: body.endIndex) ?? body.endIndex
            lines.append(String(body[index..<end]))
            index = end
        }
        lines.append("-----END PUBLIC KEY-----")
        return lines.joined(separator: "\n") + "\n"
    }

    /// The public JWK with `kid` (the thumbprint), `use` sig and, for an EC key, `alg` added: what a client's
    /// `jwks` registers (RFC 7517 §4).
    public var registeredJWK: String {
        var members: [(String, JSONText.Value)] = []
        switch kind {
        case .ec:
            members = [("kty", .string("EC")), ("crv", .string("P-256"))]
        case .rsa:
            members = [("kty", .string("RSA"))]
        }
        let object = JSONValue.parseObject(Array(publicJWK.utf8)) ?? [:]
        for name in ["x", "y", "n", "e"] {
            if let value = object[name]?.stringValue { members.append((name, .string(value))) }
        }
        members += [("kid", .string(thumbprint)), ("use", .string("sig"))]
        // An RSA key signs RS256 and PS256: an `alg` member would hold it to one (RFC 7517 §4.4).
        if algorithms.count == 1 { members.append(("alg", .string(algorithms[0]))) }
        return JSONText.object(members)
    }

    public func signature(of signingInput: [UInt8], algorithm: String) throws(TokenctlError) -> [UInt8] {
        guard algorithms.contains(algorithm) else {
            throw TokenctlError(
                .configuration,
                "a \(kind.rawValue.uppercased()) key cannot sign with '\(TerminalText.short(algorithm))' (it signs with \(algorithms.joined(separator: ", ")))"
            )
        }
        // Loaded for each signature and freed after it: a TPM key's transient object is flushed at once.
        let key = try Self.load(privateKeyPEM, home: isTPM ? .tpm : .software)
        do {
            return try OpenSSL.sign(key, message: signingInput, pss: algorithm == "PS256", ecdsa: kind == .ec)
        } catch {
            if isTPM { throw TPMAccess.error(error) }
            throw TokenctlError(.unexpected, "cannot sign the client assertion: \(error)")
        }
    }

    /// The stored form: a JSON object with the kind, the private PEM, the certificate and the
    /// time it was made. A secret (but for a TPM key, whose blob is useless elsewhere).
    public var stored: [UInt8] {
        var members: [(String, JSONText.Value)] = [
            ("version", .number(1)), ("kind", .string(kind.rawValue)), ("tpm", .bool(isTPM)),
            ("key", .string(String(decoding: privateKeyPEM, as: UTF8.self))),
        ]
        if let certificate {
            members.append(("certificate", .string(String(decoding: certificate.certificatePEM, as: UTF8.self))))
        }
        if let created { members.append(("created", .number(Int(created.timeIntervalSince1970)))) }
        return Array(JSONText.object(members).utf8)
    }

    /// A key read back from `stored`.
    public init(stored bytes: [UInt8], location: Location) throws(TokenctlError) {
        guard let object = JSONValue.parseObject(bytes), object["version"] == .number(1),
            let pem = object["key"]?.stringValue
        else {
            throw TokenctlError(.unexpected, "the stored client key is damaged")
        }
        var created: Date?
        if case .number(let seconds)? = object["created"] { created = Date(timeIntervalSince1970: seconds) }
        try self.init(
            privateKeyPEM: Array(pem.utf8), location: location,
            certificatePEM: object["certificate"]?.stringValue.map { Array($0.utf8) }, created: created)
    }

    public static func == (lhs: ClientKey, rhs: ClientKey) -> Bool {
        lhs.thumbprint == rhs.thumbprint && lhs.location == rhs.location && lhs.certificate == rhs.certificate
            && lhs.privateKeyPEM == rhs.privateKeyPEM
    }
}

extension ClientKey: CustomStringConvertible {
    /// Never the private key.
    public var description: String { "ClientKey(\(kind.rawValue), \(thumbprint))" }
}

/// The TPM as the TPM tools find it, and the error when it cannot be used.
public enum TPMAccess {
    /// The TCTI tokenctl's TPM keys use: `TPM2OPENSSL_TCTI` (the tpm2 provider's own), else
    /// `TPM2TOOLS_TCTI` (tpm2-tools'), else the kernel's resource manager `/dev/tpmrm0`.
    public static func tcti(_ environment: Environment = .process) -> String {
        if let tcti = environment["TPM2OPENSSL_TCTI"], !tcti.isEmpty { return tcti }
        if let tcti = environment["TPM2TOOLS_TCTI"], !tcti.isEmpty { return tcti }
        return "device:/dev/tpmrm0"
    }

    /// Before the tpm2 provider is first loaded: point it at the TCTI `tcti(_:)` names (it reads
    /// TPM2OPENSSL_TCTI only, and without it tries its own list, not tpm2-tools' variable).
    static func prepareProviderEnvironment(_ environment: Environment = .process) {
        guard environment["TPM2OPENSSL_TCTI"]?.isEmpty ?? true else { return }
        Environment.setProcessVariable("TPM2OPENSSL_TCTI", tcti(environment))
    }

    static let accessHint: Suggestion =
        "Use a machine with a TPM 2.0, and give your user access to it: Debian's tpm-udev (60-tpm-udev.rules) makes /dev/tpmrm0 readable by group 'tss': 'sudo usermod -aG tss $USER', then log in again. Another TPM is named with TPM2OPENSSL_TCTI (or TPM2TOOLS_TCTI). The tpm2 provider comes with Debian's tpm2-openssl."

    /// A failure inside the TPM or of its provider: 69, with how to get access.
    static func error(_ error: OpenSSLError) -> TokenctlError {
        TokenctlError(
            .serviceUnavailable, "cannot use the TPM (\(TerminalText.short(tcti()))): \(error)", hint: accessHint)
    }
}
