import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// Per persona of the test server, through the built
/// binary with `--provider`: a device login approved after several polls with a slow_down in
/// between, a browser login, `token` in every format, two forced refreshes, a 16-process
/// fan-in on an expired token (one request), 503 / 429 without a body / a reset connection
/// (75, kept), the persona ending the session its own way (77 with its words), a plain re-login,
/// and logout (revoked, or an honest message).
@Suite("End to end: every provider persona, the whole life of a session", .serialized)
struct ProviderMatrixTests {
    struct Persona: Sendable, CustomTestStringConvertible {
        var persona: String
        var provider: String
        /// `--host SERVER` (a host-based preset) or `--issuer SERVER`.
        var byHost: Bool
        var clientID: String
        var secret: String?
        /// Whether the persona issues refresh tokens (a GitHub OAuth App does not).
        var refreshes: Bool
        /// What tokenctl says when the persona ends the session.
        var endWords: String
        /// What logout says.
        var logoutWords: String
        /// Entra: the tenant the persona serves (`--tenant`, the `entra_tenant` config).
        var tenant: String? = nil

        var testDescription: String { persona }
    }

    static let personas: [Persona] = [
        Persona(
            persona: "github-oauth-app", provider: "github", byHost: true, clientID: "Ov23liMatrix", secret: nil,
            refreshes: false, endWords: "has no refresh token", logoutWords: "the token stays valid at GitHub"),
        Persona(
            persona: "github-app", provider: "github-app", byHost: true, clientID: "Iv1.matrix", secret: nil,
            refreshes: true, endWords: "bad_refresh_token: The refresh token passed is incorrect or expired.",
            logoutWords: "the token stays valid at GitHub"),
        Persona(
            persona: "google", provider: "google", byHost: false, clientID: "99-matrix.apps.googleusercontent.com",
            secret: "g-secret", refreshes: true, endWords: "invalid_grant: Token has been expired or revoked.",
            logoutWords: "the server revoked its refresh token"),
        Persona(
            persona: "okta", provider: "okta", byHost: false, clientID: "0oaMatrix", secret: nil, refreshes: true,
            endWords: "invalid_grant", logoutWords: "the server revoked its refresh token"),
        Persona(
            persona: "auth0", provider: "auth0", byHost: false, clientID: "Auth0Matrix", secret: nil, refreshes: true,
            endWords: "invalid_grant", logoutWords: "the server revoked its refresh token"),
        Persona(
            persona: "gitlab", provider: "gitlab", byHost: true, clientID: "glMatrix", secret: nil, refreshes: false,
            endWords: "has no refresh token", logoutWords: "the server revoked its access token"),
        Persona(
            persona: "entra", provider: "entra", byHost: true, clientID: "11111111-2222-3333-4444-555555555555",
            secret: nil, refreshes: true, endWords: "invalid_grant", logoutWords: "has no revocation endpoint",
            tenant: "8eaef023-2b34-4da1-9baa-8bc8c9d6a490"),
        Persona(
            persona: "keycloak", provider: "keycloak", byHost: false, clientID: "kc-matrix", secret: nil,
            refreshes: true, endWords: "invalid_grant", logoutWords: "the server revoked its refresh token"),
    ]

    func presetArguments(_ persona: Persona, _ server: AuthServer) -> [String] {
        [
            "--provider", persona.provider, persona.byHost ? "--host" : "--issuer", server.url, "--client-id",
            persona.clientID,
        ]
            + (persona.secret == nil ? [] : ["--client-secret-stdin"])
            + (persona.tenant.map { ["--tenant", $0] } ?? [])
    }

    /// The profile's issuer: the server's URL, or Entra's tenant issuer under it.
    func issuer(_ persona: Persona, _ server: AuthServer) -> String {
        persona.tenant.map { server.url + "/" + $0 + "/v2.0" } ?? server.url
    }

    func stdin(_ persona: Persona) -> String? { persona.secret.map { $0 + "\n" } }

    func stored(_ sandbox: Sandbox, _ server: AuthServer, _ persona: Persona) throws -> [String: Any] {
        try #require(try sandbox.storedTokenSet(issuer: issuer(persona, server), clientID: persona.clientID))
    }

    /// Expire the stored access token and drop it from the hot cache: the next `token` refreshes.
    func expireAccessToken(_ sandbox: Sandbox, _ server: AuthServer, _ persona: Persona) throws {
        var set = try stored(sandbox, server, persona)
        set["expires_at"] = Date().timeIntervalSince1970 - 60
        let json = String(decoding: try JSONSerialization.data(withJSONObject: set), as: UTF8.self)
        try sandbox.overwriteStoredTokenSet(json, issuer: issuer(persona, server), clientID: persona.clientID)
        HotCache(environment: .fixed([:])).invalidate(
            profile: .default, issuer: issuer(persona, server), clientID: persona.clientID)
    }

    @Test("a session's whole life at the persona", arguments: personas)
    func wholeLife(_ persona: Persona) throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "persona": persona.persona, "device_interval": 1,
            "device_script": ["authorization_pending", "slow_down", "approve"],
            "client_secrets": persona.secret.map { [persona.clientID: $0] } ?? [:],
        ])
        if let tenant = persona.tenant { try server.configure(["entra_tenant": tenant]) }
        defer {
            HotCache(environment: .fixed([:])).invalidate(
                profile: .default, issuer: issuer(persona, server), clientID: persona.clientID)
        }

        // Device login, approved after several polls with a slow_down in between.
        let login = try sandbox.tokenctl(
            arguments: ["login", "--device"] + presetArguments(persona, server), stdin: stdin(persona))
        #expect(login.status == 0, "\(login)")
        let polls = try server.tokenRequests().filter {
            ($0["grant_type"] as? String)?.hasSuffix("device_code") == true
        }
        #expect(polls.map { $0["outcome"] as? String } == ["authorization_pending", "slow_down", "issued"], "\(polls)")
        let first = try stored(sandbox, server, persona)
        let accessToken = try #require(first["access_token"] as? String)

        // `token` in every format.
        for format in ["raw", "header", "json", "exec-credential"] {
            let token = try sandbox.tokenctl("token", "--format", format)
            #expect(token.status == 0 && token.stdout.contains(accessToken), "\(format): \(token)")
        }

        if persona.refreshes {
            // Two forced refreshes: each one request, each answer kept (rotated or not).
            var before = try server.tokenRequests().count
            for _ in 0..<2 {
                #expect(try sandbox.tokenctl("refresh").status == 0)
                #expect(try server.tokenRequests().count == before + 1)
                before += 1
            }
            // 16 processes on an expired token: one request.
            try expireAccessToken(sandbox, server, persona)
            let fanIn = try sandbox.concurrently(16, ["token"])
            #expect(fanIn.allSatisfy { $0.status == 0 }, "\(fanIn.filter { $0.status != 0 })")
            #expect(Set(fanIn.map(\.stdout)).count == 1)
            #expect(try server.tokenRequests().count == before + 1, "one refresh for sixteen")

            // 503, 429 without a body, a reset connection: 75, the session kept.
            let kept = try stored(sandbox, server, persona)["refresh_token"] as? String
            for fault: [String: Any] in [["status": 503, "body": ""], ["status": 429, "body": ""], ["close": true]] {
                try server.configure(["faults": [fault.merging(["count": 20]) { $1 }]])
                let refresh = try sandbox.tokenctl("refresh", "--timeout", "3")
                #expect(refresh.status == 75, "\(fault): \(refresh)")
                #expect(try stored(sandbox, server, persona)["refresh_token"] as? String == kept, "\(fault)")
                try server.configure(["faults": []])
            }

            // The persona ends the session its own way: 77 with its words.
            _ = try server.request("POST", "/_test/revoke-all", json: [String: Any]())
            let ended = try sandbox.tokenctl("refresh")
            #expect(ended.status == 77, "\(ended)")
            #expect(ended.stderr.contains(persona.endWords), "\(ended)")
        } else {
            // No refresh token: a forced refresh cannot get a new token, says so, and ends nothing.
            let forced = try sandbox.tokenctl("token", "--force")
            #expect(forced.status == 77 && forced.stderr.contains(persona.endWords), "\(forced)")
            #expect(try sandbox.tokenctl("token").status == 0, "the session is kept as it was")
        }

        // A plain re-login keeps the preset.
        try server.configure(["device_script": ["approve"]])
        let again = try sandbox.tokenctl("login", "--device", stdin: nil)
        #expect(again.status == 0, "\(again)")
        let profile = try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8)
        #expect(profile.contains("provider = \(persona.provider)\n"), "\(profile)")

        // Logout: revoked, or an honest message.
        let logout = try sandbox.tokenctl("logout")
        #expect(logout.status == 0, "\(logout)")
        #expect(logout.stderr.contains(persona.logoutWords), "\(logout)")

        // A browser login with the preset. GitHub's code exchange needs the app's secret, and
        // tokenctl refuses a GitHub browser login without one (the persona checks a secret only
        // when "client_secrets" names one, so any will do here).
        let gitHubSecret = ["github", "github-app"].contains(persona.provider) && persona.secret == nil
        let command = try sandbox.start(
            ["login", "--browser", "--no-open"] + presetArguments(persona, server)
                + (gitHubSecret ? ["--client-secret-stdin"] : []),
            stdin: gitHubSecret ? "matrix-app-secret\n" : stdin(persona))
        let stderr = command.waitForStandardError(containing: "redirect_uri=") ?? ""
        let url = stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
            $0.hasPrefix(server.url) && $0.contains("redirect_uri=")
        }
        if let url { _ = try runProgram("/usr/bin/curl", ["-sS", "-L", "--max-time", "10", url]) }
        let browser = command.wait()
        #expect(url != nil && browser.status == 0, "\(browser)")
    }
}

extension Sandbox {
    /// `tokenctl` with an argument array.
    func tokenctl(arguments: [String], stdin: String?) throws -> RunResult {
        try start(arguments, stdin: stdin).wait()
    }
}
