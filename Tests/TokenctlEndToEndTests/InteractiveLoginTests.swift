import Foundation
import Testing
import TokenctlTestSupport

/// `login --device` and `login --browser` through the built binary against the local test server,
/// for what a real server cannot do on demand (slow_down, denial, expiry, forged state, bad signatures).
@Suite("End to end: interactive login (local test server)", .serialized)
struct InteractiveLoginTests {
    /// The keyring outlives every test and a new server may get an old one's port (and so its
    /// issuer URL): start each test from a keyring without items for this issuer.
    func forgetIssuer(_ sandbox: Sandbox, _ server: AuthServer) throws {
        for kind in ["session", "client-secret"] {
            _ = try runProgram(
                "/usr/bin/secret-tool", ["clear", "application", "tokenctl", "issuer", server.url, "kind", kind],
                environment: sandbox.variables)
        }
    }

    func device(_ sandbox: Sandbox, _ server: AuthServer, _ extra: String..., stdin: String? = nil) throws -> RunResult
    {
        try forgetIssuer(sandbox, server)
        return try sandbox.start(
            ["login", "--device", "--issuer", server.url, "--client-id", "cli"] + extra, stdin: stdin
        ).wait()
    }

    func expectNothingStored(_ sandbox: Sandbox, _ server: AuthServer) throws {
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
        #expect(!FileManager.default.fileExists(atPath: sandbox.profileFile()))
    }

    @Test("device flow: pending, slow_down (+5 s), approval → stored session, codes on stderr, no QR off a TTY")
    func deviceHappyPath() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "device_script": ["authorization_pending", "slow_down", "approve"], "device_interval": 1,
        ])
        let result = try device(sandbox, server)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("\(server.url)/device"))
        #expect(result.stderr.contains("enter the code: "))
        #expect(result.stderr.contains("user_code="))
        #expect(!result.stderr.contains("▀"), "no QR code when stderr is not a terminal")
        #expect(result.stderr.contains("signature"), "the RS256 ID token was verified")
        let polls = try server.log().filter {
            ($0["grant_type"] as? String) == "urn:ietf:params:oauth:grant-type:device_code"
        }
        #expect(polls.count == 3)
        let times = polls.compactMap { $0["time"] as? Double }
        #expect(times[1] - times[0] >= 0.9)
        #expect(times[2] - times[1] >= 5.9, "slow_down adds 5 seconds to the interval")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        #expect(stored["refresh_token"] is String)
        let profile = try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8)
        #expect(profile.contains("device_authorization_endpoint = \(server.url)/device_authorization"))
        #expect(profile.contains("jwks_uri = \(server.url)/jwks"))
        #expect(profile.contains("scope = openid offline_access"))
        let token = try sandbox.tokenctl("token")
        #expect(token.stdout == (stored["access_token"] as! String) + "\n")
        // The discovery document is cached privately.
        let cached = sandbox.allFiles().filter { $0.contains("/.cache/tokenctl/discovery/") }
        #expect(cached.count == 1)
        let mode = try FileManager.default.attributesOfItem(atPath: cached[0])[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test("device flow on a terminal: a QR code of the complete URI and a live countdown (run under script(1)'s pty)")
    func deviceFlowOnATerminal() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "device_script": ["authorization_pending", "authorization_pending", "approve"], "device_interval": 1,
        ])
        try forgetIssuer(sandbox, server)
        // script(1) gives tokenctl a pseudo-terminal as stdin, stdout and stderr, as a user has.
        let command = "\(sandbox.environment.binary) login --device --issuer \(server.url) --client-id cli"
        let result = try runProgram(
            "/usr/bin/script", ["-q", "-e", "-c", command, "/dev/null"],
            environment: sandbox.variables.merging(["TERM": "xterm"]) { $1 })
        #expect(result.status == 0, "\(result)")
        let screen = result.stdout
        #expect(screen.contains("▀") || screen.contains("█") || screen.contains("▄"), "a QR code is drawn: \(screen)")
        #expect(screen.contains("code expires in"), "a live countdown: \(screen)")
        #expect(screen.contains("\u{1B}[K"), "the countdown redraws one line")
        #expect(try sandbox.storedTokenSet(issuer: server.url) != nil)
    }

    @Test(
        "device flow: access_denied and expired_token → exit 77, nothing stored",
        arguments: [
            ("access_denied", "denied"), ("expired_token", "expired"),
        ])
    func deviceDeniedOrExpired(code: String, words: String) throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["device_script": ["authorization_pending", code], "device_interval": 1])
        let result = try device(sandbox, server)
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains(words))
        #expect(result.stderr.contains("Nothing was stored"))
        try expectNothingStored(sandbox, server)
    }

    @Test("device flow: a response without user_code → 77 with a specific message, nothing stored")
    func deviceWithoutUserCode() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["device_response_override": ["user_code": NSNull()]])
        let result = try device(sandbox, server)
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("without a usable user_code"))
        try expectNothingStored(sandbox, server)
    }

    @Test(
        "device flow: a user_code with a space (WDJB MJHT, as some servers format it) is accepted and shown as given; one with a control character or too long is not",
        arguments: [
            ("WDJB MJHT", true), ("WDJB\tMJHT", false), (String(repeating: "A", count: 65), false),
        ])
    func deviceUserCodeWithSpace(code: String, accepted: Bool) throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "device_script": ["approve"], "device_interval": 1, "device_response_override": ["user_code": code],
        ])
        let result = try device(sandbox, server)
        if accepted {
            #expect(result.status == 0, "\(result)")
            #expect(result.stderr.contains("and enter the code: \(code)\n"), "\(result)")
            #expect(try sandbox.storedTokenSet(issuer: server.url) != nil)
        } else {
            #expect(result.status == 77, "\(result)")
            #expect(result.stderr.contains("without a usable user_code"), "\(result)")
            try expectNothingStored(sandbox, server)
        }
    }

    @Test("device flow: Ctrl-C while polling stops at once and stores nothing")
    func deviceInterrupted() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["device_interval": 1])
        try forgetIssuer(sandbox, server)
        let command = try sandbox.start(["login", "--device", "--issuer", server.url, "--client-id", "cli"])
        #expect(command.waitForStandardError(containing: "enter the code") != nil)
        command.signal(SIGINT)
        let result = command.wait()
        #expect(result.status == 130, "\(result)")
        try expectNothingStored(sandbox, server)
    }

    @Test("an ES256-signed ID token verifies against the EC key in the JWKS; a bad ES256 signature does not")
    func es256() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "id_token_alg": "ES256", "device_script": ["approve", "approve"], "device_interval": 1,
        ])
        let good = try device(sandbox, server)
        #expect(good.status == 0, "\(good)")
        // The device flow sends no nonce: the summary names only the checks made.
        #expect(good.stderr.contains("ID token checked: issuer, audience, expiry and signature.\n"), "\(good)")
        #expect(!good.stderr.contains("nonce"), "\(good)")
        try server.configure(["id_token_bad_signature": true])
        let bad = try device(sandbox, server)
        #expect(bad.status == 77, "\(bad)")
        #expect(bad.stderr.contains("signature does not verify"))
    }

    @Test(
        "ID token problems: bad signature, HS256, wrong audience → 77, nothing stored",
        arguments: [
            (#"{"id_token_bad_signature": true}"#, "signature does not verify"),
            (#"{"id_token_alg": "HS256"}"#, "HS256"),
            (#"{"id_token_alg": "none"}"#, "none"),
            (#"{"id_token_claims": {"aud": "someone-else"}}"#, "another client"),
            (#"{"id_token_claims": {"iss": "https://evil.example"}}"#, "issued by"),
            (#"{"id_token_claims": {"nonce": "from-another-sign-in"}}"#, "sent none"),
        ])
    func idTokenRejected(configuration: String, words: String) throws {
        let sandbox = try Sandbox()
        var settings = try #require(try JSONSerialization.jsonObject(with: Data(configuration.utf8)) as? [String: Any])
        settings["device_script"] = ["approve"]
        settings["device_interval"] = 1
        let server = try AuthServer(settings)
        let result = try device(sandbox, server)
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("ID token was rejected"))
        #expect(result.stderr.contains(words))
        try expectNothingStored(sandbox, server)
    }

    @Test("discovery: issuer mismatch, malformed document, missing device endpoint → 78; unreachable → 75")
    func discoveryProblems() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["discovery_issuer_override": "https://other.example"])
        let mismatch = try device(sandbox, server)
        #expect(mismatch.status == 78, "\(mismatch)")
        #expect(mismatch.stderr.contains("names issuer 'https://other.example'"))

        try server.configure(["discovery_issuer_override": NSNull(), "discovery_raw": "{not json"])
        let malformed = try device(sandbox, server)
        #expect(malformed.status == 78, "\(malformed)")
        #expect(malformed.stderr.contains("is not a JSON object"))

        try server.configure([
            "discovery_raw": NSNull(), "discovery_omit": ["device_authorization_endpoint"],
            "device_script": ["approve"], "device_interval": 1,
        ])
        let missing = try device(sandbox, server)
        #expect(missing.status == 78, "\(missing)")
        #expect(missing.stderr.contains("no device_authorization_endpoint"))
        #expect(missing.stderr.contains("--device-authorization-endpoint"))
        try expectNothingStored(sandbox, server)
        let explicit = try device(
            sandbox, server, "--device-authorization-endpoint", server.url + "/device_authorization")
        #expect(explicit.status == 0, "\(explicit)")
        // The endpoint is kept in the profile: logging in again needs no option.
        #expect(try sandbox.tokenctl("logout").status == 0)
        try server.configure(["device_script": ["approve"]])
        let again = try device(sandbox, server)
        #expect(again.status == 0, "the profile's device_authorization_endpoint is used: \(again)")

        let unreachable = try sandbox.tokenctl(
            "--profile", "gone", "login", "--device", "--issuer", "http://127.0.0.1:9", "--client-id", "cli")
        #expect(unreachable.status == 75, "\(unreachable)")
        #expect(unreachable.stderr.contains("cannot reach the issuer"))
    }

    @Test("confidential client: secret stored as its own item (kind=client-secret), sent on device, refresh and revoke")
    func confidentialClient() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "client_secrets": ["cli": "s3cret/+"], "device_script": ["approve"], "device_interval": 1,
            "auth_methods": ["client_secret_post"],
        ])
        let result = try device(sandbox, server, "--client-secret-stdin", stdin: "s3cret/+\n")
        #expect(result.status == 0, "\(result)")
        let secret = try runProgram(
            "/usr/bin/secret-tool",
            [
                "lookup", "application", "tokenctl", "profile", "default", "issuer", server.url, "client_id", "cli",
                "kind", "client-secret",
            ],
            environment: sandbox.variables)
        #expect(secret.stdout == "s3cret/+")
        let profile = try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8)
        #expect(profile.contains("token_endpoint_auth_method = client_secret_post"))
        #expect(
            !sandbox.allFiles().contains {
                (try? String(contentsOfFile: $0, encoding: .utf8))?.contains("s3cret") == true
            })
        let forced = try sandbox.tokenctl("token", "--force")
        #expect(forced.status == 0, "\(forced)")
        #expect(try server.refreshGrants().last?["client_secret_sent"] as? Bool == true)
        let logout = try sandbox.tokenctl("logout")
        #expect(logout.status == 0, "\(logout)")
        #expect(
            try server.log().filter { ($0["path"] as? String) == "/revoke" }.last?["outcome"] as? String == "revoked")
    }

    @Test("no refresh token: login says so; token works until expiry, then 77 saying why")
    func noRefreshToken() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "omit_refresh_token": true, "access_ttl": 8, "device_script": ["approve"], "device_interval": 1,
        ])
        let result = try device(
            sandbox, server, "--audience", "https://api.example", "--resource", "https://api.example/v1")
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("issued no refresh token"))
        let request = try #require(try server.log().first { ($0["path"] as? String) == "/device_authorization" })
        #expect(request["audience"] as? String == "https://api.example")
        #expect(request["resource"] as? String == "https://api.example/v1")
        // The access token lives 8 s: room for the login's keyring write and this `token` on a
        // loaded machine, before the wait for its expiry.
        #expect(try sandbox.tokenctl("token", "--min-ttl", "0").status == 0)
        sleep(seconds: 8.2)
        let expired = try sandbox.tokenctl("token")
        #expect(expired.status == 77, "\(expired)")
        #expect(expired.stderr.contains("issued no refresh token"))
    }

    // MARK: Browser

    /// Start `login --browser --no-open`, wait for the URL on stderr, follow it with curl to
    /// the loopback redirect as a browser would, and return tokenctl's result and the page.
    func browserLogin(_ sandbox: Sandbox, _ server: AuthServer, _ extra: [String] = []) throws -> (RunResult, String) {
        try forgetIssuer(sandbox, server)
        let command = try sandbox.start(
            ["login", "--browser", "--no-open", "--issuer", server.url, "--client-id", "cli"] + extra)
        guard let stderr = command.waitForStandardError(containing: "redirect_uri=") else {
            command.signal(SIGKILL)
            return (command.wait(), "")
        }
        let url = try #require(
            stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
                $0.hasPrefix(server.url + "/authorize?")
            })
        let page = try runProgram("/usr/bin/curl", ["-sS", "-L", "--max-time", "10", url])
        return (command.wait(), page.stdout)
    }

    @Test(
        "browser flow through xdg-open: the browser gets exactly the descriptors tokenctl was given, not discovery's kept-alive connection; the session is stored"
    )
    func browserInheritsNoConnection() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try forgetIssuer(sandbox, server)
        // A stand-in for xdg-open: it notes its descriptors past stderr, then follows the URL as a
        // browser would.
        let bin = sandbox.root + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        let probe = try DescriptorProbe(bin + "/xdg-open", then: "exec /usr/bin/curl -sS -L --max-time 10 \"$1\"")
        sandbox.variables["PATH"] = bin + ":" + (sandbox.variables["PATH"] ?? "/usr/bin:/bin")
        let given = try probe.baseline(environment: sandbox.variables)

        let result = try sandbox.start([
            "login", "--browser", "--issuer", server.url, "--client-id", "cli", "--timeout", "30",
        ]).wait()
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("Opened your browser"), "\(result)")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] is String)
        let seen = probe.seen
        #expect(seen == given, "xdg-open got more than tokenctl was given: \(Set(seen).subtracting(given))")
    }

    @Test("browser flow: PKCE S256, state, nonce; the page tells the user to return; session stored")
    func browserHappyPath() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let (result, page) = try browserLogin(sandbox, server)
        #expect(result.status == 0, "\(result)")
        #expect(page.contains("return to the terminal"))
        let authorize = try #require(try server.log().first { ($0["path"] as? String) == "/authorize" })
        #expect(authorize["code_challenge_method"] as? String == "S256")
        #expect((authorize["nonce"] as? String)?.count == 43)
        #expect((authorize["redirect_uri"] as? String)?.hasPrefix("http://127.0.0.1:") == true)
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] is String)
        #expect(result.stderr.contains("nonce and signature"))
    }

    @Test(
        "browser flow: error=access_denied, or a missing code → 77, nothing stored",
        arguments: [
            ("deny", "denied in the browser"), ("no_code", "no authorization code"),
        ])
    func browserRejected(mode: String, words: String) throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["authorize_mode": mode])
        let (result, _) = try browserLogin(sandbox, server)
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains(words))
        try expectNothingStored(sandbox, server)
    }

    @Test(
        "browser flow: a forged state is refused with a 400 page and the login keeps waiting (here until --login-timeout: 77, nothing stored)"
    )
    func browserForgedState() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["authorize_mode": "wrong_state"])
        let (result, page) = try browserLogin(sandbox, server, ["--login-timeout", "3"])
        #expect(result.status == 77, "\(result)")
        // The last refusal is what the user hears about, not "no answer".
        #expect(
            result.stderr.contains(
                "Error: the browser's redirect was refused: its state did not match this login (it carried a code); no other came within 3 seconds"
            ), "\(result)")
        #expect(!result.stderr.contains("no answer from the browser"), "\(result)")
        let errorLines = result.stderr.split(separator: "\n").filter {
            $0.hasPrefix("Error:") || !$0.hasPrefix(" ") && !$0.contains("/authorize?")
        }
        #expect(!errorLines.contains { $0.contains("code_") }, "the code (code_…) is never echoed: \(result)")
        #expect(page.contains("not for the sign-in tokenctl is waiting for"), "\(page)")
        try expectNothingStored(sandbox, server)
    }

    @Test(
        "browser flow: a denial without the state (as some servers send it) is refused, and the timeout says so: 77, nothing stored"
    )
    func browserDenialWithoutState() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["authorize_mode": "deny_without_state"])
        let (result, _) = try browserLogin(sandbox, server, ["--login-timeout", "3"])
        #expect(result.status == 77, "\(result)")
        #expect(
            result.stderr.contains(
                "Error: the browser's redirect was refused: it carried no state (it reported error 'access_denied'); no other came within 3 seconds"
            ), "\(result)")
        try expectNothingStored(sandbox, server)
    }

    @Test(
        "browser flow: probes from other local processes (wrong path, wrong or missing state, garbage, an idle connection) never end or block the sign-in"
    )
    func browserProbes() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try forgetIssuer(sandbox, server)
        let command = try sandbox.start([
            "login", "--browser", "--no-open", "--issuer", server.url, "--client-id", "cli",
        ])
        let stderr = try #require(command.waitForStandardError(containing: "redirect_uri="))
        let url = try #require(
            stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
                $0.hasPrefix(server.url + "/authorize?")
            })
        let redirect = try #require(URLComponents(string: url)?.queryItems?.first { $0.name == "redirect_uri" }?.value)
        let port = try #require(URL(string: redirect)?.port)
        let base = "http://127.0.0.1:\(port)"
        // An idle connection that never sends anything, held open while the rest happens.
        let idle = try RunningCommand(
            executable: sandbox.environment.python,
            arguments: [
                "-c",
                "import socket, sys, time; s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); time.sleep(8)",
                String(port),
            ],
            environment: sandbox.variables, stdin: nil, directory: sandbox.root)
        defer {
            idle.signal(SIGKILL)
            _ = idle.wait()
        }
        for (target, status) in [
            ("/callback?code=stolen&state=guess", "400"), ("/callback?code=stolen", "400"), ("/other", "404"),
        ] {
            let probe = try runProgram(
                "/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", base + target])
            #expect(probe.stdout == status, "\(target): \(probe)")
        }
        let garbage = try runProgram(
            sandbox.environment.python,
            [
                "-c",
                """
                import socket, sys
                s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
                s.sendall(b'\\x00\\xff GARBAGE\\r\\n\\r\\n'); s.settimeout(10); print(s.recv(100)[:12])
                """, String(port),
            ])
        #expect(garbage.stdout.contains("400"), "\(garbage)")
        // The real browser still completes the sign-in.
        let page = try runProgram("/usr/bin/curl", ["-sS", "-L", "--max-time", "10", url])
        let result = command.wait()
        #expect(result.status == 0, "\(result)")
        #expect(page.stdout.contains("return to the terminal"), "\(page)")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] is String)
    }

    @Test("browser flow: --port already in use → 64 with a clear message; browser timeout → 77")
    func browserPortAndTimeout() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        // Occupy a port with a listener of our own (the test server's port is busy by definition).
        try forgetIssuer(sandbox, server)
        let busyPort = String(server.url.split(separator: ":").last!)
        let busy = try sandbox.tokenctl(
            "login", "--browser", "--no-open", "--port", busyPort, "--issuer", server.url, "--client-id", "cli")
        #expect(busy.status == 64, "\(busy)")
        #expect(busy.stderr.contains("already in use"))
        let timeout = try sandbox.tokenctl(
            "login", "--browser", "--no-open", "--login-timeout", "1", "--issuer", server.url, "--client-id", "cli")
        #expect(timeout.status == 77, "\(timeout)")
        #expect(timeout.stderr.contains("no answer from the browser within 1 seconds"))
        try expectNothingStored(sandbox, server)
    }

    @Test("without a display, login defaults to the device flow")
    func defaultsToDevice() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["device_script": ["approve"], "device_interval": 1])
        let result = try sandbox.tokenctl("login", "--issuer", server.url, "--client-id", "cli")
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("enter the code"))
    }
}
