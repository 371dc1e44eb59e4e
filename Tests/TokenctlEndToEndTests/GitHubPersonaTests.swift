import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// GitHub as it really behaves (docs.github.com), through the built binary against the test
/// server's `github-oauth-app` and `github-app` personas: errors with HTTP 200, no discovery,
/// OAuth App tokens without expires_in or refresh token, GitHub App tokens that rotate, scopes
/// with commas. There is no `--provider` yet: the profile is configured with explicit endpoints,
/// as a user does today.
@Suite("End to end: GitHub personas", .serialized)
struct GitHubPersonaTests {
    static let oauthAppClient = "Ov23liGitHubOAuthApp"
    static let appClient = "Iv1.GitHubAppClient"

    /// `login --device` at a GitHub persona, endpoints given as GitHub's fixed paths.
    func deviceLogin(_ sandbox: Sandbox, _ server: AuthServer, clientID: String, _ extra: String...) throws -> RunResult
    {
        for kind in ["session", "client-secret"] {
            _ = try runProgram(
                "/usr/bin/secret-tool", ["clear", "application", "tokenctl", "issuer", server.url, "kind", kind],
                environment: sandbox.variables)
        }
        return try sandbox.start(
            [
                "login", "--device", "--issuer", server.url, "--client-id", clientID,
                "--token-endpoint", server.url + "/login/oauth/access_token",
                "--device-authorization-endpoint", server.url + "/login/device/code",
            ] + extra
        ).wait()
    }

    func devicePolls(_ server: AuthServer) throws -> [[String: Any]] {
        try server.log().filter { ($0["grant_type"] as? String) == "urn:ietf:params:oauth:grant-type:device_code" }
    }

    @Test(
        "device login approved after several polls, a slow_down in between, every answer with HTTP 200: signed in, the wait raised to the server's interval"
    )
    func deviceLoginWithSlowDownAnswersWith200() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "persona": "github-oauth-app", "device_interval": 1,
            "device_script": ["authorization_pending", "slow_down", "approve"],
        ])
        let result = try deviceLogin(sandbox, server, clientID: Self.oauthAppClient, "--scope", "repo gist")
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("\(server.url)/login/device"), "\(result)")
        let polls = try devicePolls(server)
        #expect(polls.map { $0["outcome"] as? String } == ["authorization_pending", "slow_down", "issued"], "\(polls)")
        #expect(polls.allSatisfy { $0["status"] as? Int == 200 }, "GitHub answers every poll with 200: \(polls)")
        let times = polls.compactMap { $0["received"] as? Double }
        // The server's interval after slow_down is 6 s (1 + 5), carried in the answer.
        #expect(times.count == 3 && times[2] - times[1] >= 6, "\(times)")
        #expect(
            !polls.contains { $0["outcome"] as? String == "slow_down_early" },
            "no poll came before the interval: \(polls)")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.oauthAppClient))
        #expect((stored["access_token"] as? String)?.hasPrefix("gho_") == true)
        #expect(stored["refresh_token"] == nil && stored["expires_at"] == nil, "\(stored)")
        #expect(result.stderr.contains("no expiry stated"), "\(result)")
    }

    @Test(
        "GitHub OAuth App token served long after 300 s would have passed: no expiry stated, from the engine and from the front's hot cache, no request"
    )
    func oauthAppTokenHasNoStatedExpiry() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "github-oauth-app", "device_interval": 1, "device_script": ["approve"]])
        #expect(try deviceLogin(sandbox, server, clientID: Self.oauthAppClient, "--scope", "repo gist").status == 0)
        var stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.oauthAppClient))
        let accessToken = try #require(stored["access_token"] as? String)
        // Signed in an hour ago (300 s assumed would have run out twelve times over).
        stored["obtained_at"] = Date().timeIntervalSince1970 - 3600
        let json = String(decoding: try JSONSerialization.data(withJSONObject: stored), as: UTF8.self)
        try sandbox.overwriteStoredTokenSet(json, issuer: server.url, clientID: Self.oauthAppClient)
        let identity = (ProfileName.default, server.url, Self.oauthAppClient)
        HotCache(environment: .fixed([:])).invalidate(profile: identity.0, issuer: identity.1, clientID: identity.2)
        defer {
            HotCache(environment: .fixed([:])).invalidate(profile: identity.0, issuer: identity.1, clientID: identity.2)
        }
        let requests = try server.tokenRequests().count

        let engine = try sandbox.tokenctl("--verbose", "token")
        #expect(engine.status == 0, "\(engine)")
        #expect(engine.stdout == accessToken + "\n")
        #expect(engine.stderr.contains("with no expiry stated"), "\(engine)")
        #expect(!engine.stderr.contains("(kernel keyring cache)"), "the engine served it: \(engine)")
        let entry = HotCache(environment: .fixed([:])).lookup(
            profile: identity.0, issuer: identity.1, clientID: identity.2)
        if KernelKeyring.isAvailable() {
            let cached = try #require(entry, "the engine cached it")
            #expect(cached.statesNoExpiry && cached.expiresAt == nil)
            let front = try sandbox.tokenctl("--verbose", "token")
            #expect(front.status == 0 && front.stdout == accessToken + "\n", "\(front)")
            #expect(front.stderr.contains("with no expiry stated (kernel keyring cache)"), "the front's hit: \(front)")
        }
        let status = try sandbox.tokenctl("status")
        #expect(status.status == 0, "\(status)")
        #expect(status.stdout.contains(": authenticated"), "\(status)")
        #expect(status.stdout.contains("access token:  no expiry stated"), "\(status)")
        let json2 = try sandbox.tokenctl("status", "--json")
        #expect(json2.stdout.contains("\"access_token_expires_in\":null"), "\(json2)")
        #expect(try server.tokenRequests().count == requests, "nothing was sent")
    }

    @Test(
        "token --force on an OAuth App token (no refresh token): 77 saying no new token can be had, and status, the stored item and the next token as they were"
    )
    func forceOnOAuthAppToken() throws {
        let sandbox = try Sandbox()
        sandbox.useSecretServicePathOnly()
        let server = try AuthServer(["persona": "github-oauth-app", "device_interval": 1, "device_script": ["approve"]])
        #expect(try deviceLogin(sandbox, server, clientID: Self.oauthAppClient).status == 0)
        let served = try sandbox.tokenctl("token")
        #expect(served.status == 0)
        let storedBefore = try sandbox.storedTokenSet(issuer: server.url, clientID: Self.oauthAppClient)
        let statusBefore = try sandbox.tokenctl("status")
        let forced = try sandbox.tokenctl("token", "--force")
        #expect(forced.status == 77 && forced.stdout.isEmpty, "\(forced)")
        #expect(forced.stderr.contains("has no refresh token"), "\(forced)")
        #expect(forced.stderr.contains("kept as it was"), "\(forced)")
        #expect(forced.stderr.contains("tokenctl login"), "\(forced)")
        let storedAfter = try sandbox.storedTokenSet(issuer: server.url, clientID: Self.oauthAppClient)
        #expect(
            storedAfter.map { NSDictionary(dictionary: $0) } == storedBefore.map { NSDictionary(dictionary: $0) },
            "the stored session is untouched")
        let statusAfter = try sandbox.tokenctl("status")
        #expect(
            statusAfter.status == statusBefore.status && statusAfter.stdout == statusBefore.stdout, "\(statusAfter)")
        let next = try sandbox.tokenctl("token")
        #expect(next.status == 0 && next.stdout == served.stdout, "still served: \(next)")
    }

    @Test("scope shown space-separated: GitHub's 'repo,gist' is stored and shown as 'repo gist'")
    func commaSeparatedScope() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "github-oauth-app", "device_interval": 1, "device_script": ["approve"]])
        #expect(try deviceLogin(sandbox, server, clientID: Self.oauthAppClient, "--scope", "repo gist").status == 0)
        let asked = try server.log().first { ($0["path"] as? String) == "/device_authorization" }?["scope"] as? String
        #expect(asked == "repo gist", "what tokenctl asked for")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.oauthAppClient))
        #expect(stored["scope"] as? String == "repo gist", "\(stored)")
        let status = try sandbox.tokenctl("status")
        #expect(status.stdout.contains("scope:         repo gist\n"), "\(status)")
    }

    @Test(
        "GitHub App: 8 h tokens and a refresh token; a dead refresh token (200 bad_refresh_token) ends the session, 77 with the server's words"
    )
    func gitHubAppDeadRefreshToken() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "github-app"])
        let imported = try server.issue(clientID: Self.appClient, scope: "")
        let login = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", Self.appClient, "--token-endpoint",
            server.url + "/login/oauth/access_token",
            "--refresh-token-stdin", stdin: imported)
        #expect(login.status == 0, "\(login)")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.appClient))
        let refreshToken = try #require(stored["refresh_token"] as? String)
        #expect(refreshToken.hasPrefix("ghr_") && refreshToken != imported)
        let expiresIn = (stored["expires_at"] as? Double ?? 0) - Date().timeIntervalSince1970
        #expect(expiresIn > 28000 && expiresIn <= 28800, "8 h as stated: \(stored)")
        #expect(stored["scope"] == nil, "GitHub App's scope \"\" is no scope information: \(stored)")

        // Another client spends the refresh token (GitHub kills it on use).
        let spent = try runProgram(
            "/usr/bin/curl",
            [
                "-sS", "-X", "POST", server.url + "/login/oauth/access_token", "-H", "Accept: application/json",
                "--data-urlencode", "grant_type=refresh_token", "--data-urlencode", "refresh_token@-",
                "--data-urlencode", "client_id=\(Self.appClient)",
            ], stdin: refreshToken)
        #expect(spent.stdout.contains("ghu_"), "\(spent)")

        let refreshed = try sandbox.tokenctl("refresh")
        #expect(refreshed.status == 77, "\(refreshed)")
        #expect(
            refreshed.stderr.contains("bad_refresh_token: The refresh token passed is incorrect or expired."),
            "\(refreshed)")
        #expect(!refreshed.stderr.contains("no access_token"), "\(refreshed)")
        #expect(!refreshed.stderr.contains(refreshToken), "no token in messages")
        let last = try #require(try server.tokenRequests().last)
        #expect(
            last["status"] as? Int == 200 && last["outcome"] as? String == "bad_refresh_token", "GitHub's 200: \(last)")
        #expect(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.appClient) == nil)
        let status = try sandbox.tokenctl("status")
        #expect(status.status == 77 && status.stdout.contains("(bad_refresh_token)"), "\(status)")
    }

    @Test("device flow not enabled for the app (device_flow_disabled with 200): 78, --browser offered, nothing stored")
    func deviceFlowDisabled() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "github-oauth-app", "device_flow_disabled": true])
        let result = try deviceLogin(sandbox, server, clientID: Self.oauthAppClient)
        #expect(result.status == 78, "\(result)")
        #expect(
            result.stderr.contains("the device flow is not enabled for client '\(Self.oauthAppClient)'"), "\(result)")
        #expect(result.stderr.contains("--browser"), "\(result)")
        #expect(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.oauthAppClient) == nil)
    }
}
