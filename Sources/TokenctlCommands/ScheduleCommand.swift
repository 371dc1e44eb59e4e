import TokenctlCore
import TokenctlEssentials

enum ScheduleCommand: EngineCommand {
    static let everyOption = OptionSpec(
        "--every", value: "interval", help: "How often to refresh: 15m (default), 30m, 1h, 900s …")
    static let systemdOption = OptionSpec(
        "--systemd", help: "Use a systemd user timer (the default when 'systemctl --user' works).")
    static let cronOption = OptionSpec("--cron", help: "Use a crontab entry.")

    static let spec = CommandSpec(
        name: "schedule",
        abstract: "Install, remove or show the unattended refresh (systemd timer or cron).",
        usage: "install|remove|status [--every <interval>] [--systemd | --cron]",
        options: [everyOption, systemdOption, cronOption],
        arguments: [("action", "install, remove or status.")],
        argumentChoices: Action.allCases.map(\.rawValue),
        discussion:
            "The job runs 'tokenctl refresh --all --if-expiring-within <2 x interval + 60 s>'. Installing twice replaces the entry; 'remove' deletes exactly what 'install' created."
    )

    /// systemctl and crontab are bounded on their own.
    static func hasDeadline(_ options: ParsedOptions) -> Bool { false }

    static func schedule(_ context: CommandContext) -> RefreshSchedule {
        // The user-facing `tokenctl` beside the running binary, so schedules survive upgrades in place.
        // After the front's exec this process is tokenctl-engine; schedules run the front.
        var executable = context.environment.executable ?? "tokenctl"
        if executable.hasSuffix("/tokenctl-engine") {
            let front = String(executable.dropLast("-engine".count))
            // The package keeps the engine in PREFIX/libexec/tokenctl/, the front in PREFIX/bin/.
            let packagedFront =
                executable.hasSuffix("/libexec/tokenctl/tokenctl-engine")
                ? String(executable.dropLast("/libexec/tokenctl/tokenctl-engine".count)) + "/bin/tokenctl" : nil
            if Subprocess.locate(front) != nil {
                executable = front
            } else if let packagedFront, Subprocess.locate(packagedFront) != nil {
                executable = packagedFront
            }
        }
        return RefreshSchedule(
            executable: executable, environment: context.variables, units: context.environment.userUnits,
            crontab: context.environment.crontab, arguments: HintText.arguments)
    }

    enum Action: String, CaseIterable, Sendable {
        case install, remove, status
    }

    /// `schedule`'s action and options, checked.
    struct Options: Equatable, Sendable {
        var action: Action
        /// The backend asked for (`--systemd`, `--cron`), or nil for the default.
        var backend: RefreshSchedule.Backend?
        /// With `install`: the refresh interval in seconds.
        var interval: Int?

        init(_ parsed: ParsedOptions) throws(UsageError) {
            action = try parsed.action(Action.self, command: "schedule")
            if parsed.has(systemdOption) && parsed.has(cronOption) {
                throw UsageError("'--systemd' and '--cron' exclude each other.", command: "schedule")
            }
            backend = parsed.has(systemdOption) ? .systemd : parsed.has(cronOption) ? .cron : nil
            switch action {
            case .install:
                let every = parsed.value(everyOption) ?? "15m"
                guard let interval = RefreshSchedule.parseInterval(every) else {
                    throw UsageError(
                        "Invalid value '\(Output.printable(String(every.prefix(40))))' for '--every': expected a duration from 1m to 24h, e.g. 15m, 1h, 900s.",
                        command: "schedule")
                }
                self.interval = interval
            case .remove, .status:
                guard parsed.value(everyOption) == nil else {
                    throw UsageError("'--every' applies to 'install' only.", command: "schedule")
                }
                interval = nil
            }
        }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = try Options(context.options)
        let schedule = schedule(context)
        let chosen = options.backend
        switch options.action {
        case .install:
            let backend = chosen ?? schedule.defaultBackend()
            let description = try schedule.install(backend, interval: options.interval!)
            context.io.standardError("Installed \(description).\n")
            // One schedule at a time: switching backends removes the other one, once the new one works.
            let other = RefreshSchedule.Backend.allCases.filter { $0 != backend }
            for removed in (try? schedule.remove(other)) ?? [] { context.io.standardError("Removed \(removed).\n") }
            // Will it keep working after a reboot with nobody logged in? Said, not enforced.
            let gaps = KeyringCommand.keyring(context).rebootGaps()
            if !gaps.isEmpty {
                context.io.standardError(
                    "tokenctl: warning: after a reboot with nobody logged in the refresh will fail (\(gaps.joined(separator: "; "))): 'tokenctl doctor' says what to run.\n"
                )
            }
            return .success
        case .remove:
            let removed = try schedule.remove(chosen.map { [$0] } ?? RefreshSchedule.Backend.allCases)
            for item in removed { context.io.standardError("Removed \(item).\n") }
            if removed.isEmpty { context.io.standardError("No tokenctl schedule was installed.\n") }
            return .success
        case .status:
            let statuses = schedule.status()
            for entry in statuses where chosen == nil || entry.backend == chosen {
                context.io.standardOutput("\(entry.backend.rawValue): \(entry.detail)\n")
            }
            return statuses.contains(where: { $0.working && (chosen == nil || $0.backend == chosen) })
                ? .success : .failure
        }
    }
}
