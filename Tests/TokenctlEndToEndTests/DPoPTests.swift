import Foundation
import Testing
import TokenctlTestSupport

/// DPoP sessions (RFC 9449) through the binary against the test server, which verifies every
/// proof itself with Python `cryptography` (signature, typ/alg/jwk, htm, htu, iat, jti reuse,
/// nonce, ath) and binds what it issues to the proof's key: a refresh with another key or
/// without a proof fails there, so a passing refresh shows the binding held.
@Suite("End to end: DPoP-bound sessions (test server verifies every proof)")
struct DPoPEndToEndTests {
    func line(_ result: RunResult) -> String { result.stdout.trimmingCharacters(in: .newlines) }

    func forgetIssuer(_ sandbox: Sandbox, _ server: AuthServer) throws {
        for kind in ["session", "client-secret"] {
            _ = try runProgram(
                "/usr/bin/secret-tool", ["clear", "application", "tokenctl", "issuer", server.url, "kind", kind],
                environment: sandbox.variables)
        }
    }

    /// Sign `profile` in with `--dpop` by importing a refresh token the server just issued.
    func importLogin(_ sandbox: Sandbox, _ server: AuthServer, profile: String, extra: [String] = []) throws
        -> RunResult
    {
        let refreshToken = try server.issue()
        return try sandbox.start(
            [
                "--profile", profile, "login", "--dpop", "--issuer", server.url, "--client-id", "cli",
                "--refresh-token-stdin",
            ] + extra,
            stdin: refreshToken
        ).wait()
    }

    func statusJSON(_ sandbox: Sandbox, _ profile: String) throws -> [String: Any] {
        let status = try sandbox.tokenctl("--profile", profile, "status", "--json")
        return try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
    }

    /// The proofs the server saw on its token, revocation and resource endpoints.
    func proofs(_ server: AuthServer, path: String = "/token") throws -> [[String: Any]] {
        try server.log().filter { ($0["path"] as? String) == path }.compactMap { $0["dpop"] as? [String: Any] }
    }

    @Test(
        "device login --dpop: a new key, bound tokens (server's jkt = ours), the key only in the Secret Service, status and events say so"
    )
    func deviceLogin() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["device_script": ["approve"], "device_interval": 1])
        try forgetIssuer(sandbox, server)
        let profile = "dpop-device"
        let result = try sandbox.start([
            "--profile", profile, "login", "--device", "--dpop", "--issuer", server.url, "--client-id", "cli",
        ]).wait()
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("bound to a new DPoP key (jkt "), "\(result)")
        let stored = try #require(try sandbox.storedTokenSet(profile: profile, issuer: server.url))
        #expect(stored["token_type"] as? String == "DPoP")
        let key = try #require(stored["dpop_key"] as? String)
        let status = try statusJSON(sandbox, profile)
        let jkt = try #require(status["dpop_jkt"] as? String)
        #expect(status["dpop"] as? String == "bound")
        let refreshToken = try #require(stored["refresh_token"] as? String)
        #expect(try server.tokenStatus(refreshToken)["jkt"] as? String == jkt)
        let accessToken = try #require(stored["access_token"] as? String)
        #expect(try server.tokenStatus(accessToken)["jkt"] as? String == jkt)
        // Every token request carried a valid proof of that key; the device endpoint none.
        let sent = try proofs(server)
        #expect(
            !sent.isEmpty && sent.allSatisfy { $0["valid"] as? Bool == true && $0["jkt"] as? String == jkt }, "\(sent)")
        #expect(
            try server.log().filter { ($0["path"] as? String) == "/device_authorization" }.allSatisfy {
                $0["dpop"] == nil || $0["dpop"] is NSNull
            })
        #expect(try String(contentsOfFile: sandbox.profileFile(profile), encoding: .utf8).contains("dpop = true\n"))
        let human = try sandbox.tokenctl("--profile", profile, "status")
        #expect(human.stdout.contains("dpop:          bound (jkt \(jkt))"), "\(human)")
        #expect(try sandbox.tokenctl("--profile", profile, "events").stdout.contains("dpopBound"))
        let doctor = try sandbox.tokenctl("doctor")
        #expect(
            doctor.stdout.contains("libgcrypt loads: proofs can be signed for 1 profile(s) with dpop = true"),
            "\(doctor)")
        // The private key is nowhere on disk, nor in the hot cache, nor in status.
        let privatePart = String(key.split(separator: ".")[0])
        for file in sandbox.allFiles() {
            let text = (try? String(contentsOfFile: file, encoding: .isoLatin1)) ?? ""
            #expect(!text.contains(privatePart), "\(file)")
        }
        let keys = try KernelKeyringProbe().userKeyringDescriptions().filter { $0.hasPrefix("tokenctl:v1:\(profile):") }
        #expect(keys.isEmpty, "a DPoP session's token is never in the hot cache: \(keys)")
        #expect(!human.stdout.contains(privatePart) && !human.stdout.contains(accessToken))
    }

    @Test("browser login --dpop: the authorization request carries dpop_jkt, the code exchange a proof of that key")
    func browserLogin() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try forgetIssuer(sandbox, server)
        let command = try sandbox.start([
            "login", "--browser", "--no-open", "--dpop", "--issuer", server.url, "--client-id", "cli",
        ])
        guard let stderr = command.waitForStandardError(containing: "redirect_uri=") else {
            command.signal(SIGKILL)
            Issue.record("no URL: \(command.wait())")
            return
        }
        let url = try #require(
            stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
                $0.hasPrefix(server.url + "/authorize?")
            })
        _ = try runProgram("/usr/bin/curl", ["-sS", "-L", "--max-time", "10", url])
        let result = command.wait()
        #expect(result.status == 0, "\(result)")
        let jkt = try #require(try statusJSON(sandbox, "default")["dpop_jkt"] as? String)
        let authorize = try #require(try server.log().first { ($0["path"] as? String) == "/authorize" })
        #expect(authorize["dpop_jkt"] as? String == jkt)
        let exchange = try #require(try server.log().last { ($0["path"] as? String) == "/token" })
        #expect(
            exchange["grant_type"] as? String == "authorization_code" && exchange["status"] as? Int == 200,
            "\(exchange)")
        #expect((exchange["dpop"] as? [String: Any])?["jkt"] as? String == jkt)
    }

    @Test(
        "token --format dpop: two headers a resource server accepts (curl -H @-); a plain token says why Bearer fails, once"
    )
    func resourceRequest() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "dpop-resource"
        let login = try importLogin(sandbox, server, profile: profile)
        #expect(login.status == 0, "\(login)")
        let resource = server.url + "/resource"
        let headers = try sandbox.tokenctl(
            "--profile", profile, "token", "--format", "dpop", "--method", "GET", "--url", resource + "?q=1")
        #expect(headers.status == 0, "\(headers)")
        let lines = headers.stdout.split(separator: "\n").map(String.init)
        #expect(
            lines.count == 2 && lines[0].hasPrefix("Authorization: DPoP ") && lines[1].hasPrefix("DPoP: "), "\(headers)"
        )
        let answer = try runProgram(
            "/bin/sh", ["-c", "curl -sS -H @- \"$1\"", "sh", resource + "?q=1"], stdin: headers.stdout)
        #expect(
            answer.stdout.contains("\"ok\": true") && answer.stdout.contains("\"token_type\": \"DPoP\""), "\(answer)")
        // The same headers again: the proof's jti was used, the server refuses a replay.
        let replay = try runProgram(
            "/bin/sh", ["-c", "curl -sS -o /dev/null -w '%{http_code}' -H @- \"$1\"", "sh", resource],
            stdin: headers.stdout)
        #expect(replay.stdout == "401", "\(replay)")
        // POST with the other method: a new proof for it.
        let post = try sandbox.tokenctl(
            "--profile", profile, "token", "--format", "dpop", "--method", "post", "--url", resource)
        let posted = try runProgram(
            "/bin/sh", ["-c", "curl -sS -X POST -H @- \"$1\"", "sh", resource], stdin: post.stdout)
        #expect(posted.stdout.contains("\"ok\": true"), "\(posted)")
        // json gains the proof when --method and --url are given.
        let json = try sandbox.tokenctl(
            "--profile", profile, "token", "--format", "json", "--method", "GET", "--url", resource)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(
            object["token_type"] as? String == "DPoP"
                && (object["dpop_proof"] as? String)?.split(separator: ".").count == 3, "\(json)")
        // A plain token: printed, with a note on stderr the first time only.
        let plain = try sandbox.tokenctl("--profile", profile, "token")
        #expect(plain.status == 0 && plain.stderr.contains("DPoP-bound"), "\(plain)")
        // The command the note names runs as printed.
        let help = try sandbox.tokenctl("help", "token")
        #expect(help.status == 0 && help.stdout.contains("--method") && help.stdout.contains("dpop"), "\(help)")
        let bearer = try runProgram(
            "/bin/sh",
            [
                "-c", "curl -sS -o /dev/null -w '%{http_code}' -H \"Authorization: Bearer $2\" \"$1\"", "sh", resource,
                line(plain),
            ])
        #expect(bearer.stdout == "401", "a bound token presented as Bearer is refused: \(bearer)")
        let again = try sandbox.tokenctl("--profile", profile, "token")
        #expect(again.status == 0 && again.stderr.isEmpty, "\(again)")
        // A resource server's nonce is passed back with --nonce.
        let withNonce = try sandbox.tokenctl(
            "--profile", profile, "token", "--format", "dpop", "--method", "GET", "--url", resource, "--nonce",
            "rs-nonce-1")
        let proof = try #require(
            withNonce.stdout.split(separator: "\n").last.map { String($0.dropFirst("DPoP: ".count)) })
        let claims = try #require(decodeJWTPart(proof, 1))
        #expect(
            claims["nonce"] as? String == "rs-nonce-1" && claims["htm"] as? String == "GET" && claims["ath"] is String)
        // Usage errors: a proof needs both; a bearer profile has no key.
        #expect(try sandbox.tokenctl("--profile", profile, "token", "--format", "dpop").status == 64)
        #expect(try sandbox.tokenctl("--profile", profile, "token", "--method", "GET", "--url", resource).status == 64)
        #expect(
            try sandbox.tokenctl(
                "--profile", profile, "token", "--format", "dpop", "--method", "GET", "--url", "ftp://x/"
            ).status == 64)
        try sandbox.login(server, profile: "bearer-profile")
        let refused = try sandbox.tokenctl(
            "--profile", "bearer-profile", "token", "--format", "dpop", "--method", "GET", "--url", resource)
        #expect(refused.status == 78 && refused.stderr.contains("not bound to a DPoP key"), "\(refused)")
    }

    @Test(
        "64 processes on an expired DPoP session, rotation with no grace: one refresh, every proof valid, all serve the new token"
    )
    func fanIn() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0, "access_ttl": 2])
        let profile = "dpop-fanin"
        #expect(try importLogin(sandbox, server, profile: profile).status == 0)
        let before = try server.refreshGrants().count
        sleep(seconds: 2.5)
        // The refreshed token lives long: with 2 s, a loaded machine that takes longer than
        // that to start 64 processes would see it expire and rightly refresh again.
        try server.configure(["access_ttl": 600])
        let results = try sandbox.concurrently(
            64,
            ["--profile", profile, "token", "--format", "dpop", "--method", "GET", "--url", server.url + "/resource"])
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.filter { $0.status != 0 }.prefix(2))")
        let tokens = Set(results.map { $0.stdout.split(separator: "\n").first.map(String.init) ?? "" })
        #expect(tokens.count == 1, "\(tokens.count) different tokens")
        #expect(try server.refreshGrants().count == before + 1)
        let stats = try server.stats()
        #expect(
            stats["reuse_detected"] == 0 && stats["invalid_grant"] == 0 && stats["dpop_proofs_invalid"] == 0, "\(stats)"
        )
        // The proofs the 64 printed are each new: every one is accepted once.
        let proofs = Set(results.compactMap { $0.stdout.split(separator: "\n").last.map(String.init) })
        #expect(proofs.count == 64)
        #expect(try sandbox.storedTokenSet(profile: profile, issuer: server.url)?["token_type"] as? String == "DPoP")
    }

    @Test(
        "a server that demands nonces: the login does the use_dpop_nonce dance once, the refresh (another process) starts with the kept nonce"
    )
    func nonces() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["dpop_nonce_required": true])
        let profile = "dpop-nonce"
        #expect(try importLogin(sandbox, server, profile: profile).status == 0)
        let refreshed = try sandbox.tokenctl("--profile", profile, "refresh")
        #expect(refreshed.status == 0, "\(refreshed)")
        let outcomes = try server.tokenRequests().map { $0["outcome"] as? String ?? "?" }
        #expect(outcomes == ["use_dpop_nonce", "issued", "issued"], "\(outcomes)")
        let nonces = try proofs(server).compactMap { $0["nonce"] as? String }
        #expect(nonces.count == 2, "the login's retry and the refresh carry the server's nonce: \(nonces)")
    }

    @Test(
        "a server whose clock is 10 minutes ahead: the login's refused proof is signed again on the server's clock; refreshes start there"
    )
    func clockSkew() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["date_offset_seconds": 600])
        let profile = "dpop-skew"
        let login = try importLogin(sandbox, server, profile: profile)
        #expect(login.status == 0, "\(login)")
        let outcomes = try server.tokenRequests().map { ($0["dpop"] as? [String: Any])?["valid"] as? Bool }
        #expect(outcomes == [false, true], "one refused proof, then one on the server's clock: \(outcomes)")
        let refreshed = try sandbox.tokenctl("--profile", profile, "refresh")
        #expect(refreshed.status == 0, "\(refreshed)")
        #expect(try server.tokenRequests().last.flatMap { ($0["dpop"] as? [String: Any])?["valid"] as? Bool } == true)
        #expect(
            try server.tokenRequests().count == 3, "the refresh used the session's measured offset: no refused proof")
    }

    @Test("a DPoP session's tokens for other targets are DPoP tokens: token --scope … --format dpop is accepted")
    func targetedToken() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "dpop-target"
        #expect(try importLogin(sandbox, server, profile: profile).status == 0)
        let resource = server.url + "/resource"
        let headers = try sandbox.tokenctl(
            "--profile", profile, "token", "--scope", "openid", "--format", "dpop", "--method", "GET", "--url", resource
        )
        #expect(headers.status == 0, "\(headers)")
        let grant = try #require(try server.refreshGrants().last)
        #expect(
            grant["scope"] as? String == "openid" && (grant["dpop"] as? [String: Any])?["valid"] as? Bool == true,
            "\(grant)")
        let answer = try runProgram("/bin/sh", ["-c", "curl -sS -H @- \"$1\"", "sh", resource], stdin: headers.stdout)
        #expect(
            answer.stdout.contains("\"ok\": true") && answer.stdout.contains("\"token_type\": \"DPoP\""), "\(answer)")
    }

    @Test("logout revokes with a proof of the session's key; the family is revoked")
    func revocation() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "dpop-logout"
        #expect(try importLogin(sandbox, server, profile: profile).status == 0)
        let jkt = try statusJSON(sandbox, profile)["dpop_jkt"] as? String
        // A new login is a new key (and the old refresh token's binding stays with the old one).
        let first = try #require(jkt)
        #expect(try importLogin(sandbox, server, profile: profile).status == 0)
        let second = try #require(try statusJSON(sandbox, profile)["dpop_jkt"] as? String)
        #expect(second != first)
        let refreshToken = try #require(
            try sandbox.storedTokenSet(profile: profile, issuer: server.url)?["refresh_token"] as? String)
        let logout = try sandbox.tokenctl("--profile", profile, "logout")
        #expect(logout.status == 0, "\(logout)")
        let revoke = try #require(try server.log().last { ($0["path"] as? String) == "/revoke" })
        #expect(revoke["status"] as? Int == 200 && revoke["outcome"] as? String == "revoked", "\(revoke)")
        let proof = try #require(revoke["dpop"] as? [String: Any])
        #expect(
            proof["valid"] as? Bool == true && proof["jkt"] as? String == second
                && proof["htu"] as? String == server.url + "/revoke")
        #expect(try server.tokenStatus(refreshToken)["family_revoked"] as? Bool == true)
        #expect(try sandbox.storedTokenSet(profile: profile, issuer: server.url) == nil)
    }

    @Test(
        "a downgrade to Bearer is refused: at login nothing is stored; on refresh the session is not replaced (exit 78); dpop_allow_bearer accepts it"
    )
    func downgrade() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["dpop_downgrade": true])
        let refused = try importLogin(sandbox, server, profile: "dpop-down")
        #expect(
            refused.status == 78 && refused.stderr.contains("Bearer") && refused.stderr.contains("Nothing was stored"),
            "\(refused)")
        #expect(try sandbox.storedTokenSet(profile: "dpop-down", issuer: server.url) == nil)
        #expect(try sandbox.tokenctl("--profile", "dpop-down", "events").stdout.contains("dpopDowngradeRefused"))

        try server.configure(["dpop_downgrade": false])
        let profile = "dpop-later"
        #expect(try importLogin(sandbox, server, profile: profile).status == 0)
        let before = try #require(try sandbox.storedTokenSet(profile: profile, issuer: server.url))
        try server.configure(["dpop_downgrade": true])
        let refresh = try sandbox.tokenctl("--profile", profile, "refresh")
        #expect(refresh.status == 78 && refresh.stderr.contains("was not replaced"), "\(refresh)")
        let after = try #require(try sandbox.storedTokenSet(profile: profile, issuer: server.url))
        #expect(
            after["refresh_token"] as? String == before["refresh_token"] as? String
                && after["token_type"] as? String == "DPoP")
        // The hint's way back to bearer tokens runs as printed, in a shell.
        let hint = try #require(
            EverydayPathsTests.quotedCommands(refresh.stderr).first { $0.hasSuffix("login --no-dpop") }, "\(refresh)")
        try server.configure(["device_script": ["approve"], "device_interval": 1, "dpop_downgrade": false])
        var environment = sandbox.variables
        environment["PATH"] =
            URL(fileURLWithPath: sandbox.environment.binary).deletingLastPathComponent().path + ":"
            + (environment["PATH"] ?? "/usr/bin:/bin")
        let relogin = try RunningCommand(
            executable: "/bin/sh", arguments: ["-c", hint], environment: environment, stdin: nil,
            directory: sandbox.root
        ).wait()
        #expect(relogin.status == 0, "\(hint): \(relogin)")
        #expect(try statusJSON(sandbox, profile)["dpop"] as? String == "bearer")
        try server.configure(["dpop_downgrade": true])

        // The hint's way out: accept Bearer tokens for this profile.
        let file = sandbox.profileFile(profile)
        try (try String(contentsOfFile: file, encoding: .utf8) + "dpop_allow_bearer = true\n").write(
            toFile: file, atomically: true, encoding: .utf8)
        try sandbox.login(server, profile: "dpop-allowed")
        let allowedFile = sandbox.profileFile("dpop-allowed")
        try (try String(contentsOfFile: allowedFile, encoding: .utf8) + "dpop_allow_bearer = true\n").write(
            toFile: allowedFile, atomically: true, encoding: .utf8)
        let allowed = try importLogin(sandbox, server, profile: "dpop-allowed")
        #expect(allowed.status == 0, "\(allowed)")
        #expect(try statusJSON(sandbox, "dpop-allowed")["dpop"] as? String == "bearer-accepted")
    }

    @Test(
        "--dpop is refused before anything is sent when the server does not advertise ES256; a JWT bound to another key is refused"
    )
    func notSupportedAndWrongKey() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["dpop_algs": []])
        let refused = try importLogin(sandbox, server, profile: "dpop-none")
        #expect(refused.status == 78 && refused.stderr.contains("does not support DPoP"), "\(refused)")
        #expect(try server.tokenRequests().isEmpty, "nothing was sent to the token endpoint")

        try server.configure(["dpop_algs": ["ES256"], "jwt_access_tokens": true, "dpop_wrong_cnf": true])
        let wrong = try importLogin(sandbox, server, profile: "dpop-wrong")
        #expect(wrong.status == 78 && wrong.stderr.contains("not bound to this session's DPoP key"), "\(wrong)")
        #expect(try sandbox.storedTokenSet(profile: "dpop-wrong", issuer: server.url) == nil)
        try server.configure(["dpop_wrong_cnf": false])
        let right = try importLogin(sandbox, server, profile: "dpop-wrong")
        #expect(right.status == 0, "a JWT whose cnf.jkt is our key is accepted: \(right)")
    }

    @Test("a profile without --dpop is unchanged: no proofs, Bearer tokens, the hot cache serves it")
    func bearerUnchanged() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server, profile: "plain")
        let token = try sandbox.tokenctl("--profile", "plain", "-v", "token")
        #expect(token.status == 0 && token.stderr.contains("(kernel keyring cache)"), "\(token)")
        #expect(try sandbox.tokenctl("--profile", "plain", "refresh").status == 0)
        #expect(
            try server.log().filter { ($0["path"] as? String) == "/token" }.allSatisfy {
                $0["dpop"] == nil || $0["dpop"] is NSNull
            })
        #expect(try sandbox.storedTokenSet(profile: "plain", issuer: server.url)?["token_type"] as? String == "Bearer")
        #expect(try statusJSON(sandbox, "plain")["dpop"] as? String == "bearer")
        #expect(!(try String(contentsOfFile: sandbox.profileFile("plain"), encoding: .utf8)).contains("dpop"))
    }
}

/// The JSON object in part `index` of a compact JWS, unverified.
func decodeJWTPart(_ token: String, _ index: Int) -> [String: Any]? {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3 else { return nil }
    var text = String(parts[index]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while text.count % 4 != 0 { text += "=" }
    guard let data = Data(base64Encoded: text) else { return nil }
    return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
}
