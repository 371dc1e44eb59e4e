import CCrypto // tokenctl_getrandom: libc, needs no libcrypto (SHA-256 goes through OpenSSL.sha256)
import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Random values for the authorization request: PKCE verifier (RFC 7636 §4.1), `state` and `nonce`.
public enum SecureRandom {
    /// `count` bytes from the kernel's CSPRNG (getrandom(2)); aborts if the kernel cannot provide them.
    public static func bytes(_ count: Int) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = Descriptor.retryingInterrupted {
                result.withUnsafeMutableBytes { tokenctl_getrandom($0.baseAddress! + filled, count - filled) }
            }
            if got < 0 { fatalError("getrandom failed: errno \(system_errno)") }
            filled += got
        }
        return result
    }

    /// 32 random bytes, base64url without padding (43 characters).
    public static func token() -> String { Base64URL.encode(bytes(32)) }
}

public enum Base64URL {
    public static func encode(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.hasSuffix("=") { text.removeLast() }
        return String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }
}

/// Proof Key for Code Exchange with the S256 method (RFC 7636).
public struct PKCE: Sendable, Equatable {
    public let verifier: String
    public let challenge: String
    public let method = "S256"

    public init(verifier: String = SecureRandom.token()) {
        self.verifier = verifier
        // §4.2: BASE64URL-ENCODE(SHA256(ASCII(code_verifier))).
        self.challenge = Base64URL.encode(OpenSSL.sha256(Array(verifier.utf8)))
    }
}
