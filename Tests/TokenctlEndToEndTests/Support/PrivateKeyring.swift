import Foundation
import Testing
import TokenctlTestSupport

/// A session bus and gnome-keyring of a test's own, for tests that lock, stop or kill the
/// keyring (the shared one serves every other test in parallel). Started and stopped by PID
/// through Scripts/lib/services.sh.
final class PrivateKeyring: @unchecked Sendable {
    let directory: String
    let busAddress: String
    let runtimeDirectory: String
    private let servicesScript: String

    init() throws {
        servicesScript =
            ProcessInfo.processInfo.environment["TOKENCTL_SERVICES_SH"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "../../../Scripts/lib/services.sh"
            ).standardized.path
        directory = NSTemporaryDirectory() + "tokenctl-keyring-" + UUID().uuidString
        runtimeDirectory = directory + "/runtime"
        busAddress = "unix:path=" + runtimeDirectory + "/bus"
        try shell("tk_start_dbus && tk_start_keyring test")
    }

    deinit {
        _ = try? shell("tk_services_stop_all")
        try? FileManager.default.removeItem(atPath: directory)
    }

    func lock() throws { try shell("tk_lock_keyring") }
    func unlock() throws { try shell("tk_unlock_keyring test") }
    func kill() throws { try shell("tk_kill_keyring") }
    func start() throws { try shell("tk_start_keyring test") }

    /// Start the daemon again if it died (gnome-keyring 42 can abort when a client is killed
    /// in the middle of a call: known gnome-keyring races). Returns whether it had to.
    @discardableResult
    func restartIfDead() throws -> Bool {
        let result = try shell(
            """
            pid=$(cat "$TK_SERVICES_DIR/pids/keyring.pid" 2>/dev/null || true)
            if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && [[ $(awk '{print $3}' "/proc/$pid/stat") != Z ]]; then echo alive; else tk_start_keyring test; echo restarted; fi
            """)
        return result.stdout.contains("restarted")
    }

    /// What a fake Secret Service on this bus leaves unanswered (Scripts/lib/hung_secret_service.py).
    enum HungMode: String, Sendable {
        /// Owns the name and answers nothing.
        case silent
        /// Answers the session set-up and the default collection's look-up, never a search.
        case openSessionOnly = "open-session-only"
        /// Also finds one session item, whose first read gives bytes that are not a token set
        /// and later ones the secret file's.
        case garblesFirstSecret = "garbles-first-secret"
    }

    /// Stop gnome-keyring and put the fake Secret Service (a stand-in: gnome-keyring cannot be
    /// made to hang after the session set-up) in its place on this bus, recorded as the keyring
    /// (so `deinit`, `kill` and `start` treat it as one).
    func replaceWithHungService(_ mode: HungMode, secretFile: String? = nil) throws {
        let file = secretFile.map { " '\($0)'" } ?? ""
        try shell("tk_kill_keyring && tk_start_hung_secret_service \(mode.rawValue)\(file)")
    }

    /// The calls the fake Secret Service received, one line each ("answered"/"held" INTERFACE.MEMBER PATH).
    func hungServiceCalls() -> [String] {
        ((try? String(contentsOfFile: directory + "/hung-secret-service.log", encoding: .utf8)) ?? "").split(
            separator: "\n"
        ).map(String.init)
    }

    /// SIGSTOP / SIGCONT the daemon (a hung keyring).
    func pause(_ paused: Bool) throws {
        try shell("kill -\(paused ? "STOP" : "CONT") \"$(cat \"$TK_SERVICES_DIR/pids/keyring.pid\")\"")
    }

    @discardableResult
    private func shell(_ commands: String) throws -> RunResult {
        let script = """
            set -euo pipefail
            source "\(servicesScript)"
            trap : EXIT
            tk_services_init "\(directory)"
            if [[ -S "$XDG_RUNTIME_DIR/bus" ]]; then export DBUS_SESSION_BUS_ADDRESS="unix:path=$XDG_RUNTIME_DIR/bus"; fi
            \(commands)
            """
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        let result = try runProgram("/bin/bash", ["-c", script], environment: environment)
        guard result.status == 0 else { throw HarnessError("keyring control failed: \(commands): \(result)") }
        return result
    }
}

extension Sandbox {
    /// Point this sandbox's tokenctl at a private keyring.
    func use(_ keyring: PrivateKeyring) {
        variables["DBUS_SESSION_BUS_ADDRESS"] = keyring.busAddress
    }
}
