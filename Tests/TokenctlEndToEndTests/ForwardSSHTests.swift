import Foundation
import Testing
import TokenctlTestSupport

/// Forwarding through a real OpenSSH server from Debian (Scripts/lib/sshd.sh: sshd on
/// 127.0.0.1, key authentication, the remote user tokenctl-remote): the serving side's socket
/// forwarded with `ssh -R` to the remote user's well-known path, and the remote side using it
/// with nothing of the session (no profile, no Secret Service, no TOKENCTL_FORWARD_SOCKET).
@Suite("End to end: forwarding over a real ssh -R", .serialized)
struct ForwardSSHTests {
    /// Every process of the remote user: pid, environment and readable memory (root reads them).
    static let memoryScan = """
        import os, sys
        user_uid = int(sys.argv[1]); needles = [n.encode() for n in sys.argv[2:]]
        found = []; scanned = 0
        for pid in filter(str.isdigit, os.listdir('/proc')):
            try:
                if os.stat('/proc/' + pid).st_uid != user_uid: continue
                blobs = [open('/proc/%s/environ' % pid, 'rb').read(), open('/proc/%s/cmdline' % pid, 'rb').read()]
                with open('/proc/%s/maps' % pid) as maps, open('/proc/%s/mem' % pid, 'rb', 0) as mem:
                    for line in maps:
                        span, perms = line.split()[:2]
                        if 'r' not in perms: continue
                        start, end = (int(x, 16) for x in span.split('-'))
                        if end - start > 256 << 20: continue
                        try:
                            mem.seek(start); blobs.append(mem.read(end - start))
                        except (OSError, ValueError, OverflowError): pass
                scanned += 1
                for blob in blobs:
                    for needle in needles:
                        if needle in blob: found.append('%s:%d' % (pid, needles.index(needle)))
            except (FileNotFoundError, ProcessLookupError, PermissionError): pass
        print('scanned=%d found=%s' % (scanned, ','.join(sorted(set(found)))))
        """

    @Test(
        "over ssh -R: token, exec, git-credential get and exec-credential on the remote host; a 64-process remote fan-in on an expired token is one refresh; a profile not forwarded is refused; scope limits hold; the refresh token is in no remote file, environment or process memory"
    )
    func remoteSession() throws {
        let remote = try SSHRemote()
        defer { remote.stop() }
        let pair = try ForwardPair()
        let server = try AuthServer(["grace_seconds": 0])
        let firstRefreshToken = try pair.serving.loginWithExpiredAccessToken(server)
        try pair.serving.login(server, profile: "limited", clientID: "cli-l", scope: "openid offline_access read write")
        try pair.serving.login(server, profile: "private", clientID: "cli-p")
        #expect(try pair.serving.tokenctl("forward", "enable", "--no-unit").status == 0)
        #expect(try pair.serving.tokenctl("forward", "enable", "--no-unit", "--scope", "read", "limited").status == 0)
        try server.configure(["delay_seconds": 0.3])
        try pair.listen()
        let before = try server.tokenRequests().count

        // The remote user's well-known path: no variable to set there.
        let remoteSocket = remote.remoteRuntimeDirectory + "/tokenctl-forward.sock"
        let script = """
            set -u
            export XDG_RUNTIME_DIR=\(SSHRemote.shellQuoted(remote.remoteRuntimeDirectory))
            for i in $(seq 1 64); do (tokenctl token >"$HOME/fan.$i" 2>&1; echo $? >"$HOME/rc.$i") & done; wait
            echo "RC:$(cat "$HOME"/rc.* | sort -u | tr '\\n' ' ')"
            echo "DISTINCT:$(cat "$HOME"/fan.* | sort -u | wc -l)"
            rm -f "$HOME"/fan.* "$HOME"/rc.*
            echo "TOKEN:$(tokenctl token)"
            echo "EXEC:$(tokenctl exec -- sh -c 'printf %s "$TOKENCTL_ACCESS_TOKEN"')"
            printf 'protocol=https\\nhost=git.example.com\\n\\n' | tokenctl git-credential get | sed 's/^/GIT:/'
            echo "CRED:$(tokenctl token --format exec-credential)"
            tokenctl --profile private token 2>"$HOME/private.err"; echo "PRIVATE:$? $(head -c 300 "$HOME/private.err")"
            tokenctl --profile limited token --scope write 2>/dev/null; echo "BEYOND:$?"
            tokenctl --profile limited token --scope read >/dev/null; echo "WITHIN:$?"
            tokenctl status | sed 's/^/STATUS:/'
            tokenctl exec -- sleep 20 &
            sleep 1
            echo READY
            wait
            """
        let session = try remote.start(script, forwarding: [(remoteSocket, pair.socket)])
        let deadline = Date().addingTimeInterval(120)
        while !session.currentStandardOutput.contains("READY") && Date() < deadline { usleep(100_000) }
        let output = session.currentStandardOutput
        #expect(output.contains("READY"), "\(output)\n\(session.currentStandardError)")
        let stored = try #require(try pair.serving.storedTokenSet(issuer: server.url))
        let access = try #require(stored["access_token"] as? String)
        let currentRefreshToken = try #require(stored["refresh_token"] as? String)

        // While the remote `exec` child holds its token: search every remote process.
        let uid = try runProgram("/usr/bin/id", ["-u", SSHRemote.user]).stdout.trimmingCharacters(in: .newlines)
        let scan = try runProgram(
            "/usr/bin/python3", ["-c", Self.memoryScan, uid, firstRefreshToken, currentRefreshToken])
        #expect(scan.status == 0 && scan.stdout.contains("found=\n") && !scan.stdout.contains("scanned=0"), "\(scan)")
        let accessScan = try runProgram("/usr/bin/python3", ["-c", Self.memoryScan, uid, access])
        #expect(
            !accessScan.stdout.contains("found=\n"), "the scan finds what is there (the access token): \(accessScan)")
        let result = session.wait()
        #expect(result.status == 0, "\(result)")

        func value(_ key: String) -> String {
            result.stdout.split(separator: "\n").first { $0.hasPrefix(key + ":") }.map {
                String($0.dropFirst(key.count + 1))
            } ?? ""
        }
        #expect(value("RC") == "0 ", "\(result)")
        #expect(value("DISTINCT") == "1", "\(result)")
        #expect(try server.tokenRequests().count - before >= 1)
        let refreshes = try server.tokenRequests().dropFirst(before).filter {
            ($0["client_id"] as? String) == "cli" && ($0["grant_type"] as? String) == "refresh_token"
        }
        #expect(refreshes.count == 1, "one refresh for the 64 remote calls: \(refreshes.count)")
        #expect(value("TOKEN") == access && value("EXEC") == access, "\(result)")
        #expect(result.stdout.contains("GIT:password=\(access)"), "\(result)")
        #expect(value("CRED").contains("\"token\":\"\(access)\""), "\(result)")
        #expect(value("PRIVATE").hasPrefix("77 ") && value("PRIVATE").contains("not forwarded"), "\(result)")
        #expect(value("BEYOND") == "77" && value("WITHIN") == "0", "\(result)")
        #expect(result.stdout.contains("STATUS:State: authenticated (forwarded from"), "\(result)")
        #expect(try server.stats()["reuse_detected"] == 0)

        // No remote file holds a refresh token (nor a copy of the session).
        let files = try runProgram(
            "/usr/bin/find", [remote.remoteDirectory, "/tmp", "-xdev", "-user", SSHRemote.user, "-type", "f"])
        for file in files.stdout.split(separator: "\n").map(String.init) {
            let contents = (try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data()
            for needle in [firstRefreshToken, currentRefreshToken] {
                #expect(contents.range(of: Data(needle.utf8)) == nil, "\(file) holds a refresh token")
            }
        }
        // The hand-outs went through sshd, as the same user, and were logged.
        let events = try pair.events("tokenForwarded")
        #expect(
            events.count >= 4 && events.contains { ($0["reason"] as? String)?.contains("(ssh") == true },
            "\(events.prefix(3))")
    }
}
