import Foundation
import Testing
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// `forward enable|disable|status|listen|serve` run in-process with a `TestEngine`, for what
/// needs no remote: the profiles marked, the socket unit written and enabled through the
/// engine's systemd user manager (which records every `systemctl --user` call), its failures,
/// and `listen` and `serve` refusing what they cannot serve. The socket files are real, in the
/// engine's private runtime directory. The end-to-end suites (`ForwardTests`,
/// `ForwardSocketUnitTests`) serve real connections under a real user manager.
@Suite("TokenctlCommands: forward with a systemd user manager of the test's")
struct ForwardCommandTests {
    static func unitDirectory(_ engine: TestEngine) -> String { engine.root + "/config/systemd/user" }

    /// What `forward enable` prints after enabling, for a socket at `socket`.
    static func forwardingHelp(_ socket: String) -> String {
        """
        To use it from a remote host:  ssh -R /run/user/REMOTE_UID/tokenctl-forward.sock:\(socket) HOST
                                       (the remote host's sshd_config needs StreamLocalBindUnlink yes)
        In a container:                docker run --user "$(id -u)" -v \(socket):/run/tokenctl.sock -e TOKENCTL_FORWARD_SOCKET=/run/tokenctl.sock IMAGE tokenctl token

        """
    }

    static func signedIn() throws -> TestEngine {
        let engine = try TestEngine()
        try engine.signIn("work", tokenSet: engine.tokenSet())
        return engine
    }

    @Test("enable: the profile marked, the socket unit written and enabled; status; disable takes it all away")
    func enableStatusDisable() async throws {
        let engine = try Self.signedIn()
        let units = Self.unitDirectory(engine)
        let socket = engine.paths.forwardSocket
        let enable = try await engine.run("--profile", "work", "forward", "enable")
        #expect(enable.status == .success && enable.stdout.isEmpty, "\(enable)")
        #expect(
            enable.stderr
                == "Forwarding profile 'work'.\nEnabled systemd user socket tokenctl-forward.socket: \(units)/tokenctl-forward.socket.\nServing \(socket)\n"
                + Self.forwardingHelp(socket), "\(enable)")
        #expect(
            engine.systemd.calls == [
                ["show-environment"], ["daemon-reload"], ["enable", "--now", "tokenctl-forward.socket"],
            ])
        #expect(try ProfileRepository(paths: engine.paths).require(ProfileName(rawValue: "work")!).forward)
        let service = try String(contentsOfFile: units + "/tokenctl-forward.service", encoding: .utf8)
        #expect(service.contains("\nExecStart=tokenctl forward serve\n"), "\(service)")
        #expect(
            service.contains("\nEnvironment=TOKENCTL_RUNTIME_DIR=\(engine.root)/runtime\n"),
            "the lock directory travels with the unit: \(service)")
        let socketUnit = try String(contentsOfFile: units + "/tokenctl-forward.socket", encoding: .utf8)
        #expect(
            socketUnit.contains("\nListenStream=%t/tokenctl/forward.sock\n") && socketUnit.contains("\nAccept=no\n"))

        let status = try await engine.run("forward", "status")
        #expect(status.status == .unavailable && status.stderr.isEmpty, "forwarded, but nothing serves: \(status)")
        #expect(
            status.stdout
                == """
                Forwarded profiles:
                  work (no limits)
                Socket: \(socket) (absent)
                Socket unit: tokenctl-forward.socket active
                No hand-outs yet.

                """, "\(status)")

        let before = engine.systemd.calls.count
        let disable = try await engine.run("forward", "disable")
        #expect(disable.status == .success && disable.stdout.isEmpty, "\(disable)")
        #expect(
            disable.stderr
                == """
                No longer forwarding profile 'work'.
                Disabled tokenctl-forward.socket.
                Removed \(units)/tokenctl-forward.socket.
                Removed \(units)/tokenctl-forward.service.
                No profile is forwarded now; a 'tokenctl forward listen' still running refuses every request.

                """, "\(disable)")
        #expect(
            Array(engine.systemd.calls.dropFirst(before)) == [
                ["disable", "--now", "tokenctl-forward.socket"], ["daemon-reload"],
            ])
        #expect(!FileManager.default.fileExists(atPath: units + "/tokenctl-forward.socket"))
        let after = try await engine.run("forward", "status")
        #expect(after.status == .success, "\(after)")
        #expect(
            after.stdout
                == "No profile is forwarded ('tokenctl forward enable' shares one).\nSocket: \(socket) (absent)\nSocket unit: tokenctl-forward.socket inactive\nNo hand-outs yet.\n",
            "\(after)")
    }

    @Test("enable --scope --audience --no-unit: the limits saved and shown, no unit, nothing asked of systemd")
    func enableWithLimitsWithoutUnit() async throws {
        let engine = try Self.signedIn()
        let enable = try await engine.run(
            "--profile", "work", "forward", "enable", "--scope", "read write", "--audience", "api", "--no-unit")
        #expect(enable.status == .success, "\(enable)")
        #expect(
            enable.stderr
                == "Forwarding profile 'work' (scope within 'read write', audience or resource within 'api').\nServe the socket with 'tokenctl forward listen' (or the socket unit).\n",
            "\(enable)")
        #expect(engine.systemd.calls.isEmpty)
        engine.systemd.stopManager()
        let status = try await engine.run("forward", "status")
        #expect(
            status.stdout
                == "Forwarded profiles:\n  work (forward_scope = read write; forward_audience = api)\nSocket: \(engine.paths.forwardSocket) (absent)\nNo hand-outs yet.\n",
            "without a manager, no socket unit line: \(status)")
    }

    @Test("fake systemctl without a user manager: enable marks the profile and says to run 'forward listen'")
    func enableWithoutManager() async throws {
        let engine = try Self.signedIn()
        engine.systemd.stopManager()
        let enable = try await engine.run("--profile", "work", "forward", "enable")
        #expect(enable.status == .success, "\(enable)")
        #expect(
            enable.stderr
                == "Forwarding profile 'work'.\nNo systemd user manager answers ('systemctl --user'): serve the socket in the foreground with 'tokenctl forward listen' (e.g. in tmux or screen).\n"
                + Self.forwardingHelp(engine.paths.forwardSocket), "\(enable)")
        #expect(engine.systemd.calls == [["show-environment"]])
        #expect(!FileManager.default.fileExists(atPath: Self.unitDirectory(engine) + "/tokenctl-forward.socket"))
    }

    @Test("fake systemctl failing enable: exit 69, the command and its words, the hint; the units written are removed")
    func systemctlEnableFails() async throws {
        let engine = try Self.signedIn()
        engine.systemd.fail("enable", with: "Failed to enable unit: Access denied")
        let enable = try await engine.run("--profile", "work", "forward", "enable")
        #expect(enable.status == .unavailable && enable.stdout.isEmpty, "\(enable)")
        #expect(
            enable.stderr
                == """
                Forwarding profile 'work'.
                Error: cannot enable the forward socket: 'systemctl --user enable --now tokenctl-forward.socket' failed: Failed to enable unit: Access denied
                Serve it in the foreground instead: 'tokenctl forward listen'.

                """, "\(enable)")
        #expect(!FileManager.default.fileExists(atPath: Self.unitDirectory(engine) + "/tokenctl-forward.socket"))
        #expect(!FileManager.default.fileExists(atPath: Self.unitDirectory(engine) + "/tokenctl-forward.service"))
    }

    @Test("enable of a profile that is not configured: exit 78 and how to sign it in; nothing enabled")
    func enableUnknownProfile() async throws {
        let engine = try TestEngine()
        let enable = try await engine.run("forward", "enable", "ghost")
        #expect(enable.status == .configuration, "\(enable)")
        #expect(
            enable.stderr
                == "Error: profile 'ghost' is not configured (no \(engine.paths.profileFile(ProfileName(rawValue: "ghost")!)))\nSign it in first: 'tokenctl --profile ghost login --issuer URL --client-id ID'.\n",
            "\(enable)")
        #expect(engine.systemd.calls.isEmpty)
    }

    @Test("usage errors of forward: exit 64, the message and the usage line, nothing asked of systemd")
    func usageErrors() async throws {
        let engine = try TestEngine()
        let long = "/" + String(repeating: "s", count: 120)
        let cases: [([String], String)] = [
            (
                ["forward", "listen", "--socket", "relative.sock"],
                "Invalid value for '--socket': expected an absolute path of at most 107 bytes."
            ),
            (
                ["forward", "listen", "--socket", long],
                "Invalid value for '--socket': expected an absolute path of at most 107 bytes."
            ),
            (["forward", "enable", "--socket", "/tmp/x.sock"], "'--socket' applies to 'forward listen' only."),
            (["forward", "listen", "work"], "'forward listen' takes no profile names."),
            (["forward", "status", "--scope", "read"], "'--scope' applies to 'forward enable' only."),
            (["forward", "disable", "--no-unit"], "'--no-unit' applies to 'forward enable' only."),
            (
                ["forward", "enable", "../x"],
                "Invalid profile name '../x': use 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'."
            ),
        ]
        for (arguments, message) in cases {
            let result = try await engine.runArguments(arguments)
            #expect(result.status == .usage && result.stdout.isEmpty, "\(arguments): \(result)")
            #expect(
                result.stderr.split(separator: "\n").map(String.init) == [
                    "Error: " + message,
                    "USAGE: tokenctl [--profile <name>] forward enable|disable|status|serve|listen [--scope <scopes>] [--audience <list>] [--socket <path>] [<profile>…]",
                    "  See 'tokenctl forward --help' for more information.",
                ], "\(arguments): \(result)")
        }
        #expect(engine.systemd.calls.isEmpty)
    }

    @Test("listen refuses a path that is not a socket (78) and a socket something serves (69), and leaves both")
    func listenRefuses() async throws {
        let engine = try TestEngine()
        let file = engine.root + "/runtime/not-a-socket"
        try "keep me\n".write(toFile: file, atomically: true, encoding: .utf8)
        let notSocket = try await engine.run("forward", "listen", "--socket", file)
        #expect(notSocket.status == .configuration, "\(notSocket)")
        #expect(notSocket.stderr == "Error: \(file) exists and is not a socket; not replacing it\n", "\(notSocket)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "keep me\n")

        let served = engine.root + "/runtime/served.sock"
        let listening = try UnixSocket.listen(at: served, makingPrivateDirectory: false)
        defer {
            UnixSocket.close(listening)
            UnixSocket.remove(served)
        }
        let busy = try await engine.run("forward", "listen", "--socket", served)
        #expect(busy.status == .unavailable, "\(busy)")
        #expect(
            busy.stderr
                == "Error: something already serves \(served) (another 'tokenctl forward listen', or the socket unit)\nSee 'tokenctl forward status'.\n",
            "\(busy)")
        #expect(UnixSocket.isServed(served), "the other listener keeps its socket")
    }

    @Test("serve with no socket handed over (standard input a file): exit 64, where the socket comes from")
    func serveWithoutSocket() async throws {
        let engine = try TestEngine()
        let serve = try await engine.run("forward", "serve")
        #expect(serve.status == .usage && serve.stdout.isEmpty, "\(serve)")
        #expect(
            serve.stderr
                == "Error: 'tokenctl forward serve' serves the socket systemd hands it (tokenctl-forward.socket), and there is none here.\nRun 'tokenctl forward enable' to use the socket unit, or serve in the foreground with 'tokenctl forward listen'.\n",
            "\(serve)")
    }
}
