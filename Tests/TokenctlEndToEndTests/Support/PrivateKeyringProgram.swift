import Foundation
import Testing
import TokenctlTestSupport

/// A keyring program (a Secret Service implementation) of a test's own on a private session
/// bus: gnome-keyring, KeePassXC 2.7.4 or KWallet (kwalletd5), started headless and stopped by
/// PID through Scripts/lib (services.sh, keepassxc.sh, kwallet.sh). For the suites that run
/// against every keyring program.
final class PrivateKeyringProgram: @unchecked Sendable, CustomStringConvertible {
    enum Kind: String, CaseIterable, Sendable, CustomStringConvertible {
        case gnomeKeyring = "gnome-keyring"
        case keePassXC = "KeePassXC"
        case kWallet = "KWallet"
        var description: String { rawValue }
    }

    let kind: Kind
    let directory: String
    let busAddress: String
    /// KeePassXC with "Confirm when passwords are retrieved by clients" on (runs under Xvfb).
    let confirmsAccess: Bool
    private let scriptsDirectory: String

    var description: String { kind.rawValue }

    init(_ kind: Kind, confirmsAccess: Bool = false) throws {
        self.kind = kind
        self.confirmsAccess = confirmsAccess
        let servicesScript =
            ProcessInfo.processInfo.environment["TOKENCTL_SERVICES_SH"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "../../../Scripts/lib/services.sh"
            ).standardized.path
        scriptsDirectory = (servicesScript as NSString).deletingLastPathComponent
        directory = NSTemporaryDirectory() + "tokenctl-provider-" + UUID().uuidString
        busAddress = "unix:path=" + directory + "/runtime/bus"
        try shell("tk_start_dbus && " + startCommand)
    }

    deinit {
        _ = try? shell("tk_services_stop_all")
        try? FileManager.default.removeItem(atPath: directory)
    }

    private var startCommand: String {
        switch kind {
        case .gnomeKeyring: "tk_start_keyring test"
        case .keePassXC: "tk_start_keepassxc test \(confirmsAccess)"
        case .kWallet: "tk_start_kwallet test"
        }
    }

    func lock() throws {
        switch kind {
        case .gnomeKeyring: try shell("tk_lock_keyring")
        case .keePassXC:
            waitForKeePassXCSave()
            try shell("tk_lock_keepassxc")
        case .kWallet: try shell("tk_lock_kwallet")
        }
    }

    func unlock() throws {
        switch kind {
        case .gnomeKeyring: try shell("tk_unlock_keyring test")
        case .keePassXC: try shell("tk_unlock_keepassxc test")
        case .kWallet: try shell("tk_unlock_kwallet test")
        }
    }

    /// KeePassXC saves its database about 0.35 s after a change (a timer), and a lock before
    /// that loses the change: a refresh token written just before was gone after unlocking
    /// (seen once in a full run). Waits until the database file has not changed for a second
    /// (at most 10 s), as a person would not lock it in the same instant.
    private func waitForKeePassXCSave() {
        let database = directory + "/keepassxc/login.kdbx"
        let started = Date()
        var lastChange = started
        var seen: Date?
        while Date().timeIntervalSince(lastChange) < 1.0, Date().timeIntervalSince(started) < 10 {
            let modified = (try? FileManager.default.attributesOfItem(atPath: database))?[.modificationDate] as? Date
            if modified != seen {
                seen = modified
                lastChange = Date()
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// Press "Allow" on KeePassXC's access dialog (Xvfb), waiting up to `timeout` seconds for it.
    func approvePendingRequest(timeout: Int = 10) throws {
        try shell("tk_keepassxc_approve_pending \(timeout)")
    }

    @discardableResult
    private func shell(_ commands: String) throws -> RunResult {
        let script = """
            set -euo pipefail
            source "\(scriptsDirectory)/services.sh"
            source "\(scriptsDirectory)/keepassxc.sh"
            source "\(scriptsDirectory)/kwallet.sh"
            trap : EXIT
            tk_services_init "\(directory)"
            if [[ -S "$XDG_RUNTIME_DIR/bus" ]]; then export DBUS_SESSION_BUS_ADDRESS="unix:path=$XDG_RUNTIME_DIR/bus"; fi
            \(commands)
            """
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        let result = try runProgram("/bin/bash", ["-c", script], environment: environment)
        guard result.status == 0 else { throw HarnessError("\(kind) control failed: \(commands): \(result)") }
        return result
    }
}

extension Sandbox {
    /// Point this sandbox's tokenctl at a private keyring program.
    func use(_ keyring: PrivateKeyringProgram) {
        variables["DBUS_SESSION_BUS_ADDRESS"] = keyring.busAddress
    }

    /// The stored token set, read through tokenctl itself (`status --json` never shows tokens,
    /// so this asks for the refresh token's presence and the access token by `token`).
    func storedRefreshTokenPresent(profile: String = "default") throws -> Bool {
        let status = try tokenctl("--profile", profile, "status", "--json")
        return status.stdout.contains("\"refresh_token_present\":true")
    }
}
