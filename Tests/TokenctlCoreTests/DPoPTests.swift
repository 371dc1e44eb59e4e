import Foundation
import Testing
import TokenctlTestSupport

@testable import TokenctlCore

/// DPoP's building blocks (keys and proofs, signed with libgcrypt), checked by independent
/// verifiers: Python's `cryptography` (Debian python3-cryptography, installed by Scripts/test)
/// reads the proof, verifies its ES256 signature with the JWK in its header, and computes the
/// RFC 7638 thumbprint itself; OpenSSL (tokenctl's ID-token verifier) checks the signature too.
@Suite("DPoP: key, thumbprint and proof (verified by Python cryptography)")
struct DPoPTests {
    static let verifier = #"""
        import base64, hashlib, json, sys
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
        def b64(text):
            return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        proof, expected = sys.argv[1], json.loads(sys.argv[2])
        head, body, signature = proof.split(".")
        header, claims = json.loads(b64(head)), json.loads(b64(body))
        assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256", header
        jwk = header["jwk"]
        assert set(jwk) == {"kty", "crv", "x", "y"} and jwk["kty"] == "EC" and jwk["crv"] == "P-256", jwk
        key = ec.EllipticCurvePublicNumbers(int.from_bytes(b64(jwk["x"]), "big"), int.from_bytes(b64(jwk["y"]), "big"), ec.SECP256R1()).public_key()
        raw = b64(signature)
        assert len(raw) == 64
        der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        key.verify(der, (head + "." + body).encode(), ec.ECDSA(hashes.SHA256()))
        canonical = json.dumps({"crv": "P-256", "kty": "EC", "x": jwk["x"], "y": jwk["y"]}, separators=(",", ":"), sort_keys=True)
        thumbprint = base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()
        assert thumbprint == expected["thumbprint"], (thumbprint, expected["thumbprint"])
        ath = base64.urlsafe_b64encode(hashlib.sha256(expected["access_token"].encode()).digest()).rstrip(b"=").decode()
        for name, value in [("htm", expected["htm"]), ("htu", expected["htu"]), ("iat", expected["iat"]), ("jti", expected["jti"]), ("ath", ath), ("nonce", expected["nonce"])]:
            assert claims.get(name) == value, (name, claims.get(name), value)
        print("verified")
        """#

    func verify(_ proof: String, _ expected: [String: Any]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [
            "-c", Self.verifier, proof,
            String(decoding: try JSONSerialization.data(withJSONObject: expected), as: UTF8.self),
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        process.waitUntilExit()
        return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    @Test("a proof with every claim: its signature, header and claims verify independently; the thumbprint agrees")
    func proof() throws {
        let key = try DPoPKey.generate()
        let proof = try DPoPProof.make(
            key: key, method: "post", url: "HTTPS://Login.Example.COM:8443/realms/x/token?client=1#frag",
            issuedAt: 1_764_425_000,
            jti: "jti-1", accessToken: "at-123", nonce: "server-nonce")
        let result = try verify(
            proof,
            [
                "thumbprint": key.thumbprint, "htm": "POST", "htu": "https://login.example.com:8443/realms/x/token",
                "iat": 1_764_425_000,
                "jti": "jti-1", "access_token": "at-123", "nonce": "server-nonce",
            ])
        #expect(result == "verified\n", "\(result)")
        // A changed claim fails the independent check (the verifier can fail).
        let tampered = try verify(
            proof,
            [
                "thumbprint": key.thumbprint, "htm": "GET", "htu": "https://login.example.com:8443/realms/x/token",
                "iat": 1_764_425_000,
                "jti": "jti-1", "access_token": "at-123", "nonce": "server-nonce",
            ])
        #expect(tampered.contains("AssertionError"), "\(tampered)")
        // Our own verifier (the ID-token one) agrees on the signature.
        let parts = proof.split(separator: ".").map(String.init)
        let point = key.point
        let publicKey = try OpenSSL.p256PublicKey(x: Array(point[1..<33]), y: Array(point[33..<65]))
        let raw = try #require(UnverifiedJWT.base64URLDecode(parts[2]))
        let signature = try #require(OpenSSL.derECDSASignature(raw: raw))
        #expect(
            OpenSSL.verifySHA256(key: publicKey, message: Array((parts[0] + "." + parts[1]).utf8), signature: signature)
        )
    }

    @Test("the key's stored form reads back as the same key; a point that is not the scalar's is refused")
    func storedKey() throws {
        let key = try DPoPKey.generate()
        #expect(try DPoPKey(stored: key.stored) == key)
        #expect(key.stored.split(separator: ".").count == 3 && !key.publicJWK.contains("\"d\""))
        let other = try DPoPKey.generate()
        #expect(key != other && key.thumbprint != other.thumbprint)
        let mixed =
            key.stored.split(separator: ".")[0] + "." + other.stored.split(separator: ".")[1...].joined(separator: ".")
        #expect(throws: GcryptError.self) { try DPoPKey(stored: String(mixed)).checked() }
        #expect(try DPoPKey(stored: key.stored).checked() == key)
        #expect(throws: GcryptError.self) { try DPoPKey(stored: "a.b") }
        // A part whose unused low bits are set decodes to the same bytes but is not the form
        // `stored` writes: refused (it would not read back as written; FlatJSON fuzz target).
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var parts = key.stored.split(separator: ".").map(String.init)
        let last = parts[0].removeLast()
        parts[0].append(alphabet[alphabet.firstIndex(of: last)! + 1])
        #expect(!DPoPKey.isStoredForm(parts.joined(separator: ".")))
        #expect(throws: GcryptError.self) { try DPoPKey(stored: parts.joined(separator: ".")) }
    }

    @Test("htu: no query or fragment, scheme and host lower-cased, only absolute http(s) URIs")
    func htu() {
        #expect(DPoPProof.htu("https://AS.example.com/token?x=1#y") == "https://as.example.com/token")
        #expect(DPoPProof.htu("HTTP://127.0.0.1:8080/Path/Case") == "http://127.0.0.1:8080/Path/Case")
        #expect(DPoPProof.htu("https://as.example.com") == "https://as.example.com")
        #expect(DPoPProof.htu("ftp://as.example.com/x") == nil)
        #expect(DPoPProof.htu("/relative") == nil)
        #expect(DPoPProof.htu("https://user@as.example.com/") == nil)
    }
}
