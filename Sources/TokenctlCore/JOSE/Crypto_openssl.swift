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

    init(_ operation: String, reason: String) {
        tokenctl_err_clear_error()
        self.operation = operation
        self.reason = reason
    }
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
        LazyLibrary.unavailableMessage(
            "OpenSSL's libcrypto", soname: TOKENCTL_CRYPTO_SONAME, failure: failure, package: "libssl3")
    }

    /// What loading `soname` as libcrypto would say (nil: it has every function tokenctl calls),
    /// without touching the loaded table: for tests of the failure path.
    static func loadProblem(soname: String) -> String? {
        var api = tokenctl_crypto_api()
        return LazyLibrary.loadProblem { tokenctl_crypto_open(soname, &api, $0, $1) }
    }

    /// Why libssl (opened only inside libcurl's handshake of a client certificate whose key is
    /// in the TPM) cannot be opened as `soname` with every function tokenctl calls; nil when it can.
    static func tlsLoadProblem(soname: String) -> String? {
        var api = tokenctl_ssl_api()
        return LazyLibrary.loadProblem { tokenctl_ssl_open(soname, &api, $0, $1) }
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

// MARK: Client keys and certificates (private_key_jwt, RFC 7523 §2.2; mTLS, RFC 8705)

extension OpenSSL {
    /// An owned private `EVP_PKEY*` (freed in deinit; a TPM key's transient object with it: a
    /// TPM without a resource manager, such as a swtpm socket, holds only three).
    final class PrivateKey: @unchecked Sendable {
        private let handle: OpaquePointer
        let home: KeyHome

        init(_ handle: OpaquePointer, home: KeyHome) {
            self.handle = handle
            self.home = home
        }
        deinit { tokenctl_evp_pkey_free(handle) }

        func withUnsafeHandle<Result>(_ body: (OpaquePointer) throws(OpenSSLError) -> Result) throws(OpenSSLError)
            -> Result
        {
            try body(handle)
        }
    }

    /// The tpm2 provider's library context, or why it cannot be had.
    static func tpmLibrary() throws(OpenSSLError) -> OpaquePointer {
        try requireLibrary()
        TPMAccess.prepareProviderEnvironment()
        guard let library = tokenctl_tpm2_library() else {
            throw OpenSSLError("loading OpenSSL's tpm2 provider (Debian: tpm2-openssl)")
        }
        return library
    }

    private static func context(_ home: KeyHome) throws(OpenSSLError) -> (OpaquePointer?, String?) {
        switch home {
        case .software: (nil, nil)
        case .tpm: (try tpmLibrary(), "?provider=tpm2")
        }
    }

    /// Bytes a C helper allocated, copied out and cleared.
    private static func takeBuffer(
        _ operation: String,
        _ body: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, UnsafeMutablePointer<Int>) -> Int32
    ) throws(OpenSSLError) -> [UInt8] {
        var output: UnsafeMutablePointer<UInt8>?
        var length = 0
        guard body(&output, &length) == 1, let output else { throw OpenSSLError(operation) }
        defer { tokenctl_buffer_free(output, length) }
        return Array(UnsafeBufferPointer(start: output, count: length))
    }

    /// A new key pair: P-256 (`rsaBits` nil) or RSA.
    static func generateKey(rsaBits: Int?, home: KeyHome) throws(OpenSSLError) -> PrivateKey {
        try requireLibrary()
        let library: OpaquePointer? = home == .tpm ? try tpmLibrary() : nil
        let properties: String? = home == .tpm ? "provider=tpm2" : nil
        let type = rsaBits == nil ? "EC" : "RSA"
        guard let key = tokenctl_key_generate(library, type, Int32(rsaBits ?? 0), properties) else {
            throw OpenSSLError(home == .tpm ? "creating a \(type) key in the TPM" : "generating a \(type) key")
        }
        return PrivateKey(key, home: home)
    }

    /// A private key from PEM (PKCS#8, traditional EC or RSA; the TSS2 PRIVATE KEY of a TPM key with `.tpm`).
    static func readPrivateKey(pem: [UInt8], home: KeyHome) throws(OpenSSLError) -> PrivateKey {
        try requireLibrary()
        let (library, properties) = try context(home)
        let key = pem.withUnsafeBytes { tokenctl_key_read_pem(library, properties, $0.baseAddress, $0.count) }
        guard let key else { throw OpenSSLError("reading the private key") }
        return PrivateKey(key, home: home)
    }

    /// The private key as PEM: PKCS#8 for a software key, the TPM-wrapped blob for a TPM key. A secret.
    static func privateKeyPEM(_ key: PrivateKey) throws(OpenSSLError) -> [UInt8] {
        try key.withUnsafeHandle { handle throws(OpenSSLError) in
            try takeBuffer("writing the private key") { tokenctl_key_private_pem(handle, $0, $1) }
        }
    }

    /// The public key as DER SubjectPublicKeyInfo.
    static func publicKeyDER(_ key: PrivateKey) throws(OpenSSLError) -> [UInt8] {
        try key.withUnsafeHandle { handle throws(OpenSSLError) in
            try takeBuffer("writing the public key") { tokenctl_key_public_der(handle, $0, $1) }
        }
    }

    static func publicParameters(der: [UInt8]) throws(OpenSSLError) -> PublicParameters {
        try requireLibrary()
        let parsed = der.withUnsafeBufferPointer { tokenctl_key_from_public_der($0.baseAddress, $0.count) }
        guard let parsed else { throw OpenSSLError("reading the public key") }
        let key = PublicKey(parsed)
        let result = key.withUnsafeHandle { handle in
            Result { () throws(OpenSSLError) -> PublicParameters in
                func parameter(_ name: String, width: Int32) throws(OpenSSLError) -> [UInt8] {
                    try takeBuffer("reading the public key's \(name)") {
                        tokenctl_key_bn_param(handle, name, width, $0, $1)
                    }
                }
                if tokenctl_key_is_a(handle, "EC") == 1 {
                    var name = [CChar](repeating: 0, count: 64)
                    guard tokenctl_key_group_name(handle, &name, name.count) == 1,
                        String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                            == "prime256v1"
                    else {
                        throw OpenSSLError("reading the public key", reason: "only P-256 EC keys are supported")
                    }
                    return .p256(x: try parameter("qx", width: 32), y: try parameter("qy", width: 32))
                }
                if tokenctl_key_is_a(handle, "RSA") == 1 {
                    return .rsa(n: try parameter("n", width: 0), e: try parameter("e", width: 0))
                }
                throw OpenSSLError("reading the public key", reason: "only EC P-256 and RSA keys are supported")
            }
        }
        return try result.get()
    }

    /// The public key as PEM (SubjectPublicKeyInfo): never the private part.
    static func publicKeyPEM(_ key: PrivateKey) throws(OpenSSLError) -> [UInt8] {
        try key.withUnsafeHandle { handle throws(OpenSSLError) in
            try takeBuffer("writing the public key") { tokenctl_key_public_pem(handle, $0, $1) }
        }
    }

    /// Whether `key` is an EC key.
    static func isEC(_ key: PrivateKey) -> Bool {
        (try? key.withUnsafeHandle { tokenctl_key_is_a($0, "EC") == 1 }) ?? false
    }

    /// A TLS client identity for libcurl's SSL_CTX callback: the certificate, and an EC key
    /// whose signatures `key` makes in its own library context (a TPM key's); freed with
    /// `freeTLSIdentity`.
    static func tlsIdentity(_ key: PrivateKey, certificatePEM: [UInt8]) throws(OpenSSLError) -> OpaquePointer {
        let (library, properties) = try context(key.home)
        let identity = try key.withUnsafeHandle { handle in
            certificatePEM.withUnsafeBytes {
                tokenctl_tls_identity_new(handle, library, properties ?? "", $0.baseAddress, $0.count)
            }
        }
        guard let identity else {
            throw OpenSSLError("preparing the client certificate's key for TLS")
        }
        return identity
    }

    static func freeTLSIdentity(_ identity: OpaquePointer) { tokenctl_tls_identity_free(identity) }

    /// The CURLOPT_SSL_CTX_FUNCTION that installs an identity (its data) on libcurl's SSL_CTX.
    static let installTLSIdentity:
        @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int32 =
            tokenctl_tls_identity_install

    /// A SHA-256 signature: PKCS#1 v1.5 (`pss` false) or PSS for RSA, ECDSA as raw r || s
    /// (RFC 7518 §3.4) for P-256.
    static func sign(_ key: PrivateKey, message: [UInt8], pss: Bool, ecdsa: Bool) throws(OpenSSLError) -> [UInt8] {
        let (library, properties) = try context(key.home)
        let signature = try key.withUnsafeHandle { handle throws(OpenSSLError) in
            try takeBuffer(key.home == .tpm ? "signing in the TPM" : "signing") { output, length in
                message.withUnsafeBufferPointer {
                    tokenctl_key_sign(
                        handle, library, properties, pss ? 1 : 0, $0.baseAddress, $0.count, output, length)
                }
            }
        }
        guard ecdsa else { return signature }
        var raw = [UInt8](repeating: 0, count: 64)
        guard signature.withUnsafeBufferPointer({ tokenctl_ecdsa_der_to_raw($0.baseAddress, $0.count, 32, &raw) }) == 1
        else {
            throw OpenSSLError("converting the ECDSA signature")
        }
        return raw
    }

    /// A self-signed certificate for `key` (subject and issuer CN=`commonName`), as DER.
    static func selfSignedCertificate(_ key: PrivateKey, commonName: String, lifetime: Int) throws(OpenSSLError)
        -> [UInt8]
    {
        let (library, properties) = try context(key.home)
        // A positive 63-bit random serial (RFC 5280 §4.1.2.2: unique per issuer, at most 20 octets).
        var serial = SecureRandom.bytes(8)
        serial[0] &= 0x7f
        return try key.withUnsafeHandle { handle throws(OpenSSLError) in
            try takeBuffer("making the certificate") { output, length in
                serial.withUnsafeBufferPointer {
                    tokenctl_certificate_self_signed(
                        handle, library, properties, commonName, lifetime, $0.baseAddress, $0.count, output, length)
                }
            }
        }
    }

    static func certificateFacts(_ bytes: [UInt8]) throws(OpenSSLError) -> CertificateFacts {
        try requireLibrary()
        let isPEM =
            bytes.starts(with: Array("-----BEGIN".utf8))
            || String(decoding: bytes, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----")
        let parsed = bytes.withUnsafeBufferPointer { buffer in
            isPEM
                ? tokenctl_certificate_read_pem(buffer.baseAddress, buffer.count)
                : tokenctl_certificate_read_der(buffer.baseAddress, buffer.count)
        }
        guard let certificate = parsed else { throw OpenSSLError("reading the certificate") }
        defer { tokenctl_certificate_free(certificate) }
        var notBefore: Int64 = 0
        var notAfter: Int64 = 0
        guard tokenctl_certificate_validity(certificate, &notBefore, &notAfter) == 1 else {
            throw OpenSSLError("reading the certificate's validity")
        }
        func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
        return CertificateFacts(
            der: try takeBuffer("writing the certificate") { tokenctl_certificate_der(certificate, $0, $1) },
            pem: try takeBuffer("writing the certificate") { tokenctl_certificate_pem(certificate, $0, $1) },
            subject: text(try takeBuffer("reading the subject") { tokenctl_certificate_name(certificate, 0, $0, $1) }),
            issuer: text(try takeBuffer("reading the issuer") { tokenctl_certificate_name(certificate, 1, $0, $1) }),
            notBefore: Int(notBefore), notAfter: Int(notAfter),
            publicKeyDER: try takeBuffer("reading the certificate's key") {
                tokenctl_certificate_public_der(certificate, $0, $1)
            })
    }

    /// A PKCS#12 bundle's private key (PEM, PKCS#8) and certificate (PEM), either possibly absent.
    static func pkcs12(_ bytes: [UInt8], password: String?) throws(OpenSSLError) -> (
        keyPEM: [UInt8]?, certificatePEM: [UInt8]?
    ) {
        try requireLibrary()
        var key: OpaquePointer?
        var certificate: OpaquePointer?
        let ok = bytes.withUnsafeBufferPointer { buffer in
            tokenctl_pkcs12_parse(buffer.baseAddress, buffer.count, password, &key, &certificate)
        }
        guard ok == 1 else { throw OpenSSLError("reading the PKCS#12 file (a wrong or missing password?)") }
        let owned = key.map { PrivateKey($0, home: .software) }
        defer { if let certificate { tokenctl_certificate_free(certificate) } }
        let keyPEM = try owned.map { key throws(OpenSSLError) in try privateKeyPEM(key) }
        let certificatePEM = try certificate.map { certificate throws(OpenSSLError) in
            try takeBuffer("writing the certificate") { tokenctl_certificate_pem(certificate, $0, $1) }
        }
        return (keyPEM, certificatePEM)
    }
}
