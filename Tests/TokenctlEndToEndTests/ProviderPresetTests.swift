import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// `login --provider` through the built binary against the test
/// server's personas: the preset fills in what the provider needs, is saved in
/// the profile, and later logins, refreshes and logouts keep behaving the same way.
@Suite("End to end: provider presets", .serialized)
struct ProviderPresetTests {
    static let gitHubClient = "Ov23liPresetApp"
    static let googleClient = "1234-preset.apps.googleusercontent.com"

    func clearKeyring(_ server: AuthServer, _ sandbox: Sandbox) throws {
        for kind in ["session", "client-secret"] {
            _ = try runProgram(
                "/usr/bin/secret-tool", ["clear", "application", "tokenctl", "issuer", server.url, "kind", kind],
                environment: sandbox.variables)
        }
    }

    /// Start a browser login, follow its authorization URL as a browser would, return the
    /// result and the URL that was followed.
    func browserLogin(_ sandbox: Sandbox, _ server: AuthServer, _ arguments: [String], stdin: String? = nil) throws
        -> (RunResult, String)
    {
        let command = try sandbox.start(["login", "--browser", "--no-open"] + arguments, stdin: stdin)
        guard let stderr = command.waitForStandardError(containing: "redirect_uri=") else {
            command.signal(SIGKILL)
            return (command.wait(), "")
        }
        let url = try #require(
            stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
                $0.hasPrefix(server.url + "/authorize?")
            })
        _ = try runProgram("/usr/bin/curl", ["-sS", "-L", "--max-time", "10", url])
        return (command.wait(), "\(url)")
    }

    // MARK: GitHub

    @Test(
        "--provider github --host: GitHub's fixed paths, no discovery request, gh's default scopes, 'provider = github' saved and kept by a plain re-login"
    )
    func gitHubPresetDeviceLogin() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "github-oauth-app", "device_interval": 1, "device_script": ["approve"]])
        try clearKeyring(server, sandbox)
        let login = try sandbox.tokenctl(
            "login", "--provider", "github", "--host", server.url, "--client-id", Self.gitHubClient, "--device")
        #expect(login.status == 0, "\(login)")
        let log = try server.log()
        #expect(!log.contains { ($0["path"] as? String)?.hasPrefix("/.well-known/") == true }, "no discovery: \(log)")
        let device = try #require(log.first { $0["path"] as? String == "/device_authorization" })
        #expect(device["scope"] as? String == "repo read:org gist", "\(device)")
        let profile = try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8)
        #expect(profile.contains("provider = github\n"), "\(profile)")
        #expect(profile.contains("token_endpoint = \(server.url)/login/oauth/access_token\n"), "\(profile)")
        #expect(try sandbox.tokenctl("token").status == 0)

        try server.configure(["device_script": ["approve"]])
        let again = try sandbox.tokenctl("login", "--device")
        #expect(again.status == 0, "\(again)")
        let after = try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8)
        #expect(after.contains("provider = github\n"), "\(after)")
    }

    @Test(
        "GitHub logout with the app's secret: DELETE /applications/{client_id}/token with Basic auth (204), the token no longer valid"
    )
    func gitHubLogoutRevokesWithSecret() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "persona": "github-oauth-app", "device_interval": 1, "device_script": ["approve"],
            "client_secrets": [Self.gitHubClient: "app-secret"],
        ])
        try clearKeyring(server, sandbox)
        let login = try sandbox.tokenctl(
            "login", "--provider", "github", "--host", server.url, "--client-id", Self.gitHubClient, "--device",
            "--client-secret-stdin", stdin: "app-secret\n")
        #expect(login.status == 0, "\(login)")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.gitHubClient))
        let accessToken = try #require(stored["access_token"] as? String)
        let logout = try sandbox.tokenctl("logout")
        #expect(logout.status == 0, "\(logout)")
        #expect(logout.stderr.contains("the server revoked its access token"), "\(logout)")
        let revocation = try #require(try server.log().last { $0["path"] as? String == "/applications/token" })
        #expect(revocation["status"] as? Int == 204 && revocation["outcome"] as? String == "revoked", "\(revocation)")
        #expect(revocation["basic_client_id"] as? String == Self.gitHubClient, "\(revocation)")
        #expect(try server.tokenStatus(accessToken)["active"] as? Bool == false)
        #expect(!logout.stderr.contains(accessToken) && !logout.stderr.contains("app-secret"))
    }

    @Test(
        "GitHub logout without the app's secret: nothing can be revoked; logout says the token stays valid at GitHub and where to revoke it, exit 0"
    )
    func gitHubLogoutWithoutSecretSaysWhatStaysValid() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "github-oauth-app", "device_interval": 1, "device_script": ["approve"]])
        try clearKeyring(server, sandbox)
        #expect(
            try sandbox.tokenctl(
                "login", "--provider", "github", "--host", server.url, "--client-id", Self.gitHubClient, "--device"
            ).status == 0)
        let logout = try sandbox.tokenctl("logout")
        #expect(logout.status == 0, "\(logout)")
        #expect(logout.stderr.contains("the token stays valid at GitHub"), "\(logout)")
        #expect(logout.stderr.contains("never expires on its own"), "\(logout)")
        #expect(logout.stderr.contains("\(server.url)/settings/applications"), "\(logout)")
        #expect(!(try server.log().contains { $0["path"] as? String == "/applications/token" }), "nothing sent")
        #expect(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.gitHubClient) == nil)
    }

    // MARK: Google

    @Test(
        "--provider google, browser: access_type=offline and prompt=consent sent, no offline_access asked, a refresh token stored, the scheme-less iss accepted"
    )
    func googlePresetBrowserLogin() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "google", "client_secrets": [Self.googleClient: "g-secret"]])
        try clearKeyring(server, sandbox)
        let (login, url) = try browserLogin(
            sandbox, server,
            [
                "--provider", "google", "--issuer", server.url, "--client-id", Self.googleClient,
                "--client-secret-stdin",
            ],
            stdin: "g-secret\n")
        #expect(login.status == 0, "\(login)")
        #expect(url.contains("access_type=offline") && url.contains("prompt=consent"), "\(url)")
        let authorize = try #require(try server.log().first { $0["path"] as? String == "/authorize" })
        #expect(authorize["scope"] as? String == "openid email profile", "\(authorize)")
        #expect(login.stderr.contains("ID token checked"), "\(login)")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.googleClient))
        let refreshToken = try #require(stored["refresh_token"] as? String)
        // No rotation at Google: the refresh answer has no refresh token, the stored one stays.
        #expect(try sandbox.tokenctl("refresh").status == 0)
        let after = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.googleClient))
        #expect(after["refresh_token"] as? String == refreshToken)
        let profile = try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8)
        #expect(profile.contains("provider = google\n"), "\(profile)")
    }

    @Test(
        "Google without the preset (the same server, the same scopes): no refresh token, and the scheme-less iss is refused (77), nothing stored"
    )
    func googleWithoutPresetFails() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "google", "client_secrets": [Self.googleClient: "g-secret"]])
        try clearKeyring(server, sandbox)
        let (login, url) = try browserLogin(
            sandbox, server,
            [
                "--issuer", server.url, "--client-id", Self.googleClient, "--client-secret-stdin", "--scope",
                "openid email profile",
            ], stdin: "g-secret\n")
        #expect(!url.contains("access_type"), "\(url)")
        #expect(login.status == 77, "\(login)")
        let host = String(server.url.dropFirst("http://".count))
        #expect(login.stderr.contains("the ID token was issued by '\(host)'"), "\(login)")
        #expect(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.googleClient) == nil)
    }

    @Test("--provider google --scope with offline_access: refused before anything is sent (64), the reason given")
    func googleRefusesOfflineAccess() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["persona": "google"])
        try clearKeyring(server, sandbox)
        let login = try sandbox.tokenctl(
            "login", "--provider", "google", "--issuer", server.url, "--client-id", Self.googleClient, "--scope",
            "openid offline_access", "--device", "--client-secret-stdin", stdin: "g-secret\n")
        #expect(login.status == 64, "\(login)")
        #expect(login.stderr.contains("Google refuses the offline_access scope"), "\(login)")
        #expect(try server.log().filter { $0["path"] as? String != "/_test/config" }.isEmpty, "nothing sent")
    }

    @Test("--provider google without a client secret: 64, and the hint (with --client-secret-stdin) runs as printed")
    func googleNeedsTheSecret() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "persona": "google", "device_interval": 1, "device_script": ["approve"],
            "client_secrets": [Self.googleClient: "g-secret"],
        ])
        try clearKeyring(server, sandbox)
        let login = try sandbox.tokenctl(
            "login", "--provider", "google", "--issuer", server.url, "--client-id", Self.googleClient, "--device")
        #expect(login.status == 64, "\(login)")
        #expect(login.stderr.contains("Google needs the client's secret"), "\(login)")
        #expect(
            login.stderr.contains(
                "tokenctl login --provider google --client-id \(Self.googleClient) --client-secret-stdin"), "\(login)")
        // The hint, with the issuer this test server needs (a real Google login needs none).
        let hinted = try sandbox.tokenctl(
            "login", "--provider", "google", "--client-id", Self.googleClient, "--client-secret-stdin", "--issuer",
            server.url, "--device", stdin: "g-secret\n")
        #expect(hinted.status == 0, "\(hinted)")
    }

    @Test(
        "Google logout of a token already revoked (400 invalid_token at /revoke): already gone, logout 0, not 76"
    )
    func googleLogoutOfARevokedToken() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "persona": "google", "device_interval": 1, "device_script": ["approve"],
            "client_secrets": [Self.googleClient: "g-secret"],
        ])
        try clearKeyring(server, sandbox)
        #expect(
            try sandbox.tokenctl(
                "login", "--provider", "google", "--issuer", server.url, "--client-id", Self.googleClient, "--device",
                "--scope", "openid email", "--client-secret-stdin", stdin: "g-secret\n"
            ).status == 0)
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url, clientID: Self.googleClient))
        let token = (stored["refresh_token"] as? String) ?? (stored["access_token"] as? String) ?? ""
        // The user revoked access at myaccount.google.com: the server no longer knows the token.
        _ = try runProgram(
            "/usr/bin/curl",
            [
                "-sS", "-X", "POST", server.url + "/revoke", "--data-urlencode", "token@-", "--data-urlencode",
                "client_id=\(Self.googleClient)", "--data-urlencode", "client_secret=g-secret",
            ], stdin: token)
        let logout = try sandbox.tokenctl("logout")
        #expect(logout.status == 0, "\(logout)")
        #expect(logout.stderr.contains("already revoked"), "\(logout)")
        let last = try #require(try server.log().last { $0["path"] as? String == "/revoke" })
        #expect(last["status"] as? Int == 400, "Google's 400 invalid_token: \(last)")
    }
}
