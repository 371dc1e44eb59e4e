import Foundation
import Testing
import TokenctlTestSupport

/// Microsoft Entra ID as it really behaves (learn.microsoft.com), through the built binary against
/// the test server's `entra` persona: AADSTS codes in `error_codes` and in `error_description`
/// (whose lines end with "\r\n"), in the classes of the "AADSTS: …" rows; the
/// device flow's `message` and `authorization_declined`; rotation without revocation. No
/// `--provider` yet: the classes are read from the answers themselves.
@Suite("End to end: Entra persona", .serialized)
struct EntraPersonaTests {
    /// A sandbox signed in at an `entra` server (the import is one refresh).
    static func signedIn(_ configuration: [String: Any] = [:]) throws -> (Sandbox, AuthServer, String) {
        let server = try AuthServer(["persona": "entra"].merging(configuration) { $1 })
        let sandbox = try Sandbox()
        _ = try sandbox.login(server)
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        return (sandbox, server, stored)
    }

    func outcomes(_ server: AuthServer) throws -> [String] {
        try server.tokenRequests().compactMap { $0["outcome"] as? String }
    }

    @Test(
        "Entra AADSTS90024 on refresh: 75, session kept, retried (learn.microsoft.com); once it passes, the retry succeeds"
    )
    func transientOnRefresh() throws {
        let (sandbox, server, refreshToken) = try Self.signedIn()
        try server.configure(["aadsts_errors": [["code": 90024]]])
        let passing = try sandbox.tokenctl("refresh")
        #expect(passing.status == 0, "\(passing)")
        #expect(try outcomes(server).suffix(2) == ["AADSTS90024", "issued"], "retried after the transient answer")

        let kept = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        #expect(kept != refreshToken)
        try server.configure(["aadsts_errors": Array(repeating: ["code": 90024], count: 50)])
        let before = try server.tokenRequests().count
        let lasting = try sandbox.tokenctl("refresh", "--timeout", "3")
        #expect(lasting.status == 75, "\(lasting)")
        #expect(lasting.stderr.contains("temporarily_unavailable: AADSTS90024: "), "\(lasting)")
        #expect(lasting.stderr.contains("The session is kept"), "\(lasting)")
        #expect(!lasting.stderr.contains("sign in again"), "\(lasting)")
        #expect(try server.tokenRequests().count - before >= 2, "retried with backoff")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == kept)
        #expect(try server.tokenStatus(kept)["active"] as? Bool == true)
    }

    @Test("Entra AADSTS50196 on refresh (loop detection): 75 at once, session kept, the hint says to wait a minute")
    func loopDetectionOnRefresh() throws {
        let (sandbox, server, refreshToken) = try Self.signedIn()
        try server.configure(["aadsts_errors": [["code": 50196]]])
        let before = try server.tokenRequests().count
        let result = try sandbox.tokenctl("refresh")
        #expect(result.status == 75, "\(result)")
        #expect(result.stderr.contains("wait at least a minute"), "\(result)")
        #expect(try server.tokenRequests().count == before + 1, "no retry inside the 60 s backoff")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == refreshToken)
    }

    @Test(
        "Entra AADSTS700082 on refresh: 77 sign in again, the server's words with a space at each line break (learn.microsoft.com)"
    )
    func inactiveRefreshToken() throws {
        let (sandbox, server, _) = try Self.signedIn()
        try server.configure(["aadsts_errors": [["code": 700082]]])
        let result = try sandbox.tokenctl("refresh")
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("invalid_grant: AADSTS700082: The refresh token has expired"), "\(result)")
        #expect(result.stderr.contains("90.00:00:00. Trace ID: "), "\\r\\n shown as a space: \(result)")
        #expect(result.stderr.contains("Run 'tokenctl login' to sign in again."), "\(result)")
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
        let status = try sandbox.tokenctl("status")
        #expect(status.status == 77 && status.stdout.contains("(invalid_grant AADSTS700082)"), "\(status)")
    }

    @Test("Entra AADSTS50076 on refresh (MFA needed): 77, sign in again interactively")
    func interactionNeeded() throws {
        let (sandbox, server, _) = try Self.signedIn()
        try server.configure(["aadsts_errors": [["code": 50076]]])
        let result = try sandbox.tokenctl("refresh")
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("Sign in again interactively: 'tokenctl login'."), "\(result)")
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
    }

    @Test(
        "Entra AADSTS53003 on refresh (Conditional Access): 77, says it is a policy block, asks for no login, keeps the session"
    )
    func conditionalAccess() throws {
        let (sandbox, server, refreshToken) = try Self.signedIn()
        try server.configure(["aadsts_errors": [["code": 53003]]])
        let result = try sandbox.tokenctl("refresh")
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("Conditional Access"), "\(result)")
        #expect(!result.stderr.contains("tokenctl login"), "\(result)")
        #expect(
            try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == refreshToken,
            "the session is kept")
        #expect(try sandbox.tokenctl("refresh").status == 0, "and works once the policy allows it")
    }

    @Test(
        "Entra AADSTS7000218 at login (device poll) and on refresh: 78, no 'sign in again', the session kept (learn.microsoft.com)"
    )
    func publicClientFlowsOff() throws {
        let server = try AuthServer([
            "persona": "entra", "device_interval": 1, "aadsts_errors": [["code": 7_000_218]],
        ])
        let sandbox = try Sandbox()
        let login = try sandbox.tokenctl("login", "--device", "--issuer", server.url, "--client-id", "cli")
        #expect(login.status == 78, "\(login)")
        #expect(login.stderr.contains("enable public client flows"), "\(login)")
        #expect(!login.stderr.lowercased().contains("sign in again"), "\(login)")
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)

        _ = try sandbox.login(server)
        let stored = try sandbox.storedTokenSet(issuer: server.url)
        try server.configure(["aadsts_errors": [["code": 7_000_218]]])
        let refresh = try sandbox.tokenctl("refresh")
        #expect(refresh.status == 78, "\(refresh)")
        #expect(refresh.stderr.contains("The session is kept"), "\(refresh)")
        #expect(!refresh.stderr.lowercased().contains("sign in again"), "\(refresh)")
        #expect(
            try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String
                == stored?["refresh_token"] as? String)
    }

    @Test(
        "Entra AADSTS700025 at the code exchange (browser login with a secret): 78, log in again without --client-secret-stdin"
    )
    func publicClientSentSecret() throws {
        let server = try AuthServer([
            "persona": "entra", "client_secrets": ["cli": "s3cret"], "aadsts_errors": [["code": 700025]],
        ])
        let sandbox = try Sandbox()
        let command = try sandbox.start(
            [
                "login", "--browser", "--no-open", "--issuer", server.url, "--client-id", "cli",
                "--client-secret-stdin",
            ], stdin: "s3cret")
        let stderr = try #require(command.waitForStandardError(containing: "redirect_uri="))
        let url = try #require(
            stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
                $0.hasPrefix(server.url + "/authorize?")
            })
        _ = try runProgram("/usr/bin/curl", ["-sS", "-L", "--max-time", "10", url])
        let result = command.wait()
        #expect(result.status == 78, "\(result)")
        #expect(result.stderr.contains("log in again without --client-secret-stdin"), "\(result)")
        #expect(result.stderr.contains("'tokenctl logout --forget'"), "\(result)")
        #expect(try outcomes(server).last == "AADSTS700025")
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
    }

    @Test(
        "Entra device login: authorization_declined ends the wait like access_denied, message shown (learn.microsoft.com)"
    )
    func deviceDeclined() throws {
        let server = try AuthServer([
            "persona": "entra", "device_interval": 1,
            "device_script": ["authorization_pending", "access_denied"],
        ])
        let sandbox = try Sandbox()
        let result = try sandbox.tokenctl("login", "--device", "--issuer", server.url, "--client-id", "cli")
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("The server says: To sign in, use a web browser to open the page"), "\(result)")
        #expect(result.stderr.contains(server.url + "/devicelogin"), "\(result)")
        #expect(result.stderr.contains("the sign-in was denied on the verification page"), "\(result)")
        let polls = try server.tokenRequests().compactMap { $0["outcome"] as? String }
        #expect(polls == ["authorization_pending", "authorization_declined"], "\(polls)")
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
    }

    @Test(
        "Entra at a tenant's own issuer (ISSUER/GUID/v2.0): device login with tid in the ID token; a refresh rotates without revoking the old refresh token"
    )
    func tenantIssuer() throws {
        let tenant = "3f2504e0-4f89-11d3-9a0c-0305e82c3301"
        let server = try AuthServer([
            "persona": "entra", "entra_tenant": tenant, "device_interval": 1, "device_script": ["approve"],
        ])
        let issuer = server.url + "/\(tenant)/v2.0"
        let sandbox = try Sandbox()
        for kind in ["session", "client-secret"] {
            _ = try runProgram(
                "/usr/bin/secret-tool", ["clear", "application", "tokenctl", "issuer", issuer, "kind", kind],
                environment: sandbox.variables)
        }
        let login = try sandbox.tokenctl("login", "--device", "--issuer", issuer, "--client-id", "cli")
        #expect(login.status == 0, "\(login)")
        #expect(!login.stderr.contains("Or open this link"), "no verification_uri_complete: \(login)")
        let first = try #require(try sandbox.storedTokenSet(issuer: issuer)?["refresh_token"] as? String)
        #expect(try sandbox.tokenctl("refresh").status == 0)
        let second = try #require(try sandbox.storedTokenSet(issuer: issuer)?["refresh_token"] as? String)
        #expect(second != first, "rotated")
        #expect(try server.tokenStatus(first)["active"] as? Bool == true, "the old one is not revoked")
        let logout = try sandbox.tokenctl("logout")
        #expect(logout.status == 0, "no revocation endpoint: logged out here: \(logout)")
    }

    @Test(
        "Entra multi-tenant (/common): discovery's {tenantid} issuer is accepted with --provider entra only, and the ID token's iss must be the template with its tid (learn.microsoft.com)"
    )
    func commonTenant() throws {
        let server = try AuthServer([
            "persona": "entra", "entra_tenant": "common", "device_interval": 1,
            "device_script": ["approve", "approve", "approve"],
        ])
        let issuer = server.url + "/common/v2.0"
        let sandbox = try Sandbox()
        for kind in ["session", "client-secret"] {
            _ = try runProgram(
                "/usr/bin/secret-tool", ["clear", "application", "tokenctl", "issuer", issuer, "kind", kind],
                environment: sandbox.variables)
        }
        let plain = try sandbox.tokenctl("login", "--device", "--issuer", issuer, "--client-id", "cli")
        #expect(plain.status == 78, "without the preset the match stays exact: \(plain)")

        let login = try sandbox.tokenctl(
            "login", "--device", "--provider", "entra", "--issuer", issuer, "--client-id", "cli")
        #expect(login.status == 0, "\(login)")
        #expect(try sandbox.tokenctl("refresh").status == 0, "the refreshed ID token's iss is checked the same way")

        try server.configure(["id_token_claims": ["tid": "11111111-2222-3333-4444-555555555555"]])
        let other = try sandbox.tokenctl(
            "login", "--device", "--provider", "entra", "--issuer", issuer, "--client-id", "cli")
        #expect(other.status == 77, "iss names another tenant than tid: \(other)")
        #expect(other.stderr.contains("{tenantid}"), "\(other)")
    }

    @Test(
        "429 during device polling raises the interval and honours Retry-After (no OAuth body, as Okta and Auth0 send it: developer.okta.com)"
    )
    func rateLimitedDevicePolling() throws {
        let server = try AuthServer([
            "persona": "entra", "device_interval": 1, "device_script": ["authorization_pending", "approve"],
            "faults": [["status": 429, "body": "", "headers": ["Retry-After": "10"]]],
        ])
        let sandbox = try Sandbox()
        let result = try sandbox.tokenctl("login", "--device", "--issuer", server.url, "--client-id", "cli")
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("The server asked to poll more slowly (every 10 s)."), "\(result)")
        let polls = try server.tokenRequests()
        #expect(
            polls.compactMap { $0["outcome"] as? String } == ["fault", "authorization_pending", "issued"], "\(polls)")
        let times = polls.compactMap { $0["received"] as? Double }
        // After the 429: its Retry-After (10 s, more than the raised interval); then the interval
        // raised by 5 s (1 + 5, and a margin), not the 1 s the device answer asked for.
        #expect(times.count == 3 && times[1] - times[0] >= 10 && times[2] - times[1] >= 6, "\(times)")
    }
}
