import Foundation
import Testing
import TokenctlTestSupport

/// GitLab as it really behaves (docs.gitlab.com), through the built binary against the test
/// server's `gitlab` persona: `created_at` in token answers, 2 h tokens, strict one-use rotation
/// with GitLab's generic invalid_grant, device answers without a refresh token, and old
/// instances without the device endpoint. Profiles are configured with explicit options
/// (the presets).
@Suite("End to end: GitLab persona", .serialized)
struct GitLabPersonaTests {
    static let client = "gitlab-application-id"
    static let invalidGrant =
        "invalid_grant: The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client."

    func importLogin(_ sandbox: Sandbox, _ server: AuthServer) throws -> RunResult {
        try sandbox.start(
            [
                "login", "--issuer", server.url, "--client-id", Self.client, "--token-endpoint",
                server.url + "/oauth/token", "--refresh-token-stdin",
            ],
            stdin: try server.issue(clientID: Self.client)
        ).wait()
    }

    func deviceLogin(_ sandbox: Sandbox, _ server: AuthServer) throws -> RunResult {
        try sandbox.start([
            "login", "--device", "--issuer", server.url, "--client-id", Self.client, "--token-endpoint",
            server.url + "/oauth/token", "--device-authorization-endpoint", server.url + "/oauth/authorize_device",
        ]).wait()
    }

    @Test(
        "GitLab created_at in the past: expiry from created_at + expires_in (docs.gitlab.com)")
    func expiryFromCreatedAt() throws {
        let sandbox = try Sandbox()
        // The token was made an hour before the answer arrived: one of its two hours is left.
        let server = try AuthServer(["persona": "gitlab", "created_at_offset_seconds": -3600])
        let before = now()
        #expect(try importLogin(sandbox, server).status == 0)
        let answer = try #require(try server.tokenRequests().last)
        #expect(answer["status"] as? Int == 200)
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client))
        let expiresAt = try #require(stored["expires_at"] as? Double)
        // created_at + 7200 is an hour from now; the arrival plus expires_in would be two.
        #expect(expiresAt <= now() + 3600 && expiresAt >= before + 3600 - 2, "\(expiresAt - before)")
        #expect(stored["issued_lifetime"] as? Double == 7200)
        let status = try sandbox.tokenctl("status")
        #expect(status.stdout.contains("access token:  valid for 59 min") || status.stdout.contains("valid for 60 min"))
    }

    @Test(
        "GitLab device login without a refresh token: signed in, the summary says no refresh token (docs.gitlab.com)"
    )
    func deviceLoginWithoutRefreshToken() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "persona": "gitlab", "device_interval": 1, "device_script": ["authorization_pending", "approve"],
        ])
        let result = try deviceLogin(sandbox, server)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("\(server.url)/oauth/device?user_code="), "verification_uri_complete: \(result)")
        #expect(result.stderr.contains("The server issued no refresh token"), "\(result)")
        #expect(result.stderr.contains("access token valid for 119 min"), "\(result)")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client))
        #expect(stored["refresh_token"] == nil)
        #expect(try sandbox.tokenctl("token").status == 0)
    }

    @Test(
        "GitLab old instance: 404 at the device endpoint says the device flow is unsupported and offers --browser, 78; the hint runs as printed (docs.gitlab.com)"
    )
    func oldInstanceWithoutDeviceEndpoint() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "gitlab", "device_endpoint_missing": true])
        let result = try deviceLogin(sandbox, server)
        #expect(result.status == 78, "\(result)")
        #expect(
            result.stderr.contains(
                "the server does not support the device flow: its device authorization endpoint \(server.url)/oauth/authorize_device answered HTTP 404"
            ), "\(result)")
        try sandbox.expectNoProfileAndNoSession(issuer: server.url, clientID: Self.client)
        // The hint names the browser login with what this one was given.
        let command = try #require(
            result.stderr.firstMatch(of: /Sign in by browser instead: '([^']+)'\./).map { String($0.output.1) },
            "\(result)")
        #expect(
            command
                == "tokenctl login --browser --issuer \(server.url) --client-id \(Self.client) --token-endpoint \(server.url)/oauth/token"
        )
        // Run as printed, with a stand-in browser that follows the URL to the loopback redirect.
        let bin = sandbox.root + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try "#!/bin/sh\nexec /usr/bin/curl -sS -L --max-time 10 \"$1\" >/dev/null\n".write(
            toFile: bin + "/xdg-open", atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: bin + "/xdg-open")
        let words = command.split(separator: " ").map(String.init)
        #expect(words.first == "tokenctl")
        let browser = try sandbox.start(
            Array(words.dropFirst()), extraEnvironment: ["PATH": bin + ":/usr/local/bin:/usr/bin:/bin"]
        ).wait()
        #expect(browser.status == 0, "\(browser)")
        #expect(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client)?["refresh_token"] is String)
    }

    @Test(
        "many concurrent `tokenctl token` at GitLab strict rotation: one refresh (docs.gitlab.com)"
    )
    func concurrentTokensOneRefresh() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "gitlab", "access_ttl": 1])
        #expect(try importLogin(sandbox, server).status == 0)
        try server.configure(["access_ttl": 7200])
        sleep(seconds: 1.05)
        let results = try sandbox.concurrently(16, ["token"])
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.filter { $0.status != 0 })")
        #expect(Set(results.map(\.stdout)).count == 1, "every process serves the one new token")
        let refreshes = try server.refreshGrants()
        #expect(refreshes.count == 2, "the import and one refresh: \(refreshes.map { $0["outcome"] ?? "?" })")
        #expect(try server.stats()["invalid_grant"] == 0, "no spent token was sent again")
    }

    @Test(
        "GitLab strict rotation: a refresh token spent by another client ends the session, 77 with GitLab's words (docs.gitlab.com)"
    )
    func spentElsewhereEndsTheSession() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "gitlab"])
        #expect(try importLogin(sandbox, server).status == 0)
        for _ in 0..<2 { #expect(try sandbox.tokenctl("refresh").status == 0) }
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client))
        let refreshToken = try #require(stored["refresh_token"] as? String)
        let spent = try runProgram(
            "/usr/bin/curl",
            [
                "-sS", "-X", "POST", server.url + "/oauth/token", "--data-urlencode", "grant_type=refresh_token",
                "--data-urlencode", "refresh_token@-", "--data-urlencode", "client_id=\(Self.client)",
            ], stdin: refreshToken)
        #expect(spent.stdout.contains("access_token"))
        let refreshed = try sandbox.tokenctl("refresh")
        #expect(refreshed.status == 77, "\(refreshed)")
        #expect(refreshed.stderr.contains(Self.invalidGrant), "\(refreshed)")
        #expect(!refreshed.stderr.contains(refreshToken))
        #expect(try server.tokenRequests().last?["status"] as? Int == 400)
    }
}
