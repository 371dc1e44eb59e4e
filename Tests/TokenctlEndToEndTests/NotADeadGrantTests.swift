import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// Sessions that only a dead grant can end, through the built binary: a refused client is a
/// configuration error (78) whose fix, `login --client-secret-stdin`, keeps the session; an
/// answer that is not the token endpoint's (a proxy's page, a redirect to a captive portal)
/// keeps it too; `unauthorized_client` is "the device flow is off" only where it means that;
/// the hints these failures print run as printed.
@Suite("End to end: only a dead grant ends a session", .serialized)
struct NotADeadGrantTests {
    static var approvals: [String: Any] { ["device_interval": 1, "device_script": ["approve"]] }

    /// The commands a message quotes ('tokenctl …').
    static func quotedCommands(_ text: String) -> [String] {
        text.matches(of: /'(tokenctl [^']+)'/).map { String($0.output.1) }
    }

    /// A device login of a confidential client with `secret`, at `server`.
    static func confidentialLogin(_ sandbox: Sandbox, _ server: AuthServer, secret: String) throws -> RunResult {
        try sandbox.start(
            ["login", "--device", "--issuer", server.url, "--client-id", "cli", "--client-secret-stdin"],
            stdin: secret + "\n"
        ).wait()
    }

    // MARK: Not the server's verdict

    @Test(
        "a proxy's HTML 403 on refresh: 76, the session kept (status still signed in, the item and its refresh token there), the next refresh works"
    )
    func proxyPageKeepsTheSession() throws {
        let server = try AuthServer()
        let sandbox = try Sandbox()
        let refreshToken = try sandbox.loginWithExpiredAccessToken(server)
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        try server.configure([
            "faults": [
                [
                    "status": 403, "content_type": "text/html",
                    "body":
                        "<html><body><h1>Access denied</h1><p>Blocked by the corporate web filter.</p></body></html>",
                ]
            ]
        ])
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 76, "\(result)")
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("not answered by the token endpoint: HTTP 403 (text/html)"), "\(result)")
        #expect(result.stderr.contains("a proxy, a web firewall or a gateway"), "\(result)")
        #expect(result.stderr.contains("The session is kept."), "\(result)")
        #expect(!result.stderr.contains("sign in again") && !result.stderr.contains(refreshToken), "\(result)")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == stored)
        #expect(try sandbox.tokenctl("status").status == 0, "still signed in")
        #expect(try sandbox.tokenctl("token").status == 0, "the next command refreshes with the kept refresh token")
    }

    @Test(
        "a redirect to another host (a captive portal) on refresh: 75, the portal named, the session kept; one on the same host: 76"
    )
    func redirectKeepsTheSession() throws {
        let server = try AuthServer()
        let sandbox = try Sandbox()
        _ = try sandbox.loginWithExpiredAccessToken(server)
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        try server.configure([
            "faults": [
                [
                    "status": 302, "body": "<html>Redirecting</html>", "content_type": "text/html",
                    "headers": ["Location": "http://portal.hotel-wifi.example/login?continue=token"],
                ],
                ["status": 301, "body": "", "headers": ["Location": server.url + "/v2/token"]],
            ]
        ])
        let portal = try sandbox.tokenctl("token")
        #expect(portal.status == 75, "\(portal)")
        #expect(portal.stderr.contains("a redirect to portal.hotel-wifi.example"), "\(portal)")
        #expect(portal.stderr.contains("Sign in to the network"), "\(portal)")
        #expect(portal.stderr.contains("The session is kept."), "\(portal)")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == stored)
        #expect(try sandbox.tokenctl("status").status == 0, "still signed in")
        let moved = try sandbox.tokenctl("token")
        #expect(moved.status == 76, "\(moved)")
        #expect(
            moved.stderr.contains(
                "HTTP 301 (text/plain), a redirect: the token endpoint's address no longer leads to it"), "\(moved)")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == stored)
        #expect(try sandbox.tokenctl("token").status == 0)
    }

    // MARK: A refused client

    struct RefusedClient: Sendable, CustomTestStringConvertible {
        var label: String
        var persona: String?
        /// A fault answering in place of the server's own refusal, when the server's is not the one wanted.
        var faultJSON: String?
        var words: String
        var testDescription: String { label }
    }

    static let refusedClients: [RefusedClient] = [
        RefusedClient(
            label: "Dex: 401 invalid_client",
            faultJSON:
                #"{"status": 401, "body": {"error": "invalid_client", "error_description": "Invalid client credentials."}}"#,
            words: "401 invalid_client: Invalid client credentials."),
        RefusedClient(
            label: "Keycloak: 401 unauthorized_client", persona: "keycloak",
            words: "401 unauthorized_client: Invalid client or Invalid client credentials"),
    ]

    @Test(
        "a rotated client secret on refresh: 78, the session intact; 'login --client-secret-stdin' as printed stores the new one without a sign-in, and the next refresh works",
        arguments: refusedClients)
    func refusedClientKeepsTheSession(_ refused: RefusedClient) throws {
        var settings = Self.approvals
        settings["client_secrets"] = ["cli": "old-secret"]
        if let persona = refused.persona { settings["persona"] = persona }
        let server = try AuthServer(settings)
        let sandbox = try Sandbox()
        let login = try Self.confidentialLogin(sandbox, server, secret: "old-secret")
        #expect(login.status == 0, "\(login)")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)

        // The client's owner rotates the secret.
        try server.configure(["client_secrets": ["cli": "new-secret"]])
        if let faultJSON = refused.faultJSON {
            try server.configure(["faults": [try JSONSerialization.jsonObject(with: Data(faultJSON.utf8))]])
        }
        let refusedRefresh = try sandbox.tokenctl("refresh")
        #expect(refusedRefresh.status == 78, "\(refusedRefresh)")
        #expect(refusedRefresh.stderr.contains(refused.words), "\(refusedRefresh)")
        #expect(refusedRefresh.stderr.contains("The session is kept."), "\(refusedRefresh)")
        #expect(refusedRefresh.stderr.contains("client secret (or key)"), "\(refusedRefresh)")
        #expect(!refusedRefresh.stderr.contains("sign in again"), "\(refusedRefresh)")
        #expect(!refusedRefresh.stderr.contains("old-secret") && !refusedRefresh.stderr.contains(stored))
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == stored)
        #expect(try sandbox.tokenctl("status").status == 0, "still signed in")

        // The hint, as printed, with the new secret on standard input: no new sign-in.
        let hint = try #require(
            Self.quotedCommands(refusedRefresh.stderr).first { $0.hasSuffix("login --client-secret-stdin") },
            "\(refusedRefresh)")
        #expect(hint == "tokenctl login --client-secret-stdin")
        let requestsBefore = try server.log().filter { $0["path"] as? String != "/_test/config" }.count
        let replaced = try sandbox.start(
            hint.split(separator: " ").dropFirst().map(String.init), stdin: "new-secret\n"
        ).wait()
        #expect(replaced.status == 0, "'\(hint)' as printed: \(replaced)")
        #expect(replaced.stderr.contains("its session is kept"), "\(replaced)")
        #expect(
            try server.log().filter { $0["path"] as? String != "/_test/config" }.count == requestsBefore,
            "nothing sent: no device login, no code")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == stored)

        let refreshed = try sandbox.tokenctl("refresh")
        #expect(refreshed.status == 0, "\(refreshed)")
        let last = try #require(try server.tokenRequests().last)
        #expect(last["grant_type"] as? String == "refresh_token" && last["outcome"] as? String == "issued", "\(last)")
        #expect(
            try server.log().filter { $0["path"] as? String == "/device_authorization" }.count == 1,
            "one sign-in only, the first")
        _ = try sandbox.tokenctl("logout", "--forget")
    }

    // MARK: unauthorized_client at the device endpoint

    @Test(
        "Keycloak with the device grant on, answering unauthorized_client (a wrong secret at the device endpoint, then at a poll): 78, the server's words, never GitHub's device-flow text"
    )
    func keycloakUnauthorizedClientIsNotDeviceFlowOff() throws {
        var settings = Self.approvals
        settings["persona"] = "keycloak"
        settings["client_secrets"] = ["cli": "right"]
        let server = try AuthServer(settings)
        let sandbox = try Sandbox()
        let wrongSecret = try Self.confidentialLogin(sandbox, server, secret: "s3cr3t-wr0ng-value")
        #expect(wrongSecret.status == 78, "\(wrongSecret)")
        #expect(
            wrongSecret.stderr.contains("unauthorized_client: Invalid client or Invalid client credentials"),
            "\(wrongSecret)")
        #expect(wrongSecret.stderr.contains("refused the client"), "\(wrongSecret)")
        #expect(!wrongSecret.stderr.contains("device flow is not enabled"), "\(wrongSecret)")
        #expect(!wrongSecret.stderr.contains("Enable Device Flow"), "\(wrongSecret)")
        #expect(!wrongSecret.stderr.contains("s3cr3t-wr0ng-value"), "the secret is never echoed")

        try server.configure(["device_script": ["unauthorized_client"]])
        let atPoll = try Self.confidentialLogin(sandbox, server, secret: "right")
        #expect(atPoll.status == 78, "\(atPoll)")
        #expect(atPoll.stderr.contains("unauthorized_client"), "\(atPoll)")
        #expect(!atPoll.stderr.contains("device flow is not enabled"), "\(atPoll)")
        #expect(!atPoll.stderr.contains("Enable Device Flow"), "\(atPoll)")
        try sandbox.expectNoProfileAndNoSession(issuer: server.url)
    }

    @Test(
        "GitHub Enterprise Server without the device flow (unauthorized_client): the browser hint carries --client-secret-stdin and runs as printed with the secret on stdin; without a secret the browser login is refused before the browser opens"
    )
    func gitHubEnterpriseHintRunsAsPrinted() throws {
        let client = "Ov23liGHESApp"
        let server = try AuthServer(["persona": "github-oauth-app", "device_flow_disabled": "unauthorized_client"])
        let sandbox = try Sandbox()
        for kind in ["session", "client-secret"] {
            _ = try runProgram(
                "/usr/bin/secret-tool", ["clear", "application", "tokenctl", "issuer", server.url, "kind", kind],
                environment: sandbox.variables)
        }
        let device = try sandbox.tokenctl(
            "login", "--provider", "github", "--host", server.url, "--client-id", client, "--device")
        #expect(device.status == 78, "\(device)")
        #expect(device.stderr.contains("the device flow is not enabled for client '\(client)'"), "\(device)")
        #expect(device.stderr.contains("\"Enable Device Flow\""), "\(device)")
        let command = try #require(
            device.stderr.firstMatch(of: /Sign in by browser instead: '([^']+)'\./).map { String($0.output.1) },
            "\(device)")
        #expect(
            command
                == "tokenctl login --browser --provider github --issuer \(server.url) --client-id \(client) --client-secret-stdin"
        )

        // The app's secret, which GitHub needs for the code exchange (the persona checks it at
        // every endpoint, so it is set once the device attempt is over).
        try server.configure(["client_secrets": [client: "gh-app-secret"]])
        let withoutSecret = try sandbox.tokenctl(
            "login", "--browser", "--no-open", "--provider", "github", "--host", server.url, "--client-id", client)
        #expect(withoutSecret.status == 64, "\(withoutSecret)")
        #expect(withoutSecret.stderr.contains("needs the client's secret to sign in by browser"), "\(withoutSecret)")
        #expect(
            Self.quotedCommands(withoutSecret.stderr).contains { $0.hasSuffix("--client-secret-stdin") },
            "\(withoutSecret)")
        #expect(
            !(try server.log().contains { ($0["path"] as? String)?.contains("authorize") == true }),
            "refused before the browser opens")

        // Run as printed, the secret on stdin, with a stand-in browser that follows the URL.
        let bin = sandbox.root + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try "#!/bin/sh\nexec /usr/bin/curl -sS -L --max-time 10 \"$1\" >/dev/null\n".write(
            toFile: bin + "/xdg-open", atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: bin + "/xdg-open")
        let browser = try sandbox.start(
            Array(command.split(separator: " ").dropFirst().map(String.init)), stdin: "gh-app-secret\n",
            extraEnvironment: ["PATH": bin + ":/usr/local/bin:/usr/bin:/bin"]
        ).wait()
        #expect(browser.status == 0, "\(browser)")
        #expect(try sandbox.storedTokenSet(issuer: server.url, clientID: client)?["access_token"] is String)
        #expect(!browser.stderr.contains("gh-app-secret"))
        _ = try sandbox.tokenctl("logout", "--forget")
    }

    // MARK: Entra and Keycloak words

    @Test(
        "Entra AADSTS65001 (consent required) on a narrowed refresh (token --scope): the target refused (64), the session kept and still served"
    )
    func entraConsentRefusesTheTargetOnly() throws {
        let (sandbox, server, refreshToken) = try EntraPersonaTests.signedIn()
        try server.configure(["aadsts_errors": [["code": 65001]]])
        let narrowed = try sandbox.tokenctl("token", "--scope", "openid")
        #expect(narrowed.status == 64, "\(narrowed)")
        #expect(narrowed.stderr.contains("AADSTS65001"), "\(narrowed)")
        #expect(try server.tokenRequests().last?["outcome"] as? String == "AADSTS65001", "the server was asked")
        #expect(narrowed.stderr.contains("The session is kept"), "\(narrowed)")
        #expect(!narrowed.stderr.contains("sign in again"), "\(narrowed)")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == refreshToken)
        #expect(try sandbox.tokenctl("status").status == 0, "still signed in")
        #expect(try sandbox.tokenctl("refresh").status == 0, "the session's own refresh still works")
    }

    @Test("-v shows an Entra error answer's trace_id and correlation_id, never a token")
    func verboseShowsEntraTraceIdentifiers() throws {
        let (sandbox, server, refreshToken) = try EntraPersonaTests.signedIn()
        try server.configure(["aadsts_errors": [["code": 7_000_215]]])
        let result = try sandbox.tokenctl("-v", "refresh")
        #expect(result.status == 78, "\(result)")
        let answer = try #require(try server.tokenRequests().last)
        #expect(answer["outcome"] as? String == "AADSTS7000215", "\(answer)")
        #expect(
            result.stderr.firstMatch(of: /carries trace_id [0-9a-f-]{36}, correlation_id [0-9a-f-]{36}/) != nil,
            "\(result)")
        #expect(!result.stderr.contains(refreshToken))
        let quiet = try sandbox.tokenctl("refresh")
        #expect(!quiet.stderr.contains("carries trace_id"), "only with -v: \(quiet)")
    }

    @Test(
        "Keycloak 'Session not active' on a session that has offline_access: the offline session idled out (Offline Session Idle), a schedule keeps it"
    )
    func keycloakOfflineSessionIdle() throws {
        let server = try AuthServer(["persona": "keycloak"])
        let sandbox = try Sandbox()
        try sandbox.login(server, scope: "openid offline_access")
        let scope = try #require(try sandbox.storedTokenSet(issuer: server.url)?["scope"] as? String)
        #expect(scope.split(separator: " ").contains("offline_access"), "\(scope)")
        try server.configure(["keycloak_errors": ["Session not active"]])
        let result = try sandbox.tokenctl("refresh")
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("Offline Session Idle"), "\(result)")
        #expect(result.stderr.contains("'tokenctl schedule install'"), "\(result)")
        #expect(!result.stderr.contains("or the offline_access scope"), "\(result)")
    }
}
