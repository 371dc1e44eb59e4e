import Foundation
import Testing
import TokenctlTestSupport

/// `tokenctl forward`: access tokens handed to another user environment (a remote host's, a
/// container's) over a socket, never the refresh token, through the serving side's normal
/// single-flight engine. These run serving side and client on this machine with two sandboxes;
/// ForwardSSHTests does the same through a real OpenSSH `ssh -R`.
@Suite("End to end: forwarding access tokens over a socket")
struct ForwardTests {
    func line(_ result: RunResult) -> String { result.stdout.trimmingCharacters(in: .newlines) }

    @Test(
        "token (raw, header, json), exec, git-credential get and exec-credential on the client get the serving session's token; nothing of the session lands on the client; each hand-out is a tokenForwarded event"
    )
    func handsOutEveryWay() throws {
        let pair = try ForwardPair()
        let server = try AuthServer()
        let refreshToken = try pair.serving.login(server)
        #expect(try pair.serving.tokenctl("forward", "enable", "--no-unit").status == 0)
        try pair.listen()
        let local = line(try pair.serving.tokenctl("token"))

        let raw = try pair.client.tokenctl("token")
        #expect(raw.status == 0 && line(raw) == local, "\(raw)")
        let header = try pair.client.tokenctl("token", "--format", "header")
        #expect(line(header) == "Authorization: Bearer \(local)", "\(header)")
        let json = try pair.client.tokenctl("token", "--format", "json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["access_token"] as? String == local && object["expires_in"] is Int, "\(json)")
        let exec = try pair.client.tokenctl("exec", "--", "/bin/sh", "-c", "printf %s \"$TOKENCTL_ACCESS_TOKEN\"")
        #expect(exec.status == 0 && exec.stdout == local, "\(exec)")
        // git's user name is the serving profile's.
        let handle = try #require(FileHandle(forWritingAtPath: pair.serving.profileFile()))
        handle.seekToEndOfFile()
        handle.write(Data("git_username = forge\n".utf8))
        try handle.close()
        let git = try pair.client.tokenctl(
            "git-credential", "get", stdin: "protocol=https\nhost=git.example.com\n\n")
        #expect(git.status == 0 && git.stdout.contains("username=forge\npassword=\(local)\n"), "\(git)")
        let credential = try pair.client.tokenctl("token", "--format", "exec-credential")
        #expect(credential.status == 0 && credential.stdout.contains("\"token\":\"\(local)\""), "\(credential)")
        let status = try pair.client.tokenctl("status")
        #expect(status.status == 0 && status.stdout.contains("forwarded from"), "\(status)")
        #expect(!status.stdout.contains(local), "status never shows the token")

        // The client has no profile, no session and no file holding a token.
        for file in pair.client.allFiles() {
            let contents = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
            #expect(!contents.contains(refreshToken) && !contents.contains(local), "\(file)")
        }
        #expect(!FileManager.default.fileExists(atPath: pair.client.profileFile()))
        // The hand-outs were logged on the serving side (the hot cache on the client serves the rest),
        // each after its answer went out: wait for them.
        let events = try pair.events("tokenForwarded", awaiting: 2)
        #expect(events.count >= 2, "\(events)")
        #expect(events.allSatisfy { ($0["reason"] as? String)?.contains("pid ") == true })
        let shown = try pair.serving.tokenctl("events", "--min-significance", "medium")
        #expect(shown.stdout.contains("tokenForwarded") && shown.stdout.contains("for \"git-credential\""), "\(shown)")
        #expect(!shown.stdout.contains(local) && !shown.stdout.contains(refreshToken))
        let forwardStatus = try pair.serving.tokenctl("forward", "status")
        #expect(
            forwardStatus.stdout.contains("default (no limits)") && forwardStatus.stdout.contains("handed out"),
            "\(forwardStatus)")
        #expect(!forwardStatus.stdout.contains(local))
        #expect(pair.stop()?.status == 0)
        #expect(!FileManager.default.fileExists(atPath: pair.socket), "listen removes its socket")
    }

    @Test(
        "a remote token --force on a forwarded profile without a refresh token: 77 on the client, and the serving session, its status and its token as they were"
    )
    func remoteForceEndsNothing() throws {
        let pair = try ForwardPair()
        let server = try AuthServer([
            "omit_refresh_token": true, "omit_expires_in": true, "device_interval": 1, "device_script": ["approve"],
        ])
        let login = try pair.serving.tokenctl("login", "--device", "--issuer", server.url, "--client-id", "cli")
        #expect(login.status == 0, "\(login)")
        #expect(try pair.serving.storedTokenSet(issuer: server.url)?["refresh_token"] == nil, "a session without one")
        #expect(try pair.serving.tokenctl("forward", "enable", "--no-unit").status == 0)
        try pair.listen()
        let local = try pair.serving.tokenctl("token")
        #expect(local.status == 0, "\(local)")
        let statusBefore = try pair.serving.tokenctl("status")

        for _ in 0..<3 {
            let forced = try pair.client.tokenctl("token", "--force")
            #expect(forced.status == 77 && forced.stdout.isEmpty, "\(forced)")
            #expect(forced.stderr.contains("has no refresh token"), "\(forced)")
        }
        let after = try pair.serving.tokenctl("token")
        #expect(after.status == 0 && after.stdout == local.stdout, "the serving side's token is still served: \(after)")
        let statusAfter = try pair.serving.tokenctl("status")
        #expect(statusAfter.stdout == statusBefore.stdout, "\(statusAfter)")
        #expect(try pair.client.tokenctl("token").status == 0, "the client is still served")
        #expect(try server.tokenRequests().filter { ($0["grant_type"] as? String) == "refresh_token" }.isEmpty)
        #expect(pair.stop()?.status == 0)
    }

    @Test("64 client processes on an expired token: one refresh at the server, one token, all exit 0")
    func remoteFanIn() throws {
        let pair = try ForwardPair()
        let server = try AuthServer(["grace_seconds": 0])
        try pair.serving.loginWithExpiredAccessToken(server)
        try server.configure(["delay_seconds": 0.3])
        #expect(try pair.serving.tokenctl("forward", "enable", "--no-unit").status == 0)
        try pair.listen()
        let before = try server.tokenRequests().count
        let results = try pair.client.concurrently(64, ["token"])
        let stored = try #require(try pair.serving.storedTokenSet(issuer: server.url))
        let access = try #require(stored["access_token"] as? String)
        for result in results { #expect(result.status == 0 && result.stdout == access + "\n", "\(result)") }
        #expect(try server.tokenRequests().count - before == 1, "exactly one refresh reached the server")
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test(
        "a profile not forwarded is refused with 77 and logged; forward_scope and forward_audience hold; a request without a scope gets forward_scope's"
    )
    func limits() throws {
        let pair = try ForwardPair()
        let server = try AuthServer()
        try pair.serving.login(server, profile: "private")
        try pair.serving.login(server, profile: "shared", scope: "openid offline_access read write")
        try pair.listen()
        let refused = try pair.client.tokenctl("--profile", "private", "token")
        #expect(refused.status == 77 && refused.stderr.contains("is not forwarded"), "\(refused)")
        let missing = try pair.client.tokenctl("--profile", "nosuch", "token")
        #expect(
            missing.status == 77 && missing.stderr.contains("is not forwarded"), "same words: \(missing)" as Comment)

        #expect(
            try pair.serving.tokenctl(
                "forward", "enable", "--no-unit", "--scope", "read", "--audience", "https://api.example.com", "shared"
            ).status == 0)
        let file = try String(contentsOfFile: pair.serving.profileFile("shared"), encoding: .utf8)
        #expect(file.contains("forward = true") && file.contains("forward_scope = read"), "\(file)")
        let beyond = try pair.client.tokenctl("--profile", "shared", "token", "--scope", "write")
        #expect(beyond.status == 77 && beyond.stderr.contains("beyond"), "\(beyond)")
        let audience = try pair.client.tokenctl(
            "--profile", "shared", "token", "--audience", "https://other.example.com")
        #expect(audience.status == 77 && audience.stderr.contains("forward_audience"), "\(audience)")
        let within = try pair.client.tokenctl("--profile", "shared", "token", "--scope", "read")
        #expect(within.status == 0, "\(within)")
        let plain = try pair.client.tokenctl("--profile", "shared", "token")
        #expect(plain.status == 0, "\(plain)")
        // Both were narrowed refreshes for exactly `read`.
        let scopes = try server.tokenRequests().compactMap { $0["scope"] as? String }
        #expect(scopes.contains("read"), "\(scopes)")
        // Refusals are summed up per peer and minute: the first at once, the rest when it ends
        // (or the serving process stops).
        let refusals = try pair.events("forwardRefused")
        #expect(refusals.count >= 1 && refusals.allSatisfy { $0["count"] is Int }, "\(refusals)")
        #expect(refusals.contains { ($0["reason"] as? String)?.contains(": not forwarded") == true }, "\(refusals)")

        // The refusal's hint runs as printed on the serving side, and lets the scope through.
        let hinted = try #require(
            beyond.stderr.components(separatedBy: ": '").last?.components(separatedBy: "'.").first)
        let command = hinted
        #expect(command == "tokenctl --profile shared forward enable --scope \"read write\"", "\(beyond)")
        let widened = try runProgram(
            "/bin/sh",
            [
                "-c", command.replacingOccurrences(of: "tokenctl ", with: "\"$0\" ", options: .anchored) + " --no-unit",
                pair.serving.environment.binary,
            ],
            environment: pair.serving.variables)
        #expect(widened.status == 0, "\(widened)")
        #expect(try pair.client.tokenctl("--profile", "shared", "token", "--scope", "write").status == 0)
        #expect(try pair.serving.tokenctl("forward", "disable", "shared").status == 0)
        let after = try pair.client.tokenctl("--profile", "shared", "token", "--scope", "read", "--force")
        #expect(after.status == 77, "\(after)")
        #expect(pair.stop()?.status == 0)
        let summed = try pair.events("forwardRefused")
        #expect(summed.compactMap { $0["count"] as? Int }.reduce(0, +) >= 5, "\(summed)")
        #expect(summed.contains { ($0["reason"] as? String)?.contains("scope beyond forward_scope") == true })
    }

    @Test(
        "the serving side survives malformed, oversized, slow and half-closed connections and a newer protocol, answering each with an error, and serves the next request"
    )
    func hostileConnections() throws {
        let server = try AuthServer()
        let pair = try ForwardPair.listening(for: server)
        // A silent connection held open the whole time: it must not block the others.
        let silent = try RunningCommand(
            executable: "/usr/bin/python3",
            arguments: [
                "-c",
                "import socket, sys, time\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\nprint(s.recv(4096).decode(), flush=True)",
                pair.socket,
            ], environment: [:], stdin: nil, directory: pair.serving.root)
        let malformed = try pair.raw(
            "s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n\\n\\n')\nprint(s.recv(4096).decode())")
        #expect(
            malformed.stdout.contains("tokenctl-forward-v1 error") && malformed.stdout.contains("status=76"),
            "\(malformed)")
        let oversized = try pair.raw(
            "s.sendall(b'tokenctl-forward-v1 request\\nprofile=' + b'a' * 40000)\nprint(s.recv(4096).decode())")
        #expect(oversized.stdout.contains("status=64"), "\(oversized)")
        let halfClosed = try pair.raw(
            "s.sendall(b'tokenctl-forward-v1 request\\nprofile=default')\ns.shutdown(socket.SHUT_WR)\nprint(s.recv(4096).decode())"
        )
        #expect(halfClosed.stdout.contains("tokenctl-forward-v1 error"), "\(halfClosed)")
        let newer = try pair.raw(
            "s.sendall(b'tokenctl-forward-v2 request\\nprofile=default\\n\\n')\nprint(s.recv(4096).decode())")
        #expect(newer.stdout.contains("status=69") && newer.stdout.contains("v1 only"), "\(newer)")
        let unknown = try pair.raw(
            "s.sendall(b'tokenctl-forward-v1 request\\nprofile=default\\nrefresh_token=1\\n\\n')\nprint(s.recv(4096).decode())"
        )
        #expect(unknown.stdout.contains("does not know"), "\(unknown)")
        let injected = try pair.raw(
            "s.sendall(b'tokenctl-forward-v1 request\\nprofile=../../etc/passwd\\n\\n')\nprint(s.recv(4096).decode())")
        #expect(injected.stdout.contains("status=64"), "\(injected)")
        let good = try pair.client.tokenctl("token")
        #expect(good.status == 0, "served while a silent connection is open: \(good)")
        // The silent one is cut off after the request timeout (5 s) with an answer.
        let cut = silent.wait()
        #expect(cut.stdout.contains("status=75"), "\(cut)")
        #expect(pair.listener != nil && pair.stop()?.status == 0, "the listener is still running")
    }

    @Test(
        "no listener: 69 naming the socket, with a hint; listen replaces a stale socket and refuses one that is served"
    )
    func unavailable() throws {
        let pair = try ForwardPair()
        let server = try AuthServer()
        try pair.serving.login(server)
        let none = try pair.client.tokenctl("token")
        #expect(
            none.status == 69 && none.stderr.contains("no socket at") && none.stderr.contains("forward status"),
            "\(none)")
        #expect(try pair.serving.tokenctl("forward", "enable", "--no-unit").status == 0)
        try pair.listen()
        let second = try pair.serving.tokenctl("forward", "listen", "--socket", pair.socket)
        #expect(second.status == 69 && second.stderr.contains("already serves"), "\(second)")
        // A killed listener leaves its socket: the next one replaces it.
        pair.listener?.signal(SIGKILL)
        _ = pair.stop()
        #expect(FileManager.default.fileExists(atPath: pair.socket))
        let stale = try pair.client.tokenctl("token")
        #expect(stale.status == 69 && stale.stderr.contains("nothing serves"), "\(stale)")
        try pair.listen()
        #expect(try pair.client.tokenctl("token").status == 0)
        // A stale socket at the well-known path (an ended ssh -R) is passed over: the local
        // session serves, on the serving side as on any host with one.
        let wellKnown = pair.serving.root + "/runtime/tokenctl-forward.sock"
        let made = try runProgram(
            "/usr/bin/python3",
            ["-c", "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])", wellKnown])
        #expect(made.status == 0 && FileManager.default.fileExists(atPath: wellKnown), "\(made)")
        let passedOver = try pair.serving.tokenctl("token")
        #expect(passedOver.status == 0 && !passedOver.stdout.isEmpty, "\(passedOver)")
        #expect(try pair.serving.tokenctl("status").stdout.contains("forwarded") == false)
        // Another user's socket there is never used, even when it answers (with a fake token).
        if getuid() == 0 {
            try FileManager.default.removeItem(atPath: wellKnown)
            let impostor = try RunningCommand(
                executable: "/usr/bin/python3",
                arguments: [
                    "-c",
                    """
                    import os, socket, sys
                    s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chown(sys.argv[1], 65534, 65534); s.listen(4)
                    print('ready', flush=True)
                    while True:
                        c, _ = s.accept(); c.recv(65536)
                        c.sendall(b'tokenctl-forward-v1 token\\nprofile=default\\ntoken_type=Bearer\\naccess_token=fake\\nobtained_at=1\\n\\n'); c.close()
                    """,
                    wellKnown,
                ], environment: [:], stdin: nil, directory: pair.serving.root)
            defer {
                impostor.signal(SIGKILL)
                _ = impostor.wait()
            }
            for _ in 0..<100 where !impostor.currentStandardOutput.contains("ready") { usleep(50_000) }
            let local = try pair.serving.tokenctl("token", "--force")
            #expect(local.status == 0 && local.stdout != "fake\n", "\(local)")
            #expect(try pair.serving.tokenctl("status").stdout.contains("forwarded") == false)
        }
        // An empty TOKENCTL_FORWARD_SOCKET means a local session (none here: 78).
        let local = try pair.client.tokenctl("token", extraEnvironment: ["TOKENCTL_FORWARD_SOCKET": ""])
        #expect(local.status == 78, "\(local)")
    }

    @Test("a container-like run: a chroot with only the static front and the socket gets a token")
    func containerLike() throws {
        guard getuid() == 0 else { return } // chroot(2) needs root; CI runs as root
        let pair = try ForwardPair()
        let server = try AuthServer()
        try pair.serving.login(server)
        #expect(try pair.serving.tokenctl("forward", "enable", "--no-unit").status == 0)
        // The listener serves a socket inside the container's root, as `docker run -v` would mount it.
        let jail = pair.serving.root + "/jail"
        try FileManager.default.createDirectory(
            atPath: jail, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        // Copied by cp(1), not in this process: a write descriptor of ours open while another
        // test's child forks would leave the file busy for exec (ETXTBSY, seen in CI).
        let copied = try runProgram("/bin/cp", [pair.serving.environment.binary, jail + "/tokenctl"])
        #expect(copied.status == 0, "\(copied)")
        let listener = try pair.serving.start(["forward", "listen", "--socket", jail + "/forward.sock"])
        defer {
            listener.signal(SIGTERM)
            _ = listener.wait()
        }
        #expect(listener.waitForStandardError(containing: "serving forwarded tokens") != nil)
        // A directory named with --socket keeps its mode (it may be /tmp or a shared volume).
        let mode = try FileManager.default.attributesOfItem(atPath: jail)[.posixPermissions] as? Int
        #expect(mode == 0o755, "listen left the jail's mode alone: \(String(mode ?? 0, radix: 8))")
        let files = try FileManager.default.contentsOfDirectory(atPath: jail).sorted()
        #expect(files == ["forward.sock", "tokenctl"], "nothing else in the container: \(files)")
        // A container has its own /proc (the Swift runtime reads /proc/self/exe at start-up):
        // a private mount and PID namespace with a fresh proc, then chroot into the jail.
        try FileManager.default.createDirectory(atPath: jail + "/proc", withIntermediateDirectories: true)
        func inContainer(_ arguments: String) throws -> RunResult {
            try runProgram(
                "/usr/bin/unshare",
                [
                    "--mount", "--pid", "--fork", "/bin/sh", "-c",
                    "mount -t proc proc \"$1/proc\" && exec /usr/sbin/chroot \"$1\" /tokenctl $2", "sh", jail,
                    arguments,
                ], environment: ["TOKENCTL_FORWARD_SOCKET": "/forward.sock"])
        }
        let result = try inContainer("token --format header")
        let local = line(try pair.serving.tokenctl("token"))
        #expect(result.status == 0 && line(result) == "Authorization: Bearer \(local)", "\(result)")
        let refused = try inContainer("--profile other token")
        #expect(refused.status == 77 && refused.stderr.contains("not forwarded"), "\(refused)")
        let unsupported = try inContainer("status")
        #expect(unsupported.status == 69 && unsupported.stderr.contains("tokenctl-engine"), "\(unsupported)")
    }

    @Test(
        "DPoP over the forward: the serving side signs the proof for the client's request, which the resource server accepts; the key never leaves"
    )
    func dpopProofs() throws {
        let pair = try ForwardPair()
        let server = try AuthServer()
        let refreshToken = try server.issue()
        let login = try pair.serving.tokenctl(
            "login", "--dpop", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin",
            stdin: refreshToken)
        #expect(login.status == 0, "\(login)")
        #expect(try pair.serving.tokenctl("forward", "enable", "--no-unit").status == 0)
        try pair.listen()
        let resource = server.url + "/resource"
        let headers = try pair.client.tokenctl("token", "--format", "dpop", "--method", "GET", "--url", resource)
        #expect(headers.status == 0, "\(headers)")
        let answer = try runProgram("/bin/sh", ["-c", "curl -sS -H @- \"$1\"", "sh", resource], stdin: headers.stdout)
        #expect(answer.stdout.contains("\"ok\": true") && answer.stdout.contains("DPoP"), "\(answer)")
        let again = try pair.client.tokenctl("token", "--format", "dpop", "--method", "GET", "--url", resource)
        #expect(again.stdout != headers.stdout, "a new proof each time")
        // The serving side records a hand-out after its answer has gone out: wait for a proof's.
        let proofs = try awaiting(1) {
            try pair.events("tokenForwarded").filter { ($0["reason"] as? String)?.contains("DPoP proof") == true }
        }
        #expect(!proofs.isEmpty, "a hand-out for a DPoP proof is logged")
    }
}
