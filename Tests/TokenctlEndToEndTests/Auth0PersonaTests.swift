import Foundation
import Testing
import TokenctlTestSupport

/// Auth0 as it really behaves (auth0.com/docs), through the built binary against the test
/// server's `auth0` persona: device polls answered 403 (slow_down 429), `expired_token` once and
/// `invalid_grant` after it, rotation with a reuse interval where only the previous token may
/// be used again, JWT access tokens only for an `audience`. Profiles are configured with
/// explicit options (the presets).
@Suite("End to end: Auth0 persona", .serialized)
struct Auth0PersonaTests {
    static let client = "Auth0CliClientId"

    func deviceLogin(_ sandbox: Sandbox, _ server: AuthServer, _ extra: String...) throws -> RunningCommand {
        try sandbox.start(
            [
                "login", "--device", "--issuer", server.url, "--client-id", Self.client, "--token-endpoint",
                server.url + "/oauth/token", "--device-authorization-endpoint", server.url + "/oauth/device/code",
            ] + extra)
    }

    func polls(_ server: AuthServer) throws -> [[String: Any]] {
        try server.tokenRequests().filter {
            ($0["grant_type"] as? String) == "urn:ietf:params:oauth:grant-type:device_code"
        }
    }

    /// A device poll sent by the test itself (another poller of the same code), its answer's body.
    func poll(_ server: AuthServer, deviceCode: String) throws -> String {
        try runProgram(
            "/usr/bin/curl",
            [
                "-sS", "-X", "POST", server.url + "/oauth/token", "--data-urlencode",
                "grant_type=urn:ietf:params:oauth:grant-type:device_code", "--data-urlencode", "device_code@-",
                "--data-urlencode", "client_id=\(Self.client)",
            ], stdin: deviceCode
        ).stdout
    }

    /// The device code the server issued last (its log names it).
    func deviceCode(_ server: AuthServer) throws -> String? {
        try server.log().last { ($0["path"] as? String) == "/device_authorization" }?["device_code"] as? String
    }

    @Test(
        "Auth0 device polls answered 403 authorization_pending keep polling, a 429 slow_down slows them, the approval signs in with a JWT for the audience (auth0.com/docs)"
    )
    func pendingWith403KeepsPolling() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "persona": "auth0", "device_interval": 1,
            "device_script": ["authorization_pending", "authorization_pending", "slow_down", "approve"],
        ])
        let result = try deviceLogin(sandbox, server, "--audience", "https://api.example.test").wait()
        #expect(result.status == 0, "\(result)")
        let seen = try polls(server).map { "\($0["status"] as? Int ?? 0) \($0["outcome"] as? String ?? "?")" }
        #expect(
            seen == ["403 authorization_pending", "403 authorization_pending", "429 slow_down", "200 issued"], "\(seen)"
        )
        #expect(result.stderr.contains("poll more slowly"), "\(result)")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client))
        let access = try #require(stored["access_token"] as? String)
        #expect(decodeJWTPart(access, 1)?["aud"] as? String == "https://api.example.test", "a JWT for the API")
        #expect(stored["refresh_token"] is String)
    }

    @Test(
        "Auth0 without an audience: an opaque access token, good for /userinfo only (auth0.com/docs)"
    )
    func noAudienceOpaqueToken() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "auth0", "device_interval": 1, "device_script": ["approve"]])
        #expect(try deviceLogin(sandbox, server).wait().status == 0)
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client))
        #expect((stored["access_token"] as? String).map { decodeJWTPart($0, 1) == nil } == true)
        #expect(try sandbox.tokenctl("status").stdout.contains("(opaque)"))
    }

    @Test(
        "Auth0 device login: expired_token then invalid_grant ends the wait, 77, nothing stored (auth0.com/docs)"
    )
    func expiredThenInvalidGrant() throws {
        // tokenctl gets the expired_token: it stops, and a later poll of that code is invalid_grant.
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "persona": "auth0", "device_interval": 1, "device_script": ["authorization_pending", "expired_token"],
        ])
        let expired = try deviceLogin(sandbox, server).wait()
        #expect(expired.status == 77, "\(expired)")
        #expect(expired.stderr.contains("the device code expired"), "\(expired)")
        #expect(try polls(server).map { $0["status"] as? Int } == [403, 403])
        let code = try #require(try deviceCode(server))
        #expect(try poll(server, deviceCode: code).contains(#""error": "invalid_grant""#))
        try sandbox.expectNoProfileAndNoSession(issuer: server.url, clientID: Self.client)

        // Another poller of the code took the expired_token (an answer tokenctl never saw):
        // tokenctl's first poll gets invalid_grant, which ends the wait too.
        try server.configure(["device_interval": 5, "device_script": ["expired_token"]])
        let login = try deviceLogin(sandbox, server)
        var issued: String?
        for _ in 0..<200 where issued == nil || issued == code {
            issued = try deviceCode(server)
            sleep(seconds: 0.025)
        }
        let second = try #require(issued)
        #expect(try poll(server, deviceCode: second).contains("expired_token"))
        let result = login.wait()
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("invalid_grant: Invalid or expired device code."), "\(result)")
        #expect(result.stderr.contains("Nothing was stored"), "\(result)")
        #expect(try polls(server).last?["outcome"] as? String == "invalid_after_expiry")
        try sandbox.expectNoProfileAndNoSession(issuer: server.url, clientID: Self.client)
    }

    @Test(
        "Auth0 reuse interval: two forced refreshes rotate; the previous token replays within the leeway, the second-to-last revokes the family, and tokenctl's next refresh is 77 with Auth0's words (auth0.com/docs)"
    )
    func reuseIntervalOnlyPrevious() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "auth0", "grace_seconds": 3600])
        let imported = try server.issue(clientID: Self.client)
        let login = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", Self.client, "--token-endpoint",
            server.url + "/oauth/token", "--refresh-token-stdin", stdin: imported)
        #expect(login.status == 0, "\(login)")
        var chain = [imported]
        for _ in 0..<2 {
            chain.append(
                try #require(
                    try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client)?["refresh_token"] as? String))
            #expect(try sandbox.tokenctl("refresh").status == 0)
        }
        let sent = try server.refreshGrants().map { $0["refresh_token"] as? String }
        #expect(sent == chain, "each refresh spent the token the one before stored, none twice")
        func replay(_ token: String) throws -> String {
            try runProgram(
                "/usr/bin/curl",
                [
                    "-sS", "-X", "POST", server.url + "/oauth/token", "--data-urlencode", "grant_type=refresh_token",
                    "--data-urlencode", "refresh_token@-", "--data-urlencode", "client_id=\(Self.client)",
                ], stdin: token
            ).stdout
        }
        #expect(try replay(chain[2]).contains("access_token"), "the previous token, within the leeway")
        #expect(try replay(chain[1]).contains("invalid_grant"), "the second-to-last: breach detected")
        let refreshed = try sandbox.tokenctl("refresh")
        #expect(refreshed.status == 77, "\(refreshed)")
        #expect(refreshed.stderr.contains("invalid_grant: Unknown or invalid refresh token."), "\(refreshed)")
        #expect(try server.tokenRequests().last?["status"] as? Int == 403)
        #expect(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.client) == nil)
    }
}
