// Every OpenSSL (libcrypto) call of tokenctl lives in this file. libcrypto is loaded on first
// use (Sources/CCrypto), so engine runs that neither log in nor check a signature never map it.
import CCrypto

/// An OpenSSL failure, with the library's own reason from `ERR_get_error`.
public struct OpenSSLError: Error, Equatable, CustomStringConvertible {
    public var operation: String
    public var reason: String

    init(_ operation: String) {
        self.operation = operation
        var text = ""
        while case let code = tokenctl_err_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            tokenctl_err_error_string_n(code, &buffer, buffer.count)
            text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        self.reason = text.isEmpty ? "unknown error" : text
    }

    /// libcrypto could not be loaded: `reason` names the library (no `ERR_get_error` without it).
    init(unavailable reason: String) {
        operation = "libcrypto"
        self.reason = reason
    }

    init(_ operation: String, reason: String) {
        tokenctl_err_clear_error()
        self.operation = operation
        self.reason = reason
    }

    public var description: String { "\(operation): \(reason)" }
}

/// The few primitives tokenctl needs: SHA-256 (PKCE S256) and RS256/PS256/ES256/EdDSA signature checks (ID tokens).
enum OpenSSL {
    /// Why libcrypto cannot be used, or nil once it is loaded (on the first call; thread-safe).
    /// Entry points check this first: calling through the unloaded table would crash.
    static var unavailableReason: String? {
        guard let failure = tokenctl_crypto_load() else { return nil }
        return unavailableMessage(String(cString: failure))
    }

    static func unavailableMessage(_ failure: String) -> String {
        "cannot load OpenSSL's libcrypto (\(TOKENCTL_CRYPTO_SONAME)): \(failure); install libssl3"
    }

    /// What loading `soname` as libcrypto would say (nil: it has every function tokenctl calls),
    /// without touching the loaded table: for tests of the failure path.
    static func loadProblem(soname: String) -> String? {
        var api = tokenctl_crypto_api()
        var message = [CChar](repeating: 0, count: 256)
        guard let failure = tokenctl_crypto_open(soname, &api, &message, message.count) else { return nil }
        return String(cString: failure)
    }

    private static func requireLibrary() throws(OpenSSLError) {
        if let reason = unavailableReason { throw OpenSSLError(unavailable: reason) }
    }

    /// SHA-256 of `bytes`. Callers check `unavailableReason` first (login does, before PKCE).
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        if let reason = unavailableReason { fatalError(reason) }
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            tokenctl_evp_digest(input.baseAddress, input.count, &digest, &length, tokenctl_evp_sha256(), nil)
        }
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        return digest
    }

    /// HMAC-SHA256 (RFC 2104) of `message` keyed with `key`: HS256 (RFC 7518 §3.2).
    static func hmacSHA256(key: [UInt8], message: [UInt8]) throws(OpenSSLError) -> [UInt8] {
        try requireLibrary()
        var digest = [UInt8](repeating: 0, count: 64)
        var length: UInt32 = 0
        let result = key.withUnsafeBytes { key in
            message.withUnsafeBufferPointer { message in
                tokenctl_hmac(
                    tokenctl_evp_sha256(), key.baseAddress, Int32(key.count), message.baseAddress, message.count,
                    &digest, &length)
            }
        }
        guard result != nil, length == 32 else { throw OpenSSLError("HMAC(SHA-256)") }
        return Array(digest.prefix(32))
    }

    /// An RSA public key from its modulus and exponent (big-endian bytes, as in a JWK).
    static func rsaPublicKey(modulus: [UInt8], exponent: [UInt8]) throws(OpenSSLError) -> PublicKey {
        try requireLibrary()
        guard let builder = tokenctl_ossl_param_bld_new() else { throw OpenSSLError("OSSL_PARAM_BLD_new") }
        defer { tokenctl_ossl_param_bld_free(builder) }
        let n = modulus.withUnsafeBufferPointer { tokenctl_bn_bin2bn($0.baseAddress, Int32($0.count), nil) }
        let e = exponent.withUnsafeBufferPointer { tokenctl_bn_bin2bn($0.baseAddress, Int32($0.count), nil) }
        defer {
            tokenctl_bn_free(n)
            tokenctl_bn_free(e)
        }
        guard let n, let e, tokenctl_ossl_param_bld_push_bn(builder, tokenctl_param_rsa_n(), n) == 1,
            tokenctl_ossl_param_bld_push_bn(builder, tokenctl_param_rsa_e(), e) == 1
        else {
            throw OpenSSLError("building RSA key parameters")
        }
        return try fromData(builder, type: "RSA")
    }

    /// A P-256 public key from its affine coordinates (32 bytes each, as in a JWK).
    static func p256PublicKey(x: [UInt8], y: [UInt8]) throws(OpenSSLError) -> PublicKey {
        try requireLibrary()
        guard let builder = tokenctl_ossl_param_bld_new() else { throw OpenSSLError("OSSL_PARAM_BLD_new") }
        defer { tokenctl_ossl_param_bld_free(builder) }
        // The uncompressed point: 0x04 || x || y (SEC 1 §2.3.3).
        let point: [UInt8] = [0x04] + x + y
        // OSSL_PARAM_BLD keeps pointers to names and strings until to_param: C literals (static storage).
        guard
            tokenctl_ossl_param_bld_push_utf8_string(builder, tokenctl_param_group_name(), tokenctl_curve_p256(), 0)
                == 1
        else {
            throw OpenSSLError("building EC key parameters")
        }
        // The octet string is also kept by pointer: build the key while the buffer is alive.
        let result: Result<PublicKey, OpenSSLError> = point.withUnsafeBytes { buffer in
            guard
                tokenctl_ossl_param_bld_push_octet_string(
                    builder, tokenctl_param_public_key(), buffer.baseAddress, buffer.count) == 1
            else {
                return .failure(OpenSSLError("building EC key parameters"))
            }
            return Result { () throws(OpenSSLError) -> PublicKey in try fromData(builder, type: "EC") }
        }
        return try result.get()
    }

    /// An Ed25519 public key from its 32 raw bytes (RFC 8037 §2, the JWK's `x`).
    static func ed25519PublicKey(_ raw: [UInt8]) throws(OpenSSLError) -> PublicKey {
        try requireLibrary()
        let key = raw.withUnsafeBufferPointer {
            tokenctl_evp_pkey_new_raw_public_key(tokenctl_evp_pkey_ed25519(), nil, $0.baseAddress, $0.count)
        }
        guard let key else { throw OpenSSLError("EVP_PKEY_new_raw_public_key(ED25519)") }
        return PublicKey(key)
    }

    private static func fromData(_ builder: OpaquePointer, type: String) throws(OpenSSLError) -> PublicKey {
        guard let parameters = tokenctl_ossl_param_bld_to_param(builder) else {
            throw OpenSSLError("OSSL_PARAM_BLD_to_param")
        }
        defer { tokenctl_ossl_param_free(parameters) }
        guard let context = tokenctl_evp_pkey_ctx_new_from_name(nil, type, nil) else {
            throw OpenSSLError("EVP_PKEY_CTX_new_from_name(\(type))")
        }
        defer { tokenctl_evp_pkey_ctx_free(context) }
        guard tokenctl_evp_pkey_fromdata_init(context) == 1 else { throw OpenSSLError("EVP_PKEY_fromdata_init") }
        var key: OpaquePointer?
        guard tokenctl_evp_pkey_fromdata(context, &key, tokenctl_evp_pkey_public_key_selection(), parameters) == 1,
            let key
        else {
            throw OpenSSLError("EVP_PKEY_fromdata(\(type))")
        }
        return PublicKey(key)
    }

    /// Verify a SHA-256 signature over `message`: PKCS#1 v1.5 for RSA, DER ECDSA for EC keys.
    static func verifySHA256(key: PublicKey, message: [UInt8], signature: [UInt8]) -> Bool {
        guard unavailableReason == nil, let context = tokenctl_evp_md_ctx_new() else { return false }
        defer { tokenctl_evp_md_ctx_free(context) }
        return key.withUnsafeHandle { handle in
            guard tokenctl_evp_digest_verify_init(context, nil, tokenctl_evp_sha256(), nil, handle) == 1 else {
                tokenctl_err_clear_error()
                return false
            }
            let result = message.withUnsafeBufferPointer { message in
                signature.withUnsafeBufferPointer { signature in
                    tokenctl_evp_digest_verify(
                        context, signature.baseAddress, signature.count, message.baseAddress, message.count)
                }
            }
            tokenctl_err_clear_error()
            return result == 1
        }
    }

    /// Verify an RSASSA-PSS signature (RFC 8017 §8.1) with SHA-256, MGF1-SHA-256 and a 32-byte
    /// salt: PS256 (RFC 7518 §3.5).
    static func verifyRSAPSSSHA256(key: PublicKey, message: [UInt8], signature: [UInt8]) -> Bool {
        guard unavailableReason == nil, let context = tokenctl_evp_md_ctx_new() else { return false }
        defer { tokenctl_evp_md_ctx_free(context) }
        return key.withUnsafeHandle { handle in
            defer { tokenctl_err_clear_error() }
            // The key context belongs to the digest context (freed with it).
            var keyContext: OpaquePointer?
            guard tokenctl_evp_digest_verify_init(context, &keyContext, tokenctl_evp_sha256(), nil, handle) == 1,
                let keyContext,
                tokenctl_evp_pkey_ctx_set_rsa_padding(keyContext, tokenctl_rsa_pkcs1_pss_padding()) == 1,
                tokenctl_evp_pkey_ctx_set_rsa_mgf1_md(keyContext, tokenctl_evp_sha256()) == 1,
                tokenctl_evp_pkey_ctx_set_rsa_pss_saltlen(keyContext, 32) == 1
            else {
                return false
            }
            let result = message.withUnsafeBufferPointer { message in
                signature.withUnsafeBufferPointer { signature in
                    tokenctl_evp_digest_verify(
                        context, signature.baseAddress, signature.count, message.baseAddress, message.count)
                }
            }
            return result == 1
        }
    }

    /// Verify an Ed25519 signature (RFC 8032): one-shot, no separate digest.
    static func verifyEd25519(key: PublicKey, message: [UInt8], signature: [UInt8]) -> Bool {
        guard signature.count == 64, unavailableReason == nil, let context = tokenctl_evp_md_ctx_new() else {
            return false
        }
        defer { tokenctl_evp_md_ctx_free(context) }
        return key.withUnsafeHandle { handle in
            defer { tokenctl_err_clear_error() }
            guard tokenctl_evp_digest_verify_init(context, nil, nil, nil, handle) == 1 else { return false }
            let result = message.withUnsafeBufferPointer { message in
                signature.withUnsafeBufferPointer { signature in
                    tokenctl_evp_digest_verify(
                        context, signature.baseAddress, signature.count, message.baseAddress, message.count)
                }
            }
            return result == 1
        }
    }

    /// A JOSE ES256 signature (raw r || s, RFC 7518 §3.4) as the DER ECDSA-Sig-Value OpenSSL verifies.
    static func derECDSASignature(raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 64, unavailableReason == nil, let signature = tokenctl_ecdsa_sig_new() else { return nil }
        defer { tokenctl_ecdsa_sig_free(signature) }
        let r = raw[0..<32].withUnsafeBufferPointer { tokenctl_bn_bin2bn($0.baseAddress, 32, nil) }
        let s = raw[32..<64].withUnsafeBufferPointer { tokenctl_bn_bin2bn($0.baseAddress, 32, nil) }
        // set0 takes ownership of r and s on success only.
        guard let r, let s, tokenctl_ecdsa_sig_set0(signature, r, s) == 1 else {
            tokenctl_bn_free(r)
            tokenctl_bn_free(s)
            return nil
        }
        var output: UnsafeMutablePointer<UInt8>?
        let length = tokenctl_i2d_ecdsa_sig(signature, &output)
        guard length > 0, let output else { return nil }
        defer { tokenctl_openssl_free(output) }
        return Array(UnsafeBufferPointer(start: output, count: Int(length)))
    }

    /// An owned `EVP_PKEY*`, freed in deinit.
    final class PublicKey: @unchecked Sendable {
        private let handle: OpaquePointer

        init(_ handle: OpaquePointer) { self.handle = handle }
        deinit { tokenctl_evp_pkey_free(handle) }

        func withUnsafeHandle<Result>(_ body: (OpaquePointer) -> Result) -> Result { body(handle) }

        var bits: Int { Int(tokenctl_evp_pkey_get_bits(handle)) }
    }
}
