// Fuzz target: a JWK Set document (RFC 7517 §5) as fetched from an issuer's jwks_uri:
// JSONWebKeySet.parse, every key's canVerify and publicKey() (base64url, then OpenSSL through the
// dlopen-ed libcrypto), and JWTVerifier.verify of fixed tokens (RS256, PS256, ES256, EdDSA; signed
// by the keys of the JWKS seed) against the fuzzed set: key selection by kid/alg/use/kty.
//
// Input: the JWKS document bytes.
// fuzz-extra-sources:
@testable import TokenctlCore

let signedTokens = [
    "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzYTEiLCJ0eXAiOiJKV1QifQ.eyJpc3MiOiJodHRwczovL2xvZ2luLmV4YW1wbGUuY29tIiwic3ViIjoidXNlci0xIiwiYXVkIjoiY2xpIiwiZXhwIjoxNzY0NDI4NjAwLCJpYXQiOjE3NjQ0MjUwMDAsIm5vbmNlIjoibi0wUzZfV3pBMk1qIn0.HKfy8l4EB1hdJV3pVBeuVq6EwQb5GG3hGnr9lAl0KoYbhkKwDfMUfiWVhM1QetrsrwtiWX18FWYUV2IR-v2E4mUidIzPDwSXtQzygOYZT2cVdXwUFc_vHxEPNRR_9K8CBbY-0ypf5qXSY5DY5cOpGJ1mLNL0Kuil_WSaH1mrM7ggLChxD7n_EA8LRD0hQKY6ur8RzS4lTKArgIx4QMX3wm7EQTiOz8RCNMo_dDt7QKKHzAOOYta63B9FZcQnzBIeaTMPVegPrTrVYX_8O2yWH1XkvNtSqchSSywQmB84B9APwrnAlzAMyEXsLbMArneZ1DmVVPhlq6AC5Fwq-8yolQ",
    "eyJhbGciOiJQUzI1NiIsImtpZCI6InJzYS1wc3MiLCJ0eXAiOiJKV1QifQ.eyJpc3MiOiJodHRwczovL2xvZ2luLmV4YW1wbGUuY29tIiwic3ViIjoidXNlci0xIiwiYXVkIjoiY2xpIiwiZXhwIjoxNzY0NDI4NjAwLCJpYXQiOjE3NjQ0MjUwMDAsIm5vbmNlIjoibi0wUzZfV3pBMk1qIn0.l294-NCVJLVfq6fzArq104SnZgzgy-1qqatkncunTvRGaLRiqQ4kCOtWbaO8a3091LbKhZtsTQ7Hdxy40n37jiK-z9Yutq-AnYkFTE89S_vl7Uh9rWei6JV9mLHyv7nABwKmwfNNKlaeVglrvos7nbwaMpX8ZwlkVxq3L0STu-S2O7Qgc0uNkeecv3I8l-2oR7x1TlIVUIgLFqCd5m-aQQcPjjeLm1LZZSRyYa9zJE4PEb9lQgXibj81jaZnihwfULTxVQYhrno4nuqLTYuSnoA3x9fJ8ZvQd0Q2ncQrAG_FyXwcPT8_bckrGi4TcztgG_G5g9PTzpaofyo7PtuVjg",
    "eyJhbGciOiJFUzI1NiIsImtpZCI6ImVjMSIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJodHRwczovL2xvZ2luLmV4YW1wbGUuY29tIiwic3ViIjoidXNlci0xIiwiYXVkIjoiY2xpIiwiZXhwIjoxNzY0NDI4NjAwLCJpYXQiOjE3NjQ0MjUwMDAsIm5vbmNlIjoibi0wUzZfV3pBMk1qIn0.LloTEPhKUvC_MCGif1c0XRKar5HsZYGbP3SaCU7D31f0_BLOIwbQ5VFNNhVNGVkZduTJh-EYROwXxfUdsNZF4w",
    "eyJhbGciOiJFZERTQSIsImtpZCI6ImVkMSIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJodHRwczovL2xvZ2luLmV4YW1wbGUuY29tIiwic3ViIjoidXNlci0xIiwiYXVkIjoiY2xpIiwiZXhwIjoxNzY0NDI4NjAwLCJpYXQiOjE3NjQ0MjUwMDAsIm5vbmNlIjoibi0wUzZfV3pBMk1qIn0.QnOyjxDUL1yofdy2xTTUNb1eNGZ8G-wIK7ot5stsUargqEeZkccarZ7zARN7wshR8IukH_o49KIhq-Ncwc2uDw",
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJWKS(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzSupport.bytes(data, size)
    let set: JSONWebKeySet
    do { set = try JSONWebKeySet.parse(bytes) } catch {
        _ = error.description
        return 0
    }
    for key in set.keys.prefix(8) {
        for algorithm in JWSAlgorithm.allCases { _ = key.canVerify(algorithm) }
        do { _ = try key.publicKey().bits } catch { _ = error.description }
    }
    for token in signedTokens {
        do { _ = try JWTVerifier.verify(token, keys: set) } catch { _ = error.description }
    }
    return 0
}
