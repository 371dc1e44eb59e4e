import Foundation
import Testing
import TokenctlTestSupport

/// A remote host for the forwarding tests: a private OpenSSH server (Debian's sshd, on
/// 127.0.0.1, started by Scripts/lib/sshd.sh in a services directory of its own, stopped by PID)
/// whose sessions run as the real other user `tokenctl-remote`, with copies of the release
/// `tokenctl` and `tokenctl-engine` in `remoteBin`. Commands run with `ssh -R REMOTE:LOCAL`, as a
/// user forwards a socket to a host: the local end is connected to by the ssh client (this
/// process's user, root), the remote end is a socket the remote user owns.
///
///     let remote = try SSHRemote()
///     defer { remote.stop() }
///     let socket = remote.remoteSocketDirectory + "/forward.sock"
///     let result = try remote.run(
///         "tokenctl token", forwarding: socket, to: localSocket,
///         environment: ["TOKENCTL_FORWARD_SOCKET": socket])
///
/// Needs root (useradd, sshd) and the services Scripts/test starts (TestEnvironment).
final class SSHRemote: @unchecked Sendable {
    static let user = "tokenctl-remote"
    /// The ssh client config's Host name (Scripts/lib/sshd.sh writes it).
    static let host = "tokenctl-remote"
    let environment: TestEnvironment
    /// Root's, 0711: `services/` (tk_services_init's, 0700) and `remote/` (the remote user's).
    let directory: String
    let servicesDirectory: String
    /// The remote user's own directory (0700): home/, sockets/, bin/, runtime/.
    let remoteDirectory: String
    /// HOME of the remote sessions (and their working directory).
    let remoteHome: String
    /// A 0700 directory of the remote user's for the -R socket paths.
    let remoteSocketDirectory: String
    /// The remote user's copies of `tokenctl` and `tokenctl-engine`; first on the remote PATH.
    let remoteBin: String
    /// A 0700 directory of the remote user's, for an XDG_RUNTIME_DIR if a test wants one (the
    /// sessions get none: there is no logind).
    let remoteRuntimeDirectory: String
    /// The ssh client's config (`ssh -F`): host key checked, batch mode, ExitOnForwardFailure.
    let sshConfig: String
    let port: Int
    private let shell = ShellServices(variable: "TOKENCTL_SSHD_SH", file: "sshd.sh")
    private let lock = NSLock()
    private var stopped = false

    init() throws {
        environment = try TestEnvironment.require()
        guard getuid() == 0 else { throw HarnessError("SSHRemote needs root (useradd, sshd)") }
        let temporary =
            NSTemporaryDirectory().hasSuffix("/") ? String(NSTemporaryDirectory().dropLast()) : NSTemporaryDirectory()
        // Short: the socket paths under it must fit sun_path (108 bytes).
        directory = temporary + "/tokenctl-ssh-" + String(UUID().uuidString.prefix(8))
        servicesDirectory = directory + "/services"
        remoteDirectory = directory + "/remote"
        remoteHome = remoteDirectory + "/home"
        remoteSocketDirectory = remoteDirectory + "/sockets"
        remoteBin = remoteDirectory + "/bin"
        remoteRuntimeDirectory = remoteDirectory + "/runtime"
        // Searchable by the remote user (its directory is inside), not listable.
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o711])
        let started: RunResult
        do {
            started = try shell.start(
                in: servicesDirectory,
                """
                tk_start_sshd "$3"
                printf 'port=%s\\nconfig=%s\\nhome=%s\\nsockets=%s\\n' \\
                  "$TK_SSHD_PORT" "$TK_SSH_CONFIG" "$TK_SSHD_REMOTE_HOME" "$TK_SSHD_REMOTE_SOCKETS"
                """, arguments: [remoteDirectory])
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        let values = ShellServices.values(of: started.stdout)
        guard started.status == 0, let port = values["port"].flatMap({ Int($0) }), let config = values["config"],
            values["home"] == remoteHome, values["sockets"] == remoteSocketDirectory
        else {
            shell.stop(in: servicesDirectory)
            try? FileManager.default.removeItem(atPath: directory)
            throw HarnessError("starting sshd (Scripts/lib/sshd.sh) failed: \(started)")
        }
        self.port = port
        sshConfig = config
        // The executables the remote user runs: the front and the engine it runs from its own
        // directory, owned by the user (the checkout may be closed to it).
        let built = URL(fileURLWithPath: environment.binary).deletingLastPathComponent().path
        let copied = try runProgram(
            "/bin/sh",
            [
                "-c",
                """
                set -e
                mkdir -p -m 0700 "$1" "$2"
                cp "$3/tokenctl" "$3/tokenctl-engine" "$1/"
                chown -R "$4:" "$1" "$2"
                """,
                "copy", remoteBin, remoteRuntimeDirectory, built, Self.user,
            ])
        guard copied.status == 0 else {
            stop()
            throw HarnessError("copying the executables for \(Self.user) failed: \(copied)")
        }
    }

    deinit { stop() }

    /// Stop sshd (by its recorded PID) and remove the directories. Safe to call twice.
    func stop() {
        lock.lock()
        let already = stopped
        stopped = true
        lock.unlock()
        guard !already else { return }
        shell.stop(in: servicesDirectory)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Run `command` (a bash command line) remotely, with `remoteSocket` forwarded to
    /// `localSocket` (`ssh -R remoteSocket:localSocket`) for as long as it runs.
    func run(
        _ command: String, forwarding remoteSocket: String, to localSocket: String,
        environment: [String: String] = [:], stdin: String? = nil
    ) throws -> RunResult {
        try start(command, forwarding: [(remoteSocket, localSocket)], environment: environment, stdin: stdin).wait()
    }

    /// Run `command` remotely with no forward.
    func run(_ command: String, environment: [String: String] = [:], stdin: String? = nil) throws -> RunResult {
        try start(command, forwarding: [], environment: environment, stdin: stdin).wait()
    }

    /// Start the ssh client (to wait on or signal): `command` runs in the remote HOME, through
    /// `env VARIABLES... /bin/bash -c COMMAND`, with `remoteBin` first on PATH unless
    /// `environment` sets PATH. Each (remote, local) pair is one `-R remote:local`.
    func start(
        _ command: String, forwarding forwards: [(remote: String, local: String)] = [],
        environment: [String: String] = [:], stdin: String? = nil
    ) throws -> RunningCommand {
        var arguments = ["-F", sshConfig]
        for forward in forwards { arguments += ["-R", forward.remote + ":" + forward.local] }
        arguments += [Self.host, remoteCommandLine(command, environment: environment)]
        return try RunningCommand(
            executable: "/usr/bin/ssh", arguments: arguments,
            environment: ["PATH": "/usr/bin:/bin", "HOME": servicesDirectory + "/home", "LANG": "C.UTF-8"],
            stdin: stdin, directory: servicesDirectory)
    }

    /// What ssh hands the remote user's shell.
    func remoteCommandLine(_ command: String, environment: [String: String]) -> String {
        var variables = environment
        if variables["PATH"] == nil { variables["PATH"] = remoteBin + ":/usr/local/bin:/usr/bin:/bin" }
        let assignments = variables.sorted { $0.key < $1.key }.map { Self.shellQuoted($0.key + "=" + $0.value) }
        return
            (["cd", Self.shellQuoted(remoteHome), "&&", "exec", "/usr/bin/env"] + assignments
            + ["/bin/bash", "-c", Self.shellQuoted(command)]).joined(separator: " ")
    }

    /// `text` as one word for a POSIX shell.
    static func shellQuoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
