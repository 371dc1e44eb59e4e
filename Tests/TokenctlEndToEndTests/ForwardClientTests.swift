import Foundation
import Testing
import TokenctlTestSupport

/// The client side of the forward against a busy or hostile remote: no secret in any server
/// text, only this user's serving process is believed, a cached token belongs to the socket as
/// it is bound (so to its serving host) and is never served from a socket nothing serves, and
/// `--timeout` bounds the connect.
@Suite("End to end: the forward's client against a busy or hostile remote")
struct ForwardClientTests {
    func line(_ result: RunResult) -> String { result.stdout.trimmingCharacters(in: .newlines) }

    /// Whether `text` holds `secret`, or its first or last 16 characters.
    func leaks(_ text: String, _ secrets: [String]) -> Bool {
        secrets.contains { secret in
            text.contains(secret) || text.contains(String(secret.prefix(16)))
                || text.contains(String(secret.suffix(16)))
        }
    }

    @Test(
        "an error_description that echoes the refresh token and the request: the secrets appear nowhere, locally (stderr, -v, the event log, tokenctl events) or on a forwarded client"
    )
    func secretsNeverInMessages() throws {
        let pair = try ForwardPair()
        let server = try AuthServer()
        try pair.serving.loginWithExpiredAccessToken(server)
        var stored = try #require(try pair.serving.storedTokenSet(issuer: server.url))
        var secrets = [stored["refresh_token"] as? String, stored["access_token"] as? String].compactMap { $0 }
        #expect(secrets.count == 2)
        try server.configure([
            "faults": [
                [
                    "status": 400,
                    "body": [
                        "error": "invalid_grant",
                        "error_description": "refresh token {refresh_token} is revoked; the request was {request}",
                    ],
                ] as [String: Any]
            ]
        ])
        let local = try pair.serving.tokenctl("-v", "token")
        #expect(local.status == 77 && local.stdout.isEmpty, "\(local)")
        #expect(local.stderr.contains("[redacted]"), "the server's text is shown, scrubbed: \(local)")
        #expect(!leaks(local.stderr, secrets), "\(local)")
        let sent = try #require(try server.tokenRequests().last?["refresh_token"] as? String)
        #expect(secrets.contains(sent), "the echoed token is the one stored")

        // Forwarded: the serving side's refusal reaches the remote's stderr without the token.
        try pair.serving.loginWithExpiredAccessToken(server)
        stored = try #require(try pair.serving.storedTokenSet(issuer: server.url))
        let second = [stored["refresh_token"] as? String, stored["access_token"] as? String].compactMap { $0 }
        secrets += second
        #expect(try pair.serving.tokenctl("forward", "enable", "--no-unit").status == 0)
        try pair.listen()
        try server.configure([
            "faults": [
                [
                    "status": 400,
                    "body": [
                        "error": "invalid_request", "error_description": "unexpected refresh_token={refresh_token}",
                    ],
                ] as [String: Any]
            ]
        ])
        let remote = try pair.client.tokenctl("-v", "token")
        #expect(remote.status == 77 && remote.stdout.isEmpty, "\(remote)")
        #expect(remote.stderr.contains("(forwarded)") && remote.stderr.contains("[redacted]"), "\(remote)")
        #expect(!leaks(remote.stderr, secrets), "\(remote)")

        let events = try String(contentsOfFile: pair.serving.root + "/state/tokenctl/events.jsonl", encoding: .utf8)
        #expect(!leaks(events, secrets), "\(events)")
        #expect(events.contains("invalid_request"), "the refusal is logged: \(events)")
        let shown = try pair.serving.tokenctl("events", "--min-significance", "low")
        #expect(shown.status == 0 && !leaks(shown.stdout + shown.stderr, secrets), "\(shown)")
        let listener = pair.listener?.currentStandardError ?? ""
        #expect(!leaks(listener, secrets), "\(listener)")
        #expect(pair.stop()?.status == 0)
    }

    @Test(
        "another user swapping sockets in a world-writable runtime directory: 0 of 300 calls get its token; the local session is used instead"
    )
    func socketSwapRace() throws {
        guard getuid() == 0 else { return } // the second user is made and run by runuser
        let attacker = try NonRootUser()
        let directory = "/tmp/tokenctl-swap-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let wellKnown = directory + "/tokenctl-forward.sock"
        let pair = try ForwardPair(socket: wellKnown)
        pair.client.variables["TOKENCTL_FORWARD_SOCKET"] = nil
        pair.client.variables["XDG_RUNTIME_DIR"] = directory
        // Every call asks the socket: no hot cache on the client.
        pair.client.variables["TOKENCTL_TEST_DISABLE_KERNEL_KEYRING"] = "1"
        let server = try AuthServer()
        try pair.serving.login(server)
        #expect(try pair.serving.tokenctl("forward", "enable", "--no-unit").status == 0)
        try pair.listen()
        // World-writable and not sticky: anyone may rename anyone's file in it.
        #expect(chmod(directory, 0o777) == 0)
        let real = line(try pair.serving.tokenctl("token"))
        #expect(line(try pair.client.tokenctl("token")) == real, "served before the attack")

        let script = """
            import os, socket, sys, threading, time
            d = sys.argv[1]
            well, mine, saved = d + "/tokenctl-forward.sock", d + "/attacker.sock", d + "/victim.sock"
            s = socket.socket(socket.AF_UNIX); s.bind(mine); s.listen(64)
            def serve():
                while True:
                    c, _ = s.accept()
                    try:
                        c.settimeout(2); c.recv(65536)
                        c.sendall(b"tokenctl-forward-v1 token\\nprofile=default\\ntoken_type=Bearer\\naccess_token=fake\\nobtained_at=1\\nexpires_at=99999999999\\n\\n")
                    except Exception:
                        pass
                    c.close()
            threading.Thread(target=serve, daemon=True).start()
            print("ready", flush=True)
            end, swaps = time.time() + 240, 0
            while time.time() < end and not os.path.exists(d + "/stop"):
                try:
                    os.rename(well, saved); os.rename(mine, well); time.sleep(0.001)
                    os.rename(well, mine); os.rename(saved, well); time.sleep(0.001)
                    swaps += 1
                except FileNotFoundError:
                    time.sleep(0.001)
            print("swaps", swaps, flush=True)
            """
        let swapper = try attacker.startProgram("/usr/bin/python3", ["-c", script, directory])
        defer {
            swapper.signalGroup(SIGKILL)
            _ = swapper.wait()
        }
        for _ in 0..<100 where !swapper.currentStandardOutput.contains("ready") { usleep(50_000) }
        #expect(swapper.currentStandardOutput.contains("ready"), "\(swapper.currentStandardError)")
        var fake = 0
        var served = 0
        var other: [RunResult] = []
        for _ in 0..<30 {
            for result in try pair.client.concurrently(10, ["token"]) {
                if result.stdout.contains("fake") { fake += 1 }
                if result.status == 0 && line(result) == real { served += 1 } else { other.append(result) }
            }
        }
        _ = FileManager.default.createFile(atPath: directory + "/stop", contents: nil)
        let ended = swapper.wait()
        // The swaps happened while the calls ran (the file was another user's for many of them).
        #expect(ended.stdout.contains("swaps ") && !ended.stdout.contains("swaps 0\n"), "\(ended)")
        #expect(fake == 0, "calls that got the other user's token: \(fake) of 300")
        // The others found the other user's socket (by its owner, or by SO_PEERCRED after the
        // connect) and used the local session, which this client has not (78).
        #expect(other.allSatisfy { $0.status != 0 && $0.stdout.isEmpty }, "\(other.prefix(3))")
        #expect(served + other.count == 300, "served \(served), refused \(other.count); \(ended.stdout)")
        try? FileManager.default.removeItem(atPath: directory + "/attacker.sock")
        try? FileManager.default.removeItem(atPath: directory + "/victim.sock")
    }

    @Test(
        "the same client socket path served by another serving side after the first: the client prints the new side's token, not the first one's cached token"
    )
    func hostSwitch() throws {
        let server = try AuthServer()
        let pair = try ForwardPair.listening(for: server)
        let first = line(try pair.serving.tokenctl("token"))
        #expect(line(try pair.client.tokenctl("token")) == first)
        #expect(line(try pair.client.tokenctl("token")) == first, "a hit from the client's hot cache")
        let firstStatus = try pair.client.tokenctl("status", "--json")
        // The first serving side dies and leaves its socket file; the second binds its own there.
        pair.listener?.signal(SIGKILL)
        _ = pair.stop()
        let next = try Sandbox()
        try next.login(server, clientID: "cli-b", subject: "bob")
        #expect(try next.tokenctl("forward", "enable", "--no-unit").status == 0)
        let listener = try next.start(["forward", "listen", "--socket", pair.socket])
        defer {
            listener.signal(SIGTERM)
            _ = listener.wait()
        }
        #expect(listener.waitForStandardError(containing: "serving forwarded tokens") != nil)
        let second = line(try next.tokenctl("token"))
        #expect(second != first)
        let after = try pair.client.tokenctl("token")
        #expect(after.status == 0 && line(after) == second, "the new side's token: \(after)")
        #expect(line(try pair.client.tokenctl("token")) == second, "and its hit after")
        let secondStatus = try pair.client.tokenctl("status", "--json")
        let session = { (result: RunResult) in
            (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])?["serving_session"]
                as? String
        }
        #expect(
            session(firstStatus) != nil && session(secondStatus) != nil
                && session(firstStatus) != session(secondStatus),
            "\(firstStatus) \(secondStatus)")
    }

    @Test("token --timeout 5 with the listener's queue full and nobody accepting: 75 within 6 s")
    func connectDeadline() throws {
        let pair = try ForwardPair()
        try FileManager.default.createDirectory(
            atPath: (pair.socket as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let full = try RunningCommand(
            executable: "/usr/bin/python3",
            arguments: [
                "-c",
                """
                import socket, sys, time
                s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(0)
                queued = []
                for _ in range(16):
                    c = socket.socket(socket.AF_UNIX); c.setblocking(False)
                    try:
                        c.connect(sys.argv[1]); queued.append(c)
                    except BlockingIOError:
                        break
                print("full", len(queued), flush=True)
                time.sleep(120)
                """,
                pair.socket,
            ], environment: [:], stdin: nil, directory: pair.serving.root)
        defer {
            full.signal(SIGKILL)
            _ = full.wait()
        }
        for _ in 0..<100 where !full.currentStandardOutput.contains("full") { usleep(50_000) }
        #expect(full.currentStandardOutput.contains("full"), "\(full.currentStandardError)")
        let start = Date()
        let result = try pair.client.tokenctl("token", "--timeout", "5")
        let elapsed = Date().timeIntervalSince(start)
        #expect(result.status == 75 && result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.contains("did not accept the connection"), "\(result)")
        #expect(elapsed < 6, "returned after \(elapsed) s")
    }

    @Test(
        "a cached forwarded token is never served from a socket nothing serves: named by the variable, 69; at the well-known path, the local session; served again once a listener binds it"
    )
    func staleSocket() throws {
        let server = try AuthServer()
        let pair = try ForwardPair.listening(for: server)
        let token = line(try pair.client.tokenctl("token"))
        #expect(!token.isEmpty)
        #expect(line(try pair.client.tokenctl("token")) == token, "cached")
        pair.listener?.signal(SIGKILL)
        _ = pair.stop()
        #expect(FileManager.default.fileExists(atPath: pair.socket), "the killed listener left its socket file")
        let stale = try pair.client.tokenctl("token")
        #expect(stale.status == 69 && stale.stdout.isEmpty && stale.stderr.contains("nothing serves"), "\(stale)")
        let exec = try pair.client.tokenctl("exec", "--", "/bin/sh", "-c", "printf %s \"$TOKENCTL_ACCESS_TOKEN\"")
        #expect(exec.status == 69 && !exec.stdout.contains(token), "\(exec)")
        try pair.listen()
        let again = try pair.client.tokenctl("token")
        #expect(again.status == 0 && !again.stdout.isEmpty, "\(again)")

        // The well-known path (the remote end of an ended ssh -R): passed over for the local
        // session, which this client has not (78), never the cached forwarded token.
        let wellKnown = pair.client.root + "/runtime/tokenctl-forward.sock"
        let remote = try ForwardPair(socket: wellKnown)
        _ = pair.stop()
        try remote.serving.login(server)
        #expect(try remote.serving.tokenctl("forward", "enable", "--no-unit").status == 0)
        try remote.listen()
        let forwarded = try pair.client.tokenctl("token", extraEnvironment: ["TOKENCTL_FORWARD_SOCKET": ""])
        #expect(forwarded.status == 78, "an empty variable: never forward: \(forwarded)")
        var unset = pair.client.variables
        unset["TOKENCTL_FORWARD_SOCKET"] = nil
        pair.client.variables = unset
        let served = line(try pair.client.tokenctl("token"))
        let cached = line(try pair.client.tokenctl("token"))
        #expect(!served.isEmpty && cached == served, "served and cached")
        remote.listener?.signal(SIGKILL)
        _ = remote.stop()
        let passedOver = try pair.client.tokenctl("token")
        #expect(passedOver.status == 78 && !passedOver.stdout.contains(served), "\(passedOver)")
        #expect(!(try pair.client.tokenctl("status").stdout.contains("forwarded")))
    }
}
