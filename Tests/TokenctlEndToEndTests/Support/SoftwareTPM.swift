import Foundation
import TokenctlTestSupport

/// A software TPM 2.0 (swtpm) of one test's own, started and stopped through the project's
/// shell library (Scripts/lib/swtpm.sh, named by TOKENCTL_SWTPM_SH as Scripts/test exports it).
/// Under TOKENCTL_TEST_ENV=1 a TPM that cannot start is an error, never a skipped test.
final class SoftwareTPM: @unchecked Sendable {
    /// The services directory (short: the socket path must fit sun_path less ".ctrl").
    let directory: String
    /// The TCTI string for TPM2OPENSSL_TCTI and TPM2TOOLS_TCTI.
    let tcti: String
    private let swtpmScript: String
    private let servicesScript: String
    private let lock = NSLock()
    private var stopped = false

    init() throws {
        swtpmScript =
            ProcessInfo.processInfo.environment["TOKENCTL_SWTPM_SH"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "../../../Scripts/lib/swtpm.sh"
            ).standardized.path
        servicesScript =
            URL(fileURLWithPath: swtpmScript).deletingLastPathComponent().appendingPathComponent("services.sh").path
        directory = "/tmp/tk-tpm-" + String(UUID().uuidString.prefix(8))
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let started = try runProgram(
            "/bin/bash",
            [
                "-c",
                """
                set -euo pipefail
                source "$0"
                source "$1"
                trap : EXIT
                tk_services_init "$2"
                tk_start_swtpm tpm
                printf 'tcti=%s\\n' "$TK_SWTPM_TCTI"
                """,
                servicesScript, swtpmScript, directory,
            ])
        guard started.status == 0,
            let line = started.stdout.split(separator: "\n").first(where: { $0.hasPrefix("tcti=") })
        else {
            Self.stopAll(servicesScript: servicesScript, directory: directory)
            try? FileManager.default.removeItem(atPath: directory)
            throw HarnessError("starting swtpm (Scripts/lib/swtpm.sh) failed: \(started)")
        }
        tcti = String(line.dropFirst("tcti=".count))
    }

    /// The environment that points tokenctl (the tpm2 provider) and the TPM tools at this TPM.
    var environment: [String: String] { ["TPM2OPENSSL_TCTI": tcti, "TPM2TOOLS_TCTI": tcti] }

    /// The handles of transient objects and sessions left in the TPM (empty: nothing left behind).
    func transients() throws -> String {
        try runProgram(
            "/bin/bash",
            [
                "-c",
                """
                set -euo pipefail
                source "$0"
                source "$1"
                trap : EXIT
                tk_services_init "$2"
                tk_swtpm_use tpm
                tk_swtpm_transients tpm
                """,
                servicesScript, swtpmScript, directory,
            ]
        ).stdout
    }

    func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        Self.stopAll(servicesScript: servicesScript, directory: directory)
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }

    private static func stopAll(servicesScript: String, directory: String) {
        _ = try? runProgram(
            "/bin/bash",
            [
                "-c", "source \"$0\"; tk_services_init \"$1\"; tk_services_stop_all", servicesScript, directory,
            ])
    }
}
