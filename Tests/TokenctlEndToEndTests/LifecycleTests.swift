import Foundation
import Testing
import TokenctlTestSupport

/// The whole life of a session through the built binary, the real keyring and a real HTTP server.
@Suite("End to end: session lifecycle")
struct LifecycleTests {
    @Test("import → token → forced and expiry-driven rotation → status → logout of one profile → 77")
    func fullLifecycle() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let initialRefreshToken = try sandbox.login(server)

        // The profile file is private and holds no secret.
        let attributes = try FileManager.default.attributesOfItem(atPath: sandbox.profileFile())
        #expect((attributes[.posixPermissions] as? Int) == 0o600)

        // token prints exactly the stored access token and one newline; no refresh needed.
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        let firstAccess = try #require(stored["access_token"] as? String)
        let loginRefreshToken = try #require(stored["refresh_token"] as? String)
        #expect(
            loginRefreshToken != initialRefreshToken,
            "login exchanged the imported token once and stored the rotated one")
        let token = try sandbox.tokenctl("token")
        #expect(token.status == 0, "\(token)")
        #expect(token.stdout == firstAccess + "\n")
        #expect(token.stderr.isEmpty)
        #expect(try server.tokenRequests().count == 1, "a fresh token is served without the server")

        // Short-lived tokens from now on; --force refreshes and the keyring holds the rotated token.
        try server.configure(["access_ttl": 2])
        let forced = try sandbox.tokenctl("token", "--force")
        #expect(forced.status == 0, "\(forced)")
        let afterForce = try #require(try sandbox.storedTokenSet(issuer: server.url))
        #expect(forced.stdout == (afterForce["access_token"] as! String) + "\n")
        let forcedRefreshToken = try #require(afterForce["refresh_token"] as? String)
        #expect(forcedRefreshToken != loginRefreshToken)
        #expect((try server.tokenStatus(loginRefreshToken)["spent"] as? Bool) == true)
        // The token --force got lives 2 s; the one its expiry brings lives long enough for the
        // status checks below on a loaded machine.
        try server.configure(["access_ttl": 60])

        // After expiry, `token` refreshes by itself, persisting the rotation before printing.
        Thread.sleep(forTimeInterval: 2.2)
        let afterExpiry = try sandbox.tokenctl("token")
        #expect(afterExpiry.status == 0, "\(afterExpiry)")
        let rotated = try #require(try sandbox.storedTokenSet(issuer: server.url))
        #expect(afterExpiry.stdout == (rotated["access_token"] as! String) + "\n")
        #expect(afterExpiry.stdout != forced.stdout)
        #expect((rotated["refresh_token"] as? String) != forcedRefreshToken)
        #expect(try server.tokenRequests().count == 3)
        #expect(try server.stats()["reuse_detected"] == 0)

        // status reports the session, never a token.
        let status = try sandbox.tokenctl("status")
        #expect(status.status == 0, "\(status)")
        #expect(status.stdout.contains("authenticated"))
        #expect(status.stdout.contains("alice"))
        #expect(!status.stdout.contains(rotated["access_token"] as! String))
        let json = try sandbox.tokenctl("status", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["state"] as? String == "authenticated")
        #expect(object["subject"] as? String == "alice")
        #expect(object["refresh_token_present"] as? Bool == true)
        #expect(object["last_refresh_at"] is String)

        // A second profile, then logout of the first only.
        try sandbox.login(server, profile: "other", clientID: "cli2", subject: "bob")
        let otherBefore = try #require(
            try sandbox.storedTokenSet(profile: "other", issuer: server.url, clientID: "cli2"))
        let finalRefreshToken = rotated["refresh_token"] as! String
        let logout = try sandbox.tokenctl("logout")
        #expect(logout.status == 0, "\(logout)")
        #expect(logout.stderr.contains("revoked"))
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
        #expect((try server.tokenStatus(finalRefreshToken)["family_revoked"] as? Bool) == true)
        let revocations = try server.log().filter { ($0["path"] as? String) == "/revoke" }
        #expect(revocations.count == 1)

        let otherAfter = try #require(
            try sandbox.storedTokenSet(profile: "other", issuer: server.url, clientID: "cli2"))
        #expect(otherAfter["refresh_token"] as? String == otherBefore["refresh_token"] as? String)
        #expect(try sandbox.tokenctl("--profile", "other", "token").status == 0)

        // Signed out: token and status say so with 77; the profile file stays.
        let signedOut = try sandbox.tokenctl("token")
        #expect(signedOut.status == 77, "\(signedOut)")
        #expect(signedOut.stdout.isEmpty)
        #expect(signedOut.stderr.contains("not logged in"))
        let statusOut = try sandbox.tokenctl("status")
        #expect(statusOut.status == 77)
        #expect(statusOut.stdout.contains("signed-out"))
        #expect(FileManager.default.fileExists(atPath: sandbox.profileFile()))

        // No token anywhere on disk.
        let secrets = [
            firstAccess, loginRefreshToken, forcedRefreshToken, finalRefreshToken, rotated["access_token"] as! String,
        ]
        for file in sandbox.allFiles() {
            let contents = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
            for secret in secrets { #expect(!contents.contains(secret), "token found in \(file)") }
        }
    }

    @Test("token --format header and json")
    func formats() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let access = try #require(try sandbox.storedTokenSet(issuer: server.url)?["access_token"] as? String)
        #expect(try sandbox.tokenctl("token", "--format", "header").stdout == "Authorization: Bearer \(access)\n")
        let json = try sandbox.tokenctl("token", "--format=json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["access_token"] as? String == access)
        #expect(object["token_type"] as? String == "Bearer")
        #expect((object["expires_in"] as? Int).map { $0 > 3000 } == true)
    }

    @Test("a non-rotating server: the old refresh token is kept when none comes back")
    func nonRotatingServer() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["rotate": false])
        let refreshToken = try sandbox.login(server)
        #expect(try sandbox.tokenctl("token", "--force").status == 0)
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == refreshToken)
    }

    @Test("logout --no-revoke removes the session without calling the server")
    func logoutWithoutRevocation() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let refreshToken = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        let result = try sandbox.tokenctl("logout", "--no-revoke")
        #expect(result.status == 0, "\(result)")
        #expect(try server.log().filter { ($0["path"] as? String) == "/revoke" }.isEmpty)
        #expect((try server.tokenStatus(refreshToken)["active"] as? Bool) == true)
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
        #expect(try sandbox.tokenctl("logout").status == 0, "logging out twice is not an error")
    }

    @Test("fake server: a failed revocation is reported (exit 76) and the local session is still removed")
    func failedRevocation() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["revoke_fault_status": 503])
        try sandbox.login(server)
        let result = try sandbox.tokenctl("logout")
        #expect(result.status == 76, "\(result)")
        #expect(result.stderr.contains("503"))
        #expect(result.stderr.contains("Logged out profile 'default' here"))
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
    }

    @Test("a profile re-pointed at another client starts signed out and never uses the old item")
    func mismatchedIdentityIsIgnored() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        // Hand-edit the client id: the stored item no longer matches the configuration.
        let path = sandbox.profileFile()
        let text = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(
            of: "client_id = cli", with: "client_id = someone-else")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 77, "\(result)")
        #expect(result.stdout.isEmpty)
        #expect(try sandbox.tokenctl("status").status == 77)
    }
}
