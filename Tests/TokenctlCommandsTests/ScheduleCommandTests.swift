import Foundation
import Testing
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// `schedule install|remove|status` run in-process with a `TestEngine`: its systemd user manager
/// records every `systemctl --user` call and keeps which units are enabled, its crontab keeps
/// the table in memory, and the unit files are written for real into the engine's private
/// XDG_CONFIG_HOME. What the user sees (stdout, stderr, the exit status) is compared line by
/// line; the end-to-end suite `UnattendedTests` runs the same against systemd-analyze and a
/// crontab program.
@Suite("TokenctlCommands: schedule with a systemd user manager and a crontab of the test's")
struct ScheduleCommandTests {
    static func unitDirectory(_ engine: TestEngine) -> String { engine.root + "/config/systemd/user" }

    /// What `install` adds when nothing unlocks the keyring after a reboot (linger is on in a
    /// `TestEngine`; KeyringCommandTests covers the rest).
    static let rebootWarning =
        "tokenctl: warning: after a reboot with nobody logged in the refresh will fail (nothing unlocks the keyring): 'tokenctl doctor' says what to run.\n"

    /// The crontab line `install --cron` writes for `fields` and `window` in `engine`'s environment.
    static func cronLine(_ engine: TestEngine, fields: String, window: Int) -> String {
        "\(fields) XDG_RUNTIME_DIR=\(engine.root)/runtime XDG_CONFIG_HOME=\(engine.root)/config"
            + " XDG_STATE_HOME=\(engine.root)/state tokenctl refresh --all --if-expiring-within \(window)"
            + " 2>&1 | logger -t tokenctl"
    }

    // MARK: systemd

    @Test("install: the manager answers, so a systemd timer: its units written, reloaded, enabled; cron left alone")
    func installSystemdByDefault() async throws {
        let engine = try TestEngine()
        let units = Self.unitDirectory(engine)
        let result = try await engine.run("schedule", "install")
        #expect(result.status == .success && result.stdout.isEmpty, "\(result)")
        #expect(
            result.stderr
                == "Installed systemd user timer tokenctl-refresh.timer (every 15 min): \(units)/tokenctl-refresh.timer.\n"
                + Self.rebootWarning,
            "\(result)")
        #expect(
            engine.systemd.calls == [
                ["show-environment"], ["daemon-reload"], ["enable", "--now", "tokenctl-refresh.timer"],
            ])
        #expect(engine.crontab.calls == [["-l"]] && engine.crontab.table == nil, "the other backend only looked at")
        let service = try String(contentsOfFile: units + "/tokenctl-refresh.service", encoding: .utf8)
        #expect(
            service.split(separator: "\n").filter { $0.hasPrefix("ExecStart=") || $0.hasPrefix("Environment=") } == [
                "ExecStart=tokenctl refresh --all --if-expiring-within 1860",
                "Environment=XDG_CONFIG_HOME=\(engine.root)/config", "Environment=XDG_STATE_HOME=\(engine.root)/state",
            ], "\(service)")
        let timer = try String(contentsOfFile: units + "/tokenctl-refresh.timer", encoding: .utf8)
        #expect(
            timer.contains("\nOnUnitActiveSec=900s\n") && timer.hasPrefix("# Installed by 'tokenctl schedule install'"))

        let status = try await engine.run("schedule", "status")
        #expect(status.status == .success && status.stderr.isEmpty, "\(status)")
        #expect(
            status.stdout == "systemd: \(units)/tokenctl-refresh.timer (active)\ncron: not installed\n", "\(status)")
        let systemdOnly = try await engine.run("schedule", "status", "--systemd")
        #expect(systemdOnly.stdout == "systemd: \(units)/tokenctl-refresh.timer (active)\n", "\(systemdOnly)")
        #expect(systemdOnly.status == .success)
    }

    @Test("install --systemd --every 1h twice replaces the units; remove disables, deletes both, reloads")
    func installTwiceThenRemove() async throws {
        let engine = try TestEngine()
        let units = Self.unitDirectory(engine)
        for _ in 0..<2 {
            let install = try await engine.run("schedule", "install", "--systemd", "--every", "1h")
            #expect(
                install.stderr
                    == "Installed systemd user timer tokenctl-refresh.timer (every 1 h): \(units)/tokenctl-refresh.timer.\n"
                    + Self.rebootWarning,
                "\(install)")
            #expect(install.status == .success)
        }
        #expect(!engine.systemd.calls.contains(["show-environment"]), "--systemd asks no question")
        let timer = try String(contentsOfFile: units + "/tokenctl-refresh.timer", encoding: .utf8)
        #expect(timer.contains("\nOnUnitActiveSec=3600s\n") && timer.contains("every 1 h\n"), "\(timer)")

        #expect(engine.crontab.calls == [["-l"], ["-l"]], "each install looked for a crontab entry to switch from")
        let before = engine.systemd.calls.count
        let remove = try await engine.run("schedule", "remove", "--systemd")
        #expect(remove.status == .success && remove.stdout.isEmpty, "\(remove)")
        #expect(
            remove.stderr
                == "Removed \(units)/tokenctl-refresh.timer.\nRemoved \(units)/tokenctl-refresh.service.\n", "\(remove)"
        )
        #expect(
            Array(engine.systemd.calls.dropFirst(before)) == [
                ["disable", "--now", "tokenctl-refresh.timer"], ["daemon-reload"],
            ])
        #expect(!FileManager.default.fileExists(atPath: units + "/tokenctl-refresh.timer"))
        #expect(!FileManager.default.fileExists(atPath: units + "/tokenctl-refresh.service"))
        #expect(engine.crontab.calls.count == 2, "remove --systemd leaves cron alone")

        let again = try await engine.run("schedule", "remove")
        #expect(again.status == .success && again.stderr == "No tokenctl schedule was installed.\n", "\(again)")
        let status = try await engine.run("schedule", "status")
        #expect(status.status == .failure, "nothing works: exit 1")
        #expect(status.stdout == "systemd: not installed\ncron: not installed\n", "\(status)")
    }

    @Test("fake systemctl failing enable: install says which command failed, installs nothing, exits 69")
    func systemctlEnableFails() async throws {
        let engine = try TestEngine()
        let units = Self.unitDirectory(engine)
        engine.systemd.fail("enable", with: "Failed to enable unit: Unit file tokenctl-refresh.timer is masked.")
        let result = try await engine.run("schedule", "install", "--systemd")
        #expect(result.status == .unavailable && result.stdout.isEmpty, "\(result)")
        #expect(
            result.stderr
                == """
                Error: cannot install the systemd timer: 'systemctl --user enable --now tokenctl-refresh.timer' failed: Failed to enable unit: Unit file tokenctl-refresh.timer is masked.
                Run it from a login session with a systemd user manager, or use 'tokenctl schedule install --cron'. Nothing was installed.

                """, "\(result)")
        #expect(!FileManager.default.fileExists(atPath: units + "/tokenctl-refresh.timer"), "nothing half-installed")
        #expect(!FileManager.default.fileExists(atPath: units + "/tokenctl-refresh.service"))
        #expect(engine.crontab.calls.isEmpty, "the other backend is not touched after a failure")
    }

    @Test("fake systemctl without a user manager: install --systemd fails (69); install picks cron; status says so")
    func noUserManager() async throws {
        let engine = try TestEngine()
        engine.systemd.stopManager()
        let forced = try await engine.run("schedule", "install", "--systemd")
        #expect(forced.status == .unavailable, "\(forced)")
        #expect(
            forced.stderr.hasPrefix(
                "Error: cannot install the systemd timer: 'systemctl --user daemon-reload' failed: Failed to connect to bus: No medium found\n"
            ), "\(forced)")

        let result = try await engine.run("schedule", "install")
        #expect(result.status == .success && result.stdout.isEmpty, "\(result)")
        let line = Self.cronLine(engine, fields: "*/15 * * * *", window: 1860)
        #expect(result.stderr == "Installed crontab entry (every 15 min): \(line).\n" + Self.rebootWarning, "\(result)")
        let status = try await engine.run("schedule", "status")
        #expect(status.status == .success, "\(status)")
        #expect(status.stdout == "systemd: not installed\ncron: \(line)\n", "\(status)")
    }

    @Test("the package's units: install enables them instead of writing its own; status and remove name them")
    func packagedUnits() async throws {
        let engine = try TestEngine()
        let packaged = engine.systemd.packagedUnitDirectory
        try FileManager.default.createDirectory(atPath: packaged, withIntermediateDirectories: true)
        try "[Service]\nType=oneshot\nExecStart=tokenctl refresh --all --if-expiring-within 1860\n".write(
            toFile: packaged + "/tokenctl-refresh.service", atomically: true, encoding: .utf8)
        try "[Timer]\nOnUnitActiveSec=900s\n".write(
            toFile: packaged + "/tokenctl-refresh.timer", atomically: true, encoding: .utf8)

        let install = try await engine.run("schedule", "install", "--systemd")
        #expect(install.status == .success, "\(install)")
        #expect(
            install.stderr
                == "Installed systemd user timer tokenctl-refresh.timer (every 15 min), installed by the package: \(packaged)/tokenctl-refresh.timer.\n"
                + Self.rebootWarning,
            "\(install)")
        #expect(
            engine.systemd.calls == [["enable", "--now", "tokenctl-refresh.timer"]], "no daemon-reload: no new files")
        #expect(!FileManager.default.fileExists(atPath: Self.unitDirectory(engine)), "no units of its own")

        let status = try await engine.run("schedule", "status")
        #expect(
            status.stdout
                == "systemd: \(packaged)/tokenctl-refresh.timer (the package's) (active)\ncron: not installed\n",
            "\(status)")
        let remove = try await engine.run("schedule", "remove", "--systemd")
        #expect(
            remove.status == .success
                && remove.stderr == "Removed the packaged systemd timer tokenctl-refresh.timer (disabled).\n",
            "\(remove)")
        #expect(engine.systemd.enabledUnits.isEmpty)
        #expect(
            FileManager.default.fileExists(atPath: packaged + "/tokenctl-refresh.timer"), "the package's files stay")
    }

    @Test("status of an installed timer that is not active: exit 1, the state systemctl printed")
    func timerNotActive() async throws {
        let engine = try TestEngine()
        #expect(try await engine.run("schedule", "install", "--systemd").status == .success)
        engine.systemd.fail("is-active", with: "failed")
        let status = try await engine.run("schedule", "status")
        #expect(status.status == .failure, "\(status)")
        #expect(
            status.stdout
                == "systemd: \(Self.unitDirectory(engine))/tokenctl-refresh.timer (not active: failed)\ncron: not installed\n",
            "\(status)")
    }

    // MARK: cron

    @Test("install --cron keeps the other entries, twice installs once; switching to systemd removes it")
    func cronInstallAndSwitch() async throws {
        let engine = try TestEngine()
        let other = "MAILTO=me\n0 3 * * * backup\n"
        #expect(try await engine.run("schedule", "install", "--cron", "--every", "30m").status == .success)
        let crontab = try #require(engine.crontab.table)
        #expect(crontab.hasPrefix("# BEGIN tokenctl schedule"), "\(crontab)")
        engine.crontab.replaceTable(other + crontab)

        let again = try await engine.run("schedule", "install", "--cron", "--every", "2h")
        let line = Self.cronLine(engine, fields: "0 */2 * * *", window: 14460)
        #expect(
            again.status == .success
                && again.stderr == "Installed crontab entry (every 2 h): \(line).\n" + Self.rebootWarning, "\(again)")
        #expect(
            engine.crontab.table
                == other
                + "# BEGIN tokenctl schedule (managed by 'tokenctl schedule'; do not edit inside)\n\(line)\n# END tokenctl schedule\n"
        )

        let switched = try await engine.run("schedule", "install", "--systemd")
        #expect(
            switched.stderr
                == "Installed systemd user timer tokenctl-refresh.timer (every 15 min): \(Self.unitDirectory(engine))/tokenctl-refresh.timer.\nRemoved crontab entry.\n"
                + Self.rebootWarning,
            "\(switched)")
        #expect(engine.crontab.table == other, "only its own block goes")
    }

    @Test("install --cron --every 7m: cron cannot express it (64), the crontab untouched")
    func cronIntervalRefused() async throws {
        let engine = try TestEngine()
        let result = try await engine.run("schedule", "install", "--cron", "--every", "7m")
        #expect(result.status == .usage, "\(result)")
        #expect(
            result.stderr
                == "Error: cron can run every N minutes where N divides 60, or every N hours where N divides 24; 7 min is neither\n",
            "\(result)")
        #expect(engine.crontab.calls.isEmpty)
    }

    @Test(
        "fake crontab failing -l or -: install and remove say what crontab said (69); status reports the table unreadable"
    )
    func crontabFails() async throws {
        let engine = try TestEngine()
        #expect(try await engine.run("schedule", "install", "--cron").status == .success)
        engine.crontab.fail("-", with: "crontab: cannot write to /var/spool/cron/crontabs: Permission denied")
        let remove = try await engine.run("schedule", "remove", "--cron")
        #expect(remove.status == .unavailable, "\(remove)")
        #expect(
            remove.stderr
                == "Error: crontab - failed: crontab: cannot write to /var/spool/cron/crontabs: Permission denied\n",
            "\(remove)")

        engine.crontab.fail("-l", with: "crontab: your UID isn't in the passwd file.")
        let install = try await engine.run("schedule", "install", "--cron")
        #expect(install.status == .unavailable, "\(install)")
        #expect(
            install.stderr == "Error: crontab -l failed: crontab: your UID isn't in the passwd file.\n", "\(install)")
        let status = try await engine.run("schedule", "status", "--cron")
        #expect(status.status == .failure && status.stdout == "cron: crontab not available\n", "\(status)")
    }

    @Test("without crontab: install --cron says how to get it (69); remove and status carry on")
    func crontabNotInstalled() async throws {
        let engine = try TestEngine()
        engine.crontab.uninstall()
        let install = try await engine.run("schedule", "install", "--cron")
        #expect(install.status == .unavailable, "\(install)")
        #expect(
            install.stderr
                == "Error: crontab is not installed\nInstall cron ('apt-get install cron'), or use systemd: 'tokenctl schedule install --systemd'.\n",
            "\(install)")
        let remove = try await engine.run("schedule", "remove")
        #expect(remove.status == .success && remove.stderr == "No tokenctl schedule was installed.\n", "\(remove)")
        let status = try await engine.run("schedule", "status")
        #expect(status.stdout == "systemd: not installed\ncron: crontab not available\n", "\(status)")
        #expect(status.status == .failure && engine.crontab.calls.isEmpty)
    }

    // MARK: usage

    @Test("usage errors: exit 64, the message and the usage line, nothing asked of systemd or cron")
    func usageErrors() async throws {
        let engine = try TestEngine()
        let cases: [([String], String)] = [
            (["schedule", "install", "--systemd", "--cron"], "Error: '--systemd' and '--cron' exclude each other."),
            (["schedule", "status", "--every", "1h"], "Error: '--every' applies to 'install' only."),
            (
                ["schedule", "install", "--every", "10s"],
                "Error: Invalid value '10s' for '--every': expected a duration from 1m to 24h, e.g. 15m, 1h, 900s."
            ),
        ]
        for (arguments, message) in cases {
            let result = try await engine.runArguments(arguments)
            #expect(result.status == .usage && result.stdout.isEmpty, "\(arguments): \(result)")
            let lines = result.stderr.split(separator: "\n").map(String.init)
            #expect(
                lines == [
                    message,
                    "USAGE: tokenctl [--profile <name>] schedule install|remove|status [--every <interval>] [--systemd | --cron]",
                    "  See 'tokenctl schedule --help' for more information.",
                ], "\(arguments): \(result)")
        }
        #expect(engine.systemd.calls.isEmpty && engine.crontab.calls.isEmpty)
    }
}
