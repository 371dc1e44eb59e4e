import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// Every row of the failure-class table, against the real binary, keyring and HTTP server.
/// Faults are injected by the test server (a real server cannot fail on demand).
@Suite("End to end: refresh failure classes")
struct RefreshFailureTests {
    /// A logged-in sandbox whose access token is stale, so the next `token` refreshes.
    static func staleSession(_ server: AuthServer) throws -> (Sandbox, String) {
        let sandbox = try Sandbox()
        try sandbox.loginWithExpiredAccessToken(server)
        let refreshToken = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        return (sandbox, refreshToken)
    }

    @Test(
        "fake server: 500/502/503/504 are transient: retried, and a later success is used",
        arguments: [500, 502, 503, 504])
    func serverErrorsAreRetried(status: Int) throws {
        let server = try AuthServer()
        let (sandbox, _) = try Self.staleSession(server)
        try server.configure([
            "faults": [["status": status, "body": "<html>oops</html>", "content_type": "text/html", "count": 2]]
        ])
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 0, "\(result)")
        #expect(try server.tokenRequests().filter { ($0["outcome"] as? String) == "fault" }.count == 2)
        #expect(
            result.stdout == (try sandbox.storedTokenSet(issuer: server.url)?["access_token"] as? String ?? "?") + "\n")
    }

    @Test("fake server: a persistent 503 exits 75 within --timeout and keeps the session")
    func persistentServerErrorKeepsSession() throws {
        let server = try AuthServer()
        let (sandbox, refreshToken) = try Self.staleSession(server)
        try server.configure(["faults": [["status": 503, "count": 1000]]])
        let result = try sandbox.tokenctl("token", "--timeout", "3")
        #expect(result.status == 75, "\(result)")
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("kept"))
        #expect(try server.tokenRequests().count >= 3, "retried with backoff")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == refreshToken)
        #expect(try sandbox.tokenctl("status").status == 0, "still signed in (expired-refreshable)")
    }

    @Test("fake server: 429 with Retry-After in seconds is honoured")
    func retryAfterSeconds() throws {
        let server = try AuthServer()
        let (sandbox, _) = try Self.staleSession(server)
        try server.configure(["faults": [["status": 429, "headers": ["Retry-After": "2"]]]])
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 0, "\(result)")
        let times = try server.tokenRequests().suffix(2).compactMap { $0["time"] as? Double }
        #expect(times.count == 2 && times[1] - times[0] >= 1.9, "waited for Retry-After: \(times)")
    }

    @Test("fake server: 429 with Retry-After as an HTTP-date is honoured")
    func retryAfterDate() throws {
        let server = try AuthServer()
        let (sandbox, _) = try Self.staleSession(server)
        let date = DateFormatter()
        date.locale = Locale(identifier: "en_US_POSIX")
        date.timeZone = TimeZone(identifier: "GMT")
        date.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let retryAt = date.string(from: Date().addingTimeInterval(3))
        try server.configure(["faults": [["status": 429, "headers": ["Retry-After": retryAt]]]])
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 0, "\(result)")
        let times = try server.tokenRequests().suffix(2).compactMap { $0["time"] as? Double }
        #expect(times.count == 2 && times[1] - times[0] >= 1.0, "waited until the date: \(times)")
    }

    @Test("fake server: a Retry-After beyond the deadline gives up at once with 75")
    func retryAfterBeyondDeadline() throws {
        let server = try AuthServer()
        let (sandbox, refreshToken) = try Self.staleSession(server)
        try server.configure(["faults": [["status": 429, "headers": ["Retry-After": "3600"]]]])
        let result = try sandbox.tokenctl("token", "--timeout", "5")
        #expect(result.status == 75, "\(result)")
        #expect(try server.tokenRequests().filter { ($0["outcome"] as? String) == "fault" }.count == 1)
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == refreshToken)
    }

    @Test("fake server: a hung server hits the deadline: 75, session kept")
    func hungServer() throws {
        let server = try AuthServer()
        let (sandbox, refreshToken) = try Self.staleSession(server)
        try server.configure(["faults": [["hang": 30, "count": 10]]])
        let started = now()
        let result = try sandbox.tokenctl("token", "--timeout", "2")
        #expect(result.status == 75, "\(result)")
        #expect(now() - started < 25, "did not wait for the hung server")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == refreshToken)
    }

    @Test("fake server: a connection closed without an answer is transient")
    func connectionClosed() throws {
        let server = try AuthServer()
        let (sandbox, refreshToken) = try Self.staleSession(server)
        try server.configure(["faults": [["close": true, "count": 1000]]])
        let result = try sandbox.tokenctl("token", "--timeout", "2")
        #expect(result.status == 75, "\(result)")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == refreshToken)
    }

    @Test("no server listening (connection refused) is transient")
    func connectionRefused() throws {
        var sandboxAndToken: (Sandbox, String)?
        var url = ""
        do {
            let server = try AuthServer()
            sandboxAndToken = try Self.staleSession(server)
            url = server.url
        } // the server is stopped here
        let (sandbox, refreshToken) = try #require(sandboxAndToken)
        let result = try sandbox.tokenctl("token", "--timeout", "2")
        #expect(result.status == 75, "\(result)")
        #expect(try sandbox.storedTokenSet(issuer: url)?["refresh_token"] as? String == refreshToken)
    }

    @Test("invalid_grant (the real server's reuse protection) is terminal: 77, session cleared, no loop")
    func invalidGrantEndsSession() throws {
        let server = try AuthServer()
        let (sandbox, refreshToken) = try Self.staleSession(server)
        // Spend the stored refresh token behind tokenctl's back: the server now sees a replay.
        _ = try runProgram(
            "/usr/bin/curl",
            ["-s", "-d", "grant_type=refresh_token&client_id=cli&refresh_token=\(refreshToken)", server.url + "/token"])
        let requests = try server.tokenRequests().count
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("invalid_grant"))
        #expect(result.stderr.contains("login"))
        #expect(try server.tokenRequests().count == requests + 1, "one request, no retry loop")
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
        #expect(try sandbox.tokenctl("token").status == 77)
    }

    @Test(
        "fake server: an answer of the server without a usable OAuth error (an empty 400 or 401, a 404 with JSON) is terminal",
        arguments: [
            ["status": 401, "body": ""],
            ["status": 400, "body": ""],
            ["status": 404, "body": "{\"message\":\"no such refresh token\"}", "content_type": "application/json"],
        ] as [[String: any Sendable]])
    func unexpectedAnswersAreTerminal(fault: [String: any Sendable]) throws {
        let server = try AuthServer()
        let (sandbox, _) = try Self.staleSession(server)
        try server.configure(["faults": [fault]])
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 77, "\(result)")
        #expect(result.stdout.isEmpty)
        #expect(!result.stderr.contains("has space"), "no token material in messages")
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
    }

    @Test(
        "fake server: a 200 with neither an access token nor an error (an HTML page, an empty object) is a protocol error: 76, the session kept",
        arguments: [
            ["status": 200, "body": "<html>login page</html>", "content_type": "text/html"],
            ["status": 200, "body": "{\"token_type\":\"bearer\"}", "content_type": "application/json"],
        ] as [[String: any Sendable]])
    func answersWithoutTokenOrErrorKeepTheSession(fault: [String: any Sendable]) throws {
        let server = try AuthServer()
        let (sandbox, refreshToken) = try Self.staleSession(server)
        try server.configure(["faults": [fault]])
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 76, "\(result)")
        #expect(result.stdout.isEmpty)
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == refreshToken)
        #expect(try sandbox.tokenctl("token").status == 0, "the next command refreshes with the kept refresh token")
    }

    /// The access tokens that a refresh answer may carry and tokenctl
    /// refuses (a null removes the member): each must leave the rotated refresh token kept.
    static let unusableAccessTokens: [[String: any Sendable]] = [
        ["access_token": "at with spaces"], ["access_token": "at_x\r\nX-Injected: 1"], ["access_token": ""],
        ["access_token": 42],
        ["access_token": String(repeating: "a", count: 70_000)], ["access_token": NSNull()],
    ]

    @Test(
        "a rotated refresh token with an unusable access token on a one-use server: session kept, 76, the next token refreshes with the rotated token, no reuse",
        arguments: unusableAccessTokens)
    func unusableAccessTokenKeepsRotatedRefreshToken(override: [String: any Sendable]) throws {
        let server = try AuthServer() // one-use refresh tokens, no grace period
        let (sandbox, refreshToken) = try Self.staleSession(server)
        try server.configure(["refresh_answer_overrides": [override]])
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 76, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(
            result.stderr.hasPrefix(
                "Error: the server's answer to the refresh of profile 'default' is unusable: the token endpoint"),
            "\(result)")
        #expect(
            result.stderr.contains(
                "tokenctl kept the new one without this answer's access token: the session is kept, and the next command refreshes again."
            ), "\(result)")
        #expect(
            !result.stderr.contains("X-Injected") && !result.stderr.contains("at with spaces")
                && !result.stderr.contains("aaaa"), "no token material in messages")
        #expect(try server.tokenRequests().last?["overridden"] as? [String] == ["access_token"])
        let rotated = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        #expect(rotated != refreshToken, "the rotated refresh token is stored")
        #expect(try server.tokenStatus(rotated)["active"] as? Bool == true)
        #expect(try sandbox.tokenctl("status").stdout.contains("expired"), "no usable access token is stored")

        let next = try sandbox.tokenctl("token")
        #expect(next.status == 0, "\(next)")
        let requests = try server.tokenRequests()
        #expect(requests.last?["refresh_token"] as? String == rotated, "the next refresh spends the rotated token")
        #expect(requests.last?["outcome"] as? String == "issued")
        #expect(try server.stats()["reuse_detected"] == 0)
        #expect(
            next.stdout == (try sandbox.storedTokenSet(issuer: server.url)?["access_token"] as? String ?? "?") + "\n")
    }

    @Test(
        "refresh (forced) of a fresh, hot-cached session answered with an unusable access token: 76, and the next token refreshes instead of serving the old one"
    )
    func unusableAccessTokenOnForcedRefresh() throws {
        let server = try AuthServer()
        let sandbox = try Sandbox()
        try sandbox.login(server)
        let old = try sandbox.tokenctl("token") // now in the hot cache too
        #expect(old.status == 0, "\(old)")
        try server.configure(["refresh_answer_overrides": [["access_token": "at with spaces"]]])
        let refresh = try sandbox.tokenctl("refresh")
        #expect(refresh.status == 76, "\(refresh)")
        let rotated = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        let next = try sandbox.tokenctl("token")
        #expect(next.status == 0, "\(next)")
        #expect(next.stdout != old.stdout, "the access token the refresh replaced is not served again")
        #expect(try server.tokenRequests().last?["refresh_token"] as? String == rotated)
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test(
        "refresh --all: a profile answered with an unusable access token is reported as an unusable answer, and the exit status is 76"
    )
    func unusableAccessTokenInRefreshAll() throws {
        let server = try AuthServer()
        let sandbox = try Sandbox()
        try sandbox.login(server, profile: "one")
        try sandbox.login(server, profile: "two")
        try server.configure(["refresh_answer_overrides": [["access_token": ""]]])
        let result = try sandbox.tokenctl("refresh", "--all")
        #expect(result.status == 76, "\(result)")
        #expect(
            result.stderr.components(separatedBy: ": unusable answer: the server's answer to the refresh of profile")
                .count == 2, "\(result)")
        #expect(try sandbox.tokenctl("refresh", "--all").status == 0, "both sessions go on")
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test(
        "an answer with neither a usable access token nor a refresh token (a non-rotating server): the session is kept, 76",
        arguments: [
            ["status": 200, "body": "{\"token_type\":\"Bearer\"}", "content_type": "application/json"],
            [
                "status": 200, "body": "{\"access_token\":\"has space\",\"token_type\":\"Bearer\"}",
                "content_type": "application/json",
            ],
        ] as [[String: any Sendable]])
    func unusableAccessTokenWithoutRefreshToken(fault: [String: any Sendable]) throws {
        let server = try AuthServer(["rotate": false])
        let (sandbox, refreshToken) = try Self.staleSession(server)
        try server.configure(["faults": [fault]])
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 76, "\(result)")
        #expect(result.stderr.contains("no new refresh token, so the stored one is kept"), "\(result)")
        #expect(!result.stderr.contains("has space"), "no token material in messages")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == refreshToken)
        #expect(try sandbox.tokenctl("token").status == 0)
    }

    @Test(
        "an unusable refresh token in the answer: nothing of it is stored, the session is left as it was, 76 saying it may be lost"
    )
    func unusableRefreshToken() throws {
        let server = try AuthServer()
        let (sandbox, refreshToken) = try Self.staleSession(server)
        try server.configure(["refresh_answer_overrides": [["refresh_token": "rt with spaces"]]])
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 76, "\(result)")
        #expect(result.stderr.contains("refresh_token contains whitespace or control characters"), "\(result)")
        #expect(
            result.stderr.contains(
                "if the server rotated its refresh token, the session is lost and the next command will say so"),
            "\(result)")
        #expect(!result.stderr.contains("rt with spaces"))
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == refreshToken)
        // This server did rotate: the next refresh says the session ended.
        #expect(try sandbox.tokenctl("token").status == 77)
    }

    @Test("fake server: compare-and-delete — a terminal answer does not delete a set another writer stored meanwhile")
    func compareAndDelete() throws {
        let server = try AuthServer()
        let (sandbox, _) = try Self.staleSession(server)
        try server.configure([
            "delay_seconds": 1.0,
            "faults": [["status": 400, "body": "{\"error\":\"invalid_grant\"}", "content_type": "application/json"]],
        ])
        let command = try sandbox.start(["token"])
        try server.waitForTokenRequests(2)
        // While the doomed request is in flight, another writer stores a newer session.
        let newer =
            #"{"access_token":"at_newer","token_type":"Bearer","refresh_token":"rt_newer","obtained_at":\#(now()),"expires_at":\#(now() + 3600),"issued_lifetime":3600}"#
        try sandbox.overwriteStoredTokenSet(newer, issuer: server.url)
        let result = command.wait()
        #expect(result.status == 77, "\(result)")
        #expect(
            try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == "rt_newer",
            "the other writer's session survives")
    }

    @Test("a lock held too long by another process is transient (75)")
    func lockTimeout() throws {
        let server = try AuthServer()
        let (sandbox, _) = try Self.staleSession(server)
        try server.configure(["delay_seconds": 4.0])
        let slow = try sandbox.start(["token"])
        try server.waitForTokenRequests(2)
        let impatient = try sandbox.tokenctl("token", "--timeout", "1")
        #expect(impatient.status == 75, "\(impatient)")
        #expect(impatient.stderr.contains("refreshing this profile"))
        #expect(slow.wait().status == 0)
    }
}

@Suite("End to end: limits and locations")
struct LimitsAndLocationsTests {
    @Test("fake server: a 2 MiB answer is cut off at the response cap and treated as unusable (77), not stored")
    func oversizedResponse() throws {
        let server = try AuthServer()
        let (sandbox, _) = try RefreshFailureTests.staleSession(server)
        let body = "{\"access_token\":\"" + String(repeating: "a", count: 2 << 20) + "\"}"
        try server.configure(["faults": [["status": 200, "body": body, "content_type": "application/json"]]])
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("exceeds"))
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
    }

    @Test(
        "the refresh lock lives in the uid's runtime directory whatever XDG_RUNTIME_DIR says: a 0700 directory, an empty 0600 file"
    )
    func lockLocation() throws {
        let server = try AuthServer()
        let (sandbox, _) = try RefreshFailureTests.staleSession(server)
        let profile = "lockplace-" + String(UUID().uuidString.prefix(8)).lowercased()
        try sandbox.login(server, profile: profile)
        sandbox.variables["TOKENCTL_RUNTIME_DIR"] = nil
        sandbox.variables["XDG_RUNTIME_DIR"] = nil
        #expect(try sandbox.tokenctl("--profile", profile, "token", "--force").status == 0)
        let directory = Paths.runtimeLockDirectory(.fixed([:]))
        let lockFile = directory + "/" + profile + ".lock"
        defer { unlink(lockFile) }
        let attributes = try FileManager.default.attributesOfItem(atPath: directory)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        let file = try FileManager.default.attributesOfItem(atPath: lockFile)
        #expect((file[.posixPermissions] as? Int) == 0o600)
        #expect((file[.size] as? Int) == 0, "the lock file holds nothing")
        #expect(!FileManager.default.fileExists(atPath: sandbox.root + "/state/tokenctl/locks"))
    }
}
