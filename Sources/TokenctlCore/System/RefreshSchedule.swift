import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Keeping sessions alive unattended: a systemd user timer, or a crontab entry, running
/// `tokenctl refresh --all --if-expiring-within …`. Installing is idempotent; removing takes
/// away exactly what was installed (files carrying our marker, the marked crontab block).
public struct RefreshSchedule: Sendable {
    public enum Backend: String, Sendable, CaseIterable { case systemd, cron }

    public static let unitName = "tokenctl-refresh"
    static let marker = "# Installed by 'tokenctl schedule install'; remove with 'tokenctl schedule remove'."
    static let cronBegin = "# BEGIN tokenctl schedule (managed by 'tokenctl schedule'; do not edit inside)"
    static let cronEnd = "# END tokenctl schedule"

    public var executable: String
    public var environment: Environment
    /// The systemd user manager the timer is installed with.
    public var units: SystemdUserUnits
    /// crontab(1), or the program `TOKENCTL_CRONTAB` names (`Crontab.live`).
    public var crontab: Crontab

    /// Where the Debian package installs its user units (`tokenctl-refresh.service` and
    /// `.timer`, running /usr/bin/tokenctl every 15 minutes).
    public var packagedUnitDirectory: String { units.packagedUnitDirectory }

    public init(
        executable: String, environment: Environment = .process, units: SystemdUserUnits = .live,
        crontab: Crontab? = nil
    ) {
        self.executable = executable
        self.environment = environment
        self.units = units
        self.crontab = crontab ?? .live(environment)
    }

    /// The interval of the packaged timer.
    public static let packagedInterval = 900

    /// Whether the package's units can serve this schedule: they are installed, run this very
    /// executable, and the interval is theirs. Then `install` enables them instead of writing
    /// units of its own (which, in ~/.config/systemd/user, would shadow them).
    func packagedUnitsServe(interval: Int) -> Bool {
        guard interval == Self.packagedInterval,
            let service = (try? FileIO.readFile(packagedUnitDirectory + "/\(Self.unitName).service")) ?? nil,
            (try? FileIO.readFile(packagedUnitDirectory + "/\(Self.unitName).timer")) ?? nil != nil
        else { return false }
        return service.split(separator: "\n").contains { $0.hasPrefix("ExecStart=\(executable) ") }
    }

    // MARK: Interval

    /// A schedule interval such as `15m`, `1h`, `900s` or `30` (minutes).
    public static func parseInterval(_ text: String) -> Int? {
        let units: [(String, Int)] = [("min", 60), ("h", 3600), ("m", 60), ("s", 1)]
        var number = Substring(text)
        var scale = 60
        for (suffix, seconds) in units where text.hasSuffix(suffix) {
            number = text.dropLast(suffix.count)
            scale = seconds
            break
        }
        guard let value = Int(number), value > 0 else { return nil }
        let seconds = value * scale
        return (60...86400).contains(seconds) ? seconds : nil
    }

    /// "15 min", "2 h", "90 s".
    static func describe(_ seconds: Int) -> String {
        seconds % 3600 == 0 ? "\(seconds / 3600) h" : seconds % 60 == 0 ? "\(seconds / 60) min" : "\(seconds) s"
    }

    /// The refresh window for an interval: a token expiring before the run after next is refreshed.
    public static func window(forInterval seconds: Int) -> Int { 2 * seconds + 60 }

    /// The cron time fields for an interval, or nil when cron cannot express it.
    public static func cronFields(forInterval seconds: Int) -> String? {
        let minutes = seconds / 60
        guard seconds % 60 == 0 else { return nil }
        if minutes < 60 { return 60 % minutes == 0 ? (minutes == 1 ? "* * * * *" : "*/\(minutes) * * * *") : nil }
        let hours = minutes / 60
        guard minutes % 60 == 0, 24 % hours == 0 else { return nil }
        return hours == 1 ? "0 * * * *" : "0 */\(hours) * * *"
    }

    // MARK: Backends

    /// Whether a systemd user manager answers (`systemctl --user`).
    public func systemdAvailable() -> Bool { units.managerAnswers() }

    public func defaultBackend() -> Backend { systemdAvailable() ? .systemd : .cron }

    var unitDirectory: String? { SystemdUserUnits.directory(environment) }

    var servicePath: String? { unitDirectory.map { "\($0)/\(Self.unitName).service" } }
    var timerPath: String? { unitDirectory.map { "\($0)/\(Self.unitName).timer" } }

    /// Variables the refresh needs when they are not the defaults (where the profiles are).
    var passedEnvironment: [(String, String)] {
        ["XDG_CONFIG_HOME", "XDG_STATE_HOME", EnvironmentSwitches.profile.description].compactMap { name in
            environment[name].map { (name, $0) }
        }
    }

    public func serviceUnit(interval: Int) -> String {
        var lines = [
            Self.marker,
            "[Unit]",
            "Description=Refresh tokenctl sessions before they expire",
            "Documentation=man:tokenctl(1)",
            "",
            "[Service]",
            "Type=oneshot",
            "ExecStart=\(SystemdUserUnits.quoted(executable)) refresh --all --if-expiring-within \(Self.window(forInterval: interval))",
        ]
        for (name, value) in passedEnvironment {
            lines.append("Environment=\(SystemdUserUnits.quoted("\(name)=\(value)"))")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    public func timerUnit(interval: Int) -> String {
        [
            Self.marker,
            "[Unit]",
            "Description=Refresh tokenctl sessions every \(Self.describe(interval))",
            "Documentation=man:tokenctl(1)",
            "",
            "[Timer]",
            "OnActiveSec=1min",
            "OnUnitActiveSec=\(interval)s",
            "RandomizedDelaySec=30s",
            "AccuracySec=30s",
            "Unit=\(Self.unitName).service",
            "",
            "[Install]",
            "WantedBy=timers.target",
        ].joined(separator: "\n") + "\n"
    }

    public func cronBlock(interval: Int) -> String? {
        guard let fields = Self.cronFields(forInterval: interval) else { return nil }
        // cron gives HOME, SHELL and a short PATH: point tokenctl at the user's runtime
        // directory so it finds the session bus (with lingering enabled).
        var variables = [("XDG_RUNTIME_DIR", environment["XDG_RUNTIME_DIR"] ?? "/run/user/\(system_getuid())")]
        variables += passedEnvironment
        let assignments = variables.map { SystemdUserUnits.quoted("\($0.0)=\($0.1)") }.joined(separator: " ")
        let command =
            "\(assignments) \(SystemdUserUnits.quoted(executable)) refresh --all --if-expiring-within \(Self.window(forInterval: interval)) 2>&1 | logger -t tokenctl"
        return [Self.cronBegin, "\(fields) \(command)", Self.cronEnd].joined(separator: "\n") + "\n"
    }

    // MARK: Install / remove / status

    public func install(_ backend: Backend, interval: Int) throws(TokenctlError) -> String {
        switch backend {
        case .systemd:
            guard let servicePath, let timerPath, let unitDirectory else {
                throw TokenctlError(.configuration, "HOME is not set: cannot find the systemd user unit directory")
            }
            if packagedUnitsServe(interval: interval), !SystemdUserUnits.exists(timerPath) {
                if let failed = units.enable("\(Self.unitName).timer") {
                    throw TokenctlError(
                        .serviceUnavailable,
                        "cannot enable the packaged systemd timer: '\(failed.command)' failed: \(failed.output)",
                        hint:
                            "Run it from a login session with a systemd user manager, or use 'tokenctl schedule install --cron'. Nothing was installed."
                    )
                }
                return
                    "systemd user timer \(Self.unitName).timer (every \(Self.describe(interval))), installed by the package: \(packagedUnitDirectory)/\(Self.unitName).timer"
            }
            try SystemdUserUnits.write(
                [(servicePath, serviceUnit(interval: interval)), (timerPath, timerUnit(interval: interval))],
                into: unitDirectory)
            if let failed = units.reloadAndEnable("\(Self.unitName).timer") {
                // Nothing half-installed: units that no manager runs would look like a schedule.
                try? FileIO.removeFile(timerPath)
                try? FileIO.removeFile(servicePath)
                throw TokenctlError(
                    .serviceUnavailable,
                    "cannot install the systemd timer: '\(failed.command)' failed: \(failed.output)",
                    hint:
                        "Run it from a login session with a systemd user manager, or use 'tokenctl schedule install --cron'. Nothing was installed."
                )
            }
            return "systemd user timer \(Self.unitName).timer (every \(Self.describe(interval))): \(timerPath)"
        case .cron:
            guard let block = cronBlock(interval: interval) else {
                throw TokenctlError(
                    .invalidInput,
                    "cron can run every N minutes where N divides 60, or every N hours where N divides 24; \(Self.describe(interval)) is neither"
                )
            }
            let current = try readCrontab()
            try writeCrontab(Self.withoutBlock(current) + block)
            return "crontab entry (every \(Self.describe(interval))): " + block.split(separator: "\n")[1]
        }
    }

    /// Remove what `install` put in place; returns a description of each thing removed.
    public func remove(_ backends: [Backend]) throws(TokenctlError) -> [String] {
        var removed: [String] = []
        for backend in backends {
            switch backend {
            case .systemd:
                let ours = [timerPath, servicePath].compactMap { $0 }.filter {
                    SystemdUserUnits.isOurs($0, marker: Self.marker)
                }
                if ours.isEmpty {
                    // The package's timer, enabled by 'install': disable it (its files stay the package's).
                    if packagedUnitsServe(interval: Self.packagedInterval),
                        units.isEnabled("\(Self.unitName).timer")
                    {
                        units.disable("\(Self.unitName).timer")
                        removed.append("the packaged systemd timer \(Self.unitName).timer (disabled)")
                    }
                    continue
                }
                units.disable("\(Self.unitName).timer")
                for path in ours {
                    do { try FileIO.removeFile(path) } catch {
                        throw TokenctlError(.unexpected, "cannot remove \(path): \(error)")
                    }
                    removed.append(path)
                }
                units.daemonReload()
            case .cron:
                guard crontab.isInstalled() else { continue }
                let current = try readCrontab()
                let stripped = Self.withoutBlock(current)
                if stripped != current {
                    try writeCrontab(stripped)
                    removed.append("crontab entry")
                }
            }
        }
        return removed
    }

    public struct Status: Sendable, Equatable {
        public var backend: Backend
        /// Our files or crontab block are present.
        public var installed: Bool
        /// Installed and in effect (the timer is active; a crontab entry always is).
        public var working: Bool
        public var detail: String
    }

    public func status() -> [Status] {
        var result: [Status] = []
        let ownTimer = timerPath.map { SystemdUserUnits.isOurs($0, marker: Self.marker) } ?? false
        let packagedTimer =
            !ownTimer && packagedUnitsServe(interval: Self.packagedInterval)
            && units.isEnabled("\(Self.unitName).timer")
        let timerInstalled = ownTimer || packagedTimer
        var detail =
            ownTimer
            ? timerPath!
            : packagedTimer ? "\(packagedUnitDirectory)/\(Self.unitName).timer (the package's)" : "not installed"
        var active = false
        if timerInstalled {
            let answer = units.activity("\(Self.unitName).timer")
            active = answer.active
            detail += active ? " (active)" : " (not active: \(answer.state))"
        }
        result.append(Status(backend: .systemd, installed: timerInstalled, working: active, detail: detail))
        let cron = crontab.isInstalled() ? try? readCrontab() : nil
        let line = cron.flatMap { text in
            text.split(separator: "\n").drop { $0 != Self.cronBegin }.dropFirst().first.map(String.init)
        }
        result.append(
            Status(
                backend: .cron, installed: line != nil, working: line != nil,
                detail: line ?? (cron == nil ? "crontab not available" : "not installed")))
        return result
    }

    // MARK: crontab

    func readCrontab() throws(TokenctlError) -> String {
        guard crontab.isInstalled() else {
            throw TokenctlError(
                .serviceUnavailable, "crontab is not installed",
                hint: "Install cron ('apt-get install cron'), or use systemd: 'tokenctl schedule install --systemd'.")
        }
        let result = crontab.run(["-l"], nil)
        if result.status == 0 { return result.output }
        if result.output.contains("no crontab") { return "" }
        throw TokenctlError(.serviceUnavailable, "crontab -l failed: \(result.output.trimmingCharacters(in: " \n"))")
    }

    func writeCrontab(_ text: String) throws(TokenctlError) {
        let result = crontab.run(["-"], text)
        guard result.status == 0 else {
            throw TokenctlError(.serviceUnavailable, "crontab - failed: \(result.output.trimmingCharacters(in: " \n"))")
        }
    }

    /// The crontab without our block (and nothing else changed).
    static func withoutBlock(_ text: String) -> String {
        var lines: [Substring] = []
        var inside = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == cronBegin {
                inside = true
                continue
            }
            if inside {
                if line == cronEnd { inside = false }
                continue
            }
            lines.append(line)
        }
        var result = lines.joined(separator: "\n")
        while result.hasSuffix("\n\n") { result.removeLast() }
        if !result.isEmpty && !result.hasSuffix("\n") { result += "\n" }
        return result
    }
}
