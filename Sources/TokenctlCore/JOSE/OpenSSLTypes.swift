// The values Crypto_openssl.swift takes and gives that make no libcrypto call.

extension OpenSSLError {
    /// libcrypto could not be loaded: `reason` names the library (no `ERR_get_error` without it).
    init(unavailable reason: String) {
        operation = "libcrypto"
        self.reason = reason
    }

    public var description: String { "\(operation): \(reason)" }
}

extension OpenSSL {
    /// Where a private key lives: libcrypto's memory, or inside a TPM 2.0 through the tpm2
    /// provider (tpm2-openssl), in the library context `tokenctl_tpm2_library` makes.
    enum KeyHome: Sendable, Equatable {
        case software
        case tpm
    }

    /// The public parameters of a DER SubjectPublicKeyInfo: a P-256 key's x and y, or an RSA key's n and e.
    enum PublicParameters: Equatable {
        case p256(x: [UInt8], y: [UInt8])
        case rsa(n: [UInt8], e: [UInt8])
    }

    /// A certificate's facts, from PEM or DER.
    struct CertificateFacts: Equatable {
        var der: [UInt8]
        var pem: [UInt8]
        var subject: String
        var issuer: String
        var notBefore: Int
        var notAfter: Int
        var publicKeyDER: [UInt8]
    }
}
