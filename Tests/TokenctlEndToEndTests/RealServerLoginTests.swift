import Foundation
import Testing
import TokenctlTestSupport

/// `tokenctl login` against a real authorization server (django-oauth-toolkit 3.4.1), driven as a
/// user would: tokenctl shows a code or a URL; the test signs in through the server's HTML login
/// form and approves on its device or consent page; then token, expiry-driven refresh, logout.
@Suite("End to end: login against django-oauth-toolkit", .serialized)
struct RealServerLoginTests {
    /// The keyring is shared by all tests and so is this server's issuer: every test uses its own profile.
    func deviceLogin(
        _ sandbox: Sandbox, _ server: DotServer, profile: String, clientID: String = "tokenctl-device",
        deny: Bool = false, stdin: String? = nil, extra: [String] = []
    ) throws -> RunResult {
        let command = try sandbox.start(
            [
                "--profile", profile, "login", "--device", "--issuer", server.issuer, "--client-id", clientID,
                "--device-authorization-endpoint", server.deviceEndpoint, "--revocation-endpoint",
                server.revocationEndpoint,
            ] + extra, stdin: stdin)
        guard let stderr = command.waitForStandardError(containing: "enter the code: "),
            let line = stderr.split(separator: "\n").first(where: { $0.contains("enter the code: ") })
        else {
            command.signal(SIGKILL)
            throw HarnessError("no user code shown: \(command.wait())")
        }
        let userCode = String(line.split(separator: " ").last!)
        let approval = try server.approveDevice(userCode: userCode, deny: deny)
        #expect(approval.status == 0, "\(approval)")
        return command.wait()
    }

    @Test("device flow → token → expiry-driven refresh (rotation) → logout revokes: the server refuses the token")
    func deviceLifecycle() throws {
        let server = try DotServer.require()
        let sandbox = try Sandbox()
        let profile = "dot-device"
        let login = try deviceLogin(sandbox, server, profile: profile)
        #expect(login.status == 0, "\(login)")
        #expect(login.stderr.contains("Logged in profile 'dot-device'"))
        let stored = try #require(
            try sandbox.storedTokenSet(profile: profile, issuer: server.issuer, clientID: "tokenctl-device"))
        let firstRefresh = try #require(stored["refresh_token"] as? String)

        let token = try sandbox.tokenctl("--profile", profile, "token", "--min-ttl", "0")
        #expect(token.status == 0, "\(token)")
        #expect(try server.acceptsAccessToken(token.stdout.trimmingCharacters(in: .newlines)))

        // 5-second access tokens: after expiry, `token` refreshes by itself and the server rotates.
        sleep(seconds: 5.2)
        let refreshed = try sandbox.tokenctl("--profile", profile, "token")
        #expect(refreshed.status == 0, "\(refreshed)")
        #expect(refreshed.stdout != token.stdout)
        #expect(try server.acceptsAccessToken(refreshed.stdout.trimmingCharacters(in: .newlines)))
        let rotated = try #require(
            try sandbox.storedTokenSet(profile: profile, issuer: server.issuer, clientID: "tokenctl-device"))
        let currentRefresh = try #require(rotated["refresh_token"] as? String)
        #expect(currentRefresh != firstRefresh, "ROTATE_REFRESH_TOKEN: the stored refresh token was replaced")

        let logout = try sandbox.tokenctl("--profile", profile, "logout")
        #expect(logout.status == 0, "\(logout)")
        #expect(logout.stderr.contains("revoked"))
        #expect(try sandbox.storedTokenSet(profile: profile, issuer: server.issuer, clientID: "tokenctl-device") == nil)
        // The server's view: the revoked refresh token no longer refreshes.
        let replay = try server.tryRefresh(currentRefresh, clientID: "tokenctl-device")
        #expect(replay.status == 400)
        #expect(replay.error == "invalid_grant")
    }

    @Test(
        "reuse protection: a rotated-out refresh token replayed after the grace period revokes the family; tokenctl then says login is required"
    )
    func reuseProtection() throws {
        let server = try DotServer.require()
        let sandbox = try Sandbox()
        let profile = "dot-reuse"
        let login = try deviceLogin(sandbox, server, profile: profile)
        #expect(login.status == 0, "\(login)")
        let first = try #require(
            try sandbox.storedTokenSet(profile: profile, issuer: server.issuer, clientID: "tokenctl-device")?[
                "refresh_token"] as? String)
        let forced = try sandbox.tokenctl("--profile", profile, "token", "--force")
        #expect(forced.status == 0, "\(forced)")
        // Inside the 2-second grace period the old token would still be honoured; after it, replay is reuse.
        sleep(seconds: 2.5)
        let replay = try server.tryRefresh(first, clientID: "tokenctl-device")
        #expect(replay.error == "invalid_grant", "\(replay)")
        let afterReuse = try sandbox.tokenctl("--profile", profile, "token", "--force")
        #expect(afterReuse.status == 77, "\(afterReuse)")
        #expect(afterReuse.stderr.contains("ended the session"))
        #expect(try sandbox.storedTokenSet(profile: profile, issuer: server.issuer, clientID: "tokenctl-device") == nil)
    }

    @Test("device flow denied on the server's page → 77, nothing stored")
    func deviceDenied() throws {
        let server = try DotServer.require()
        let sandbox = try Sandbox()
        let login = try deviceLogin(sandbox, server, profile: "dot-denied", deny: true)
        #expect(login.status == 77, "\(login)")
        #expect(login.stderr.contains("denied"))
        #expect(
            try sandbox.storedTokenSet(profile: "dot-denied", issuer: server.issuer, clientID: "tokenctl-device") == nil
        )
        #expect(!FileManager.default.fileExists(atPath: sandbox.profileFile("dot-denied")))
    }

    @Test("confidential client: secret from stdin, client authentication on device, refresh and revocation")
    func confidential() throws {
        let server = try DotServer.require()
        let sandbox = try Sandbox()
        let login = try deviceLogin(
            sandbox, server, profile: "dot-conf", clientID: "tokenctl-confidential", stdin: "tokenctl-secret\n",
            extra: ["--client-secret-stdin"])
        #expect(login.status == 0, "\(login)")
        let profile = try String(contentsOfFile: sandbox.profileFile("dot-conf"), encoding: .utf8)
        #expect(profile.contains("token_endpoint_auth_method = client_secret_basic"))
        #expect(!profile.contains("tokenctl-secret"))
        let forced = try sandbox.tokenctl("--profile", "dot-conf", "token", "--force")
        #expect(forced.status == 0, "\(forced)")
        let stored = try #require(
            try sandbox.storedTokenSet(profile: "dot-conf", issuer: server.issuer, clientID: "tokenctl-confidential"))
        let refreshToken = try #require(stored["refresh_token"] as? String)
        let logout = try sandbox.tokenctl("--profile", "dot-conf", "logout")
        #expect(logout.status == 0, "\(logout)")
        #expect(logout.stderr.contains("revoked"))
        #expect(
            try server.tryRefresh(refreshToken, clientID: "tokenctl-confidential", secret: "tokenctl-secret").error
                == "invalid_grant")
    }

    func browserLogin(
        _ sandbox: Sandbox, _ server: DotServer, profile: String, deny: Bool = false, fromSavedProfile: Bool = false
    ) throws -> (RunResult, RunResult) {
        try browserLoginShowingURL(sandbox, server, profile: profile, deny: deny, fromSavedProfile: fromSavedProfile)
            .result
    }

    func browserLoginShowingURL(
        _ sandbox: Sandbox, _ server: DotServer, profile: String, deny: Bool = false, fromSavedProfile: Bool = false
    ) throws -> (result: (RunResult, RunResult), url: String) {
        let given = fromSavedProfile ? [] : ["--issuer", server.issuer, "--client-id", "tokenctl-browser"]
        let command = try sandbox.start(["--profile", profile, "login", "--browser", "--no-open"] + given)
        guard let stderr = command.waitForStandardError(containing: "Waiting for the browser"),
            let url = stderr.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }).first(where: {
                $0.hasPrefix(server.issuer + "/authorize/?")
            })
        else {
            command.signal(SIGKILL)
            throw HarnessError("no authorization URL shown: \(command.wait())")
        }
        let page = try server.authorize(url: url, deny: deny)
        return ((command.wait(), page), url)
    }

    @Test("logging in again with no options (after logout) sends what the first login sent: scope, nonce, PKCE")
    func secondBrowserLogin() throws {
        let server = try DotServer.require()
        let sandbox = try Sandbox()
        let (first, firstURL) = try browserLoginShowingURL(sandbox, server, profile: "dot-again")
        #expect(first.0.status == 0, "\(first.0)")
        #expect(try sandbox.tokenctl("--profile", "dot-again", "logout").status == 0)
        let (second, secondURL) = try browserLoginShowingURL(
            sandbox, server, profile: "dot-again", fromSavedProfile: true)
        #expect(second.0.status == 0, "\(second.0)")
        #expect(second.0.stderr.contains("nonce and signature"), "\(second.0)")
        func query(_ url: String) -> [String: String] {
            var fields: [String: String] = [:]
            for item in URLComponents(string: url)?.queryItems ?? [] { fields[item.name] = item.value }
            return fields
        }
        let (a, b) = (query(firstURL), query(secondURL))
        for key in ["client_id", "scope", "code_challenge_method", "response_type"] {
            #expect(a[key] != nil && a[key] == b[key], "\(key): \(a) vs \(b)")
        }
        #expect(b["nonce"]?.count == 43 && b["nonce"] != a["nonce"], "a fresh nonce: \(b)")
        #expect(b["code_challenge"] != nil && b["code_challenge"] != a["code_challenge"], "a fresh PKCE challenge")
        #expect(try sandbox.tokenctl("--profile", "dot-again", "token").status == 0)
        _ = try sandbox.tokenctl("--profile", "dot-again", "logout", "--forget")
    }

    @Test("browser flow (PKCE, loopback redirect, consent page) → token → logout revokes")
    func browserLifecycle() throws {
        let server = try DotServer.require()
        let sandbox = try Sandbox()
        let (login, page) = try browserLogin(sandbox, server, profile: "dot-browser")
        #expect(login.status == 0, "\(login)")
        #expect(page.stdout.contains("return to the terminal"), "\(page)")
        #expect(
            login.stderr.contains("nonce and signature"), "the RS256 ID token was verified against the server's JWKS")
        let token = try sandbox.tokenctl("--profile", "dot-browser", "token", "--min-ttl", "0")
        #expect(token.status == 0, "\(token)")
        #expect(try server.acceptsAccessToken(token.stdout.trimmingCharacters(in: .newlines)))
        let stored = try #require(
            try sandbox.storedTokenSet(profile: "dot-browser", issuer: server.issuer, clientID: "tokenctl-browser"))
        #expect(stored["subject"] is String)
        let refreshToken = try #require(stored["refresh_token"] as? String)
        // The revocation endpoint came from the RFC 8414 document (the OIDC one lacks it).
        let profileText = try String(contentsOfFile: sandbox.profileFile("dot-browser"), encoding: .utf8)
        #expect(profileText.contains("revocation_endpoint = \(server.revocationEndpoint)"))
        let logout = try sandbox.tokenctl("--profile", "dot-browser", "logout")
        #expect(logout.status == 0, "\(logout)")
        #expect(try server.tryRefresh(refreshToken, clientID: "tokenctl-browser").error == "invalid_grant")
    }

    @Test("browser flow denied on the consent page → error=access_denied → 77, nothing stored")
    func browserDenied() throws {
        let server = try DotServer.require()
        let sandbox = try Sandbox()
        let (login, _) = try browserLogin(sandbox, server, profile: "dot-browser-denied", deny: true)
        #expect(login.status == 77, "\(login)")
        #expect(login.stderr.contains("access_denied"))
        #expect(!FileManager.default.fileExists(atPath: sandbox.profileFile("dot-browser-denied")))
    }
}
