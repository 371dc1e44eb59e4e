// Every libgcrypt call of tokenctl lives in this file: DPoP's P-256 keys and ES256 proofs
// (see CGcrypt/include/CGcrypt.h for why DPoP signs with libgcrypt and not OpenSSL's libcrypto).
import CGcrypt

/// A libgcrypt failure, or the library missing. Never holds key material.
public struct GcryptError: Error, Equatable, CustomStringConvertible {
    public var operation: String
    public var reason: String

    init(_ operation: String, _ error: gcry_error_t) {
        self.operation = operation
        reason = String(cString: tokenctl_gcry_error_text(error))
    }

    init(_ operation: String, reason: String) {
        self.operation = operation
        self.reason = reason
    }

    public var description: String { "\(operation): \(reason)" }
}

enum Gcrypt {
    /// Load (once) and check libgcrypt.
    static func requireLibrary() throws(GcryptError) {
        if let failure = tokenctl_gcrypt_load() {
            throw GcryptError(
                "libgcrypt",
                reason: "cannot load \(TOKENCTL_GCRYPT_SONAME): \(String(cString: failure)); install libgcrypt20")
        }
    }

    /// SHA-256 of `bytes`.
    static func sha256(_ bytes: [UInt8]) throws(GcryptError) -> [UInt8] {
        try requireLibrary()
        var digest = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { input in tokenctl_gcry_sha256(input.baseAddress, input.count, &digest) }
        return digest
    }

    /// A new P-256 key pair: the private scalar (32 bytes) and the public point (65 bytes, 0x04 x y).
    static func generateP256() throws(GcryptError) -> (scalar: [UInt8], point: [UInt8]) {
        try requireLibrary()
        var scalar = [UInt8](repeating: 0, count: 32)
        var point = [UInt8](repeating: 0, count: 65)
        let error = tokenctl_gcry_p256_generate(&scalar, &point)
        guard error == 0 else { throw GcryptError("gcry_pk_genkey(NIST P-256)", error) }
        return (scalar, point)
    }

    /// Throws unless `point` is the public point of `scalar` on P-256.
    static func checkP256(scalar: [UInt8], point: [UInt8]) throws(GcryptError) {
        try requireLibrary()
        guard scalar.count == 32, point.count == 65, point[0] == 4 else {
            throw GcryptError("P-256 key", reason: "not a P-256 key pair")
        }
        let error = tokenctl_gcry_p256_check(scalar, point)
        guard error == 0 else { throw GcryptError("gcry_pk_testkey(NIST P-256)", error) }
    }

    /// An ES256 signature of `message` (SHA-256, then ECDSA P-256 with RFC 6979 nonces), as raw r || s.
    static func signES256(scalar: [UInt8], point: [UInt8], message: [UInt8]) throws(GcryptError) -> [UInt8] {
        let digest = try sha256(message)
        guard scalar.count == 32, point.count == 65 else { throw GcryptError("ES256", reason: "not a P-256 key pair") }
        var signature = [UInt8](repeating: 0, count: 64)
        let error = tokenctl_gcry_es256_sign(scalar, point, digest, &signature)
        guard error == 0 else { throw GcryptError("gcry_pk_sign(ES256)", error) }
        return signature
    }
}
