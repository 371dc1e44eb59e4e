import Foundation
import Testing
import TokenctlTestSupport

/// Okta as it really behaves (developer.okta.com), through the built binary against the test
/// server's `okta` persona: the org authorization server's paths (/oauth2/v1/...), DPoP with a
/// mandatory nonce, rotation with a grace window and family revocation, persistent refresh
/// tokens, rate limits as 429 without a body. Profiles are configured with explicit options
/// (the presets).
@Suite("End to end: Okta persona", .serialized)
struct OktaPersonaTests {
    static let client = "0oaOktaNativeApp"

    func tokenEndpoint(_ server: AuthServer) -> String { server.url + "/oauth2/v1/token" }

    /// `login --refresh-token-stdin` at the persona (optionally with `--dpop`), from a new family.
    func importLogin(_ sandbox: Sandbox, _ server: AuthServer, profile: String = "default", dpop: Bool = false)
        throws -> RunResult
    {
        try sandbox.start(
            ["--profile", profile, "login", "--issuer", server.url, "--client-id", Self.client]
                + ["--token-endpoint", tokenEndpoint(server), "--refresh-token-stdin"] + (dpop ? ["--dpop"] : []),
            stdin: try server.issue(clientID: Self.client)
        ).wait()
    }

    func dpopThumbprint(_ sandbox: Sandbox, profile: String = "default") throws -> String {
        let status = try sandbox.tokenctl("--profile", profile, "status", "--json")
        let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        return try #require(object?["dpop_jkt"] as? String, "\(status)")
    }

    /// Spend `refreshToken` at the persona with curl (another client, or a replay).
    func spend(_ server: AuthServer, _ refreshToken: String) throws -> RunResult {
        try runProgram(
            "/usr/bin/curl",
            [
                "-sS", "-X", "POST", tokenEndpoint(server), "--data-urlencode", "grant_type=refresh_token",
                "--data-urlencode", "refresh_token@-", "--data-urlencode", "client_id=\(Self.client)",
            ], stdin: refreshToken)
    }

    @Test(
        "Okta DPoP nonce: one use_dpop_nonce per nonce rotation, not per process (developer.okta.com)"
    )
    func oneNonceRoundTripPerRotation() throws {
        let sandbox = try Sandbox()
        // Another machine signed in at the same server: its requests rotate the nonce unseen by ours.
        let elsewhere = try Sandbox()
        let server = try AuthServer(["persona": "okta", "dpop_nonce_rotate_after": 2])
        #expect(try importLogin(sandbox, server, dpop: true).status == 0)
        let ours = try dpopThumbprint(sandbox)
        for _ in 0..<2 { #expect(try sandbox.tokenctl("refresh").status == 0) }
        // The nonce rotated after the first refresh, and that answer carried the new one: no retry.
        #expect(try importLogin(elsewhere, server, profile: "other", dpop: true).status == 0)
        for _ in 0..<2 { #expect(try sandbox.tokenctl("refresh").status == 0) }

        let mine = try server.tokenRequests().filter { ($0["dpop"] as? [String: Any])?["jkt"] as? String == ours }
        let outcomes = mine.map { $0["outcome"] as? String ?? "?" }
        // Five processes: the login's first proof (no nonce yet), and the first refresh after the
        // other machine's requests rotated the nonce; every other first proof carried the kept one.
        #expect(
            outcomes == ["use_dpop_nonce", "issued", "issued", "issued", "use_dpop_nonce", "issued", "issued"],
            "\(outcomes)")
        let words = try server.tokenRequests().first { $0["outcome"] as? String == "use_dpop_nonce" }
        #expect(words?["status"] as? Int == 400, "\(words ?? [:])")
        #expect(
            try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client)?["token_type"] as? String == "DPoP")
    }

    @Test(
        "Okta persistent refresh token: an answer without refresh_token keeps the stored one (developer.okta.com)"
    )
    func persistentRefreshToken() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "okta", "rotate": false])
        let imported = try server.issue(clientID: Self.client)
        let login = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", Self.client, "--token-endpoint", tokenEndpoint(server),
            "--refresh-token-stdin", stdin: imported)
        #expect(login.status == 0, "\(login)")
        // Okta sends the same refresh token back; then an answer that leaves it out.
        #expect(try server.tokenRequests().last?["issued_refresh_token"] as? String == imported)
        try server.configure(["refresh_answer_overrides": [["refresh_token": NSNull()]]])
        let first = try sandbox.tokenctl("refresh")
        #expect(first.status == 0, "\(first)")
        #expect(try server.tokenRequests().last?["overridden"] as? [String] == ["refresh_token"])
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client))
        #expect(stored["refresh_token"] as? String == imported, "the stored refresh token is kept")
        let second = try sandbox.tokenctl("refresh")
        #expect(second.status == 0, "\(second)")
        let sent = try server.refreshGrants().map { $0["refresh_token"] as? String }
        #expect(sent == [imported, imported, imported], "every refresh sent the one persistent token")
    }

    @Test(
        "Okta reuse after the grace window revokes the family: tokenctl's next refresh is 77 with Okta's words, the session ended (developer.okta.com)"
    )
    func reuseAfterGraceEndsTheSession() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "okta"])
        let imported = try server.issue(clientID: Self.client)
        let login = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", Self.client, "--token-endpoint", tokenEndpoint(server),
            "--refresh-token-stdin", stdin: imported)
        #expect(login.status == 0, "\(login)")
        // Within the 30 s grace window the spent token still works (and spends nothing of ours).
        #expect(try spend(server, imported).stdout.contains("access_token"))
        #expect(try sandbox.tokenctl("refresh").status == 0)
        // After it, a replay revokes the whole family, the newest refresh token too.
        try server.configure(["grace_seconds": 0])
        #expect(try spend(server, imported).stdout.contains("invalid_grant"))
        let refreshed = try sandbox.tokenctl("refresh")
        #expect(refreshed.status == 77, "\(refreshed)")
        #expect(refreshed.stderr.contains("invalid_grant: The refresh token is invalid or expired."), "\(refreshed)")
        #expect(refreshed.stderr.contains("tokenctl login"), "\(refreshed)")
        #expect(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client) == nil)
    }

    @Test(
        "Okta rate limit, 429 without a body, on every refresh attempt: 75, the session kept (developer.okta.com)"
    )
    func rateLimitWithoutBody() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "okta"])
        #expect(try importLogin(sandbox, server).status == 0)
        let before = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client))
        try server.configure(["faults": [["status": 429, "body": "", "content_type": NSNull(), "count": 100]]])
        let refreshed = try sandbox.tokenctl("refresh", "--timeout", "4")
        #expect(refreshed.status == 75, "\(refreshed)")
        #expect(
            try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client)?["refresh_token"] as? String
                == before["refresh_token"] as? String)
        #expect(try server.tokenRequests().dropFirst().allSatisfy { $0["status"] as? Int == 429 })
    }

    @Test(
        "Okta device login at /oauth2/v1/device/authorize: a 429 without a body between polls slows the polling, and the approval signs in (developer.okta.com)"
    )
    func deviceLoginThroughRateLimit() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "persona": "okta", "device_interval": 1, "device_script": ["authorization_pending", "approve"],
            "faults": [["status": 429, "body": "", "content_type": NSNull()]],
        ])
        let result = try sandbox.tokenctl(
            "login", "--device", "--issuer", server.url, "--client-id", Self.client, "--token-endpoint",
            tokenEndpoint(server), "--device-authorization-endpoint", server.url + "/oauth2/v1/device/authorize")
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("\(server.url)/activate"), "\(result)")
        #expect(result.stderr.contains("poll more slowly"), "the 429 counted as slow_down: \(result)")
        let polls = try server.tokenRequests().map { $0["status"] as? Int }
        #expect(polls == [429, 400, 200], "\(polls)")
        #expect(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client)?["refresh_token"] is String)
    }
}
