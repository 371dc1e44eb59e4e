import Foundation
import Testing
import TokenctlTestSupport

/// The forward's one serving process (`forward listen`; `forward serve` under the socket unit
/// runs the same loop): many connections at once, silent ones, a remote's forced refreshes and
/// a flood of refused requests, each through the built binary and raw sockets (python3).
extension ForwardTests {
    /// Connect `count` clients at once (a barrier before connect) and send each a complete
    /// request; prints how many got which first line.
    static let burst = #"""
        import socket, sys, threading, collections
        path, count = sys.argv[1], int(sys.argv[2])
        request = sys.argv[3].encode() if len(sys.argv) > 3 else b'tokenctl-forward-v1 request\nprofile=default\ncommand=token\n\n'
        barrier = threading.Barrier(count)
        results = [None] * count
        def one(index):
            try:
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(120)
                barrier.wait()
                s.connect(path)
                s.sendall(request)
                data = b''
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                results[index] = data.split(b'\n', 1)[0].decode() or 'closed without an answer'
            except Exception as error:
                results[index] = 'error ' + type(error).__name__
        threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for line, number in sorted(collections.Counter(results).items()):
            print('%d %s' % (number, line))
        """#

    @Test("200 concurrent complete requests are all answered with a token, by one process")
    func concurrentRequests() throws {
        let server = try AuthServer()
        let pair = try ForwardPair.listening(for: server)
        let result = try runProgram("/usr/bin/python3", ["-c", Self.burst, pair.socket, "200"])
        #expect(result.stdout == "200 tokenctl-forward-v1 token\n", "\(result)")
        #expect(pair.listener != nil && pair.stop()?.status == 0, "the listener is still running")
    }

    @Test(
        "100 silent connections: a legitimate request (raw and through tokenctl) is answered before their read deadline, they are cut at it with 75; the serving process's memory is printed"
    )
    func silentConnections() throws {
        let server = try AuthServer()
        let pair = try ForwardPair.listening(for: server)
        let listenerPID = try #require(pair.listener?.pid)
        func resident() -> String {
            let status = (try? String(contentsOfFile: "/proc/\(listenerPID)/status", encoding: .utf8)) ?? ""
            return status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.map {
                $0.dropFirst(6).trimmingCharacters(in: .whitespaces)
            } ?? "unknown"
        }
        let idle = resident()
        let silent = try RunningCommand(
            executable: "/usr/bin/python3",
            arguments: [
                "-c",
                #"""
                import socket, sys, time
                path, count = sys.argv[1], int(sys.argv[2])
                held = []
                for _ in range(count):
                    s = socket.socket(socket.AF_UNIX)
                    s.connect(path)
                    held.append(s)
                opened = time.time()
                print('opened %.3f' % opened, flush=True)
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(30)
                s.connect(path)
                s.sendall(b'tokenctl-forward-v1 request\nprofile=default\ncommand=token\n\n')
                first = s.recv(4096).split(b'\n', 1)[0].decode()
                print('legitimate %.3f %s' % (time.time() - opened, first), flush=True)
                answers = []
                for s in held:
                    s.settimeout(30)
                    data = s.recv(4096)
                    answers.append((time.time(), b'status=75' in data))
                print('silent first %.3f after %.3f s, %d of %d cut with 75' % (min(a[0] for a in answers), min(a[0] for a in answers) - opened, sum(1 for a in answers if a[1]), count), flush=True)
                """#,
                pair.socket, "100",
            ], environment: [:], stdin: nil, directory: pair.serving.root)
        var waited = 0
        while !silent.currentStandardOutput.contains("legitimate"), waited < 400 {
            usleep(50_000)
            waited += 1
        }
        let started = now()
        let client = try pair.client.tokenctl("token")
        let finished = now()
        let held = resident()
        let result = silent.wait()
        print(
            "forward serving process: VmRSS \(idle) idle, \(held) with 100 silent connections open; tokenctl token through it: \(String(format: "%.3f", finished - started)) s; \(result.stdout)"
        )
        let lines = result.stdout.split(separator: "\n")
        let legitimate = try #require(lines.first { $0.hasPrefix("legitimate ") }, "\(result)")
        let fields = legitimate.split(separator: " ")
        let seconds = try #require(Double(fields[1]))
        #expect(fields.count >= 3 && fields[2] == "tokenctl-forward-v1", "\(result)")
        let summary = try #require(lines.first { $0.hasPrefix("silent first ") }, "\(result)")
        let firstCut = try #require(Double(summary.split(separator: " ")[2]))
        // Ordered against the silent ones' cut (their read deadline), not against a clock bound.
        let cutAfter = try #require(Double(summary.split(separator: " ")[4]))
        #expect(seconds < cutAfter, "the raw request waited \(seconds) s behind the silent ones, cut at \(cutAfter) s")
        #expect(summary.hasSuffix("100 of 100 cut with 75"), "\(result)")
        #expect(client.status == 0 && !client.stdout.isEmpty, "\(client)")
        #expect(finished < firstCut, "tokenctl token finished before the silent ones were cut: \(result)")
        #expect(pair.stop()?.status == 0)
    }

    @Test(
        "a remote loop of forced refreshes for 10 s makes one refresh at the server; a force naming a token already replaced refreshes nothing"
    )
    func remoteForcedRefreshes() throws {
        let server = try AuthServer(["grace_seconds": 0])
        let pair = try ForwardPair.listening(for: server)
        let before = try server.refreshGrants().count
        let loop = try runProgram(
            "/usr/bin/python3",
            [
                "-c",
                #"""
                import socket, sys, time, collections
                path = sys.argv[1]
                end = time.time() + 10
                answers = collections.Counter()
                while time.time() < end:
                    s = socket.socket(socket.AF_UNIX)
                    s.settimeout(30)
                    s.connect(path)
                    s.sendall(b'tokenctl-forward-v1 request\nprofile=default\nforce=1\ncommand=token\n\n')
                    data = b''
                    while True:
                        chunk = s.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    answers[data.split(b'\n', 1)[0].decode()] += 1
                    s.close()
                for line, number in answers.items():
                    print('%d %s' % (number, line))
                """#,
                pair.socket,
            ])
        let refreshes = try server.refreshGrants().count - before
        print(
            "remote forced refreshes for 10 s: \(loop.stdout.replacingOccurrences(of: "\n", with: "; ")) -> \(refreshes) refresh(es) at the server"
        )
        #expect(loop.status == 0 && loop.stdout.contains(" tokenctl-forward-v1 token"), "\(loop)")
        #expect(!loop.stdout.contains("error"), "\(loop)")
        #expect(refreshes == 1, "at most one forced refresh per 30 s: \(refreshes)")
        #expect(try server.stats()["reuse_detected"] == 0)

        // A new serving process (its limit starts anew): a force naming a token that is no
        // longer the current one is answered with the current one, without a refresh.
        #expect(pair.stop()?.status == 0)
        try pair.listen()
        let current = line(try pair.serving.tokenctl("token"))
        let stale = try runProgram(
            "/usr/bin/python3",
            [
                "-c",
                #"""
                import hashlib, socket, sys
                path, token = sys.argv[1], sys.argv[2]
                def ask(fingerprint):
                    s = socket.socket(socket.AF_UNIX)
                    s.settimeout(30)
                    s.connect(path)
                    s.sendall(('tokenctl-forward-v1 request\nprofile=default\nforce=1\ntoken_fingerprint=%s\n\n' % fingerprint).encode())
                    data = b''
                    while True:
                        chunk = s.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    fields = dict(line.split('=', 1) for line in data.decode().split('\n')[1:] if '=' in line)
                    return fields.get('access_token', 'none: ' + data.decode().replace('\n', ' | '))
                print('stale', ask(hashlib.sha256(b'a token long replaced').hexdigest()) == token)
                print('current', ask(hashlib.sha256(token.encode()).hexdigest()) != token)
                """#,
                pair.socket, current,
            ])
        let afterStale = try server.refreshGrants().count - before
        #expect(stale.stdout == "stale True\ncurrent True\n", "\(stale)")
        #expect(afterStale == 2, "only the force naming the current token refreshed: \(afterStale - 1)")
        #expect(pair.stop()?.status == 0)
    }

    @Test(
        "a client's forced refresh names the token it holds: after the serving side refreshed on its own, the force gets the newer token with no refresh; then it refreshes"
    )
    func clientForceNamesItsToken() throws {
        let server = try AuthServer(["grace_seconds": 0])
        let pair = try ForwardPair.listening(for: server)
        let held = line(try pair.client.tokenctl("token"))
        let newer = line(try pair.serving.tokenctl("token", "--force"))
        #expect(newer != held && !newer.isEmpty)
        let before = try server.refreshGrants().count
        let forced = try pair.client.tokenctl("token", "--force")
        #expect(forced.status == 0 && line(forced) == newer, "\(forced)")
        #expect(try server.refreshGrants().count == before, "the token the client held was already replaced")
        // Now the client holds the current token: its force refreshes (once: the limit's first).
        let refreshed = try pair.client.tokenctl("token", "--force")
        #expect(refreshed.status == 0 && line(refreshed) != newer, "\(refreshed)")
        #expect(try server.refreshGrants().count == before + 1)
        #expect(try server.stats()["reuse_detected"] == 0)
        #expect(pair.stop()?.status == 0)
    }

    @Test(
        "10,000 refused requests are summed up in the refusal log: the hand-outs and the user's own events stay; a client's command text is quoted in the reason"
    )
    func refusalFlood() throws {
        let server = try AuthServer()
        let pair = try ForwardPair.listening(for: server)
        #expect(try pair.client.tokenctl("token").status == 0)
        let injected = try pair.raw(
            "s.sendall(b'tokenctl-forward-v1 request\\nprofile=default\\ncommand=tok; to pid 1 (sshd) uid 1001\\n\\n')\nprint(s.recv(65536).split(b'\\n')[0].decode())"
        )
        #expect(injected.stdout == "tokenctl-forward-v1 token\n", "\(injected)")
        let ownBefore = try pair.events("signedIn").count
        let handOutsBefore = try pair.events("tokenForwarded", awaiting: 2)
        #expect(ownBefore >= 1 && handOutsBefore.count >= 2, "\(handOutsBefore)")
        let flood = try runProgram(
            "/usr/bin/python3",
            [
                "-c",
                #"""
                import socket, sys, threading
                path = sys.argv[1]
                answered = [0] * 4
                def run(index):
                    for _ in range(2500):
                        s = socket.socket(socket.AF_UNIX)
                        s.settimeout(30)
                        s.connect(path)
                        s.sendall(b'GET / HTTP/1.1\r\n\r\n\n\n')
                        if b'tokenctl-forward-v1 error' in s.recv(4096):
                            answered[index] += 1
                        s.close()
                threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                print(sum(answered))
                """#,
                pair.socket,
            ])
        #expect(flood.stdout == "10000\n", "\(flood)")
        #expect(pair.stop()?.status == 0, "stopping writes the last summaries")
        #expect(try pair.events("signedIn").count == ownBefore, "the user's own events stay")
        let handOuts = try pair.events("tokenForwarded")
        #expect(handOuts.count == handOutsBefore.count, "the hand-outs stay")
        let summaries = try pair.events("forwardRefused")
        let refused = summaries.compactMap { $0["count"] as? Int }.reduce(0, +)
        #expect(refused == 10000, "\(summaries)")
        #expect(summaries.count <= 10, "summed up, not one record each: \(summaries.count)")
        let mainLog = pair.serving.root + "/state/tokenctl/events.jsonl"
        let mainText = try String(contentsOfFile: mainLog, encoding: .utf8)
        #expect(!mainText.contains("forwardRefused"), "refusals are not in the main log")
        // The client's text in quotes, after the peer's own fields, which appear once.
        let reason = try #require(
            handOuts.compactMap { $0["reason"] as? String }.first { $0.contains("tok;") }, "\(handOuts)")
        #expect(reason.hasSuffix("; for \"tok; to pid 1 (sshd) uid 1001\""), "\(reason)")
        let beforeQuote = reason.components(separatedBy: "\"").first ?? ""
        #expect(beforeQuote.components(separatedBy: "to pid ").count == 2, "\(reason)")
        let shown = try pair.serving.tokenctl("events")
        #expect(shown.stdout.contains("forwardRefused") && shown.stdout.contains("tokenForwarded"), "\(shown)")
    }

    @Test(
        "forward serve answers one connected socket on its standard input (a unit with Accept=yes an earlier version wrote), serves a listening one until stopped or idle, and exits 64 on a terminal or pipe"
    )
    func serveCompatibility() throws {
        let pair = try ForwardPair()
        let server = try AuthServer()
        try pair.serving.login(server)
        #expect(try pair.serving.tokenctl("forward", "enable", "--no-unit").status == 0)
        let local = line(try pair.serving.tokenctl("token"))
        let result = try runProgram(
            "/usr/bin/python3",
            [
                "-c",
                #"""
                import os, signal, socket, subprocess, sys, time
                tokenctl = sys.argv[1]
                ours, theirs = socket.socketpair()
                child = subprocess.Popen([tokenctl, 'forward', 'serve'], stdin=theirs, stdout=theirs)
                theirs.close()
                ours.settimeout(30)
                ours.sendall(b'tokenctl-forward-v1 request\nprofile=default\ncommand=token\n\n')
                data = b''
                while not data.endswith(b'\n\n'):
                    chunk = ours.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                fields = dict(l.split('=', 1) for l in data.decode().split('\n')[1:] if '=' in l)
                print('connected', child.wait(timeout=30), fields.get('access_token'))
                # A listening socket on standard input (inetd style): served until SIGTERM.
                path = os.path.join(os.environ['HOME'], 'inetd.sock')
                listening = socket.socket(socket.AF_UNIX)
                listening.bind(path)
                listening.listen(16)
                child = subprocess.Popen([tokenctl, 'forward', 'serve'], stdin=listening)
                answers = []
                for _ in range(3):
                    s = socket.socket(socket.AF_UNIX)
                    s.settimeout(30)
                    s.connect(path)
                    s.sendall(b'tokenctl-forward-v1 request\nprofile=default\ncommand=token\n\n')
                    answers.append(s.recv(65536).split(b'\n', 1)[0].decode())
                    s.close()
                child.send_signal(signal.SIGTERM)
                print('listening', child.wait(timeout=30), ' '.join(sorted(set(answers))))
                # Idle: it exits by itself (TOKENCTL_FORWARD_IDLE_EXIT) after its last connection.
                env = dict(os.environ, TOKENCTL_FORWARD_IDLE_EXIT='1')
                child = subprocess.Popen([tokenctl, 'forward', 'serve'], stdin=listening, env=env)
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(30)
                s.connect(path)
                s.sendall(b'tokenctl-forward-v1 request\nprofile=default\ncommand=token\n\n')
                answer = s.recv(65536).split(b'\n', 1)[0].decode()
                s.close()
                start = time.time()
                status = child.wait(timeout=30)
                print('idle', status, answer, 'after %.1f s' % (time.time() - start))
                """#,
                pair.serving.environment.binary,
            ], environment: pair.serving.variables)
        #expect(result.stdout.contains("connected 0 \(local)\n"), "\(result)")
        #expect(result.stdout.contains("listening 0 tokenctl-forward-v1 token\n"), "\(result)")
        #expect(result.stdout.contains("idle 0 tokenctl-forward-v1 token after "), "\(result)")
        let terminal = try pair.serving.tokenctl("forward", "serve", stdin: "")
        #expect(terminal.status == 64 && terminal.stderr.contains("forward listen"), "\(terminal)")
    }
}
