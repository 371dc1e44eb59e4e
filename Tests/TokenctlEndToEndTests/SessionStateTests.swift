import Foundation
import Testing
import TokenctlTestSupport

/// `status` states and transitions, `status --watch`, and the audit event log.
@Suite("End to end: session state and events")
struct SessionStateTests {
    func state(_ sandbox: Sandbox, _ profile: String = "default") throws -> (String?, Int32, [String: Any]) {
        let result = try sandbox.tokenctl("--profile", profile, "status", "--json")
        let object = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
        return (object["state"] as? String, result.status, object)
    }

    /// Wait (at most 10 s) until the running `command` has printed `count` complete lines: each
    /// next step of a watcher's test waits for the line of the step before, however slow the machine.
    func waitForLines(of command: RunningCommand, _ count: Int) {
        let deadline = now() + 10
        while command.currentStandardOutput.filter({ $0 == "\n" }).count < count && now() < deadline {
            sleep(seconds: 0.02)
        }
    }

    @Test(
        "every state through the binary: signed-out → authenticated → expired-refreshable → authenticated → ended → signed-out; store-unavailable"
    )
    func states() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        // Long-lived access tokens unless a step needs one to expire: `status` right after a
        // login reads "authenticated" however long the login and the keyring write took.
        let server = try AuthServer()
        // Configured but never logged in.
        try sandbox.login(server)
        #expect(try sandbox.tokenctl("logout", "--no-revoke").status == 0)
        #expect(try state(sandbox).0 == "signed-out" && state(sandbox).1 == 77)

        try sandbox.login(server)
        let (authenticated, code, object) = try state(sandbox)
        #expect(authenticated == "authenticated" && code == 0, "\(object)")
        let claims = try #require(object["claims"] as? [String: Any])
        #expect(claims["sub"] as? String == "alice")
        #expect(claims["email"] as? String == "alice@example.test")
        #expect(object["claims_source"] as? String == "id_token")
        #expect(object["access_token_format"] as? String == "opaque")
        #expect(object["store"] as? String == "secret-service")

        // A refresh that brings a 1 s access token; the one after it brings a long-lived one again.
        try server.configure(["access_ttl": 1])
        #expect(try sandbox.tokenctl("token", "--force").status == 0)
        try server.configure(["access_ttl": 3600])
        sleep(seconds: 1.1)
        #expect(try state(sandbox).0 == "expired-refreshable" && state(sandbox).1 == 0)
        #expect(try sandbox.tokenctl("token").status == 0)
        #expect(try state(sandbox).0 == "authenticated")

        try server.configure([
            "faults": [["status": 400, "body": "{\"error\":\"invalid_grant\"}", "content_type": "application/json"]]
        ])
        #expect(try sandbox.tokenctl("token", "--force").status == 77)
        let (ended, endedCode, endedObject) = try state(sandbox)
        #expect(ended == "ended" && endedCode == 77, "\(endedObject)")
        #expect(endedObject["ended_reason"] as? String == "invalid_grant")

        try sandbox.login(server)
        #expect(try sandbox.tokenctl("logout").status == 0)
        #expect(try state(sandbox).0 == "signed-out", "a logout after a new login is not 'ended'")

        try sandbox.login(server)
        try keyring.lock()
        let (unavailable, unavailableCode, unavailableObject) = try state(sandbox)
        #expect(unavailable == "store-unavailable" && unavailableCode == 69, "\(unavailableObject)")
        #expect(unavailableObject["refresh_token_present"] is NSNull)
        try keyring.unlock()
    }

    @Test("a JWT access token's claims are shown when there is no ID token; the format says jwt")
    func jwtAccessTokenClaims() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["jwt_access_tokens": true])
        try sandbox.login(server)
        let (_, _, object) = try state(sandbox)
        #expect(object["access_token_format"] as? String == "jwt")
    }

    @Test("status --watch prints the current state, then a refresh and a logout done by other processes")
    func watch() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let watcher = try sandbox.start(["status", "--watch", "--json"])
        waitForLines(of: watcher, 1)
        #expect(try sandbox.tokenctl("token", "--force").status == 0)
        waitForLines(of: watcher, 2)
        #expect(try sandbox.tokenctl("logout").status == 0)
        waitForLines(of: watcher, 3)
        watcher.signal(SIGINT)
        let result = watcher.wait()
        let states = result.stdout.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]).flatMap { $0 }
        }
        #expect(states.count == 3, "initial, refreshed, signed out: \(result)")
        #expect(states.first?["state"] as? String == "authenticated")
        #expect(states.count > 1 && states[1]["last_refresh_at"] is String, "the refresh by another process is seen")
        #expect(states.last?["state"] as? String == "signed-out")
    }

    @Test(
        "events: the lifecycle is logged with significance, filters work, and no line is torn under 64 concurrent writers"
    )
    func events() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        // Rate-limited far beyond the deadline: one attempt, one refreshFailed line, whatever the load.
        try server.configure(["faults": [["status": 429, "headers": ["Retry-After": "3600"], "count": 1000]]])
        #expect(try sandbox.tokenctl("token", "--force").status == 75)
        try server.configure(["faults": []])
        #expect(try sandbox.tokenctl("token", "--force").status == 0)
        #expect(try sandbox.tokenctl("logout").status == 0)

        let all = try sandbox.tokenctl("events", "--json")
        let records = all.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let names = records.compactMap { $0["event"] as? String }
        #expect(names == ["signedIn", "refreshFailed", "tokenRefreshed", "sessionRevoked", "signedOut"], "\(names)")
        #expect(records.first?["significance"] as? String == "high")
        #expect(records[1]["reason"] as? String == "rate-limited")
        let high = try sandbox.tokenctl("events", "--min-significance", "high")
        #expect(high.stdout.split(separator: "\n").count == 3, "\(high)")
        #expect(try sandbox.tokenctl("events", "--since", "1h").stdout.split(separator: "\n").count == 5)
        #expect(try sandbox.tokenctl("events", "--since", "2999-01-01T00:00:00Z").stdout.isEmpty)
        #expect(try sandbox.tokenctl("events", "--since", "yesterday").status == 64)
        #expect(try sandbox.tokenctl("--profile", "nobody", "events").stdout.isEmpty)

        // 64 processes appending at once (each refresh attempt logs one line).
        try sandbox.login(server)
        try server.configure(["faults": [["status": 429, "headers": ["Retry-After": "3600"], "count": 10_000]]])
        // The deadline is long enough for 64 refreshes in a row on a loaded machine: a shorter one
        // ends the last waiters at the Secret Service (69) or the lock instead of the server.
        let results = try sandbox.concurrently(64, ["token", "--force", "--timeout", "60"])
        #expect(results.allSatisfy { $0.status == 75 }, "\(results.filter { $0.status != 75 })")
        let text = try String(contentsOfFile: sandbox.root + "/state/tokenctl/events.jsonl", encoding: .utf8)
        let lines = text.split(separator: "\n")
        #expect(text.hasSuffix("\n"))
        for line in lines {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "torn line: \(line)")
        }
        #expect(lines.filter { $0.contains("refreshFailed") }.count >= 64)
        let mode =
            try FileManager.default.attributesOfItem(atPath: sandbox.root + "/state/tokenctl/events.jsonl")[
                .posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test("events --follow prints events appended by other processes")
    func follow() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let follower = try sandbox.start(["events", "--follow", "--json"])
        waitForLines(of: follower, 1)
        #expect(try sandbox.tokenctl("token", "--force").status == 0)
        waitForLines(of: follower, 2)
        follower.signal(SIGINT)
        let result = follower.wait()
        let names = result.stdout.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["event"] as? String
        }
        #expect(names == ["signedIn", "tokenRefreshed"], "\(result)")
    }

    @Test("no token in any output or file of a full lifecycle")
    func noTokenAnywhere() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["access_ttl": 1])
        let imported = try sandbox.login(server)
        var outputs: [RunResult] = []
        sleep(seconds: 1.1)
        for arguments in [
            ["status"], ["status", "--json"], ["--verbose", "refresh"], ["--verbose", "status", "--all"], ["events"],
            ["events", "--json"], ["doctor"], ["doctor", "--json"],
        ] {
            outputs.append(try sandbox.tokenctl(arguments[0], arguments.count > 1 ? arguments[1] : "--verbose"))
        }
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        outputs.append(try sandbox.tokenctl("logout"))
        let secrets =
            [
                imported, stored["access_token"] as! String, stored["refresh_token"] as! String,
                stored["id_token"] as! String,
            ]
            + (try server.log()).compactMap { $0["refresh_token"] as? String }
        for output in outputs {
            for secret in secrets {
                #expect(
                    !output.stdout.contains(secret) && !output.stderr.contains(secret), "token in output: \(output)")
            }
        }
        for file in sandbox.allFiles() {
            let contents = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
            for secret in secrets { #expect(!contents.contains(secret), "token in \(file)") }
        }
    }
}
