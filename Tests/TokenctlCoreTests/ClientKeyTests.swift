import Foundation
import Testing
import TokenctlTestSupport

@testable import TokenctlCore

/// Client keys (private_key_jwt, RFC 7523 §2.2) made and used with libcrypto, checked by
/// independent parties: Python's `cryptography` (python3-cryptography, installed by
/// Scripts/test) verifies the assertions with the public JWK and computes the RFC 7638
/// thumbprint itself; the `openssl` CLI makes the PEM fixtures and reads what tokenctl writes.
@Suite("Client keys: EC and RSA pairs, PEM, JWK, thumbprints, ES256/RS256/PS256 (checked by Python and openssl)")
struct ClientKeyTests {
    static let verifier = #"""
        import base64, hashlib, json, sys
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, rsa, padding
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
        def b64(text):
            return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        assertion, jwk, expected = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
        head, body, signature = assertion.split(".")
        header, claims = json.loads(b64(head)), json.loads(b64(body))
        raw, message = b64(signature), (head + "." + body).encode()
        if jwk["kty"] == "EC":
            assert set(jwk) >= {"kty", "crv", "x", "y"} and jwk["crv"] == "P-256", jwk
            key = ec.EllipticCurvePublicNumbers(int.from_bytes(b64(jwk["x"]), "big"), int.from_bytes(b64(jwk["y"]), "big"), ec.SECP256R1()).public_key()
            assert len(raw) == 64
            key.verify(encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")), message, ec.ECDSA(hashes.SHA256()))
            canonical = {"crv": jwk["crv"], "kty": "EC", "x": jwk["x"], "y": jwk["y"]}
        else:
            key = rsa.RSAPublicNumbers(int.from_bytes(b64(jwk["e"]), "big"), int.from_bytes(b64(jwk["n"]), "big")).public_key()
            if header["alg"] == "PS256":
                key.verify(raw, message, padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32), hashes.SHA256())
            else:
                key.verify(raw, message, padding.PKCS1v15(), hashes.SHA256())
            canonical = {"e": jwk["e"], "kty": "RSA", "n": jwk["n"]}
        thumbprint = base64.urlsafe_b64encode(hashlib.sha256(json.dumps(canonical, separators=(",", ":"), sort_keys=True).encode()).digest()).rstrip(b"=").decode()
        assert header["kid"] == thumbprint, (header, thumbprint)
        assert header["alg"] == expected["alg"] and header["typ"] == "JWT", header
        for name in ["iss", "sub", "aud"]:
            assert claims[name] == expected[name], (name, claims)
        assert claims["exp"] - claims["iat"] <= 300 and claims["nbf"] == claims["iat"], claims
        print("verified")
        """#

    static func python(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", verifier] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// `openssl` with `arguments` in `directory`; its standard output.
    static func openssl(_ arguments: [String], in directory: URL, input: Data? = nil) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let standardInput = Pipe()
        process.standardInput = standardInput
        try process.run()
        if let input { standardInput.fileHandleForWriting.write(input) }
        try standardInput.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestFailure(
                "openssl \(arguments.joined(separator: " ")): \(String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))"
            )
        }
        return data
    }

    struct TestFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tokenctl-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    func assertion(_ key: ClientKey, algorithm: String?) throws -> String {
        try ClientAssertion.make(
            clientID: "machine-1", audience: "https://idp.example/token", signer: key, serverAlgorithms: nil,
            algorithm: algorithm, now: Date())
    }

    func expected(_ alg: String) throws -> String {
        String(
            decoding: try JSONSerialization.data(withJSONObject: [
                "alg": alg, "iss": "machine-1", "sub": "machine-1", "aud": "https://idp.example/token",
            ]), as: UTF8.self)
    }

    @Test("RFC 7638 §3.1: the thumbprint of its example RSA key")
    func thumbprintKnownAnswer() throws {
        let n = try #require(
            UnverifiedJWT.base64URLDecode(
                "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
            ))
        let jwk = ClientKey.canonicalJWK(.rsa(n: n, e: [1, 0, 1]))
        #expect(ClientKey.thumbprint(ofCanonicalJWK: jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
    }

    @Test("EC P-256: ES256 assertions verify with the JWK (Python and tokenctl's verifier); kid is the thumbprint")
    func ecKey() throws {
        let key = try ClientKey.generate(.ec, location: .keyring, now: Date())
        #expect(key.kind == .ec)
        #expect(key.algorithms == ["ES256"])
        #expect(key.keyID == key.thumbprint)
        let signed = try assertion(key, algorithm: nil)
        #expect(try Self.python([signed, key.registeredJWK, try expected("ES256")]) == "verified\n")
        // Tampered claims fail the independent check (it can fail).
        let parts = signed.split(separator: ".").map(String.init)
        let otherClaims = Base64URL.encode(Array(#"{"iss":"mallory"}"#.utf8))
        #expect(
            try Self.python([parts[0] + "." + otherClaims + "." + parts[2], key.registeredJWK, try expected("ES256")])
                .contains("InvalidSignature"))
        let jwk = try #require(JSONValue.parseObject(Array(key.registeredJWK.utf8)))
        let verified = try JWTVerifier.verify(signed, keys: JSONWebKeySet(keys: [JSONWebKey(object: jwk)]))
        #expect(verified.algorithm == .es256)
        #expect(verified.keyID == key.thumbprint)
    }

    @Test("RSA: RS256 and PS256 assertions verify; 3072 bits too", arguments: [2048, 3072])
    func rsaKey(bits: Int) throws {
        let key = try ClientKey.generate(.rsa, rsaBits: bits, location: .keyring, now: Date())
        #expect(key.kind == .rsa)
        #expect(key.algorithms == ["RS256", "PS256"])
        let jwk = try #require(JSONValue.parseObject(Array(key.registeredJWK.utf8)))
        #expect(UnverifiedJWT.base64URLDecode(jwk["n"]?.stringValue ?? "")?.count == bits / 8)
        for algorithm in ["RS256", "PS256"] {
            let signed = try assertion(key, algorithm: algorithm)
            #expect(try Self.python([signed, key.registeredJWK, try expected(algorithm)]) == "verified\n")
            let verified = try JWTVerifier.verify(signed, keys: JSONWebKeySet(keys: [JSONWebKey(object: jwk)]))
            #expect(verified.algorithm.rawValue == algorithm)
        }
        #expect {
            _ = try assertion(key, algorithm: "ES256")
        } throws: { ($0 as? TokenctlError)?.exitStatus == .configuration }
    }

    @Test("the stored form reads back as the same key, and never shows in the description")
    func storedForm() throws {
        let key = try ClientKey.generate(.ec, location: .keyring, now: Date(timeIntervalSince1970: 1_800_000_000))
        let again = try ClientKey(stored: key.stored, location: .keyring)
        #expect(again == key)
        #expect(again.thumbprint == key.thumbprint)
        #expect(again.created == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(!String(describing: key).contains("PRIVATE"))
        #expect(String(decoding: key.stored, as: UTF8.self).contains("BEGIN PRIVATE KEY"))
        #expect(throws: TokenctlError.self) { try ClientKey(stored: Array("{}".utf8), location: .keyring) }
    }

    @Test(
        "PEM made by the openssl CLI: PKCS#8, traditional EC and RSA; the public key and JWK agree with openssl's",
        arguments: [
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
            ["ecparam", "-name", "prime256v1", "-genkey", "-noout"],
            ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
            ["genrsa", "-traditional", "2048"],
        ])
    func importedPEM(command: [String]) throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let pem = try Self.openssl(command, in: directory)
        let key = try ClientKey(privateKeyPEM: Array(pem), location: .keyring)
        let publicPEM = try Self.openssl(["pkey", "-pubout"], in: directory, input: pem)
        #expect(key.publicKeyPEM == String(decoding: publicPEM, as: UTF8.self))
        #expect(!key.publicKeyPEM.contains("PRIVATE"))
        let signed = try assertion(key, algorithm: nil)
        #expect(try Self.python([signed, key.registeredJWK, try expected(key.algorithms[0])]) == "verified\n")
    }

    @Test("an encrypted PEM, a public key, garbage and a small RSA key are refused as input (64)")
    func refusedPEM() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let pem = try Self.openssl(
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], in: directory)
        try "pass-word".write(to: directory.appendingPathComponent("pw"), atomically: true, encoding: .utf8)
        let encrypted = try Self.openssl(["pkey", "-aes256", "-passout", "file:pw"], in: directory, input: pem)
        let publicOnly = try Self.openssl(["pkey", "-pubout"], in: directory, input: pem)
        let small = try Self.openssl(
            ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"], in: directory)
        for input in [encrypted, publicOnly, Data("not a key".utf8), small] {
            #expect {
                try ClientKey(privateKeyPEM: Array(input), location: .keyring)
            } throws: { ($0 as? TokenctlError)?.exitStatus == .usage }
        }
    }

    @Test("key_file and certificate_file: read again at every use, bounded, regular files only (78 otherwise)")
    func keyFiles() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let keys = ClientKeys(
            store: InMemorySessionStore(),
            paths: Paths(
                configDirectory: directory.path, lockDirectory: directory.path, stateDirectory: directory.path),
            clock: .system)
        let keyFile = directory.appendingPathComponent("tls.key").path
        let certificateFile = directory.appendingPathComponent("tls.crt").path
        let first = try Self.openssl(
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], in: directory)
        try first.write(to: URL(fileURLWithPath: keyFile))
        _ = try Self.openssl(
            ["req", "-x509", "-new", "-key", keyFile, "-subj", "/CN=rotated-1", "-days", "1", "-out", certificateFile],
            in: directory)
        let before = try keys.fileKey(keyFile: keyFile, certificateFile: certificateFile)
        #expect(before.location == .file(keyFile))
        #expect(before.certificate?.subject == "CN=rotated-1")
        #expect(before.certificate?.privateKeyPEM == Array(first))

        // Another program rotates both files: the next use reads the new ones.
        let second = try Self.openssl(
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], in: directory)
        try second.write(to: URL(fileURLWithPath: keyFile))
        #expect {
            try keys.fileKey(keyFile: keyFile, certificateFile: certificateFile)
        } throws: { ($0 as? TokenctlError)?.exitStatus == .configuration }
        _ = try Self.openssl(
            ["req", "-x509", "-new", "-key", keyFile, "-subj", "/CN=rotated-2", "-days", "1", "-out", certificateFile],
            in: directory)
        let after = try keys.fileKey(keyFile: keyFile, certificateFile: certificateFile)
        #expect(after.thumbprint != before.thumbprint)
        #expect(after.certificate?.subject == "CN=rotated-2")

        // A FIFO is refused without blocking; so are a missing file and one over 64 KiB.
        let fifo = directory.appendingPathComponent("fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        try Data(repeating: 0x41, count: 70_000).write(to: directory.appendingPathComponent("big.pem"))
        for path in [
            fifo, directory.appendingPathComponent("missing.pem").path,
            directory.appendingPathComponent("big.pem").path,
        ] {
            #expect {
                try keys.fileKey(keyFile: path, certificateFile: nil)
            } throws: { ($0 as? TokenctlError)?.exitStatus == .configuration }
        }
    }
}
