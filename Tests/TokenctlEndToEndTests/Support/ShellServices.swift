import Foundation
import TokenctlTestSupport

/// A service library of Scripts/lib (sshd.sh, swtpm.sh, squid.sh) and the services.sh beside
/// it, through which a test starts services of its own in a directory of its own and stops
/// them by the PIDs recorded there: every such harness does it this one way.
struct ShellServices: Sendable {
    /// The library: the path Scripts/test exports in `variable` (TOKENCTL_SSHD_SH, …), else
    /// the repository's own.
    let library: String
    let services: String

    init(variable: String, file: String) {
        library =
            ProcessInfo.processInfo.environment[variable]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "../../../Scripts/lib/" + file
            ).standardized.path
        services = URL(fileURLWithPath: library).deletingLastPathComponent().appendingPathComponent("services.sh").path
    }

    /// Run `body` in bash with services.sh and the library sourced and `directory` made the
    /// services directory (`tk_services_init`); `arguments` are `$3`, `$4`, … of `body`.
    func start(in directory: String, _ body: String, arguments: [String] = []) throws -> RunResult {
        let script = """
            set -euo pipefail
            source "$0"
            source "$1"
            trap : EXIT
            tk_services_init "$2"

            """
        return try runProgram("/bin/bash", ["-c", script + body, services, library, directory] + arguments)
    }

    /// The `NAME=VALUE` lines of a start's output, by name.
    static func values(of output: String) -> [String: String] {
        var values: [String: String] = [:]
        for line in output.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        return values
    }

    /// Stop what was started in `directory`, by the PIDs recorded there (safe to call twice).
    func stop(in directory: String) {
        let script = """
            source "$0"
            trap : EXIT
            TK_SERVICES_DIR="$1"
            tk_services_stop_all
            """
        _ = try? runProgram("/bin/bash", ["-c", script, services, directory])
    }

    /// Stop what was started in `directory` and remove the directory, the first time `once` is
    /// claimed (a test's own stop, then the deinit after it).
    func stop(in directory: String, once: StopOnce) {
        guard once.claim() else { return }
        stop(in: directory)
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Whether a stop has run: the first `claim()` gets true, every later one false.
final class StopOnce: @unchecked Sendable {
    private let lock = NSLock()
    private var claimed = false

    func claim() -> Bool {
        lock.withLock {
            defer { claimed = true }
            return !claimed
        }
    }
}
