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
    private let shell = ShellServices(variable: "TOKENCTL_SWTPM_SH", file: "swtpm.sh")
    private let once = StopOnce()

    init() throws {
        directory = "/tmp/tk-tpm-" + String(UUID().uuidString.prefix(8))
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let started = try shell.start(
            in: directory,
            """
            tk_start_swtpm tpm
            printf 'tcti=%s\\n' "$TK_SWTPM_TCTI"
            """)
        guard started.status == 0,
            let line = started.stdout.split(separator: "\n").first(where: { $0.hasPrefix("tcti=") })
        else {
            shell.stop(in: directory)
            try? FileManager.default.removeItem(atPath: directory)
            throw HarnessError("starting swtpm (Scripts/lib/swtpm.sh) failed: \(started)")
        }
        tcti = String(line.dropFirst("tcti=".count))
    }

    /// The environment that points tokenctl (the tpm2 provider) and the TPM tools at this TPM.
    var environment: [String: String] { ["TPM2OPENSSL_TCTI": tcti, "TPM2TOOLS_TCTI": tcti] }

    /// The handles of transient objects and sessions left in the TPM (empty: nothing left behind).
    func transients() throws -> String {
        try shell.start(in: directory, "tk_swtpm_use tpm\ntk_swtpm_transients tpm").stdout
    }

    func stop() { shell.stop(in: directory, once: once) }

    deinit { stop() }
}
