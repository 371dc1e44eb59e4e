import Foundation
import Testing
import TokenctlTestSupport

/// Machine profiles against the project's test server (Scripts/testserver/authserver.py): its
/// JWT bearer grant (RFC 7523 §2.1, built from §3 because no server the tests run has one) and
/// its client credentials grant (client_secret_basic), one server per test.
@Suite("End to end: machine grants at the project's test server")
struct MachineGrantTestServerTests {
    static let jose = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Scripts/lib/glewlwyd_jwt.py").standardized.path
    static let platform = "https://ci.tokenctl.test"

    /// Write `text` to `path`, 0600, by rename (as a platform rotating it does).
    func replace(_ path: String, with text: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path + ".new"))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path + ".new")
        guard rename(path + ".new", path) == 0 else { throw HarnessError("rename to \(path) failed") }
    }

    func accessToken(_ result: RunResult) -> String { result.stdout.trimmingCharacters(in: .newlines) }

    /// The platform's signing key (a P-256 PEM in the sandbox's home) and its public JWK.
    func platformKey(_ sandbox: Sandbox) throws -> (path: String, jwk: Any) {
        let key = sandbox.root + "/home/platform.key"
        let made = try runProgram(
            "/usr/bin/openssl", ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key])
        guard made.status == 0 else { throw HarnessError("openssl ecparam: \(made)") }
        let jwk = try JSONSerialization.jsonObject(
            with: Data(try runProgram("/usr/bin/python3", [Self.jose, "jwk", key]).stdout.utf8))
        return (key, jwk)
    }

    /// A new assertion by the platform (iss = sub = the platform, aud = `server`'s token
    /// endpoint) signed with `key`, written to `file` in place of the last.
    @discardableResult
    func newAssertion(_ file: String, key: String, server: AuthServer) throws -> String {
        let made = try runProgram(
            "/usr/bin/python3",
            [Self.jose, "assertion", "--client-id", Self.platform, "--aud", server.url + "/token", "--key", key])
        try replace(file, with: made.stdout)
        return made.stdout
    }

    @Test(
        "the project's test server: jwt-bearer presents the file's assertion, read again for every request; a replayed one is refused (78), an expired one never sent"
    )
    func jwtBearer() throws {
        let sandbox = try Sandbox()
        let (key, jwk) = try platformKey(sandbox)
        let server = try AuthServer([
            "jwt_access_tokens": true, "client_secrets": ["job": "job-secret-0123"],
            "jwt_bearer_issuers": [Self.platform: ["keys": [jwk]]],
        ])
        defer { server.stop() }
        let file = sandbox.root + "/home/assertion"
        // iss = sub = the platform (the helper's assertion), aud = the server's token endpoint.
        func newAssertion() throws -> String { try self.newAssertion(file, key: key, server: server) }
        let first = try newAssertion()
        sandbox.forgetsHotCacheAtEnd(profile: "job", issuer: server.url, clientID: "job")
        let login = try sandbox.start(
            [
                "--profile", "job", "login", "--grant", "jwt-bearer", "--issuer", server.url, "--client-id", "job",
                "--client-secret-stdin", "--assertion-file", file,
            ], stdin: "job-secret-0123\n"
        ).wait()
        #expect(login.status == 0, "\(login)")
        #expect(
            try String(contentsOfFile: sandbox.profileFile("job"), encoding: .utf8).contains("assertion_file = \(file)")
        )
        let token = try sandbox.tokenctl("--profile", "job", "token")
        #expect(token.status == 0, "\(token)")
        #expect(try GlewlwydServer.claims(of: accessToken(token))["sub"] as? String == Self.platform)
        let requests = try server.tokenRequests()
        #expect(requests.map { $0["grant_type"] as? String } == ["urn:ietf:params:oauth:grant-type:jwt-bearer"])
        #expect(requests.first?["client_id"] as? String == "job")

        // The same assertion again: the server refuses the replay (its jti), 78 with what to check.
        let replayed = try sandbox.tokenctl("--profile", "job", "token", "--force", "--timeout", "5")
        #expect(replayed.status == 78, "\(replayed)")
        #expect(replayed.stderr.contains("invalid_grant") && replayed.stderr.contains("assertion_file"), "\(replayed)")
        #expect(!replayed.stderr.contains(first))
        // A new one in the file is read and accepted.
        _ = try newAssertion()
        let renewed = try sandbox.tokenctl("--profile", "job", "token", "--force")
        #expect(renewed.status == 0, "\(renewed)")
        #expect(try server.tokenRequests().map { $0["status"] as? Int } == [200, 400, 200])

        // An expired assertion is never sent.
        let now = Int(Date().timeIntervalSince1970)
        try replace(file, with: try PlatformTokenExchangeTests.jwt(["iss": Self.platform, "exp": now - 600]))
        let expired = try sandbox.tokenctl("--profile", "job", "token", "--force", "--timeout", "5")
        #expect(expired.status == 78, "\(expired)")
        #expect(expired.stderr.contains("expired at") && expired.stderr.contains(file), "\(expired)")
        #expect(try server.tokenRequests().count == 3, "nothing sent")
        for path in sandbox.allFiles() where path != file {
            let contents = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            #expect(!contents.contains(first), "the assertion is in \(path)")
        }
    }

    @Test(
        "the project's test server: jwt-bearer as a public client (--client-auth none): client_id alone, no client authentication, saved and shown as none"
    )
    func jwtBearerPublicClient() throws {
        let sandbox = try Sandbox()
        let (key, jwk) = try platformKey(sandbox)
        // "job" is not among the server's confidential clients: a public client.
        let server = try AuthServer([
            "jwt_access_tokens": true, "client_secrets": ["other": "other-secret-0123"],
            "jwt_bearer_issuers": [Self.platform: ["keys": [jwk]]],
        ])
        defer { server.stop() }
        let file = sandbox.root + "/home/assertion"
        try newAssertion(file, key: key, server: server)
        sandbox.forgetsHotCacheAtEnd(profile: "job", issuer: server.url, clientID: "job")
        let login = try sandbox.tokenctl(
            "--profile", "job", "login", "--grant", "jwt-bearer", "--issuer", server.url, "--client-id", "job",
            "--assertion-file", file, "--client-auth", "none")
        #expect(login.status == 0, "\(login)")
        let profile = try String(contentsOfFile: sandbox.profileFile("job"), encoding: .utf8)
        #expect(profile.contains("token_endpoint_auth_method = none\n"), "\(profile)")
        try newAssertion(file, key: key, server: server)
        let token = try sandbox.tokenctl("--profile", "job", "token", "--force")
        #expect(token.status == 0, "\(token)")
        #expect(try GlewlwydServer.claims(of: accessToken(token))["sub"] as? String == Self.platform)
        let requests = try server.tokenRequests()
        #expect(requests.count == 2, "the login's request and the token's")
        for request in requests {
            #expect(request["grant_type"] as? String == "urn:ietf:params:oauth:grant-type:jwt-bearer")
            #expect(request["status"] as? Int == 200)
            #expect(request["client_id"] as? String == "job")
            #expect(request["client_auth"] as? String == "none", "\(request)")
            #expect(request["client_secret_sent"] as? Bool == false)
        }
        let status = try sandbox.tokenctl("--profile", "job", "status", "--json")
        #expect(status.status == 0, "\(status)")
        let shown = try #require(
            try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        #expect(shown["client_auth"] as? String == "none", "\(status.stdout)")
        #expect(shown["grant"] as? String == "jwt-bearer", "\(status.stdout)")
        let human = try sandbox.tokenctl("--profile", "job", "status")
        #expect(human.stdout.contains("jwt-bearer grant, none (a public client)"), "\(human)")
        // No secret or key to miss.
        let doctor = try sandbox.tokenctl("doctor")
        #expect(doctor.stdout.contains("[ok]   machine 'job': jwt-bearer, none"), "\(doctor)")

        // The client credentials grant is a confidential client's only (RFC 6749 §4.4).
        let refused = try sandbox.tokenctl(
            "--profile", "svc", "login", "--grant", "client-credentials", "--issuer", server.url, "--client-id",
            "svc", "--client-auth", "none")
        #expect(refused.status == 64, "\(refused)")
        #expect(refused.stderr.contains("confidential clients only"), "\(refused)")
        #expect(try server.tokenRequests().count == 2, "nothing sent")
        // Nothing but the profile and its token to forget.
        let forgot = try sandbox.tokenctl("--profile", "job", "logout", "--forget", "--no-revoke")
        #expect(forgot.status == 0, "\(forgot)")
        #expect(!FileManager.default.fileExists(atPath: sandbox.profileFile("job")))
    }

    @Test(
        "the project's test server: a client credentials machine profile's token serves --format header, exec-credential and git-credential get"
    )
    func machineTokenFormats() throws {
        let server = try AuthServer(["client_secrets": ["svc": "svc-secret-0123"]])
        defer { server.stop() }
        let sandbox = try Sandbox()
        sandbox.forgetsHotCacheAtEnd(profile: "svc", issuer: server.url, clientID: "svc")
        let login = try sandbox.start(
            [
                "--profile", "svc", "login", "--grant", "client-credentials", "--issuer", server.url, "--client-id",
                "svc", "--client-secret-stdin",
            ], stdin: "svc-secret-0123\n"
        ).wait()
        #expect(login.status == 0, "\(login)")
        let raw = try sandbox.tokenctl("--profile", "svc", "token")
        #expect(raw.status == 0, "\(raw)")
        let token = accessToken(raw)
        #expect(try server.tokenStatus(token)["active"] as? Bool == true)
        let requests = try server.tokenRequests()
        #expect(requests.map { $0["grant_type"] as? String } == ["client_credentials"], "the login's one request")
        #expect(requests.first?["client_secret_sent"] as? Bool == true)

        let header = try sandbox.tokenctl("--profile", "svc", "token", "--format", "header")
        #expect(header.stdout == "Authorization: Bearer \(token)\n", "\(header)")
        let credential = try sandbox.tokenctl("--profile", "svc", "token", "--format", "exec-credential")
        #expect(credential.status == 0, "\(credential)")
        let object = try JSONSerialization.jsonObject(with: Data(credential.stdout.utf8)) as? [String: Any]
        #expect(object?["kind"] as? String == "ExecCredential")
        let status = object?["status"] as? [String: Any]
        #expect(status?["token"] as? String == token)
        #expect(status?["expirationTimestamp"] is String)
        let git = try sandbox.tokenctl(
            "--profile", "svc", "git-credential", "get", stdin: "protocol=https\nhost=git.example.com\n\n")
        #expect(git.status == 0, "\(git)")
        #expect(git.stdout.contains("password=\(token)\n"), "\(git)")
        #expect(git.stdout.contains("username=oauth2\n"), "\(git)")
        #expect(try server.tokenRequests().count == 1, "every format served the cached token")
    }
}
