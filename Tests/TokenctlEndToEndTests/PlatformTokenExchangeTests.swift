import Foundation
import Testing
import TokenctlTestSupport

/// Machine profiles that exchange a token a platform gives the job (RFC 8693 token exchange, a
/// federated client assertion) against a real server: idpyoidc from PyPI (Scripts/lib/idpyoidc.sh),
/// one per test. idpyoidc exchanges only its own access tokens (subject_token_type access_token),
/// so a client-credentials token of another client stands for the platform's token.
@Suite("End to end: token exchange of a platform's token file against idpyoidc")
struct PlatformTokenExchangeTests {
    static let secretB = "secret-b-0123456789"

    /// A server with client-a and client-c (whose tokens stand for the platform's) and client-b
    /// (the machine profile's, client_secret_basic).
    func server() throws -> IdpyoidcServer {
        let server = try IdpyoidcServer()
        for (id, secret) in [("client-a", "secret-a-0123456789"), ("client-c", "secret-c-0123456789")] {
            try server.addClient([
                "client_id": id, "client_secret": secret, "client_authn_method": ["client_secret_basic"],
                "allowed_scopes": ["read"],
            ])
        }
        try server.addClient(["client_id": "client-b", "client_secret": Self.secretB, "allowed_scopes": ["read"]])
        return server
    }

    /// Write `text` to `path`, 0600, replacing the file (as a platform rotating it does: rename).
    func replace(_ path: String, with text: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path + ".new"))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path + ".new")
        guard rename(path + ".new", path) == 0 else { throw HarnessError("rename to \(path) failed") }
    }

    /// An unsigned-looking JWT with `claims` (its signature is never checked before sending).
    static func jwt(_ claims: [String: Any]) throws -> String {
        func part(_ object: [String: Any]) throws -> String {
            try JSONSerialization.data(withJSONObject: object).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        return try part(["alg": "ES256", "typ": "JWT"]) + "." + part(claims) + ".c2lnbmF0dXJl"
    }

    func login(_ sandbox: Sandbox, _ server: IdpyoidcServer, file: String, extra: [String] = []) throws -> RunResult {
        sandbox.forgetsHotCacheAtEnd(profile: "job", issuer: server.issuer, clientID: "client-b")
        return try sandbox.start(
            [
                "--profile", "job", "login", "--grant", "token-exchange", "--issuer", server.issuer, "--client-id",
                "client-b", "--client-secret-stdin", "--subject-token-file", file, "--subject-token-type",
                IdpyoidcServer.accessTokenType,
            ] + extra, stdin: Self.secretB + "\n"
        ).wait()
    }

    func token(_ result: RunResult) -> String { result.stdout.trimmingCharacters(in: .newlines) }

    @Test(
        "the file's token is exchanged, the replaced file's token is sent by the next exchange, and it is copied nowhere"
    )
    func exchangeAndRotation() throws {
        let server = try server()
        defer { server.stop() }
        let sandbox = try Sandbox()
        let subjectA = try server.clientCredentialsToken("client-a", secret: "secret-a-0123456789")
        let subjectC = try server.clientCredentialsToken("client-c", secret: "secret-c-0123456789")
        let file = sandbox.root + "/home/subject-token"
        try replace(file, with: subjectA + "\n")
        let before = try server.tokenRequests()

        let login = try login(sandbox, server, file: file)
        #expect(login.status == 0, "\(login)")
        #expect(login.stderr.contains("token-exchange"), "\(login)")
        #expect(try server.tokenRequests() == before + 1, "the login's one exchange")
        let profile = try String(contentsOfFile: sandbox.profileFile("job"), encoding: .utf8)
        #expect(profile.contains("grant = token-exchange"))
        #expect(profile.contains("subject_token_file = \(file)"))
        #expect(profile.contains("subject_token_type = \(IdpyoidcServer.accessTokenType)"))

        let first = try sandbox.tokenctl("--profile", "job", "token")
        #expect(first.status == 0, "\(first)")
        let firstClaims = try GlewlwydServer.claims(of: token(first))
        #expect(firstClaims["client_id"] as? String == "client-b")
        #expect(firstClaims["sub"] as? String == "client-a", "the subject of the file's token")
        // idpyoidc's exchanged JWT says exp = iat + 60 s: within tokenctl's margin, so `token`
        // may have exchanged again already; what matters is which file's token each sends.
        let beforeRotation = try server.tokenRequests()

        // The platform rotates the file: the next exchange reads it again.
        try replace(file, with: subjectC)
        let second = try sandbox.tokenctl("--profile", "job", "token", "--force")
        #expect(second.status == 0, "\(second)")
        #expect(try GlewlwydServer.claims(of: token(second))["sub"] as? String == "client-c", "the new file's token")
        #expect(try server.tokenRequests() == beforeRotation + 1, "one exchange")

        // The subject tokens are nowhere but in their file: not in the profile, state, cache or
        // events, not in the Secret Service.
        for path in sandbox.allFiles() where path != file {
            let contents = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            #expect(!contents.contains(subjectA) && !contents.contains(subjectC), "a subject token is in \(path)")
        }
        let items = try runProgram(
            "/usr/bin/secret-tool", ["search", "--all", "--unlock", "application", "tokenctl"],
            environment: sandbox.variables)
        // The machine's token lives in the kernel keyring; its client secret is what the Secret
        // Service holds, and the search shows it.
        #expect(items.stdout.contains("label = tokenctl client secret: job"), "the search shows the secrets: \(items)")
        #expect(!items.stdout.contains(token(second)), "a machine's token is not in the Secret Service")
        #expect(!items.stdout.contains(subjectA) && !items.stdout.contains(subjectC))
    }

    @Test(
        "a missing, empty, oversized, non-regular, not-a-JWT or expired file is refused (78) with nothing sent, naming the file, never its content"
    )
    func refusedBeforeSending() throws {
        let server = try server()
        defer { server.stop() }
        let sandbox = try Sandbox()
        let file = sandbox.root + "/home/subject-token"
        try replace(file, with: try server.clientCredentialsToken("client-a", secret: "secret-a-0123456789"))
        #expect(try login(sandbox, server, file: file).status == 0)
        let sent = try server.tokenRequests()

        let expired = try Self.jwt(["sub": "job", "exp": Int(Date().timeIntervalSince1970) - 3600])
        let cases: [(String, () throws -> Void, String)] = [
            ("missing", {}, "is missing"),
            ("empty", { try self.replace(file, with: "\n") }, "is empty"),
            ("too large", { try self.replace(file, with: String(repeating: "a", count: 70_000)) }, "64 KiB"),
            ("a FIFO", { _ = mkfifo(file, 0o600) }, "64 KiB"),
            ("not a JWT", { try self.replace(file, with: "abc.not-json.def") }, "does not hold a JWT"),
            ("expired", { try self.replace(file, with: expired) }, "expired at"),
        ]
        for (what, make, reason) in cases {
            try? FileManager.default.removeItem(atPath: file)
            try make()
            let result = try sandbox.tokenctl("--profile", "job", "token", "--force", "--timeout", "5")
            #expect(result.status == 78, "\(what): \(result)")
            #expect(result.stderr.contains(file) && result.stderr.contains("subject_token_file"), "\(what): \(result)")
            #expect(result.stderr.contains(reason), "\(what): \(result)")
            #expect(result.stderr.contains("Nothing was sent"), "\(what): \(result)")
            #expect(!result.stderr.contains(expired) && !result.stderr.contains("not-json"), "\(what): content shown")
        }
        #expect(try server.tokenRequests() == sent, "nothing reached the server")

        // With the default type (a JWT), a login whose file holds an opaque token sends nothing.
        let other = try Sandbox()
        let opaque = other.root + "/home/opaque"
        try replace(opaque, with: "an-opaque-token")
        other.forgetsHotCacheAtEnd(profile: "job", issuer: server.issuer, clientID: "client-b")
        let refused = try other.start(
            [
                "--profile", "job", "login", "--grant", "token-exchange", "--issuer", server.issuer, "--client-id",
                "client-b", "--client-secret-stdin", "--subject-token-file", opaque,
            ], stdin: Self.secretB + "\n"
        ).wait()
        #expect(refused.status == 78, "\(refused)")
        #expect(refused.stderr.contains("does not hold a JWT") && !refused.stderr.contains("an-opaque-token"))
        #expect(!other.profileFileExists("job"), "nothing saved")
        #expect(try server.tokenRequests() == sent, "nothing reached the server")
    }

    @Test(
        "audience, scope and requested_token_type are sent with the exchange; a requested type the server refuses is 78"
    )
    func exchangeParameters() throws {
        let server = try server()
        defer { server.stop() }
        let sandbox = try Sandbox()
        let file = sandbox.root + "/home/subject-token"
        try replace(file, with: try server.clientCredentialsToken("client-a", secret: "secret-a-0123456789"))
        let login = try login(
            sandbox, server, file: file,
            extra: [
                "--audience", "https://api.tokenctl.test", "--scope", "read", "--requested-token-type",
                IdpyoidcServer.accessTokenType,
            ])
        #expect(login.status == 0, "\(login)")
        let profile = try String(contentsOfFile: sandbox.profileFile("job"), encoding: .utf8)
        #expect(profile.contains("requested_token_type = \(IdpyoidcServer.accessTokenType)"))
        let token = try sandbox.tokenctl("--profile", "job", "token", "--force")
        #expect(token.status == 0, "\(token)")
        let introspection = try server.introspect(self.token(token), clientID: "client-b", secret: Self.secretB)
        #expect(introspection["aud"] as? [String] == ["https://api.tokenctl.test"], "\(introspection)")
        #expect(introspection["scope"] as? String == "read")
        #expect(introspection["sub"] as? String == "client-a")

        // idpyoidc issues no refresh token by exchange: 400 invalid_request, the configuration's fault.
        let refused = try sandbox.start(
            [
                "--profile", "job", "login", "--grant", "token-exchange", "--requested-token-type",
                "urn:ietf:params:oauth:token-type:refresh_token",
            ]
        ).wait()
        #expect(refused.status == 78, "\(refused)")
        #expect(
            refused.stderr.contains("invalid_request") && refused.stderr.contains("Nothing was stored"), "\(refused)")
    }

    @Test(
        "a subject token the server refuses (invalid_request) is 78 with what to check, sent once; a good one works again"
    )
    func refusedByServer() throws {
        let server = try server()
        defer { server.stop() }
        let sandbox = try Sandbox()
        let file = sandbox.root + "/home/subject-token"
        let subject = try server.clientCredentialsToken("client-a", secret: "secret-a-0123456789")
        try replace(file, with: subject)
        #expect(try login(sandbox, server, file: file).status == 0)
        // A JWT with another token's signature: idpyoidc answers 400 invalid_request BadSignature.
        let other = try server.clientCredentialsToken("client-c", secret: "secret-c-0123456789")
        let forged =
            subject.split(separator: ".").prefix(2).joined(separator: ".") + "."
            + String(other.split(separator: ".")[2])
        try replace(file, with: forged)
        let sent = try server.tokenRequests()
        let result = try sandbox.tokenctl("--profile", "job", "token", "--force", "--timeout", "5")
        #expect(result.status == 78, "\(result)")
        #expect(result.stderr.contains("invalid_request"), "\(result)")
        #expect(result.stderr.contains("subject_token_file"), "what to check: \(result)")
        #expect(!result.stderr.contains(forged))
        #expect(try server.tokenRequests() == sent + 1, "one request, not retried")
        // The platform writes a good token again: the next exchange works.
        try replace(file, with: subject)
        let served = try sandbox.tokenctl("--profile", "job", "token", "--force")
        #expect(served.status == 0, "\(served)")
    }

    @Test(
        "a public client exchanges with its client_id alone, named (--client-auth none) or chosen from the metadata's none: the token is the public client's, and a confidential client cannot pass so"
    )
    func publicClientExchange() throws {
        let server = try server()
        defer { server.stop() }
        try server.addClient(["client_id": "client-pub", "client_authn_method": ["public"], "allowed_scopes": ["read"]])
        let subject = try server.clientCredentialsToken("client-a", secret: "secret-a-0123456789")
        let accepted = "client_id=client-pub authenticated=False credentials=none"
        // exchange SANDBOX PROFILE CLIENT EXTRA: a token exchange login with no secret or key.
        func exchange(_ sandbox: Sandbox, _ profile: String, _ client: String, _ extra: [String]) throws -> RunResult {
            let file = sandbox.root + "/home/subject-token"
            try replace(file, with: subject)
            sandbox.forgetsHotCacheAtEnd(profile: profile, issuer: server.issuer, clientID: client)
            return try sandbox.start(
                [
                    "--profile", profile, "login", "--grant", "token-exchange", "--issuer", server.issuer,
                    "--client-id", client, "--subject-token-file", file, "--subject-token-type",
                    IdpyoidcServer.accessTokenType,
                ] + extra
            ).wait()
        }
        // issuedToPublicClient TOKEN: introspection (by client-b) and the JWT name client-pub as
        // the client, client-a (the subject token's) as the subject.
        func issuedToPublicClient(_ token: String) throws {
            let introspection = try server.introspect(token, clientID: "client-b", secret: Self.secretB)
            #expect(introspection["active"] as? Bool == true, "\(introspection)")
            #expect(introspection["client_id"] as? String == "client-pub", "\(introspection)")
            #expect(introspection["sub"] as? String == "client-a", "\(introspection)")
            #expect(try GlewlwydServer.claims(of: token)["client_id"] as? String == "client-pub")
        }

        for (name, extra) in [("named", ["--client-auth", "none"]), ("from the metadata", [])] {
            let sandbox = try Sandbox()
            let before = try server.tokenClients()
            let login = try exchange(sandbox, "job", "client-pub", extra)
            #expect(login.status == 0, "\(name): \(login)")
            let profile = try String(contentsOfFile: sandbox.profileFile("job"), encoding: .utf8)
            #expect(profile.contains("token_endpoint_auth_method = none\n"), "\(name): \(profile)")
            let forced = try sandbox.tokenctl("--profile", "job", "token", "--force")
            #expect(forced.status == 0, "\(name): \(forced)")
            try issuedToPublicClient(token(forced))
            // The login's exchange and the forced one: client_id alone, no secret or assertion
            // (nor an Authorization header), and idpyoidc took it as a public client's.
            #expect(try server.tokenClients().dropFirst(before.count) == [accepted, accepted], "\(name)")
        }

        // A confidential client (client-b has a secret) cannot pass by its client_id alone.
        let sandbox = try Sandbox()
        let sent = try server.tokenRequests()
        let refused = try exchange(sandbox, "other", "client-b", ["--client-auth", "none"])
        #expect(refused.status == 78, "\(refused)")
        #expect(refused.stderr.contains("invalid_client"), "\(refused)")
        #expect(!sandbox.profileFileExists("other"), "nothing saved")
        #expect(try server.tokenRequests() == sent + 1, "one request, refused")
    }

    @Test(
        "a federated client assertion (client_assertion_file) authenticates the client at idpyoidc (private_key_jwt), read again for every request"
    )
    func federatedClientAssertion() throws {
        let server = try server()
        defer { server.stop() }
        let sandbox = try Sandbox()
        let key = sandbox.root + "/home/pk.key"
        let made = try runProgram(
            "/usr/bin/openssl", ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key])
        #expect(made.status == 0, "\(made)")
        let jose = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Scripts/lib/glewlwyd_jwt.py").standardized.path
        let jwk = try runProgram("/usr/bin/python3", [jose, "jwk", key])
        try server.addClient([
            "client_id": "client-pk", "client_authn_method": ["private_key_jwt"], "allowed_scopes": ["read"],
            "jwks": ["keys": [try JSONSerialization.jsonObject(with: Data(jwk.stdout.utf8))]],
        ])
        let assertionFile = sandbox.root + "/home/client-assertion"
        func newAssertion() throws -> String {
            let made = try runProgram(
                "/usr/bin/python3",
                [jose, "assertion", "--client-id", "client-pk", "--aud", server.tokenEndpoint, "--key", key])
            try replace(assertionFile, with: made.stdout)
            return made.stdout
        }
        let first = try newAssertion()
        sandbox.forgetsHotCacheAtEnd(profile: "ci", issuer: server.issuer, clientID: "client-pk")
        let login = try sandbox.tokenctl(
            "--profile", "ci", "login", "--grant", "client-credentials", "--issuer", server.issuer, "--client-id",
            "client-pk", "--client-assertion-file", assertionFile)
        #expect(login.status == 0, "\(login)")
        let profile = try String(contentsOfFile: sandbox.profileFile("ci"), encoding: .utf8)
        #expect(profile.contains("client_assertion_file = \(assertionFile)"))
        #expect(profile.contains("token_endpoint_auth_method = private_key_jwt"))

        // idpyoidc refuses an assertion it has seen (its jti): the same file again is refused…
        let replayed = try sandbox.tokenctl("--profile", "ci", "token", "--force", "--timeout", "5")
        #expect(replayed.status == 78, "\(replayed)")
        #expect(replayed.stderr.contains("invalid_client"), "\(replayed)")
        #expect(!replayed.stderr.contains(first))
        // … and a new one in the file is read and accepted.
        _ = try newAssertion()
        let renewed = try sandbox.tokenctl("--profile", "ci", "token", "--force")
        #expect(renewed.status == 0, "\(renewed)")
        for path in sandbox.allFiles() where path != assertionFile {
            let contents = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            #expect(!contents.contains(first), "the assertion is in \(path)")
        }
    }
}
