import Foundation
import Testing
import TokenctlTestSupport

/// The ssh harness of the forwarding tests (SSHRemote, Scripts/lib/sshd.sh) on its own, with no
/// forwarding feature involved: a real sshd, the remote user, and a unix socket forwarded with
/// `ssh -R` to a local echo server.
@Suite("End to end: the ssh harness (a private sshd, a remote user, ssh -R unix-socket forwards)")
struct SSHHarnessTests {
    /// A local unix-socket echo server (python3) that answers `echo:UID:DATA`, UID the peer's
    /// (SO_PEERCRED).
    final class EchoServer {
        let socket: String
        private let process: RunningCommand

        init(in directory: String, python: String) throws {
            socket = directory + "/echo.sock"
            let script = """
                import socket, struct, sys
                server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                server.bind(sys.argv[1])
                server.listen(8)
                while True:
                    conn, _ = server.accept()
                    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
                    data = conn.recv(4096)
                    conn.sendall(b"echo:%d:" % uid + data)
                    conn.close()
                """
            process = try RunningCommand(
                executable: python, arguments: ["-c", script, socket], environment: ["PATH": "/usr/bin:/bin"],
                stdin: nil, directory: directory)
            let deadline = Date().addingTimeInterval(10)
            while !FileManager.default.fileExists(atPath: socket) {
                guard Date() < deadline else {
                    stop()
                    throw HarnessError("the echo server made no socket: \(process.currentStandardError)")
                }
                usleep(50_000)
            }
        }

        func stop() {
            process.signal(SIGTERM)
            _ = process.wait()
        }
    }

    /// The remote side's client: connect to argv[1] (retrying while the forward is set up), send
    /// argv[2], print the answer.
    static let client = """
        import socket, sys, time
        s = socket.socket(socket.AF_UNIX)
        for _ in range(50):
            try:
                s.connect(sys.argv[1])
                break
            except OSError:
                time.sleep(0.1)
        s.sendall(sys.argv[2].encode())
        print(s.recv(4096).decode())
        """

    @Test("a command runs remotely as tokenctl-remote, in its HOME, with the variables given and the copied binaries")
    func remoteUser() throws {
        let remote = try SSHRemote()
        defer { remote.stop() }
        let result = try remote.run(
            #"id -un; pwd; printf '%s\n' "$HOME" "$GREETING"; command -v tokenctl; test -x "$(dirname "$(command -v tokenctl)")/tokenctl-engine" && echo engine"#,
            environment: ["GREETING": "it's \"quoted\" $HOME"])
        #expect(result.status == 0, "\(result)")
        #expect(
            result.stdout.split(separator: "\n").map(String.init) == [
                SSHRemote.user, remote.remoteHome, remote.remoteHome, "it's \"quoted\" $HOME",
                remote.remoteBin + "/tokenctl", "engine",
            ], "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        let version = try remote.run("tokenctl --version")
        #expect(version.status == 0 && !version.stdout.isEmpty, "the remote user runs its copy: \(version)")
    }

    @Test("a unix socket forwarded with ssh -R reaches a local server, whose peer is the ssh client's user")
    func forwardedSocket() throws {
        let remote = try SSHRemote()
        defer { remote.stop() }
        let server = try EchoServer(in: remote.servicesDirectory, python: remote.environment.python)
        defer { server.stop() }
        let socket = remote.remoteSocketDirectory + "/forward.sock"
        let command = "python3 -c \(SSHRemote.shellQuoted(Self.client)) \"$FORWARD_SOCKET\" hello"
        let result = try remote.run(
            command, forwarding: socket, to: server.socket, environment: ["FORWARD_SOCKET": socket])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "echo:\(getuid()):hello\n", "\(result)")
        // The socket the remote user's clients connect to is its own; a second session replaces
        // the one left behind (StreamLocalBindUnlink).
        let owner = try remote.run("stat -c '%U %a' \(SSHRemote.shellQuoted(socket))")
        #expect(owner.stdout == "\(SSHRemote.user) 600\n", "\(owner)")
        let again = try remote.run(
            command, forwarding: socket, to: server.socket, environment: ["FORWARD_SOCKET": socket])
        #expect(again.stdout == "echo:\(getuid()):hello\n", "\(again)")
    }
}
