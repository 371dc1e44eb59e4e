import Foundation
import Testing
import TokenctlTestSupport

/// The second day: signing a profile in again from what it saved, hints that run as printed,
/// removing a profile, an honest logout when revocation fails, and `-v` telling the story.
/// Through the real binary against the local test server (the second browser login against
/// django-oauth-toolkit is in RealServerLoginTests).
@Suite("End to end: everyday paths")
struct EverydayPathsTests {
    /// Approvals for every device login a test makes (one is consumed per login).
    static var approvals: [String: Any] {
        ["device_script": Array(repeating: "approve", count: 12), "device_interval": 1]
    }

    func requests(_ server: AuthServer, path: String) throws -> [[String: Any]] {
        try server.log().filter { ($0["path"] as? String) == path }
    }

    @Test("device: a second login with no options sends what the first sent (scope, audience, resource)")
    func deviceReloginFromSavedProfile() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(Self.approvals)
        let profile = "everyday-device"
        let first = try sandbox.start([
            "--profile", profile, "login", "--device", "--issuer", server.url, "--client-id", "cli",
            "--audience", "api://billing", "--resource", "https://api.example/",
        ]).wait()
        #expect(first.status == 0, "\(first)")
        #expect(try sandbox.tokenctl("--profile", profile, "logout").status == 0)
        let second = try sandbox.start(["--profile", profile, "login"]).wait()
        #expect(second.status == 0, "\(second)")
        let sent = try requests(server, path: "/device_authorization")
        try #require(sent.count == 2, "\(sent)")
        for key in ["client_id", "scope", "audience", "resource"] {
            #expect(sent[0][key] as? String == sent[1][key] as? String, "\(key): \(sent)")
        }
        #expect(sent[1]["scope"] as? String == "openid offline_access")
        #expect(sent[1]["audience"] as? String == "api://billing")
        #expect(try sandbox.storedTokenSet(profile: profile, issuer: server.url)?["refresh_token"] is String)
        _ = try sandbox.tokenctl("--profile", profile, "logout", "--forget")
    }

    @Test("browser: a second login with no other option sends scope, nonce and PKCE as the first did")
    func browserReloginFromSavedProfile() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "everyday-browser"
        func browserLogin(_ arguments: [String]) throws -> RunResult {
            let command = try sandbox.start(["--profile", profile, "login", "--browser", "--no-open"] + arguments)
            guard let stderr = command.waitForStandardError(containing: "redirect_uri=") else {
                command.signal(SIGKILL)
                return command.wait()
            }
            let url = try #require(
                stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
                    $0.hasPrefix(server.url + "/authorize?")
                })
            _ = try runProgram("/usr/bin/curl", ["-sS", "-L", "--max-time", "10", url])
            return command.wait()
        }
        #expect(try browserLogin(["--issuer", server.url, "--client-id", "cli"]).status == 0)
        #expect(try sandbox.tokenctl("--profile", profile, "logout").status == 0)
        let second = try browserLogin([])
        #expect(second.status == 0, "\(second)")
        #expect(second.stderr.contains("nonce and signature"), "\(second)")
        let sent = try requests(server, path: "/authorize")
        try #require(sent.count == 2)
        for key in ["client_id", "scope", "code_challenge_method"] {
            #expect(sent[0][key] as? String == sent[1][key] as? String, "\(key): \(sent)")
        }
        #expect(sent[1]["scope"] as? String == "openid offline_access")
        #expect((sent[1]["nonce"] as? String)?.count == 43)
        _ = try sandbox.tokenctl("--profile", profile, "logout", "--forget")
    }

    @Test("login with no options and no saved profile: 64 naming what is missing and the command to run")
    func loginWithoutSavedProfile() throws {
        let sandbox = try Sandbox()
        let result = try sandbox.tokenctl("--profile", "everyday-none", "login")
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("has none saved"), "\(result)")
    }

    /// Every `'tokenctl …'` quoted in `text`.
    static func quotedCommands(_ text: String) -> [String] {
        var found: [String] = []
        var rest = Substring(text)
        while let start = rest.range(of: "'tokenctl ") {
            let after = rest[start.upperBound...]
            guard let end = after.firstIndex(of: "'") else { break }
            found.append("tokenctl " + after[..<end])
            rest = after[after.index(after: end)...]
        }
        return found
    }

    @Test("every hint after a logout, an ended session and in refresh --all runs as printed (never 64)")
    func hintsRunAsPrinted() throws {
        // A keyring of its own: the hints include 'tokenctl logout --orphans', which removes every
        // item no profile of this sandbox uses, and the shared keyring holds other tests' sessions.
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(Self.approvals)
        let profile = "everyday-hints"
        // Hints may say 'tokenctl schedule install': never touch the machine's crontab or units.
        try sandbox.useFakeCrontab()
        let bin = sandbox.root + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try writeExecutable(
            bin + "/systemctl", "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n")
        sandbox.variables["PATH"] = bin + ":" + (sandbox.variables["PATH"] ?? "/usr/bin:/bin")
        var ran: [String] = []
        /// Run every quoted command in `printed` as printed (a removal last): never a usage error.
        func runHints(_ printed: [String], _ situation: String) throws {
            var commands: [String] = []
            for command in printed.flatMap(Self.quotedCommands) where !commands.contains(command) {
                commands.append(command)
            }
            commands.sort { !$0.contains("--forget") && $1.contains("--forget") }
            for command in commands {
                let result = try sandbox.start(command.split(separator: " ").dropFirst().map(String.init)).wait()
                #expect(result.status != 64, "\(situation): '\(command)' as printed: \(result)")
                ran.append(command)
            }
        }
        func outputs(_ commands: [[String]]) throws -> [String] {
            try commands.map { arguments in
                let result = try sandbox.runTokenctl(["--profile", profile] + arguments, stdin: nil)
                return result.stdout + result.stderr
            }
        }

        // Signed out by logout.
        try sandbox.login(server, profile: profile)
        #expect(try sandbox.tokenctl("--profile", profile, "logout").status == 0)
        try runHints(
            try outputs([
                ["status"], ["status", "--json"], ["token"], ["doctor"], ["refresh"], ["refresh", "--all"],
                ["status", "--all"],
            ]), "signed out")

        // A session the server ended.
        _ = try sandbox.login(server, profile: profile)
        try server.configure([
            "faults": [["status": 400, "body": ["error": "invalid_grant"], "content_type": "application/json"]]
        ])
        let ended = try sandbox.tokenctl("--profile", profile, "token", "--force")
        #expect(ended.status == 77, "\(ended)")
        try runHints(
            [ended.stderr] + (try outputs([["status"], ["status", "--json"], ["doctor"], ["token"]])), "ended")

        // A keyring item that is not a token set.
        _ = try sandbox.login(server, profile: profile)
        try sandbox.overwriteStoredTokenSet("not a token set", profile: profile, issuer: server.url)
        let damaged = try outputs([["status"], ["status", "--json"]])
        #expect(damaged.joined().contains("logout --no-revoke"), "\(damaged)")
        try runHints(damaged, "damaged item")

        // A hand-edited profile without its token endpoint.
        _ = try sandbox.login(server, profile: profile)
        let file = sandbox.profileFile(profile)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        try text.split(separator: "\n").filter { !$0.hasPrefix("token_endpoint =") }.joined(separator: "\n").write(
            toFile: file, atomically: true, encoding: .utf8)
        let noEndpoint = try sandbox.tokenctl("--profile", profile, "token", "--force")
        #expect(noEndpoint.status == 78, "\(noEndpoint)")
        try runHints([noEndpoint.stderr], "no token endpoint")

        for expected in ["login", "logout --forget", "logout --no-revoke"] {
            #expect(ran.contains("tokenctl --profile \(profile) \(expected)"), "\(expected) among \(ran)")
        }
    }

    @Test(
        "the hints of a confidential profile whose secret is gone, and of a refresh sent without an answer, run as printed"
    )
    func moreHintsRunAsPrinted() throws {
        let sandbox = try Sandbox()
        var settings = Self.approvals
        settings["client_secrets"] = ["cli": "s3cret"]
        settings["auth_methods"] = ["client_secret_post"]
        let server = try AuthServer(settings)
        let profile = "everyday-secret"
        let login = try sandbox.start(
            [
                "--profile", profile, "login", "--device", "--issuer", server.url, "--client-id", "cli",
                "--client-secret-stdin",
            ], stdin: "s3cret\n"
        ).wait()
        #expect(login.status == 0, "\(login)")
        // The secret item is gone (removed by hand, or by another tool).
        _ = try runProgram(
            "/usr/bin/secret-tool",
            ["clear", "application", "tokenctl", "issuer", server.url, "kind", "client-secret"],
            environment: sandbox.variables)
        let noSecret = try sandbox.tokenctl("--profile", profile, "token", "--force")
        #expect(noSecret.status == 78, "\(noSecret)")
        let secretHint = try #require(Self.quotedCommands(noSecret.stderr).first, "\(noSecret)")
        #expect(secretHint == "tokenctl --profile \(profile) login --client-secret-stdin")
        let relogin = try sandbox.start(
            secretHint.split(separator: " ").dropFirst().map(String.init), stdin: "s3cret\n"
        ).wait()
        #expect(relogin.status == 0, "'\(secretHint)' as printed, with the secret on stdin: \(relogin)")

        // A refresh that reached the server and got no answer in time (it gets at least 5 s).
        try server.configure(["delay_seconds": 7])
        let silent = try sandbox.tokenctl("--profile", profile, "token", "--force", "--timeout", "2")
        #expect(silent.status == 75, "\(silent)")
        try server.configure(["delay_seconds": 0])
        let commands = Self.quotedCommands(silent.stderr)
        #expect(commands.contains("tokenctl --profile \(profile) token"), "\(silent)")
        for command in commands {
            let result = try sandbox.start(command.split(separator: " ").dropFirst().map(String.init)).wait()
            #expect(result.status != 64, "'\(command)' as printed: \(result)")
        }
        _ = try sandbox.tokenctl("--profile", profile, "logout", "--forget")
    }

    @Test("status --all and refresh --all over 20 profiles (more than they run at once): all there, in order, exit 0")
    func manyProfiles() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let names = (1...20).map { String(format: "everyday-many-%02d", $0) }
        for name in names { try sandbox.login(server, profile: name) }
        let status = try sandbox.tokenctl("status", "--all")
        #expect(status.status == 0, "\(status)")
        let shown = status.stdout.split(separator: "\n").filter { $0.hasPrefix("Profile ") }.map {
            String($0.split(separator: " ")[1].dropLast())
        }
        #expect(shown == names, "\(shown)")
        let json = try sandbox.tokenctl("status", "--all", "--json")
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        // Orphaned items of other tests in the shared keyring come after the profiles.
        #expect(
            objects.filter { $0["state"] as? String != "orphaned" }.compactMap { $0["profile"] as? String } == names)
        let before = try server.tokenRequests().count
        let refresh = try sandbox.tokenctl("refresh", "--all")
        #expect(refresh.status == 0, "\(refresh)")
        #expect(try server.tokenRequests().count - before == 20, "one request per profile")
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test(
        "logout --forget removes the profile and its caches, leaving other profiles (and a shared issuer's caches) alone"
    )
    func logoutForget() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server, profile: "everyday-a")
        try sandbox.login(server, profile: "everyday-b")
        let caches = ["discovery", "jwks"].map { sandbox.root + "/home/.cache/tokenctl/" + $0 }
        func cached() -> Int {
            caches.map { (try? FileManager.default.contentsOfDirectory(atPath: $0).count) ?? 0 }.reduce(0, +)
        }
        #expect(cached() >= 1)
        let forget = try sandbox.tokenctl("--profile", "everyday-a", "logout", "--forget")
        #expect(forget.status == 0, "\(forget)")
        #expect(forget.stderr.contains("Removed profile 'everyday-a'"), "\(forget)")
        #expect(!FileManager.default.fileExists(atPath: sandbox.profileFile("everyday-a")))
        #expect(try sandbox.storedTokenSet(profile: "everyday-a", issuer: server.url) == nil)
        #expect(FileManager.default.fileExists(atPath: sandbox.profileFile("everyday-b")))
        #expect(try sandbox.tokenctl("--profile", "everyday-b", "token").status == 0)
        #expect(cached() >= 1, "the issuer's caches stay while another profile uses it")
        #expect(try sandbox.tokenctl("--profile", "everyday-a", "status").status == 78, "the profile is gone")
        #expect(try sandbox.tokenctl("--profile", "everyday-b", "logout", "--forget").status == 0)
        #expect(cached() == 0, "the last profile of the issuer took its caches along")
        #expect(
            try sandbox.tokenctl("--profile", "everyday-b", "logout", "--forget").status == 78, "nothing left to remove"
        )
    }

    @Test(
        "refresh --all skips a profile signed out by logout (exit 0) and still fails for a session the server ended (77)"
    )
    func refreshAllSkipsSignedOut() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server, profile: "everyday-kept")
        try sandbox.login(server, profile: "everyday-out")
        #expect(try sandbox.tokenctl("--profile", "everyday-out", "logout").status == 0)
        let skipped = try sandbox.tokenctl("refresh", "--all")
        #expect(skipped.status == 0, "\(skipped)")
        #expect(skipped.stderr.contains("everyday-out: skipped, signed out by 'logout'"), "\(skipped)")
        #expect(skipped.stderr.contains("everyday-kept: refreshed"), "\(skipped)")
        try server.configure([
            "faults": [["status": 400, "body": ["error": "invalid_grant"], "content_type": "application/json"]]
        ])
        let ended = try sandbox.tokenctl("refresh", "--all")
        #expect(ended.status == 77, "\(ended)")
        #expect(ended.stderr.contains("everyday-kept: login required"), "\(ended)")
    }

    @Test(
        "a refused revocation: the session is removed here, exit 76, the message says the token may stay valid, revocationFailed recorded",
        arguments: [401, 503])
    func honestLogout(status: Int) throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["revoke_fault_status": status])
        let profile = "everyday-revoke"
        try sandbox.login(server, profile: profile)
        let result = try sandbox.tokenctl("--profile", profile, "logout")
        #expect(result.status == 76, "\(result)")
        #expect(result.stderr.contains("did not revoke its refresh token"), "\(result)")
        #expect(result.stderr.contains("may stay valid at the server until it expires"), "\(result)")
        #expect(try sandbox.storedTokenSet(profile: profile, issuer: server.url) == nil, "removed here anyway")
        let events = try sandbox.tokenctl("--profile", profile, "events", "--json")
        #expect(
            events.stdout.contains(#""event":"revocationFailed""#)
                && events.stdout.contains(#""reason":"http-\#(status)""#), "\(events)")
        #expect(
            try sandbox.tokenctl("--profile", profile, "logout").status == 0,
            "nothing left to revoke: a second logout succeeds")
    }

    @Test(
        "-v tells the story: where the session came from, why it refreshed, the lock wait, what was stored, a capped min-ttl"
    )
    func verboseStory() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "everyday-verbose"
        try sandbox.login(server, profile: profile)
        let forced = try sandbox.tokenctl("--profile", profile, "token", "-v", "--force")
        #expect(forced.status == 0, "\(forced)")
        for line in [
            "read the session of '\(profile)' from the Secret Service", "refreshing: forced", "took the profile lock",
            "rotated refresh token", "stored the refreshed session",
        ] {
            #expect(forced.stderr.contains(line), "\(line): \(forced.stderr)")
        }
        #expect(!forced.stderr.contains(forced.stdout.trimmingCharacters(in: .newlines)), "never the token")
        try server.configure(["access_ttl": 30])
        #expect(try sandbox.tokenctl("--profile", profile, "token", "--force").status == 0)
        let capped = try sandbox.tokenctl("--profile", profile, "token", "-v", "--min-ttl", "25")
        #expect(capped.status == 0, "\(capped)")
        #expect(capped.stderr.contains("min-ttl 25 s capped at 15 s"), "\(capped.stderr)")
        sandbox.useSecretServicePathOnly()
        let engine = try sandbox.tokenctl("--profile", profile, "token", "-v", "--min-ttl", "25")
        #expect(engine.stderr.contains("min-ttl 25 s capped at 15 s"), "the engine says it too: \(engine.stderr)")
    }
}
