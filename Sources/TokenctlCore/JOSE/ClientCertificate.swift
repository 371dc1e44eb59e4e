/// A TLS client certificate and its private key, as libcurl takes them from memory (RFC 8705 §2).
public struct ClientCertificate: Sendable, Equatable {
    public var certificatePEM: [UInt8]
    /// The private key in PEM; secret: never printed, logged or written to a file. nil for a TPM key.
    public var privateKeyPEM: [UInt8]?
    /// base64url SHA-256 of the DER certificate (`x5t#S256`, RFC 8705 §3.1).
    public var thumbprint: String
    public var subject: String
    public var notAfter: Date

    public init(certificatePEM: [UInt8], privateKeyPEM: [UInt8]?, thumbprint: String, subject: String, notAfter: Date) {
        self.certificatePEM = certificatePEM
        self.privateKeyPEM = privateKeyPEM
        self.thumbprint = thumbprint
        self.subject = subject
        self.notAfter = notAfter
    }
}

extension ClientCertificate: CustomStringConvertible {
    /// Never the private key.
    public var description: String { "ClientCertificate(\(subject), x5t#S256 \(thumbprint))" }
}

/// An X.509 certificate's facts (RFC 5280), read with libcrypto.
public struct CertificateInfo: Sendable, Equatable {
    public var der: [UInt8]
    public var pem: [UInt8]
    /// RFC 4514 form, most specific first ("CN=machine-1").
    public var subject: String
    public var issuer: String
    public var notBefore: Date
    public var notAfter: Date
    /// base64url SHA-256 of the DER certificate: RFC 8705 §3.1 `x5t#S256`.
    public var thumbprint: String
    /// The certificate's public key (DER SubjectPublicKeyInfo).
    let publicKeyDER: [UInt8]

    /// A certificate in PEM or DER.
    public init(_ bytes: [UInt8]) throws(TokenctlError) {
        let facts: OpenSSL.CertificateFacts
        do { facts = try OpenSSL.certificateFacts(bytes) } catch {
            throw TokenctlError(.invalidInput, "not an X.509 certificate in PEM or DER: \(error)")
        }
        der = facts.der
        pem = facts.pem
        subject = facts.subject
        issuer = facts.issuer
        notBefore = Date(timeIntervalSince1970: Double(facts.notBefore))
        notAfter = Date(timeIntervalSince1970: Double(facts.notAfter))
        thumbprint = Base64URL.encode(OpenSSL.sha256(facts.der))
        publicKeyDER = facts.publicKeyDER
    }

    /// Whether this certificate is for the key whose public half is `publicKeyDER`.
    public func matches(_ key: ClientKey) -> Bool { publicKeyDER == key.publicKeyDER }
}
