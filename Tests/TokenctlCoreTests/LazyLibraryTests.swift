import Testing

@testable import TokenctlCore

/// libcrypto and libqrencode are dlopen-ed on first use (Sources/CCrypto, Sources/CQRencode). The
/// real libraries cannot be hidden from a test process, so the failure path is exercised by
/// pointing the same loader at a library that is absent, and at one that is not the right one.
@Suite("Lazily loaded libraries")
struct LazyLibraryTests {
    @Test("libcrypto, libssl and libqrencode load, with every function tokenctl calls")
    func present() {
        #expect(OpenSSL.unavailableReason == nil)
        #expect(QRCode.unavailableReason == nil)
        #expect(OpenSSL.loadProblem(soname: "libcrypto.so.3") == nil)
        #expect(OpenSSL.tlsLoadProblem(soname: "libssl.so.3") == nil)
        #expect(
            OpenSSL.tlsLoadProblem(soname: "libc.so.6")
                == "libc.so.6 lacks a function tokenctl needs (SSL_CTX_use_certificate)")
        #expect(QRCode.loadProblem(soname: "libqrencode.so.4") == nil)
    }

    @Test("an absent library is named in the reason")
    func absent() throws {
        let crypto = try #require(OpenSSL.loadProblem(soname: "libtokenctl-absent-crypto.so.3"))
        #expect(crypto.contains("libtokenctl-absent-crypto.so.3: cannot open shared object file"))
        let qr = try #require(QRCode.loadProblem(soname: "libtokenctl-absent-qrencode.so.4"))
        #expect(qr.contains("libtokenctl-absent-qrencode.so.4: cannot open shared object file"))
    }

    @Test("a library without the functions is named, with the first one missing")
    func lacking() {
        #expect(OpenSSL.loadProblem(soname: "libc.so.6") == "libc.so.6 lacks a function tokenctl needs (ERR_get_error)")
        #expect(
            QRCode.loadProblem(soname: "libc.so.6") == "libc.so.6 lacks a function tokenctl needs (QRcode_encodeString)"
        )
    }

    @Test("the messages a user sees name libcrypto and say what to install")
    func messages() {
        let reason = OpenSSL.unavailableMessage(
            "libcrypto.so.3: cannot open shared object file: No such file or directory")
        #expect(
            reason
                == "cannot load OpenSSL's libcrypto (libcrypto.so.3): libcrypto.so.3: cannot open shared object file: No such file or directory; install libssl3"
        )
        #expect(JWTError.cryptoUnavailable(reason).description == "the token's signature cannot be checked: " + reason)
        #expect(OpenSSLError(unavailable: reason).description == "libcrypto: " + reason)
    }
}
