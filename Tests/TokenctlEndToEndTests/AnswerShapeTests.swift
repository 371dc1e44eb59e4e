import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// What the answers themselves say: a device login approved with an
/// answer that is neither tokens nor an error is a protocol error, and a refresh token whose
/// lifetime the server states (GitHub App tokens) is known to be dead without asking.
@Suite("End to end: protocol errors at login and stated refresh-token lifetimes", .serialized)
struct AnswerShapeTests {
    @Test(
        "device login whose final answer is a 2xx with neither access_token nor error: 76, the session signed in before kept, nothing stored"
    )
    func deviceAnswerWithoutTokensOrError() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let before = try #require(try sandbox.storedTokenSet(issuer: server.url))
        let profile = try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8)
        try server.configure([
            "device_interval": 1,
            "device_script": ["authorization_pending", ["status": 200, "body": ["token_type": "Bearer"]]],
        ])
        let result = try sandbox.tokenctl("login", "--device", "--issuer", server.url, "--client-id", "cli")
        #expect(result.status == 76, "\(result)")
        #expect(result.stderr.contains("its answer is unusable"), "\(result)")
        #expect(result.stderr.contains("no access_token"), "\(result)")
        #expect(result.stderr.contains("Nothing was stored; a session signed in before is kept."), "\(result)")
        let after = try #require(try sandbox.storedTokenSet(issuer: server.url))
        #expect(after["access_token"] as? String == before["access_token"] as? String)
        #expect(after["refresh_token"] as? String == before["refresh_token"] as? String)
        #expect(try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8) == profile)
        #expect(try sandbox.tokenctl("token").status == 0, "the kept session still serves")
    }

    @Test(
        "GitHub App refresh_token_expires_in: status says when the refresh token expires; past it, a refresh says re-login is needed, 77, no request sent (docs.github.com)"
    )
    func statedRefreshTokenLifetime() throws {
        let sandbox = try Sandbox()
        sandbox.useSecretServicePathOnly()
        let client = "Iv1.GitHubAppClient"
        let server = try AuthServer(["persona": "github-app"])
        let login = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", client, "--token-endpoint",
            server.url + "/login/oauth/access_token", "--refresh-token-stdin",
            stdin: try server.issue(clientID: client, scope: ""))
        #expect(login.status == 0, "\(login)")
        var stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: client))
        let end = try #require(stored["refresh_token_expires_at"] as? Double, "\(stored.keys)")
        #expect(end > now() + 15_897_000 && end <= now() + 15_897_600)
        let status = try sandbox.tokenctl("status")
        #expect(status.stdout.contains("refresh token: present, expires in 183 days"), "\(status)")

        // Six months on: the refresh token is past its stated end, the access token expired.
        stored["refresh_token_expires_at"] = now() - 60
        stored["expires_at"] = now() - 10
        let json = String(decoding: try JSONSerialization.data(withJSONObject: stored), as: UTF8.self)
        try sandbox.overwriteStoredTokenSet(json, issuer: server.url, clientID: client)
        let requests = try server.tokenRequests().count
        for arguments in [["refresh"], ["token"]] {
            let refreshed = try sandbox.start(arguments).wait()
            #expect(refreshed.status == 77, "\(refreshed)")
            #expect(refreshed.stderr.contains("re-login needed"), "\(refreshed)")
            #expect(refreshed.stderr.contains("'tokenctl login'"), "\(refreshed)")
        }
        #expect(try server.tokenRequests().count == requests, "no doomed request was sent")
        let after = try sandbox.tokenctl("status")
        #expect(after.status == 77, "\(after)")
        #expect(after.stdout.contains(": signed-out") && after.stdout.contains("'tokenctl login'"), "\(after)")
    }
}
