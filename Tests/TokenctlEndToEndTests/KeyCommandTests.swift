import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// `tokenctl key` through the binary against the test run's real keyring (gnome-keyring on the
/// private bus): the private key is in the Secret Service and in no file; what `key show`
/// prints is checked against the `openssl` CLI's reading of the stored key.
@Suite("End to end: key create, show, import, rotate and remove in the Secret Service")
struct KeyCommandTests {
    /// The profile's stored client key item (`secret-tool lookup`), as JSON.
    static func storedKey(_ sandbox: Sandbox, profile: String, slot: String = "client-key") throws -> [String: Any]? {
        let result = try runProgram(
            "/usr/bin/secret-tool", ["lookup", "application", "tokenctl", "profile", profile, "kind", slot],
            environment: sandbox.variables)
        guard result.status == 0, !result.stdout.isEmpty else { return nil }
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
    }

    /// `openssl ARGUMENTS` with `stdin`, in `directory`.
    static func openssl(_ arguments: [String], stdin: String? = nil, in directory: String) throws -> RunResult {
        let result = try runProgram(
            "/bin/sh", ["-c", "cd \"$0\" && exec openssl \"$@\"", directory] + arguments, stdin: stdin)
        #expect(result.status == 0, "openssl \(arguments): \(result)")
        return result
    }

    static func thumbprint(ofJWK text: String) throws -> String {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String])
        let members = object["kty"] == "EC" ? ["crv", "kty", "x", "y"] : ["e", "kty", "n"]
        let canonical = "{" + members.map { "\"\($0)\":\"\(object[$0]!)\"" }.joined(separator: ",") + "}"
        // Hashed by Python (a binary digest through a String would be lossy).
        let python = try runProgram(
            "/usr/bin/python3",
            [
                "-c",
                "import base64,hashlib,sys;print(base64.urlsafe_b64encode(hashlib.sha256(sys.argv[1].encode()).digest()).rstrip(b'=').decode())",
                canonical,
            ])
        return python.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("create keeps the private key in the keyring only; show prints the public key openssl reads from it")
    func createAndShow() throws {
        let sandbox = try Sandbox()
        let created = try sandbox.tokenctl("--profile", "m1", "key", "create")
        #expect(created.status == 0, "\(created)")
        let jwk = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(jwk.contains("\"kty\":\"EC\"") && jwk.contains("\"alg\":\"ES256\""), "\(jwk)")
        #expect(!created.stdout.contains("PRIVATE") && !created.stderr.contains("PRIVATE"))

        let stored = try #require(try Self.storedKey(sandbox, profile: "m1"), "the key is in the Secret Service")
        let privatePEM = try #require(stored["key"] as? String)
        #expect(privatePEM.contains("BEGIN PRIVATE KEY"))
        for file in sandbox.allFiles() {
            let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
            #expect(!text.contains("PRIVATE KEY"), "\(file) holds a private key")
        }

        let pem = try sandbox.tokenctl("--profile", "m1", "key", "show", "--format", "pem")
        #expect(pem.status == 0, "\(pem)")
        #expect(!pem.stdout.contains("PRIVATE"))
        let expected = try Self.openssl(["pkey", "-pubout"], stdin: privatePEM, in: sandbox.root)
        #expect(pem.stdout == expected.stdout)

        let shown = try sandbox.tokenctl("--profile", "m1", "key", "show", "--format", "jwk")
        #expect(shown.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == jwk)
        let kid = try #require(
            (try JSONSerialization.jsonObject(with: Data(jwk.utf8)) as? [String: String])?["kid"])
        #expect(kid == (try Self.thumbprint(ofJWK: jwk)))
        let summary = try sandbox.tokenctl("--profile", "m1", "key", "show")
        #expect(summary.status == 0 && summary.stdout.contains(kid) && summary.stdout.contains("Secret Service"))

        // A second create is refused: the key is replaced only by a rotation.
        let again = try sandbox.tokenctl("--profile", "m1", "key", "create")
        #expect(again.status == ExitStatus.configuration.rawValue, "\(again)")
        #expect(again.stderr.contains("key rotate"))
        #expect((try Self.storedKey(sandbox, profile: "m1"))?["key"] as? String == privatePEM)
    }

    @Test("an RSA key with a self-signed certificate: CN is the client id, the certificate is the key's")
    func rsaWithCertificate() throws {
        let sandbox = try Sandbox()
        let created = try sandbox.tokenctl(
            "--profile", "m2", "key", "create", "--type", "rsa", "--bits", "3072", "--certificate", "--common-name",
            "machine-2", "--days", "30")
        #expect(created.status == 0, "\(created)")
        #expect(created.stdout.contains("BEGIN CERTIFICATE"))
        let certificate = try sandbox.tokenctl("--profile", "m2", "key", "show", "--format", "certificate")
        let facts = try Self.openssl(
            ["x509", "-noout", "-subject", "-issuer", "-pubkey"], stdin: certificate.stdout, in: sandbox.root)
        #expect(facts.stdout.contains("subject=CN = machine-2"), "\(facts.stdout)")
        #expect(facts.stdout.contains("issuer=CN = machine-2"), "\(facts.stdout)")
        let pem = try sandbox.tokenctl("--profile", "m2", "key", "show", "--format", "pem")
        #expect(facts.stdout.contains(pem.stdout), "the certificate's key is the profile's")
        let bits = try Self.openssl(["pkey", "-pubin", "-noout", "-text"], stdin: pem.stdout, in: sandbox.root)
        #expect(bits.stdout.contains("3072 bit"))
        let jwk = try sandbox.tokenctl("--profile", "m2", "key", "show", "--format", "jwk")
        #expect(jwk.stdout.contains("\"kty\":\"RSA\"") && !jwk.stdout.contains("\"alg\""))
    }

    @Test("rotate makes a next key beside the current one; jwks has both; --commit promotes it")
    func rotate() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.tokenctl("--profile", "m3", "key", "create").status == 0)
        let before = try sandbox.tokenctl("--profile", "m3", "key", "show", "--format", "jwk").stdout
        let rotated = try sandbox.tokenctl("--profile", "m3", "key", "rotate")
        #expect(rotated.status == 0, "\(rotated)")
        let next = try sandbox.tokenctl("--profile", "m3", "key", "show", "--format", "jwk", "--next").stdout
        #expect(next != before)
        #expect(try sandbox.tokenctl("--profile", "m3", "key", "show", "--format", "jwk").stdout == before)
        let set = try sandbox.tokenctl("--profile", "m3", "key", "show", "--format", "jwks").stdout
        let keys = try #require(
            (try JSONSerialization.jsonObject(with: Data(set.utf8)) as? [String: Any])?["keys"] as? [[String: Any]])
        #expect(keys.count == 2)
        let summary = try sandbox.tokenctl("--profile", "m3", "key", "show").stdout
        #expect(summary.contains("current key:") && summary.contains("next key:"))
        #expect(try sandbox.tokenctl("--profile", "m3", "key", "rotate").status == ExitStatus.configuration.rawValue)
        let committed = try sandbox.tokenctl("--profile", "m3", "key", "rotate", "--commit")
        #expect(committed.status == 0, "\(committed)")
        #expect(try sandbox.tokenctl("--profile", "m3", "key", "show", "--format", "jwk").stdout == next)
        #expect(try Self.storedKey(sandbox, profile: "m3", slot: "client-key-next") == nil)
        let removed = try sandbox.tokenctl("--profile", "m3", "key", "remove")
        #expect(removed.status == 0, "\(removed)")
        #expect(try Self.storedKey(sandbox, profile: "m3") == nil)
        #expect(
            try sandbox.tokenctl("--profile", "m3", "key", "show").status == ExitStatus.configuration.rawValue)
    }

    @Test("import: PEM key and certificate on stdin; PKCS#12 with its password on stdin; wrong input is 64")
    func importKeys() throws {
        let sandbox = try Sandbox()
        let directory = sandbox.root
        _ = try Self.openssl(
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "k.pem"], in: directory)
        _ = try Self.openssl(
            ["req", "-x509", "-new", "-key", "k.pem", "-subj", "/CN=imported", "-days", "2", "-out", "c.pem"],
            in: directory)
        let key = try String(contentsOfFile: directory + "/k.pem", encoding: .utf8)
        let certificate = try String(contentsOfFile: directory + "/c.pem", encoding: .utf8)
        let imported = try sandbox.tokenctl("--profile", "i1", "key", "import", stdin: certificate + key)
        #expect(imported.status == 0, "\(imported)")
        let shown = try sandbox.tokenctl("--profile", "i1", "key", "show", "--format", "certificate")
        #expect(shown.stdout == certificate)
        #expect(try sandbox.tokenctl("--profile", "i1", "key", "show").stdout.contains("CN=imported"))

        _ = try Self.openssl(
            [
                "pkcs12", "-export", "-inkey", "k.pem", "-in", "c.pem", "-passout", "pass:p12-pass-word", "-out",
                "b.p12",
            ], in: directory)
        let wrong = try sandbox.tokenctl(
            "--profile", "i2", "key", "import", "--bundle", directory + "/b.p12", "--password-stdin",
            stdin: "not-it\n")
        #expect(wrong.status == ExitStatus.usage.rawValue, "\(wrong)")
        #expect(!wrong.stderr.contains("not-it"))
        let bundle = try sandbox.tokenctl(
            "--profile", "i2", "key", "import", "--bundle", directory + "/b.p12", "--password-stdin",
            stdin: "p12-pass-word\n")
        #expect(bundle.status == 0, "\(bundle)")
        #expect(
            try sandbox.tokenctl("--profile", "i2", "key", "show", "--format", "jwk").stdout
                == (try sandbox.tokenctl("--profile", "i1", "key", "show", "--format", "jwk").stdout))

        // A certificate of another key, an encrypted key, and no key at all.
        _ = try Self.openssl(
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "other.pem"], in: directory)
        let other = try String(contentsOfFile: directory + "/other.pem", encoding: .utf8)
        let mismatched = try sandbox.tokenctl("--profile", "i3", "key", "import", stdin: other + certificate)
        #expect(mismatched.status == ExitStatus.usage.rawValue, "\(mismatched)")
        let encrypted = try Self.openssl(["pkey", "-aes256", "-passout", "pass:x"], stdin: key, in: directory)
        let refused = try sandbox.tokenctl("--profile", "i3", "key", "import", stdin: encrypted.stdout)
        #expect(refused.status == ExitStatus.usage.rawValue, "\(refused)")
        #expect(refused.stderr.contains("encrypted"))
        let nothing = try sandbox.tokenctl("--profile", "i3", "key", "import", stdin: certificate)
        #expect(nothing.status == ExitStatus.usage.rawValue, "\(nothing)")
        #expect(try Self.storedKey(sandbox, profile: "i3") == nil)
    }

    @Test(
        "bad command lines exit 64",
        arguments: [
            ["key"], ["key", "make"], ["key", "create", "--type", "dsa"], ["key", "create", "--bits", "3072"],
            ["key", "show", "--tpm"], ["key", "create", "--format", "jwk"], ["key", "import", "--password-stdin"],
            ["key", "rotate", "--commit", "--tpm"], ["key", "create", "--days", "30"],
        ])
    func badCommandLines(arguments: [String]) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.start(arguments).wait()
        #expect(result.status == ExitStatus.usage.rawValue, "\(arguments): \(result)")
    }

    @Test("a profile's key_file is read from there: key show and status name the file; key create refuses (78)")
    func keyFileProfile() throws {
        let sandbox = try Sandbox()
        _ = try Self.openssl(
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "kf.pem"], in: sandbox.root)
        let keyFile = sandbox.root + "/kf.pem"
        try FileManager.default.createDirectory(
            atPath: sandbox.root + "/config/tokenctl/profiles", withIntermediateDirectories: true)
        try
            "issuer = https://login.example.com\nclient_id = machine-f\ntoken_endpoint = https://login.example.com/token\nkey_file = \(keyFile)\n"
            .write(toFile: sandbox.profileFile("kf"), atomically: true, encoding: .utf8)
        let pem = try sandbox.tokenctl("--profile", "kf", "key", "show", "--format", "pem")
        #expect(pem.status == 0, "\(pem)")
        let expected = try Self.openssl(["pkey", "-pubout", "-in", "kf.pem"], in: sandbox.root)
        #expect(pem.stdout == expected.stdout)
        #expect(try sandbox.tokenctl("--profile", "kf", "key", "show").stdout.contains("read from \(keyFile)"))
        let status = try sandbox.tokenctl("--profile", "kf", "status")
        #expect(status.stdout.contains("client key:") && status.stdout.contains(keyFile), "\(status)")
        let create = try sandbox.tokenctl("--profile", "kf", "key", "create")
        #expect(create.status == ExitStatus.configuration.rawValue, "\(create)")
        #expect(try Self.storedKey(sandbox, profile: "kf") == nil)
    }
}
