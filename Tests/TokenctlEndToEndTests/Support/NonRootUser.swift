import Foundation
import Testing
import TokenctlTestSupport

/// A real non-root user (`tokenctl-quota`, made with useradd when missing) with a session bus
/// and gnome-keyring of its own, running the release binary through runuser: for what root never
/// meets, such as the kernel key quota (20,000 bytes for a non-root user by default; root's is
/// huge). Its services are started by the user and stopped by PID (Scripts/lib/services.sh);
/// every key the user holds is removed at the end, since its quota outlives the test.
final class NonRootUser: @unchecked Sendable {
    static let name = "tokenctl-quota"
    let environment: TestEnvironment
    let directory: String
    private let servicesScript: String
    /// The user's copy of the front (beside its copy of the engine).
    private let binary: String
    private(set) var variables: [String: String]

    init() throws {
        environment = try TestEnvironment.require()
        let repositoryScript =
            ProcessInfo.processInfo.environment["TOKENCTL_SERVICES_SH"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "../../../Scripts/lib/services.sh"
            ).standardized.path
        if try runProgram("/usr/bin/id", ["-u", Self.name]).status != 0 {
            let made = try runProgram(
                "/usr/sbin/useradd",
                ["--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/bash", Self.name])
            guard made.status == 0 || made.stderr.contains("already exists") else {
                throw HarnessError("useradd failed: \(made)")
            }
        }
        directory = NSTemporaryDirectory() + "tokenctl-nonroot-" + UUID().uuidString
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // The user may not be able to read the checkout (a clone under a 0700 directory, as
        // mktemp -d makes): it gets its own copy of the scripts it runs.
        let scripts = URL(fileURLWithPath: repositoryScript).deletingLastPathComponent().deletingLastPathComponent()
            .path
        let copied = try runProgram("/bin/cp", ["-R", scripts + "/lib", scripts + "/testserver", directory + "/"])
        guard copied.status == 0 else { throw HarnessError("cp of the scripts failed: \(copied)") }
        servicesScript = directory + "/lib/services.sh"
        // Likewise the executables: the front and the engine it runs from its own directory.
        let built = URL(fileURLWithPath: environment.binary).deletingLastPathComponent().path
        try FileManager.default.createDirectory(atPath: directory + "/bin", withIntermediateDirectories: true)
        let binaries = try runProgram(
            "/bin/cp", [built + "/tokenctl", built + "/tokenctl-engine", directory + "/bin/"])
        guard binaries.status == 0 else { throw HarnessError("cp of the executables failed: \(binaries)") }
        binary = directory + "/bin/tokenctl"
        let owned = try runProgram("/bin/chown", ["-R", Self.name + ":", directory])
        guard owned.status == 0 else { throw HarnessError("chown failed: \(owned)") }
        variables = [
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": directory + "/home",
            "XDG_CONFIG_HOME": directory + "/config",
            "XDG_STATE_HOME": directory + "/state",
            "XDG_RUNTIME_DIR": directory + "/runtime",
            "TOKENCTL_RUNTIME_DIR": directory + "/runtime",
            "DBUS_SESSION_BUS_ADDRESS": "unix:path=" + directory + "/runtime/bus",
            "LANG": "C.UTF-8",
        ]
        try removeKeys()
        try services("tk_start_dbus && tk_start_keyring test")
    }

    deinit {
        try? removeKeys()
        try? stopServices()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Run `tokenctl` as the user.
    @discardableResult
    func tokenctl(_ arguments: String..., stdin: String? = nil) throws -> RunResult {
        try start(arguments, stdin: stdin).wait()
    }

    func start(_ arguments: [String], stdin: String? = nil) throws -> RunningCommand {
        let assignments = variables.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        return try RunningCommand(
            executable: "/usr/sbin/runuser",
            arguments: ["-u", Self.name, "--", "/usr/bin/env", "-i"] + assignments + [binary] + arguments,
            environment: ["PATH": "/usr/bin:/bin"], stdin: stdin, directory: directory)
    }

    /// Run another program as the user, such as a process playing another user's part (its
    /// process group, which `signalGroup` ends, is the test's command's).
    func startProgram(_ executable: String, _ arguments: [String]) throws -> RunningCommand {
        try RunningCommand(
            executable: "/usr/sbin/runuser", arguments: ["-u", Self.name, "--", executable] + arguments,
            environment: ["PATH": "/usr/bin:/bin"], stdin: nil, directory: directory)
    }

    /// Sign the default profile in at `server` (one-use refresh tokens unless configured otherwise).
    func login(_ server: AuthServer) throws {
        let result = try tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", stdin: try server.issue())
        guard result.status == 0 else { throw HarnessError("login failed: \(result)") }
    }

    /// This user's line of /proc/key-users as (bytes used, bytes allowed), read as the user.
    func quota() throws -> (used: Int, maximum: Int) {
        let line = try asUser(#"awk -v uid="$(id -u)" '$1 == uid":" { print $5 }' /proc/key-users"#).stdout
        let parts = line.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "/").compactMap { Int($0) }
        guard parts.count == 2 else { return (0, 20_000) }
        return (parts[0], parts[1])
    }

    /// What another program does: fill the user's key quota with `user` keys of its own until
    /// `left` bytes remain (keyctl, keyutils).
    func fillQuota(leaving left: Int) throws {
        // Replaced keys are freed by the kernel's garbage collector, a moment later.
        usleep(300_000)
        var (used, maximum) = try quota()
        var index = 0
        while maximum - used > left {
            let description = "tokenctl-test-filler-\(index)"
            let payload = min(maximum - used - left - description.utf8.count - 1, 32_000)
            guard payload > 0 else { break }
            try asUser("head -c \(payload) /dev/zero | tr '\\0' x | keyctl padd user \(description) @u >/dev/null")
            (used, maximum) = try quota()
            index += 1
        }
    }

    /// Remove every key of the user: the fillers, and tokenctl's hot cache and journal.
    func removeKeys() throws {
        try asUser("keyctl clear @u")
    }

    /// The user's keyring services (Scripts/lib/services.sh), as the user.
    @discardableResult
    func services(_ commands: String) throws -> RunResult {
        try asUser(
            """
            source "\(servicesScript)"
            trap : EXIT
            tk_services_init "\(directory)"
            export DBUS_SESSION_BUS_ADDRESS="unix:path=$XDG_RUNTIME_DIR/bus"
            \(commands)
            """)
    }

    func lockKeyring() throws { try services("tk_lock_keyring") }
    func unlockKeyring() throws { try services("tk_unlock_keyring test") }

    private func stopServices() throws {
        // By the PIDs the user's services recorded; root may signal them.
        let script = """
            source "\(servicesScript)"
            trap : EXIT
            TK_SERVICES_DIR="\(directory)"
            tk_services_stop_all
            """
        _ = try runProgram("/bin/bash", ["-c", script])
    }

    @discardableResult
    private func asUser(_ script: String) throws -> RunResult {
        let result = try runProgram(
            "/usr/sbin/runuser", ["-u", Self.name, "--", "/bin/bash", "-c", "set -euo pipefail\n" + script],
            environment: ["PATH": "/usr/bin:/bin", "HOME": directory])
        guard result.status == 0 else { throw HarnessError("as \(Self.name): \(script): \(result)") }
        return result
    }
}
