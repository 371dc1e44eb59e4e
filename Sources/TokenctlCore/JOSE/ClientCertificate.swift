/// A TLS client certificate and its private key, as libcurl takes them (RFC 8705 §2).
public struct ClientCertificate: Sendable, Equatable {
    /// Where the certificate's private key is, as a handshake needs it.
    public enum PrivateKey: Sendable, Equatable {
        /// PEM, which libcurl copies from memory; secret: never printed, logged or written to a file.
        case pem([UInt8])
        /// Inside the TPM: its wrapped blob, useless on another TPM (`loadedForTLS()` loads it).
        case tpm(blob: [UInt8])
        /// A TPM key loaded for the handshakes of one request.
        case loaded(TLSClientKey)
    }

    public var certificatePEM: [UInt8]
    public var privateKey: PrivateKey
    /// base64url SHA-256 of the DER certificate (`x5t#S256`, RFC 8705 §3.1).
    public var thumbprint: String
    public var subject: String
    public var notAfter: Date

    public init(certificatePEM: [UInt8], privateKey: PrivateKey, thumbprint: String, subject: String, notAfter: Date) {
        self.certificatePEM = certificatePEM
        self.privateKey = privateKey
        self.thumbprint = thumbprint
        self.subject = subject
        self.notAfter = notAfter
    }

    /// The private key's PEM; nil for a key inside the TPM.
    public var privateKeyPEM: [UInt8]? { if case .pem(let pem) = privateKey { pem } else { nil } }

    /// This certificate ready for a handshake: a key inside the TPM is loaded, for as long as
    /// the result lives (its transient object is flushed after).
    ///
    /// - Throws: the TPM cannot be used (69); the TPM key is RSA (78): TLS 1.3 signs with RSA
    ///   only by RSASSA-PSS with a salt as long as the hash (RFC 8446 §4.2.3), which the tpm2
    ///   provider refuses.
    public func loadedForTLS() throws(TokenctlError) -> ClientCertificate {
        guard case .tpm(let blob) = privateKey else { return self }
        var loaded = self
        do {
            let key = try OpenSSL.readPrivateKey(pem: blob, home: .tpm)
            guard OpenSSL.isEC(key) else {
                throw TokenctlError(
                    .configuration,
                    "the client certificate's key is an RSA key inside the TPM, which cannot sign a TLS 1.3 handshake (RSA-PSS)",
                    hint: Self.tpmRSAHint)
            }
            loaded.privateKey = .loaded(try TLSClientKey(key, certificatePEM: certificatePEM))
        } catch let error as OpenSSLError {
            throw TPMAccess.error(error)
        } catch let error as TokenctlError {
            throw error
        } catch {
            throw TokenctlError(.unexpected, "cannot load the client certificate's key: \(error)")
        }
        return loaded
    }

    /// The profile is not known here, and the key to make is a rotation: the manual says how.
    static let tpmRSAHint: Suggestion =
        "Rotate the profile to an EC key inside the TPM with a certificate, and register that certificate (tokenctl-key(1), EXAMPLES)."
}

/// A TPM key loaded for TLS: libssl is given an EC key whose signatures the TPM makes. The
/// same object for the life of one request; equal only to itself.
public final class TLSClientKey: @unchecked Sendable, Equatable {
    let identity: OpaquePointer

    init(_ key: OpenSSL.PrivateKey, certificatePEM: [UInt8]) throws(OpenSSLError) {
        identity = try OpenSSL.tlsIdentity(key, certificatePEM: certificatePEM)
    }
    deinit { OpenSSL.freeTLSIdentity(identity) }

    /// What libcurl calls at each new connection's handshake (CURLOPT_SSL_CTX_FUNCTION), and its data.
    var installer:
        @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int32
    {
        OpenSSL.installTLSIdentity
    }
    var installerData: UnsafeMutableRawPointer { UnsafeMutableRawPointer(identity) }

    public static func == (lhs: TLSClientKey, rhs: TLSClientKey) -> Bool { lhs === rhs }
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
