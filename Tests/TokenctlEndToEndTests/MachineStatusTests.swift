import Foundation
import Testing
import TokenctlTestSupport

/// `status` of a machine profile: the key it authenticates with (where it is, its JWK
/// thumbprint, its certificate's SHA-256 fingerprint and notAfter) and the platform's token
/// files it reads, in text and JSON. No server: status sends nothing for these.
@Suite("End to end: status of a machine profile's key and token files")
struct MachineStatusTests {
    func openssl(_ arguments: [String], in directory: String) throws -> RunResult {
        let result = try runProgram(
            "/bin/sh", ["-c", "cd \"$0\" && exec /usr/bin/openssl \"$@\"", directory] + arguments)
        guard result.status == 0 else { throw HarnessError("openssl \(arguments): \(result)") }
        return result
    }

    func writeProfile(_ sandbox: Sandbox, _ name: String, _ text: String) throws {
        try FileManager.default.createDirectory(
            atPath: sandbox.root + "/config/tokenctl/profiles", withIntermediateDirectories: true)
        try text.write(toFile: sandbox.profileFile(name), atomically: true, encoding: .utf8)
    }

    func statusJSON(_ sandbox: Sandbox, _ profile: String) throws -> [String: Any] {
        let result = try sandbox.tokenctl("--profile", profile, "status", "--json")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    @Test("a key_file with its certificate: kind file, the JWK thumbprint, the certificate's SHA-256 and notAfter")
    func keyAndCertificate() throws {
        let sandbox = try Sandbox()
        _ = try openssl(
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "k.pem"], in: sandbox.root)
        _ = try openssl(
            ["req", "-new", "-x509", "-key", "k.pem", "-subj", "/CN=job", "-days", "30", "-out", "c.pem"],
            in: sandbox.root)
        let fingerprint = try openssl(["x509", "-in", "c.pem", "-noout", "-fingerprint", "-sha256"], in: sandbox.root)
            .stdout.split(separator: "=", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        try writeProfile(
            sandbox, "m",
            "issuer = https://login.example.com\nclient_id = job\ntoken_endpoint = https://login.example.com/token\n"
                + "grant = client-credentials\ntoken_endpoint_auth_method = tls_client_auth\n"
                + "key_file = \(sandbox.root)/k.pem\ncertificate_file = \(sandbox.root)/c.pem\n")
        let jwk = try sandbox.tokenctl("--profile", "m", "key", "show", "--format", "jwk")
        let kid = try #require(
            (try JSONSerialization.jsonObject(with: Data(jwk.stdout.utf8)) as? [String: Any])?["kid"] as? String)

        let status = try statusJSON(sandbox, "m")
        let keys = try #require(status["client_keys"] as? [[String: Any]])
        #expect(keys.count == 1)
        #expect(keys.first?["kind"] as? String == "file")
        #expect(keys.first?["slot"] as? String == "current")
        #expect(keys.first?["thumbprint"] as? String == kid)
        let certificate = try #require(keys.first?["certificate"] as? [String: Any])
        #expect(certificate["sha256_fingerprint"] as? String == fingerprint)
        #expect((certificate["not_after"] as? String)?.hasPrefix("20") == true)
        #expect(status["platform_files"] as? [Any] != nil)
        let text = try sandbox.tokenctl("--profile", "m", "status").stdout
        #expect(text.contains("thumbprint \(kid)") && text.contains("SHA-256 \(fingerprint ?? "-")"), "\(text)")

        // A person's profile with a secret has neither.
        try writeProfile(
            sandbox, "p",
            "issuer = https://login.example.com\nclient_id = cli\ntoken_endpoint = https://login.example.com/token\n")
        let person = try statusJSON(sandbox, "p")
        #expect(person["client_keys"] is NSNull && person["platform_files"] is NSNull)
    }

    @Test("a token exchange's subject token file: its path, usable, its token's exp; a missing one says so")
    func subjectTokenFile() throws {
        let sandbox = try Sandbox()
        let file = sandbox.root + "/home/token"
        let exp = Int(Date().timeIntervalSince1970) + 3600
        let token = try PlatformTokenExchangeTests.jwt(["sub": "system:serviceaccount:ci:job", "exp": exp])
        try token.write(toFile: file, atomically: true, encoding: .utf8)
        try writeProfile(
            sandbox, "x",
            "issuer = https://login.example.com\nclient_id = job\ntoken_endpoint = https://login.example.com/token\n"
                + "grant = token-exchange\ntoken_endpoint_auth_method = client_secret_basic\nsubject_token_file = \(file)\n"
        )
        let status = try statusJSON(sandbox, "x")
        #expect(status["grant"] as? String == "token-exchange")
        let files = try #require(status["platform_files"] as? [[String: Any]])
        #expect(files.count == 1)
        #expect(files.first?["key"] as? String == "subject_token_file")
        #expect(files.first?["path"] as? String == file)
        #expect(files.first?["usable"] as? Bool == true)
        let expiresAt = try #require(files.first?["token_expires_at"] as? String)
        let formatter = ISO8601DateFormatter()
        #expect(formatter.date(from: expiresAt).map { Int($0.timeIntervalSince1970) } == exp)
        let text = try sandbox.tokenctl("--profile", "x", "status")
        #expect(
            text.stdout.contains("subject_token_file: \(file) (readable, its token expires \(expiresAt))"), "\(text)")
        let json = try sandbox.tokenctl("--profile", "x", "status", "--json").stdout
        #expect(!text.stdout.contains(token) && !json.contains(token))

        try FileManager.default.removeItem(atPath: file)
        let missing = try statusJSON(sandbox, "x")
        let after = try #require((missing["platform_files"] as? [[String: Any]])?.first)
        #expect(after["usable"] as? Bool == false)
        #expect(after["problem"] as? String == "is missing")
        #expect(
            try sandbox.tokenctl("--profile", "x", "status").stdout.contains("subject_token_file: \(file) (is missing)")
        )
        // doctor says so too, as a machine's finding.
        let doctor = try sandbox.tokenctl("--profile", "x", "doctor")
        #expect(
            (doctor.stdout + doctor.stderr).contains("(subject_token_file) is missing") && doctor.status != 0,
            "\(doctor)")
    }

    @Test("token on a token exchange profile without subject_token_file: 78 before anything is sent, naming the option")
    func missingSubjectTokenFile() throws {
        let sandbox = try Sandbox()
        let assertion = sandbox.root + "/home/assertion"
        try PlatformTokenExchangeTests.jwt(["exp": Int(Date().timeIntervalSince1970) + 600])
            .write(toFile: assertion, atomically: true, encoding: .utf8)
        // The token endpoint is a closed port: a request sent would fail otherwise (75).
        try writeProfile(
            sandbox, "x",
            "issuer = http://127.0.0.1:9\nclient_id = job\ntoken_endpoint = http://127.0.0.1:9/token\n"
                + "grant = token-exchange\ntoken_endpoint_auth_method = private_key_jwt\n"
                + "client_assertion_file = \(assertion)\n")
        let result = try sandbox.tokenctl("--profile", "x", "token", "--timeout", "5")
        #expect(result.status == 78, "\(result)")
        #expect(result.stderr.contains("no subject_token_file"), "\(result)")
        #expect(result.stderr.contains("tokenctl --profile x login --subject-token-file"), "\(result)")
    }

    @Test("login: a platform file option that does not fit the grant given or saved is a usage error (64)")
    func fileOptionsFitTheGrant() throws {
        let sandbox = try Sandbox()
        try writeProfile(
            sandbox, "cc",
            "issuer = http://127.0.0.1:9\nclient_id = job\ntoken_endpoint = http://127.0.0.1:9/token\n"
                + "grant = client-credentials\ntoken_endpoint_auth_method = client_secret_basic\n")
        let cases: [([String], String)] = [
            (["--profile", "cc", "login", "--subject-token-file", "/t"], "applies with --grant token-exchange only"),
            (
                ["--profile", "cc", "login", "--grant", "jwt-bearer", "--subject-token-file", "/t"],
                "applies with --grant token-exchange only"
            ),
            (
                ["login", "--issuer", "http://127.0.0.1:9", "--client-id", "c", "--device", "--assertion-file", "/t"],
                "applies to a machine profile"
            ),
            (
                ["login", "--issuer", "http://127.0.0.1:9", "--client-id", "c", "--client-assertion-file", "/t"],
                "apply to a machine profile"
            ),
            (
                [
                    "--profile", "cc", "login", "--client-assertion-file", "/t", "--client-auth",
                    "client_secret_basic",
                ],
                "authenticates the client with private_key_jwt, not client_secret_basic"
            ),
            // RFC 6749 §4.4: the client credentials grant, given or saved, is a confidential client's only.
            (
                ["--profile", "x", "login", "--grant", "client-credentials", "--client-auth", "none"],
                "--grant client-credentials is for confidential clients only (RFC 6749 §4.4)"
            ),
            (["--profile", "cc", "login", "--client-auth", "none"], "is for confidential clients only"),
            (
                ["--profile", "x", "login", "--grant", "jwt-bearer", "--client-auth", "none", "--client-secret-stdin"],
                "--client-auth none is a public client, which sends no secret"
            ),
        ]
        for (arguments, message) in cases {
            let result = try sandbox.start(arguments).wait()
            #expect(result.status == 64, "\(arguments): \(result)")
            #expect(result.stderr.contains(message), "\(arguments): \(result)")
        }
    }
}
