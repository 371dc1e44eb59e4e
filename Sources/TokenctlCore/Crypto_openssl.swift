// Every OpenSSL (libcrypto) call of tokenctl lives in this file.
import CCrypto

/// An OpenSSL failure, with the library's own reason from `ERR_get_error`.
public struct OpenSSLError: Error, Equatable, CustomStringConvertible {
    public var operation: String
    public var reason: String

    init(_ operation: String) {
        self.operation = operation
        var text = ""
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        self.reason = text.isEmpty ? "unknown error" : text
    }

    public var description: String { "\(operation): \(reason)" }
}

/// The few primitives tokenctl needs: SHA-256 (PKCE S256) and RS256/PS256/ES256/EdDSA signature checks (ID tokens).
enum OpenSSL {
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &digest, &length, EVP_sha256(), nil)
        }
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        return digest
    }

    /// An RSA public key from its modulus and exponent (big-endian bytes, as in a JWK).
    static func rsaPublicKey(modulus: [UInt8], exponent: [UInt8]) throws(OpenSSLError) -> PublicKey {
        guard let builder = OSSL_PARAM_BLD_new() else { throw OpenSSLError("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        let n = modulus.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        let e = exponent.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        defer {
            BN_free(n)
            BN_free(e)
        }
        guard let n, let e, OSSL_PARAM_BLD_push_BN(builder, tokenctl_param_rsa_n(), n) == 1,
              OSSL_PARAM_BLD_push_BN(builder, tokenctl_param_rsa_e(), e) == 1 else {
            throw OpenSSLError("building RSA key parameters")
        }
        return try fromData(builder, type: "RSA")
    }

    /// A P-256 public key from its affine coordinates (32 bytes each, as in a JWK).
    static func p256PublicKey(x: [UInt8], y: [UInt8]) throws(OpenSSLError) -> PublicKey {
        guard let builder = OSSL_PARAM_BLD_new() else { throw OpenSSLError("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        // The uncompressed point: 0x04 || x || y (SEC 1 §2.3.3).
        let point: [UInt8] = [0x04] + x + y
        // OSSL_PARAM_BLD keeps pointers to names and strings until to_param: C literals (static storage).
        guard OSSL_PARAM_BLD_push_utf8_string(builder, tokenctl_param_group_name(), tokenctl_curve_p256(), 0) == 1 else {
            throw OpenSSLError("building EC key parameters")
        }
        // The octet string is also kept by pointer: build the key while the buffer is alive.
        let result: Result<PublicKey, OpenSSLError> = point.withUnsafeBytes { buffer in
            guard OSSL_PARAM_BLD_push_octet_string(builder, tokenctl_param_public_key(), buffer.baseAddress, buffer.count) == 1 else {
                return .failure(OpenSSLError("building EC key parameters"))
            }
            return Result { () throws(OpenSSLError) -> PublicKey in try fromData(builder, type: "EC") }
        }
        return try result.get()
    }

    /// An Ed25519 public key from its 32 raw bytes (RFC 8037 §2, the JWK's `x`).
    static func ed25519PublicKey(_ raw: [UInt8]) throws(OpenSSLError) -> PublicKey {
        let key = raw.withUnsafeBufferPointer { EVP_PKEY_new_raw_public_key(tokenctl_evp_pkey_ed25519(), nil, $0.baseAddress, $0.count) }
        guard let key else { throw OpenSSLError("EVP_PKEY_new_raw_public_key(ED25519)") }
        return PublicKey(key)
    }

    private static func fromData(_ builder: OpaquePointer, type: String) throws(OpenSSLError) -> PublicKey {
        guard let parameters = OSSL_PARAM_BLD_to_param(builder) else { throw OpenSSLError("OSSL_PARAM_BLD_to_param") }
        defer { OSSL_PARAM_free(parameters) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else { throw OpenSSLError("EVP_PKEY_CTX_new_from_name(\(type))") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_fromdata_init(context) == 1 else { throw OpenSSLError("EVP_PKEY_fromdata_init") }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata(context, &key, tokenctl_evp_pkey_public_key_selection(), parameters) == 1, let key else {
            throw OpenSSLError("EVP_PKEY_fromdata(\(type))")
        }
        return PublicKey(key)
    }

    /// Verify a SHA-256 signature over `message`: PKCS#1 v1.5 for RSA, DER ECDSA for EC keys.
    static func verifySHA256(key: PublicKey, message: [UInt8], signature: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        return key.withUnsafeHandle { handle in
            guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, handle) == 1 else {
                ERR_clear_error()
                return false
            }
            let result = message.withUnsafeBufferPointer { message in
                signature.withUnsafeBufferPointer { signature in
                    EVP_DigestVerify(context, signature.baseAddress, signature.count, message.baseAddress, message.count)
                }
            }
            ERR_clear_error()
            return result == 1
        }
    }

    /// Verify an RSASSA-PSS signature (RFC 8017 §8.1) with SHA-256, MGF1-SHA-256 and a 32-byte
    /// salt: PS256 (RFC 7518 §3.5).
    static func verifyRSAPSSSHA256(key: PublicKey, message: [UInt8], signature: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        return key.withUnsafeHandle { handle in
            defer { ERR_clear_error() }
            // The key context belongs to the digest context (freed with it).
            var keyContext: OpaquePointer?
            guard EVP_DigestVerifyInit(context, &keyContext, EVP_sha256(), nil, handle) == 1, let keyContext,
                  EVP_PKEY_CTX_set_rsa_padding(keyContext, tokenctl_rsa_pkcs1_pss_padding()) == 1,
                  EVP_PKEY_CTX_set_rsa_mgf1_md(keyContext, EVP_sha256()) == 1,
                  EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, 32) == 1 else {
                return false
            }
            let result = message.withUnsafeBufferPointer { message in
                signature.withUnsafeBufferPointer { signature in
                    EVP_DigestVerify(context, signature.baseAddress, signature.count, message.baseAddress, message.count)
                }
            }
            return result == 1
        }
    }

    /// Verify an Ed25519 signature (RFC 8032): one-shot, no separate digest.
    static func verifyEd25519(key: PublicKey, message: [UInt8], signature: [UInt8]) -> Bool {
        guard signature.count == 64, let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        return key.withUnsafeHandle { handle in
            defer { ERR_clear_error() }
            guard EVP_DigestVerifyInit(context, nil, nil, nil, handle) == 1 else { return false }
            let result = message.withUnsafeBufferPointer { message in
                signature.withUnsafeBufferPointer { signature in
                    EVP_DigestVerify(context, signature.baseAddress, signature.count, message.baseAddress, message.count)
                }
            }
            return result == 1
        }
    }

    /// A JOSE ES256 signature (raw r || s, RFC 7518 §3.4) as the DER ECDSA-Sig-Value OpenSSL verifies.
    static func derECDSASignature(raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 64, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = raw[0..<32].withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = raw[32..<64].withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        // set0 takes ownership of r and s on success only.
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        var output: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(signature, &output)
        guard length > 0, let output else { return nil }
        defer { tokenctl_openssl_free(output) }
        return Array(UnsafeBufferPointer(start: output, count: Int(length)))
    }

    /// An owned `EVP_PKEY*`, freed in deinit.
    final class PublicKey: @unchecked Sendable {
        private let handle: OpaquePointer

        init(_ handle: OpaquePointer) { self.handle = handle }
        deinit { EVP_PKEY_free(handle) }

        func withUnsafeHandle<Result>(_ body: (OpaquePointer) -> Result) -> Result { body(handle) }

        var bits: Int { Int(EVP_PKEY_get_bits(handle)) }
    }
}
