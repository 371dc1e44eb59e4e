import Foundation
import Testing
import TokenctlTestSupport

/// Per-call targets through the binary, against the test server (which records each refresh's
/// scope, audience and resources, rotates with no grace and revokes a family on reuse) and
/// django-oauth-toolkit.
@Suite("End to end: tokens for other scopes, audiences and resources")
struct TargetedTokenTests {
    func line(_ result: RunResult) -> String { result.stdout.trimmingCharacters(in: .newlines) }

    @Test(
        "token --scope: a narrower token from the session's refresh token, rotated token kept, served from the hot cache and the Secret Service after; status lists it; logout removes it"
    )
    func narrowerScope() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "target-scope"
        try sandbox.login(server, profile: profile, scope: "openid offline_access read write")
        let own = line(try sandbox.tokenctl("--profile", profile, "token"))
        let before = try server.refreshGrants().count
        let storedBefore = try #require(try sandbox.storedTokenSet(profile: profile, issuer: server.url))

        let read = try sandbox.tokenctl("--profile", profile, "token", "--scope", "read")
        #expect(read.status == 0, "\(read)")
        let readToken = line(read)
        #expect(readToken != own)
        let grants = try server.refreshGrants()
        #expect(grants.count == before + 1)
        #expect(grants.last?["scope"] as? String == "read")
        let status = try server.tokenStatus(readToken)
        #expect(status["active"] as? Bool == true && status["scope"] as? String == "read", "\(status)")
        // The rotated refresh token is the session's, in the same item as the new token.
        let stored = try #require(try sandbox.storedTokenSet(profile: profile, issuer: server.url))
        let rotated = try #require(stored["refresh_token"] as? String)
        #expect(rotated != storedBefore["refresh_token"] as? String)
        #expect(try server.tokenStatus(rotated)["active"] as? Bool == true)
        #expect(stored["access_token"] as? String == own, "the session's own token is unchanged")
        #expect(
            stored["target.0.scope"] as? String == "read" && stored["target.0.access_token"] as? String == readToken)

        // Again, in another word order and spacing: the front's hot cache, no request.
        #expect(line(try sandbox.tokenctl("--profile", profile, "token", "--scope", " read ")) == readToken)
        let hit = try sandbox.tokenctl("--profile", profile, "-v", "token", "--scope=read", "--format", "header")
        #expect(
            hit.stdout == "Authorization: Bearer \(readToken)\n" && hit.stderr.contains("(kernel keyring cache)"),
            "\(hit)")
        // And through the Secret Service without the hot cache.
        #expect(
            line(
                try sandbox.tokenctl(
                    "--profile", profile, "token", "--scope", "read",
                    extraEnvironment: ["TOKENCTL_DISABLE_KERNEL_KEYRING": "1"])) == readToken)
        #expect(line(try sandbox.tokenctl("--profile", profile, "token")) == own)
        #expect(try server.refreshGrants().count == before + 1, "no request after the first")

        // Two scopes in either order are one target: one more request, then hits.
        let both = line(try sandbox.tokenctl("--profile", profile, "token", "--scope", "write read"))
        #expect(line(try sandbox.tokenctl("--profile", profile, "token", "--scope", "read write")) == both)
        #expect(try server.refreshGrants().count == before + 2)
        #expect(try server.tokenStatus(both)["scope"] as? String == "read write")

        let shown = try sandbox.tokenctl("--profile", profile, "status")
        #expect(shown.stdout.contains("token for:     scope 'read': valid for"), "\(shown)")
        #expect(shown.stdout.contains("token for:     scope 'read write': valid for"), "\(shown)")
        let json = try sandbox.tokenctl("--profile", profile, "status", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let listed = try #require(object["targeted_tokens"] as? [[String: Any]])
        #expect(listed.compactMap { $0["scope"] as? String }.sorted() == ["read", "read write"])
        #expect(!json.stdout.contains(readToken) && !shown.stdout.contains(readToken), "status never shows a token")

        // logout: the session and every target's token, from the keyring and the hot cache.
        #expect(try sandbox.tokenctl("--profile", profile, "logout", "--no-revoke").status == 0)
        #expect(try sandbox.storedTokenSet(profile: profile, issuer: server.url) == nil)
        let keys = try KernelKeyringProbe().userKeyringDescriptions().filter { $0.hasPrefix("tokenctl:v1:\(profile):") }
        #expect(keys.isEmpty, "\(keys)")
        #expect(try sandbox.tokenctl("--profile", profile, "token", "--scope", "read").status == 77)
    }

    @Test("audience and resource indicators are sent on the refresh and make their own targets")
    func audienceAndResource() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "target-audience"
        try sandbox.login(server, profile: profile)
        let api = line(
            try sandbox.tokenctl(
                "--profile", profile, "token", "--audience", "api://orders", "--resource",
                "https://orders.test/ https://billing.test/"))
        let grant = try #require(try server.refreshGrants().last)
        #expect(grant["audience"] as? String == "api://orders")
        #expect((grant["resource"] as? [String])?.sorted() == ["https://billing.test/", "https://orders.test/"])
        let status = try server.tokenStatus(api)
        #expect(status["audience"] as? String == "api://orders", "\(status)")
        let other = line(try sandbox.tokenctl("--profile", profile, "token", "--audience", "api://billing"))
        #expect(other != api)
        #expect(
            line(
                try sandbox.tokenctl(
                    "--profile", profile, "token", "--resource", "https://billing.test/ https://orders.test/",
                    "--audience", "api://orders")) == api)
    }

    @Test(
        "refusals: a scope the session lacks (no request), a resource the server refuses (invalid_target): 64, the session kept"
    )
    func refusals() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(EverydayPathsTests.approvals)
        let profile = "target-refused"
        try sandbox.login(server, profile: profile, scope: "openid offline_access read")
        let before = try server.refreshGrants().count
        let admin = try sandbox.tokenctl("--profile", profile, "token", "--scope", "read admin")
        #expect(admin.status == 64, "\(admin)")
        #expect(admin.stderr.contains("was not granted the scope 'admin'"), "\(admin)")
        #expect(try server.refreshGrants().count == before)
        // The hint runs as printed, in a shell (its scope is quoted), and grants the scope.
        let hint = try #require(
            admin.stderr.components(separatedBy: "sign in with more: '").last?.components(separatedBy: "'.").first)
        #expect(hint == "tokenctl --profile \(profile) login --scope \"offline_access openid read admin\"", "\(admin)")
        var environment = sandbox.variables
        environment["PATH"] =
            URL(fileURLWithPath: sandbox.environment.binary).deletingLastPathComponent().path + ":"
            + (environment["PATH"] ?? "/usr/bin:/bin")
        let relogin = try RunningCommand(
            executable: "/bin/sh", arguments: ["-c", hint], environment: environment, stdin: nil,
            directory: sandbox.root
        ).wait()
        #expect(relogin.status == 0, "\(relogin)")
        let granted = try sandbox.tokenctl("--profile", profile, "token", "--scope", "read admin")
        #expect(granted.status == 0, "\(granted)")
        #expect(try server.tokenStatus(line(granted))["scope"] as? String == "admin read")

        try server.configure(["allowed_resources": ["https://orders.test/"]])
        let target = try sandbox.tokenctl("--profile", profile, "token", "--resource", "https://elsewhere.test/")
        #expect(target.status == 64, "\(target)")
        #expect(target.stderr.contains("invalid_target") && target.stderr.contains("The session is kept"), "\(target)")
        #expect(
            try sandbox.tokenctl("--profile", profile, "token", "--force").status == 0, "the session still refreshes")

        for bad in [
            ["--scope", ""], ["--scope", "a\"b"], ["--audience", "two words"], ["--resource", "not-a-uri"],
            ["--scope", "a", "--scope", "b"],
        ] {
            let result = try sandbox.start(["--profile", profile, "token"] + bad).wait()
            #expect(result.status == 64, "\(bad): \(result)")
            #expect(result.stderr.hasPrefix("Error: "), "\(bad): \(result)")
        }
    }

    @Test(
        "many processes on an expired session, mixed targets, no grace: one request per distinct target, no reuse, every process served"
    )
    func mixedFanIn() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "target-fan-in"
        try server.configure(["grace_seconds": 0])
        try sandbox.loginWithExpiredAccessToken(server, profile: profile)
        // The session's scope in the test server is "openid offline_access".
        let shapes: [[String]] = [[], ["--scope", "openid"], ["--scope", "offline_access"], ["--audience", "api"]]
        let before = try server.refreshGrants().count
        var commands: [(Int, RunningCommand)] = []
        for index in 0..<32 {
            let shape = index % shapes.count
            commands.append((shape, try sandbox.start(["--profile", profile, "token"] + shapes[shape])))
        }
        let results = commands.map { ($0.0, $0.1.wait()) }
        #expect(results.allSatisfy { $0.1.status == 0 }, "\(results.filter { $0.1.status != 0 }.map { $0.1 })")
        for shape in shapes.indices {
            let tokens = Set(results.filter { $0.0 == shape }.map { line($0.1) })
            #expect(tokens.count == 1, "\(shapes[shape]): \(tokens.count) tokens")
        }
        let grants = try server.refreshGrants()
        #expect(grants.count == before + shapes.count, "one request per target: \(grants.count - before)")
        #expect(try server.stats()["reuse_detected"] == 0)
        #expect(try sandbox.tokenctl("--profile", profile, "token", "--force").status == 0, "the session is alive")
    }

    @Test("git credential helper, kubectl exec credential and exec hand out the target's token")
    func tools() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "target-tools"
        try sandbox.login(server, profile: profile, scope: "openid offline_access read")
        let get = try sandbox.tokenctl(
            "--profile", profile, "git-credential", "--scope", "read", "get", stdin: "protocol=https\nhost=h.test\n\n")
        #expect(get.status == 0, "\(get)")
        let password = try #require(
            get.stdout.split(separator: "\n").first { $0.hasPrefix("password=") }.map { String($0.dropFirst(9)) })
        #expect(try server.tokenStatus(password)["scope"] as? String == "read")
        #expect(line(try sandbox.tokenctl("--profile", profile, "token", "--scope", "read")) == password)
        // erase drops the target's token only: the next get refreshes that target.
        let erase = try sandbox.tokenctl(
            "--profile", profile, "git-credential", "--scope", "read", "erase",
            stdin: "protocol=https\nhost=h.test\npassword=\(password)\n\n")
        #expect(erase.status == 0, "\(erase)")
        let own = line(try sandbox.tokenctl("--profile", profile, "token"))
        #expect(try server.tokenStatus(own)["scope"] as? String == "openid offline_access read")
        let again = try sandbox.tokenctl(
            "--profile", profile, "git-credential", "--scope", "read", "get", stdin: "protocol=https\nhost=h.test\n\n")
        #expect(!again.stdout.contains(password) && again.stdout.contains("password="), "\(again)")

        let credential = try sandbox.tokenctl(
            "--profile", profile, "token", "--format", "exec-credential", "--scope", "read")
        #expect(credential.status == 0, "\(credential)")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(credential.stdout.utf8)) as? [String: Any])
        let token = try #require((object["status"] as? [String: Any])?["token"] as? String)
        #expect(try server.tokenStatus(token)["scope"] as? String == "read")

        let exec = try sandbox.tokenctl(
            "--profile", profile, "exec", "--scope", "read", "--", "/bin/sh", "-c",
            "printf %s \"$TOKENCTL_ACCESS_TOKEN\"")
        #expect(exec.status == 0 && exec.stdout == token, "\(exec)")
    }

    @Test("django-oauth-toolkit: a narrowed refresh gets a token for just that scope, rotation goes on")
    func realServer() throws {
        let server = try DotServer.require()
        let sandbox = try Sandbox()
        let profile = "dot-target"
        let login = try RealServerLoginTests().deviceLogin(
            sandbox, server, profile: profile, extra: ["--scope", "openid offline_access read"])
        #expect(login.status == 0, "\(login)")
        let first = try #require(
            try sandbox.storedTokenSet(profile: profile, issuer: server.issuer, clientID: "tokenctl-device")?[
                "refresh_token"] as? String)
        let read = try sandbox.tokenctl("--profile", profile, "token", "--scope", "read")
        #expect(read.status == 0, "\(read)")
        let stored = try #require(
            try sandbox.storedTokenSet(profile: profile, issuer: server.issuer, clientID: "tokenctl-device"))
        #expect(stored["refresh_token"] as? String != first, "the server rotated; the new refresh token is stored")
        #expect(stored["target.0.scope"] as? String == "read")
        #expect(stored["target.0.granted_scope"] as? String == "read", "\(stored.keys.sorted())")
        // Its userinfo endpoint needs 'openid': the narrowed token lacks it.
        #expect(try !server.acceptsAccessToken(line(read)))
        let refused = try sandbox.tokenctl("--profile", profile, "token", "--scope", "openid email")
        #expect(refused.status == 64, "a scope the session lacks: \(refused)")
        // django-oauth-toolkit 3.4.1 ties the refresh token it rotated to the narrowed scope
        // (against RFC 6749 §6): the session's own refresh now gets only 'read'. tokenctl keeps
        // the session working and says what happened, with the command that restores it.
        let own = try sandbox.tokenctl("--profile", profile, "token", "--force")
        #expect(own.status == 0, "the session still refreshes: \(own)")
        let status = try sandbox.tokenctl("--profile", profile, "status")
        #expect(
            status.stdout.contains("warning:       the server narrowed this session's scope on a refresh"), "\(status)")
        #expect(
            status.stdout.contains(
                "hint:          Run 'tokenctl --profile \(profile) login' to sign in with the full scope again."),
            "\(status)")
        let json = try #require(
            try JSONSerialization.jsonObject(
                with: Data(try sandbox.tokenctl("--profile", profile, "status", "--json").stdout.utf8))
                as? [String: Any])
        #expect((json["problem"] as? String)?.contains("narrowed") == true, "\(json)")
        #expect(try sandbox.tokenctl("--profile", profile, "events").stdout.contains("scopeNarrowed"))
    }
}
