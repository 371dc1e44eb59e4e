import Foundation
import Testing
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// `keyring setup --unattended|status|remove`, `doctor`'s reboot lines and `schedule install`'s
/// warning, run in-process with a `TestEngine`: its systemd user manager records every
/// `systemctl --user` call, its tpm2-tools and systemd-creds record every call (the length of
/// what came on standard input, never the text) and answer as told, the TPM and linger are the
/// test's, and the unit files and the sealed password are written for real into the engine's
/// private directories. The Secret Service is the engine's in-memory store, failing as told
/// until the keyring unit starts. The real mechanism (tpm2-tools with a TPM, gnome-keyring, the
/// user manager) is measured by Scripts/lib/unattended-selftest.sh.
@Suite("TokenctlCommands: keyring setup, status and remove with a systemd and a TPM of the test's")
struct KeyringCommandTests {
    static func unitDirectory(_ engine: TestEngine) -> String { engine.root + "/config/systemd/user" }
    static func credential(_ engine: TestEngine) -> String { engine.root + "/config/tokenctl/keyring.cred" }
    static func seal(_ engine: TestEngine) -> String { engine.root + "/config/tokenctl/keyring-seal" }
    /// The tools tpm2-tools ran, in order.
    static func tools(_ engine: TestEngine) -> [String] { engine.unattended.tpmCalls.map { $0[0] } }
    /// The context directories left in the runtime directory (none: each removed).
    static func workDirectoriesLeft(_ engine: TestEngine) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: engine.root + "/runtime/tokenctl")) ?? []).filter {
            $0.hasPrefix("keyring-seal-")
        }
    }

    /// A server: no Secret Service answers until tokenctl-keyring.service starts, then it
    /// answers unlocked.
    static func server(variables: [String: String] = [:]) throws -> TestEngine {
        let engine = try TestEngine(variables: variables)
        engine.store.failure = StoreError(.noSecretService, "no Secret Service is running on the session bus")
        let store = engine.store
        engine.systemd.onStart { unit in
            if unit == "tokenctl-keyring.service" { store.failure = nil }
        }
        return engine
    }

    static func mode(_ path: String) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    @Test(
        "setup on a server with a TPM: the password sealed on stdin with tpm2-tools (noDA), the units as measured, started and unlocked"
    )
    func setupWithTPM() async throws {
        let engine = try Self.server()
        let units = Self.unitDirectory(engine)
        let seal = Self.seal(engine)
        let tcti = "device:" + engine.unattended.tpmDevice
        let result = try await engine.run("keyring", "setup", "--unattended")
        #expect(result.status == .success && result.stdout.isEmpty, "\(result)")
        #expect(
            result.stderr.split(separator: "\n").map(String.init) == [
                "Sealed a new keyring password to TPM 2.0: \(seal).{pub,priv}",
                "Wrote \(units)/tokenctl-keyring.service and \(units)/tokenctl-refresh.service.d/keyring.conf.",
                "Masked gnome-keyring-daemon.socket and gnome-keyring-daemon.service; enabled and started tokenctl-keyring.service.",
                "The Secret Service answers, unlocked.",
            ], "\(result)")
        #expect(engine.unattended.calls.isEmpty, "no systemd-creds")
        #expect(
            Self.tools(engine) == ["createprimary", "flushcontext", "create", "flushcontext"],
            "\(engine.unattended.tpmCalls)")
        let calls = engine.unattended.tpmCalls
        #expect(calls.allSatisfy { Array($0[1...2]) == ["-T", tcti] }, "the TPM always named: \(calls)")
        let primary = try #require(calls.first)
        #expect(
            primary.contains("fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|decrypt|noda")
                && Array(primary[3...8]) == ["-Q", "-C", "o", "-g", "sha256", "-G"], "\(primary)")
        let create = calls[2]
        #expect(
            create.contains("fixedtpm|fixedparent|noda|userwithauth") && create.contains(seal + ".pub")
                && create.contains(seal + ".priv") && !create.contains("-L"),
            "noDA, no PCR policy: \(create)")
        #expect(engine.unattended.inputLengths == [43], "32 random bytes, base64url, on standard input only")
        #expect(
            try Self.mode(seal + ".pub") == 0o600 && Self.mode(seal + ".priv") == 0o600,
            "tpm2_create's 0660 set to 0600")
        #expect(try Self.mode(engine.root + "/config/tokenctl") == 0o700)
        #expect(Self.workDirectoriesLeft(engine).isEmpty, "the context files' directory removed")
        #expect(
            engine.systemd.calls == [
                ["show-environment"], ["daemon-reload"],
                ["mask", "gnome-keyring-daemon.socket", "gnome-keyring-daemon.service"],
                ["stop", "gnome-keyring-daemon.service", "gnome-keyring-daemon.socket"],
                ["enable", "tokenctl-keyring.service"], ["restart", "tokenctl-keyring.service"],
            ])
        let unit = try String(contentsOfFile: units + "/tokenctl-keyring.service", encoding: .utf8)
        let lines = unit.split(separator: "\n").map(String.init)
        #expect(
            lines.first
                == "# Installed by 'tokenctl keyring setup --unattended'; remove with 'tokenctl keyring remove'.")
        for line in [
            "Type=dbus", "BusName=org.freedesktop.secrets", "Before=tokenctl-refresh.service", "Restart=on-failure",
            "WantedBy=default.target",
            "RuntimeDirectory=tokenctl-keyring", "RuntimeDirectoryMode=0700", "Environment=TPM2TOOLS_TCTI=\(tcti)",
            "ExecStart=/bin/bash -c 'cd %t/tokenctl-keyring || exit 1; pw=$$(tpm2_createprimary -Q -C o -g sha256 -G ecc -a \"fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|decrypt|noda\" -c primary.ctx && tpm2_flushcontext -t && tpm2_load -Q -C primary.ctx -u \(seal).pub -r \(seal).priv -c seal.ctx && tpm2_flushcontext -t && tpm2_unseal -c seal.ctx) && ok=1 || ok=0; tpm2_flushcontext -t 2>/dev/null; rm -f primary.ctx seal.ctx; if [ $$ok = 1 ]; then exec gnome-keyring-daemon --replace --unlock --foreground --components=secrets < <(printf %%s \"$$pw\"); fi; exec gnome-keyring-daemon --replace --foreground --components=secrets'",
        ] {
            #expect(lines.contains(line), "\(line) in \(unit)")
        }
        let dropIn = try String(
            contentsOfFile: units + "/tokenctl-refresh.service.d/keyring.conf", encoding: .utf8)
        #expect(dropIn.hasSuffix("[Unit]\nWants=tokenctl-keyring.service\nAfter=tokenctl-keyring.service\n"))

        let status = try await engine.run("keyring", "status")
        #expect(status.status == .success, "\(status)")
        #expect(
            status.stdout == """
                secret service: answers, unlocked
                linger: on for tester: the user manager starts at boot
                keyring unit: \(units)/tokenctl-keyring.service (enabled, active)
                keyring seal: \(seal).{pub,priv} unseals (TPM 2.0)
                after a reboot: the keyring is unlocked again with nobody logged in

                """, "\(status)")
        #expect(
            Self.tools(engine).suffix(6) == [
                "createprimary", "flushcontext", "load", "flushcontext", "unseal", "flushcontext",
            ], "\(engine.unattended.tpmCalls)")
        #expect(
            engine.unattended.tpmCalls.last(where: { $0[0] == "unseal" })?.suffix(2) == ["-o", "/dev/null"],
            "the status unseals into /dev/null: the password never reaches tokenctl")
        #expect(Self.workDirectoriesLeft(engine).isEmpty)

        // Again: the password sealed first is the keyring's, so it is kept, not made anew.
        let again = try await engine.run("keyring", "setup", "--unattended")
        #expect(again.status == .success, "\(again)")
        #expect(
            again.stderr.hasPrefix("Kept the sealed keyring password \(seal).{pub,priv} (TPM 2.0).\n"), "\(again)")
        #expect(engine.unattended.inputLengths == [43], "no second password")
    }

    @Test("setup leaves an unlocked Secret Service alone (a desktop, KeePassXC, KWallet) unless --force")
    func setupLeavesAnUnlockedSecretServiceAlone() async throws {
        let engine = try TestEngine()
        let result = try await engine.run("keyring", "setup", "--unattended")
        #expect(result.status == .success, "\(result)")
        #expect(result.stderr.hasPrefix("An unlocked Secret Service answers already"), "\(result)")
        #expect(engine.unattended.calls.isEmpty && engine.systemd.calls == [["show-environment"]])
        #expect(!FileManager.default.fileExists(atPath: Self.unitDirectory(engine) + "/tokenctl-keyring.service"))
        #expect(!FileManager.default.fileExists(atPath: Self.seal(engine) + ".priv"))

        let forced = try await engine.run("keyring", "setup", "--unattended", "--force")
        #expect(forced.status == .success, "\(forced)")
        #expect(FileManager.default.fileExists(atPath: Self.seal(engine) + ".priv"))
        #expect(engine.systemd.enabledUnits.contains("tokenctl-keyring.service"))
    }

    @Test("setup refuses a login keyring it does not know the password of, and changes nothing")
    func setupRefusesAnExistingLoginKeyring() async throws {
        let engine = try Self.server()
        let keyrings = engine.root + "/home/.local/share/keyrings"
        try FileManager.default.createDirectory(atPath: keyrings, withIntermediateDirectories: true)
        try Data("a keyring".utf8).write(to: URL(fileURLWithPath: keyrings + "/login.keyring"))
        let result = try await engine.run("keyring", "setup", "--unattended")
        #expect(result.status == .configuration, "\(result)")
        #expect(
            result.stderr.contains("a login keyring exists already (\(keyrings)/login.keyring)")
                && result.stderr.contains("Nothing was changed."), "\(result)")
        #expect(try String(contentsOfFile: keyrings + "/login.keyring", encoding: .utf8) == "a keyring")
        #expect(
            engine.unattended.tpmCalls.isEmpty && !FileManager.default.fileExists(atPath: Self.seal(engine) + ".priv"))
    }

    @Test("a TPM this user may not open: setup says group tss, usermod -aG tss USER and Debian's udev rule")
    func setupSaysHowToGetTheTPM() async throws {
        let engine = try Self.server()
        engine.unattended.setTPM(present: true, accessible: false)
        let result = try await engine.run("keyring", "setup", "--unattended")
        #expect(result.status == .configuration, "\(result)")
        for part in ["this user may not use the TPM", "'tss'", "60-tpm-udev.rules", "'sudo usermod -aG tss tester'"] {
            #expect(result.stderr.contains(part), "\(part) in \(result)")
        }
        #expect(engine.unattended.calls.isEmpty && engine.unattended.tpmCalls.isEmpty, "nothing sealed")
    }

    @Test("no TPM: per-user credentials where systemd-creds offers --user, else the host key's commands for root")
    func setupWithoutTPM() async throws {
        let engine = try Self.server()
        engine.unattended.setTPM(present: false, accessible: false)
        let refused = try await engine.run("keyring", "setup", "--unattended")
        #expect(refused.status == .configuration, "\(refused)")
        for part in [
            "only systemd's host key is left", "systemd-creds encrypt --with-key=host", "LoadCredentialEncrypted=",
        ] {
            #expect(refused.stderr.contains(part), "\(part) in \(refused)")
        }
        #expect(engine.unattended.calls == [["--help"]], "only asked whether --user exists")
        #expect(!FileManager.default.fileExists(atPath: Self.credential(engine)))

        engine.unattended.offerUserCredentials()
        let result = try await engine.run("keyring", "setup", "--unattended")
        #expect(result.status == .success, "\(result)")
        #expect(
            engine.unattended.calls.last == [
                "--user", "encrypt", "--name=tokenctl-keyring", "-", Self.credential(engine),
            ])
        let unit = try String(
            contentsOfFile: Self.unitDirectory(engine) + "/tokenctl-keyring.service", encoding: .utf8)
        #expect(unit.contains("pw=$$(systemd-creds --user decrypt --name=tokenctl-keyring "), "\(unit)")
    }

    @Test("a TPM named by TPM2TOOLS_TCTI: sealed with it, and the unit names it for the unseal at boot")
    func setupWithANamedTPM() async throws {
        let engine = try Self.server(variables: ["TPM2TOOLS_TCTI": "swtpm:path=/run/swtpm/tpm.sock"])
        engine.unattended.setTPM(present: false, accessible: false)
        let result = try await engine.run("keyring", "setup", "--unattended")
        #expect(result.status == .success, "\(result)")
        #expect(
            engine.unattended.tpmCalls.allSatisfy { Array($0[1...2]) == ["-T", "swtpm:path=/run/swtpm/tpm.sock"] }
                && Self.tools(engine).contains("create"), "\(engine.unattended.tpmCalls)")
        #expect(result.stderr.contains("to TPM 2.0 (swtpm:path=/run/swtpm/tpm.sock): "), "\(result)")
        let unit = try String(
            contentsOfFile: Self.unitDirectory(engine) + "/tokenctl-keyring.service", encoding: .utf8)
        #expect(unit.contains("\nEnvironment=TPM2TOOLS_TCTI=swtpm:path=/run/swtpm/tpm.sock\n"), "\(unit)")
        let status = try await engine.run("keyring", "status")
        #expect(
            status.stdout.contains("unseals (TPM 2.0 (swtpm:path=/run/swtpm/tpm.sock))"),
            "status reads the TPM back from the unit: \(status)")
    }

    /// tokenctl-keyring.service as an earlier tokenctl wrote it, with systemd-creds.
    static func systemdCredsUnit(_ engine: TestEngine) -> String {
        """
        # Installed by 'tokenctl keyring setup --unattended'; remove with 'tokenctl keyring remove'.
        [Service]
        Type=dbus
        BusName=org.freedesktop.secrets
        ExecStart=/bin/bash -c 'if pw=$$(systemd-creds decrypt --name=tokenctl-keyring \(credential(engine)) -); then exec gnome-keyring-daemon --replace --unlock --foreground --components=secrets < <(printf %%s "$$pw"); fi; exec gnome-keyring-daemon --replace --foreground --components=secrets'

        """
    }

    @Test(
        "a password an earlier tokenctl sealed with systemd-creds: status warns of lockout; setup seals the same password with tpm2-tools"
    )
    func systemdCredsSealSealedAgain() async throws {
        let engine = try Self.server()
        let units = Self.unitDirectory(engine)
        let credential = Self.credential(engine)
        try FileManager.default.createDirectory(atPath: units, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            atPath: engine.root + "/config/tokenctl", withIntermediateDirectories: true)
        try Self.systemdCredsUnit(engine).write(
            toFile: units + "/tokenctl-keyring.service", atomically: true, encoding: .utf8)
        try "sealed\n".write(toFile: credential, atomically: true, encoding: .utf8)
        let password = String(repeating: "A", count: 42) + "_"
        engine.unattended.decryptGives(password)

        let status = try await engine.run("keyring", "status")
        #expect(
            status.stdout.contains("keyring seal: \(credential) unseals (TPM 2.0 through systemd-creds)\n"),
            "\(status)")
        #expect(status.stdout.contains("dictionary-attack protection"), "\(status)")
        #expect(engine.unattended.calls.last == ["decrypt", "--name=tokenctl-keyring", credential, "-"])

        // Warnings mixed into the decrypt's output: not a password, so nothing is sealed again.
        engine.unattended.decryptGives("Warning: something\n" + password)
        let kept = try await engine.run("keyring", "setup", "--unattended")
        #expect(kept.status == .success, "\(kept)")
        #expect(
            kept.stderr.contains("Could not read the systemd-creds seal's password cleanly: kept \(credential)."),
            "\(kept)")
        #expect(engine.unattended.tpmCalls.isEmpty && FileManager.default.fileExists(atPath: credential))

        engine.unattended.decryptGives(password)
        let result = try await engine.run("keyring", "setup", "--unattended")
        #expect(result.status == .success, "\(result)")
        #expect(
            result.stderr.hasPrefix(
                "Sealed the keyring password again, outside the TPM's dictionary-attack lockout: \(Self.seal(engine)).{pub,priv} (replaces \(credential)).\n"
            ), "\(result)")
        #expect(engine.unattended.inputLengths == [43], "the same password, on tpm2_create's standard input")
        #expect(Self.tools(engine).contains("unseal"), "the new seal checked before the old one goes")
        #expect(!FileManager.default.fileExists(atPath: credential))
        let unit = try String(contentsOfFile: units + "/tokenctl-keyring.service", encoding: .utf8)
        #expect(unit.contains("tpm2_unseal -c seal.ctx") && !unit.contains("systemd-creds"), "\(unit)")
    }

    @Test(
        "another TPM: status and doctor say the sessions need a new login or the original TPM; remove keeps the keyring"
    )
    func brokenSealAndRemove() async throws {
        let engine = try Self.server()
        let units = Self.unitDirectory(engine)
        let seal = Self.seal(engine)
        #expect(try await engine.run("keyring", "setup", "--unattended").status == .success)
        engine.unattended.breakSeal(with: "ERROR: Eys_Load(0x1DF) - tpm:parameter(1):integrity check failed")
        let status = try await engine.run("keyring", "status")
        #expect(status.status == .failure, "\(status)")
        #expect(
            status.stdout.contains(
                "keyring seal: \(seal).{pub,priv} does not unseal: ERROR: Eys_Load(0x1DF) - tpm:parameter(1):integrity check failed; ERROR: Unable to run tpm2_load\n"
            ), "\(status)")
        #expect(status.stdout.contains("sealed by another TPM, or the TPM was cleared."), "no PCR: \(status)")
        #expect(Self.workDirectoriesLeft(engine).isEmpty, "removed after a failure too")
        #expect(
            status.stdout.contains(
                "The sessions on this machine need a new login ('tokenctl login'), or the original TPM. Nothing was deleted"
            ),
            "\(status)")
        #expect(
            status.stdout.hasSuffix("after a reboot: the sessions are not served with nobody logged in (see above)\n"))

        let doctor = try await engine.run("doctor")
        #expect(doctor.status == .failure, "\(doctor)")
        #expect(doctor.stdout.contains("[FAIL] keyring seal: \(seal).{pub,priv} does not unseal"), "\(doctor)")
        #expect(FileManager.default.fileExists(atPath: seal + ".priv"), "a failed seal deletes nothing")

        let again = try await engine.run("keyring", "setup", "--unattended")
        #expect(again.status == .unavailable, "\(again)")
        #expect(again.stderr.contains("need a new login"), "\(again)")
        #expect(FileManager.default.fileExists(atPath: seal + ".priv"), "nor does setup")

        let keyrings = engine.root + "/home/.local/share/keyrings"
        try FileManager.default.createDirectory(atPath: keyrings, withIntermediateDirectories: true)
        try Data("a keyring".utf8).write(to: URL(fileURLWithPath: keyrings + "/login.keyring"))
        let remove = try await engine.run("keyring", "remove")
        #expect(remove.status == .success, "\(remove)")
        #expect(
            remove.stderr.split(separator: "\n").prefix(5).map(String.init) == [
                "Removed tokenctl-keyring.service (stopped and disabled).",
                "Removed \(units)/tokenctl-keyring.service.",
                "Removed \(units)/tokenctl-refresh.service.d/keyring.conf.",
                "Removed the mask of gnome-keyring-daemon.socket and gnome-keyring-daemon.service.",
                "Kept the keyring, its sessions and the sealed keyring password \(seal).{pub,priv} (nothing unlocks the keyring at boot now; 'tokenctl keyring setup --unattended' uses the password again).",
            ], "\(remove)")
        #expect(
            engine.systemd.calls.contains(["unmask", "gnome-keyring-daemon.socket", "gnome-keyring-daemon.service"]))
        #expect(!engine.systemd.enabledUnits.contains("tokenctl-keyring.service"))
        #expect(!FileManager.default.fileExists(atPath: units + "/tokenctl-keyring.service"), "the unit removed")
        #expect(
            FileManager.default.fileExists(atPath: seal + ".pub")
                && FileManager.default.fileExists(atPath: seal + ".priv"), "the sealed password kept")
        #expect(FileManager.default.fileExists(atPath: keyrings + "/login.keyring"), "the keyring stays")
        let nothing = try await engine.run("keyring", "remove")
        #expect(nothing.status == .success && nothing.stderr == "No unattended keyring was set up.\n", "\(nothing)")
    }

    @Test("doctor answers 'after a reboot with nobody logged in?': no linger, no keyring unit, a unit not enabled")
    func doctorRebootLines() async throws {
        let engine = try TestEngine()
        engine.unattended.setLinger(false)
        let doctor = try await engine.run("doctor")
        #expect(
            doctor.stdout.contains(
                "[warn] linger: off for tester: the user manager starts at this user's first login only\n    Run 'sudo loginctl enable-linger tester'.\n"
            ), "\(doctor)")
        #expect(
            doctor.stdout.contains(
                "[warn] keyring unit: tokenctl-keyring.service not installed: after a reboot nothing unlocks the keyring until a person does\n    On a server, run 'tokenctl keyring setup --unattended'.\n"
            ), "\(doctor)")
        #expect(!doctor.stdout.contains("keyring seal"), "no seal line when nothing is set up")

        let server = try Self.server()
        #expect(try await server.run("keyring", "setup", "--unattended").status == .success)
        #expect(try await server.run("doctor").stdout.contains("[ok]   keyring seal: "))
        server.systemd.fail("is-enabled", with: "disabled")
        let broken = try await server.run("doctor")
        #expect(broken.status == .failure)
        #expect(
            broken.stdout.contains(
                "[FAIL] keyring unit: \(Self.unitDirectory(server))/tokenctl-keyring.service (not enabled"), "\(broken)"
        )
    }

    @Test("schedule install warns on stderr when the answer is no, and exits as before")
    func scheduleInstallWarns() async throws {
        let engine = try TestEngine()
        engine.unattended.setLinger(false)
        let result = try await engine.run("schedule", "install", "--cron")
        #expect(result.status == .success, "\(result)")
        #expect(
            result.stderr.hasSuffix(
                "tokenctl: warning: after a reboot with nobody logged in the refresh will fail (linger is off; nothing unlocks the keyring): 'tokenctl doctor' says what to run.\n"
            ), "\(result)")

        let server = try Self.server()
        #expect(try await server.run("keyring", "setup", "--unattended").status == .success)
        let ready = try await server.run("schedule", "install", "--cron")
        #expect(ready.status == .success && !ready.stderr.contains("warning"), "\(ready)")
    }

    @Test("usage: setup needs --unattended; --force and --unattended belong to setup")
    func usage() async throws {
        let engine = try TestEngine()
        let setup = try await engine.run("keyring", "setup")
        #expect(setup.status == .usage && setup.stderr.contains("'setup' needs '--unattended'"), "\(setup)")
        let status = try await engine.run("keyring", "status", "--force")
        #expect(status.status == .usage, "\(status)")
    }
}
