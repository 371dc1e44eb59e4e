import Foundation
import Testing
import TokenctlTestSupport

/// Data from outside never crashes or hangs tokenctl: absurd numbers from servers, the keyring
/// and files, FIFOs in place of files, escape sequences in claims, hand-edited keyring items,
/// and input that never ends. Through the real binary; faults come from the test server.
@Suite("End to end: hostile input")
struct HostileInputTests {
    /// A 200 answer the test server sends as a fault (it never touches the server's own state).
    private static func tokenAnswer(_ body: [String: Any], headers: [String: String] = [:]) -> [String: Any] {
        ["status": 200, "body": body, "content_type": "application/json", "headers": headers]
    }

    @Test("a Date header with a year beyond Int32 after the server rotated: no trap, the rotation kept")
    func absurdDateHeader() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        try server.configure([
            "faults": [
                Self.tokenAnswer(
                    [
                        "access_token": "at_rotated", "refresh_token": "rt_rotated", "expires_in": 3600,
                        "token_type": "Bearer",
                    ],
                    headers: ["Date": "Sun, 06 Nov 3000000000 08:49:37 GMT"])
            ]
        ])
        let result = try sandbox.tokenctl("token", "--force")
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "at_rotated\n")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == "rt_rotated")
    }

    @Test(
        "a JWT access token with exp ±2^63 and no expires_in: stored clamped; token, status, refresh and min-ttl never trap",
        arguments: ["9223372036854775808", "-9223372036854775808"])
    func absurdJWTExpiry(exp: String) throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let jwt = "eyJhbGciOiJub25lIn0." + base64URL(#"{"sub":"alice","exp":"# + exp + "}") + ".sig"
        try server.configure([
            "faults": [Self.tokenAnswer(["access_token": jwt, "refresh_token": "rt_2", "token_type": "Bearer"])]
        ])
        #expect(try sandbox.tokenctl("token", "--force").status == 0)
        for arguments in [
            ["token"], ["token", "--min-ttl", "30"], ["status"], ["status", "--json"],
            ["refresh", "--if-expiring-within", "60"],
        ] {
            let result = try sandbox.start(arguments).wait()
            #expect(result.status < 128, "\(arguments): \(result)")
            #expect([0, 75, 77].contains(result.status), "\(arguments): \(result)")
        }
    }

    @Test("expires_in of ten years (a common 'never') is clamped, not terminal: the rotated session is kept")
    func tenYearLifetime() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        try server.configure([
            "faults": [
                Self.tokenAnswer(
                    [
                        "access_token": "at_long", "refresh_token": "rt_long", "expires_in": 315_360_000,
                        "token_type": "Bearer",
                    ])
            ]
        ])
        let result = try sandbox.tokenctl("token", "--force")
        #expect(result.status == 0, "\(result)")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == "rt_long")
    }

    @Test("a keyring item with absurd times (±1e19, 1e308) loads without a trap")
    func absurdStoredTimes() throws {
        let sandbox = try Sandbox()
        sandbox.useSecretServicePathOnly()
        let server = try AuthServer()
        try sandbox.login(server)
        for value in ["1e19", "-1e19", "1e308"] {
            try sandbox.overwriteStoredTokenSet(
                #"{"access_token":"at_x","token_type":"Bearer","refresh_token":"rt_x","obtained_at":"# + value
                    + #","expires_at":"# + value
                    + #","last_refresh_at":"# + value + "}", issuer: server.url)
            for arguments in [["token"], ["status"], ["status", "--json"]] {
                let result = try sandbox.start(arguments).wait()
                #expect(result.status < 128, "\(value) \(arguments): \(result)")
            }
        }
    }

    @Test(
        "a stored access token with a line break or an empty one is refused when read, never printed",
        arguments: [#"at_x\r\nX-Injected: 1"#, ""])
    func injectedStoredToken(token: String) throws {
        let sandbox = try Sandbox()
        sandbox.useSecretServicePathOnly()
        let server = try AuthServer()
        try sandbox.login(server)
        try sandbox.overwriteStoredTokenSet(
            #"{"access_token":""# + token + #"","token_type":"Bearer","obtained_at":1800000000}"#, issuer: server.url)
        let result = try sandbox.tokenctl("token", "--format", "header")
        #expect(result.status == 69, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.contains("not a tokenctl token set"), "\(result)")
    }

    @Test("an events.jsonl line with unix_time ±1e19: events, --since and --json never trap")
    func absurdEventTime() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let log = sandbox.root + "/state/tokenctl/events.jsonl"
        let handle = try #require(FileHandle(forWritingAtPath: log))
        handle.seekToEndOfFile()
        handle.write(Data(#"{"unix_time":1e19,"event":"signedIn","profile":"default"}"#.utf8 + [0x0A]))
        handle.write(Data(#"{"unix_time":-1e19,"event":"signedOut","profile":"default"}"#.utf8 + [0x0A]))
        handle.closeFile()
        for arguments in [["events"], ["events", "--since", "1h"], ["events", "--json"]] {
            let result = try sandbox.start(arguments).wait()
            #expect(result.status == 0, "\(arguments): \(result)")
        }
    }

    @Test("a FIFO in place of events.jsonl or of the profile file never hangs a command")
    func fifos() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let log = sandbox.root + "/state/tokenctl/events.jsonl"
        unlink(log)
        #expect(mkfifo(log, 0o600) == 0)
        var started = now()
        let forced = try sandbox.tokenctl("token", "--force", "--timeout", "5")
        #expect(forced.status == 0, "\(forced)")
        #expect(now() - started < 5, "no hang on the log FIFO")

        let profile = sandbox.profileFile()
        unlink(profile)
        #expect(mkfifo(profile, 0o600) == 0)
        for arguments in [["token"], ["status"], ["refresh"]] {
            started = now()
            let result = try sandbox.start(arguments + ["--timeout", "3"]).wait()
            #expect(result.status == 78, "\(arguments): \(result)")
            #expect(result.stderr.contains("not a regular file"), "\(arguments): \(result)")
            #expect(now() - started < 5)
        }
    }

    @Test("standard input that never ends: login --refresh-token-stdin gives up within --timeout (64)")
    func endlessStandardInput() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        // stdin a pipe whose writer never closes it (sleep 30 | tokenctl ...).
        let script = """
            import subprocess, sys, time
            start = time.time()
            p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                p.wait(timeout=20)  # stdin stays open: nobody ever closes it
            except subprocess.TimeoutExpired:
                p.kill(); print("HUNG"); sys.exit(0)
            sys.stdout.write("rc=%d elapsed=%.2f\\n" % (p.returncode, time.time() - start))
            sys.stdout.write(p.stderr.read().decode())
            """
        let result = try runProgram(
            sandbox.environment.python,
            [
                "-c", script, sandbox.environment.binary, "login", "--issuer", server.url, "--client-id", "cli",
                "--refresh-token-stdin", "--timeout", "2",
            ],
            environment: sandbox.variables)
        #expect(result.stdout.contains("rc=64"), "\(result)")
        #expect(result.stdout.contains("did not end within 2 s"), "\(result)")
        let elapsed =
            Double(result.stdout.split(separator: "=").last.map { String($0.prefix { $0 != "\n" }) } ?? "") ?? 99
        #expect(elapsed < 4, "\(result)")
    }

    @Test("core dumps are off: RLIMIT_CORE 0 in /proc/PID/limits while a refresh waits on a slow server")
    func noCoreDumps() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        try server.configure(["faults": [["delay": 1.5]]])
        let before = try server.stats()["token_requests"] ?? 0
        let command = try sandbox.start(["token", "--force"], extraEnvironment: [:])
        try server.waitForTokenRequests(before + 1)
        let limits = try String(contentsOfFile: "/proc/\(command.pid)/limits", encoding: .utf8)
        let core = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") } ?? ""
        #expect(
            core.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2) == ["0", "0"], "\(core)")
        #expect(command.wait().status == 0)
    }

    @Test("escape sequences in an ID token's sub never reach the terminal: login line, status, doctor")
    func escapeSequencesInClaims() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["id_token_claims": ["sub": "eve\u{1b}[2J\u{1b}]0;PWNED\u{07}"]])
        try sandbox.login(server)
        for arguments in [["status"], ["doctor"], ["status", "--all"]] {
            let result = try sandbox.start(arguments).wait()
            for text in [result.stdout, result.stderr] {
                #expect(
                    !text.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(arguments): \(result)")
            }
        }
        let json = try sandbox.tokenctl("status", "--json")
        #expect(json.stdout.contains(#"\u001b"#), "JSON escapes it as JSON does: \(json)")
    }

    private func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(
            of: "/", with: "_"
        )
        .replacingOccurrences(of: "=", with: "")
    }
}
