import Foundation
import Testing
import TokenctlTestSupport

/// What is piped to `login --refresh-token-stdin`, built around a real, valid refresh token so
/// that a parser too lenient to reject it would log in (and the test would notice).
enum BadStdin: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case empty, newlineOnly, whitespaceOnly, embeddedSpace, embeddedTab, controlCharacter, nulByte, twoLines

    func text(around token: String) -> String {
        let middle = token.index(token.startIndex, offsetBy: token.count / 2)
        let (head, tail) = (String(token[..<middle]), String(token[middle...]))
        switch self {
        case .empty: return ""
        case .newlineOnly: return "\n"
        case .whitespaceOnly: return "  \t  \n"
        case .embeddedSpace: return head + " " + tail + "\n"
        case .embeddedTab: return head + "\t" + tail
        case .controlCharacter: return head + "\u{1B}" + tail + "\n"
        case .nulByte: return token + "\u{0}"
        case .twoLines: return token + "\n" + "rt_second_line\n"
        }
    }

    var testDescription: String { rawValue }
}

/// The next /token answer during login, as a fault for the test server, and what the error must say.
struct BadTokenResponse: Sendable, CustomTestStringConvertible {
    let label: String
    let faultJSON: String
    let mentioning: String
    /// The exit status of a login it answers, when not the usual one (77, or 76 for a 200).
    var loginStatus: Int32? = nil

    var testDescription: String { label }

    var fault: [String: Any] {
        get throws {
            guard let object = try JSONSerialization.jsonObject(with: Data(faultJSON.utf8)) as? [String: Any] else {
                throw HarnessError("bad fault JSON: \(faultJSON)")
            }
            return object
        }
    }
}

/// A hand-written profile file and what `tokenctl token` must say about it.
struct BrokenProfile: Sendable, CustomTestStringConvertible {
    let label: String
    let text: String
    /// The line at fault, when there is one.
    let line: Int?
    let mentioning: String

    var testDescription: String { label }
}

/// Bad input gets a clear error and loses nothing.
@Suite("End to end: bad input")
struct BadInputTests {
    // MARK: The refresh token on stdin

    @Test("a bad refresh token on stdin: exit 64, nothing created, nothing sent", arguments: BadStdin.allCases)
    func badRefreshTokenOnStdin(_ input: BadStdin) throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let refreshToken = try server.issue()
        let result = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin",
            stdin: input.text(around: refreshToken))
        #expect(result.status == 64, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.hasPrefix("Error: "), "\(result)")
        #expect(result.stderr.contains("standard input"), "\(result)")
        #expect(!result.stderr.contains(refreshToken), "the token is never echoed")
        try sandbox.expectNoProfileAndNoSession(issuer: server.url)
        #expect(try server.tokenRequests().isEmpty, "nothing was sent to the token endpoint")
        #expect((try server.tokenStatus(refreshToken)["active"] as? Bool) == true)
    }

    @Test("a refresh token with a CRLF line ending is accepted")
    func crlfLineEnding() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let refreshToken = try server.issue()
        let result = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", stdin: refreshToken + "\r\n"
        )
        #expect(result.status == 0, "\(result)")
        #expect(try server.tokenRequests().first?["refresh_token"] as? String == refreshToken)
    }

    // MARK: The token endpoint's answer during login

    static let badResponses: [BadTokenResponse] = [
        BadTokenResponse(
            label: "200 with a body that is not JSON",
            faultJSON: #"{"status": 200, "body": "access_token=at_x&token_type=bearer", "content_type": "text/plain"}"#,
            mentioning: "not a JSON object"),
        BadTokenResponse(
            label: "200 with an HTML page",
            faultJSON:
                #"{"status": 200, "body": "<!doctype html><html><body>Sign in</body></html>", "content_type": "text/html"}"#,
            mentioning: "not a JSON object"),
        BadTokenResponse(
            label: "200 with a JSON array",
            faultJSON: #"{"status": 200, "body": [{"access_token": "at_x"}]}"#,
            mentioning: "not a JSON object"),
        BadTokenResponse(
            label: "200 without access_token",
            faultJSON:
                #"{"status": 200, "body": {"token_type": "Bearer", "expires_in": 3600, "refresh_token": "rt_new"}}"#,
            mentioning: "no access_token"),
        BadTokenResponse(
            label: "200 with an empty access_token",
            faultJSON: #"{"status": 200, "body": {"access_token": "", "token_type": "Bearer", "expires_in": 3600}}"#,
            mentioning: "empty access_token"),
        BadTokenResponse(
            label: "200 with an access_token containing a space",
            faultJSON:
                #"{"status": 200, "body": {"access_token": "at_abc def", "token_type": "Bearer", "expires_in": 3600}}"#,
            mentioning: "access_token contains whitespace or control characters"),
        BadTokenResponse(
            label: "200 with a refresh_token containing a newline",
            faultJSON:
                #"{"status": 200, "body": {"access_token": "at_ok", "token_type": "Bearer", "refresh_token": "rt_a\nb"}}"#,
            mentioning: "refresh_token contains whitespace or control characters"),
        BadTokenResponse(
            label: "200 with token_type mac",
            faultJSON: #"{"status": 200, "body": {"access_token": "at_ok", "token_type": "mac", "expires_in": 3600}}"#,
            mentioning: "'mac' token"),
        BadTokenResponse(
            label: "200 with a non-numeric expires_in",
            faultJSON:
                #"{"status": 200, "body": {"access_token": "at_ok", "token_type": "Bearer", "expires_in": "soon"}}"#,
            mentioning: "invalid expires_in"),
        BadTokenResponse(
            label: "400 invalid_grant",
            faultJSON:
                #"{"status": 400, "body": {"error": "invalid_grant", "error_description": "refresh token is invalid or revoked"}}"#,
            mentioning: "400 invalid_grant: refresh token is invalid or revoked"),
        BadTokenResponse(
            label: "401 invalid_client (a refused client: 78)",
            faultJSON: #"{"status": 401, "body": {"error": "invalid_client"}}"#,
            mentioning: "401 invalid_client", loginStatus: 78),
        BadTokenResponse(
            label: "400 with an empty body",
            faultJSON: #"{"status": 400, "body": ""}"#,
            mentioning: "HTTP 400"),
        BadTokenResponse(
            label: "403 HTML page (not the server's verdict: 76)",
            faultJSON: #"{"status": 403, "body": "<html>Forbidden</html>", "content_type": "text/html"}"#,
            mentioning: "HTTP 403 (text/html)", loginStatus: 76),
    ]

    @Test(
        "login: a refusing token endpoint → 77 (a refused client 78), an unusable 200 without an error or a page not from the server → 76, the problem named, nothing stored",
        arguments: badResponses)
    func loginRejected(_ response: BadTokenResponse) throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["faults": [try response.fault]])
        let refreshToken = try server.issue()
        let result = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", "--timeout", "20",
            stdin: refreshToken)
        // A 2xx without an error is the server breaking the protocol (76), not a refusal.
        let unusable = response.faultJSON.contains(#""status": 200"#)
        #expect(result.status == response.loginStatus ?? (unusable ? 76 : 77), "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.hasPrefix("Error: "), "\(result)")
        #expect(result.stderr.contains(response.mentioning), "\(result)")
        #expect(result.stderr.contains("Nothing was stored"), "\(result)")
        #expect(!result.stderr.contains(refreshToken), "the token is never echoed")
        try sandbox.expectNoProfileAndNoSession(issuer: server.url)
        #expect(try server.tokenRequests().count == 1, "a terminal answer is not retried")
    }

    static let transientFaults: [BadTokenResponse] = [
        BadTokenResponse(
            label: "503 three times", faultJSON: #"{"status": 503, "body": "", "count": 3}"#, mentioning: ""),
        BadTokenResponse(
            label: "502 HTML twice",
            faultJSON: #"{"status": 502, "body": "<html>Bad Gateway</html>", "content_type": "text/html", "count": 2}"#,
            mentioning: ""),
        BadTokenResponse(
            label: "429 with Retry-After: 1",
            faultJSON: #"{"status": 429, "body": {"error": "slow_down"}, "headers": {"Retry-After": "1"}}"#,
            mentioning: ""),
        BadTokenResponse(label: "connection closed twice", faultJSON: #"{"close": true, "count": 2}"#, mentioning: ""),
    ]

    @Test("login retries transient failures of the token endpoint and then succeeds", arguments: transientFaults)
    func loginRetries(_ response: BadTokenResponse) throws {
        let sandbox = try Sandbox()
        let fault = try response.fault
        let server = try AuthServer(["faults": [fault]])
        let refreshToken = try server.issue()
        let result = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", "--timeout", "20",
            stdin: refreshToken)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        let requests = try server.tokenRequests()
        let faults = (fault["count"] as? Int) ?? 1
        #expect(requests.count == faults + 1, "\(requests)")
        #expect(requests.last?["outcome"] as? String == "issued")
        #expect(
            requests.allSatisfy { $0["refresh_token"] as? String == refreshToken }, "every retry sends the same token")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        #expect(stored["refresh_token"] is String)
        #expect(sandbox.profileFileExists())
        #expect(try sandbox.tokenctl("token").stdout == (stored["access_token"] as? String ?? "?") + "\n")
    }

    @Test("login: a token endpoint that never answers → 75 when --timeout runs out, nothing stored")
    func loginTimesOut() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["faults": [["hang": 30]]])
        let refreshToken = try server.issue()
        // --timeout bounds the whole exchange, so a broken build cannot hang the suite.
        let result = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", "--timeout", "2",
            stdin: refreshToken)
        #expect(result.status == 75, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.hasPrefix("Error: "), "\(result)")
        #expect(result.stderr.contains("Nothing was stored"), "\(result)")
        try sandbox.expectNoProfileAndNoSession(issuer: server.url)
        #expect((try server.tokenStatus(refreshToken)["active"] as? Bool) == true, "the token was never used")
    }

    @Test("a failed re-login keeps the existing session and profile")
    func failedReloginKeepsSession() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let before = try #require(try sandbox.storedTokenSet(issuer: server.url))
        let profileBefore = try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8)

        // Empty stdin.
        let empty = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", stdin: "")
        #expect(empty.status == 64, "\(empty)")
        // A new token the server refuses.
        let refusal: [String: Any] = ["status": 400, "body": ["error": "invalid_grant"]]
        try server.configure(["faults": [refusal]])
        let refused = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", stdin: try server.issue())
        #expect(refused.status == 77, "\(refused)")

        #expect(sameTokenSet(before, try sandbox.storedTokenSet(issuer: server.url)), "the stored session is unchanged")
        #expect(try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8) == profileBefore)
        let token = try sandbox.tokenctl("token")
        #expect(token.status == 0, "\(token)")
        #expect(token.stdout == (before["access_token"] as? String ?? "?") + "\n")
    }

    @Test("--timeout also bounds the wait for a profile another process holds: 75, the session kept")
    func busyProfileTimesOut() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let before = try #require(try sandbox.storedTokenSet(issuer: server.url))

        // Another process holds the profile's refresh lock (flock on $TOKENCTL_RUNTIME_DIR/tokenctl/default.lock).
        let holder = try ProfileLockHolder(sandbox, seconds: 15)
        defer { holder.release() }
        holder.waitUntilHolding()
        try #require(holder.isHolding, "the lock holder did not start")

        let token = try sandbox.tokenctl("token", "--force", "--timeout", "1")
        #expect(token.status == 75, "\(token)")
        #expect(token.stdout.isEmpty, "\(token)")
        #expect(token.stderr.contains("another tokenctl process"), "\(token)")

        let relogin = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", "--timeout", "1",
            stdin: try server.issue())
        #expect(relogin.status == 75, "login must give up on the lock within --timeout: \(relogin)")
        #expect(relogin.stderr.contains("another tokenctl process"), "\(relogin)")

        #expect(sameTokenSet(before, try sandbox.storedTokenSet(issuer: server.url)), "the stored session is unchanged")
    }

    // MARK: Malformed configuration

    static let brokenProfiles: [BrokenProfile] = [
        BrokenProfile(
            label: "an unknown key",
            text: "# hand-written\nissuer = https://issuer.example\nclient_id = cli\ncolour = blue\n",
            line: 4, mentioning: "unknown key 'colour'"),
        BrokenProfile(
            label: "a misspelled key",
            text: "issuer = https://issuer.example\nclient-id = cli\n",
            line: 2, mentioning: "did you mean 'client_id'?"),
        BrokenProfile(
            label: "a line without '='",
            text: "issuer = https://issuer.example\n\nclient_id cli\n",
            line: 3, mentioning: "expected 'key = value'"),
        BrokenProfile(
            label: "a key set twice",
            text: "issuer = https://issuer.example\nclient_id = cli\nclient_id = other\n",
            line: 3, mentioning: "'client_id' is set twice"),
        BrokenProfile(
            label: "no issuer",
            text: "client_id = cli\n",
            line: nil, mentioning: "'issuer' is missing"),
        BrokenProfile(
            label: "no client_id",
            text: "issuer = https://issuer.example\n",
            line: nil, mentioning: "'client_id' is missing"),
        BrokenProfile(
            label: "a plain http issuer to a remote host",
            text: "issuer = http://example.com\nclient_id = cli\n",
            line: 1, mentioning: "plain http://"),
        BrokenProfile(
            label: "a plain http token endpoint to a remote host",
            text: "issuer = https://issuer.example\nclient_id = cli\ntoken_endpoint = http://example.com/token\n",
            line: 3, mentioning: "token_endpoint"),
    ]

    @Test("a malformed profile file → 78 naming the file and line", arguments: brokenProfiles)
    func malformedProfile(_ profile: BrokenProfile) throws {
        let sandbox = try Sandbox()
        let path = sandbox.profileFile()
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        try profile.text.write(toFile: path, atomically: true, encoding: .utf8)

        for command in ["token", "refresh", "status"] {
            let result = try sandbox.tokenctl(command)
            #expect(result.status == 78, "\(command): \(result)")
            #expect(result.stdout.isEmpty, "\(command): \(result)")
            #expect(result.stderr.hasPrefix("Error: "), "\(command): \(result)")
            if let line = profile.line {
                #expect(result.stderr.contains("\(path):\(line):"), "\(command): \(result)")
            } else {
                #expect(result.stderr.contains(path), "\(command): \(result)")
            }
            #expect(result.stderr.contains(profile.mentioning), "\(command): \(result)")
        }
        #expect(
            try String(contentsOfFile: path, encoding: .utf8) == profile.text, "a hand-written file is never rewritten")
    }

    @Test("a never-configured profile → 78 with a hint to log in", arguments: ["token", "refresh", "status", "logout"])
    func neverConfigured(_ command: String) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.tokenctl("--profile", "work", command)
        #expect(result.status == 78, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.hasPrefix("Error: "), "\(result)")
        #expect(result.stderr.contains("profile 'work' is not configured"), "\(result)")
        #expect(result.stderr.contains(sandbox.profileFile("work")), "\(result)")
        #expect(result.stderr.contains("tokenctl --profile work login"), "\(result)")
        #expect(!sandbox.profileFileExists("work"))
    }

    // MARK: Issuer discovery

    @Test("no OpenID Connect discovery: login falls back to RFC 8414 metadata")
    func rfc8414Fallback() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["discovery_oidc": false])
        try sandbox.login(server)
        let discovery = try server.log().filter { ($0["path"] as? String)?.hasPrefix("/.well-known/") == true }
        #expect(
            discovery.map { $0["path"] as? String } == [
                "/.well-known/openid-configuration", "/.well-known/oauth-authorization-server",
            ])
        #expect(discovery.map { $0["status"] as? Int } == [404, 200])
        let profile = try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8)
        #expect(profile.contains("token_endpoint = \(server.url)/token"), "\(profile)")
        #expect(profile.contains("revocation_endpoint = \(server.url)/revoke"), "\(profile)")
        #expect(try sandbox.tokenctl("token", "--force").status == 0)
    }

    @Test("a discovery document naming another issuer → 78, nothing stored, nothing sent")
    func issuerMismatch() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["discovery_issuer_override": "https://evil.example"])
        let refreshToken = try server.issue()
        let result = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", "--timeout", "20",
            stdin: refreshToken)
        #expect(result.status == 78, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.hasPrefix("Error: "), "\(result)")
        #expect(result.stderr.contains("names issuer 'https://evil.example', not '\(server.url)'"), "\(result)")
        try sandbox.expectNoProfileAndNoSession(issuer: server.url)
        #expect(try server.tokenRequests().isEmpty, "the token is never sent to an endpoint from a mismatched document")
        #expect((try server.tokenStatus(refreshToken)["active"] as? Bool) == true)
    }

    @Test("an issuer with no discovery document at all → 78 suggesting --token-endpoint, nothing stored")
    func noDiscoveryDocument() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let issuer = server.url + "/tenant-without-metadata"
        let result = try sandbox.tokenctl(
            "login", "--issuer", issuer, "--client-id", "cli", "--refresh-token-stdin", "--timeout", "20",
            stdin: try server.issue())
        #expect(result.status == 78, "\(result)")
        #expect(result.stderr.contains("no discovery document"), "\(result)")
        #expect(result.stderr.contains("--token-endpoint"), "\(result)")
        try sandbox.expectNoProfileAndNoSession(issuer: issuer)
        #expect(try server.tokenRequests().isEmpty)
    }

    @Test("an issuer where nothing listens → 75, nothing stored")
    func unreachableIssuer() throws {
        let sandbox = try Sandbox()
        let issuer = "http://127.0.0.1:9"
        let result = try sandbox.tokenctl(
            "login", "--issuer", issuer, "--client-id", "cli", "--refresh-token-stdin", "--timeout", "5",
            stdin: "rt_unreachable")
        #expect(result.status == 75, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.hasPrefix("Error: "), "\(result)")
        #expect(result.stderr.contains(issuer), "\(result)")
        try sandbox.expectNoProfileAndNoSession(issuer: issuer)
    }
}
