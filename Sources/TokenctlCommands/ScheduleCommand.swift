import TokenctlCore
import TokenctlEssentials

enum ScheduleCommand: EngineCommand {
    static let spec = CommandSpec(
        name: "schedule",
        abstract: "Install, remove or show the unattended refresh (systemd timer or cron).",
        usage: "install|remove|status [--every <interval>] [--systemd | --cron]",
        options: [
            OptionSpec("--every", value: "interval", help: "How often to refresh: 15m (default), 30m, 1h, 900s …"),
            OptionSpec("--systemd", help: "Use a systemd user timer (the default when 'systemctl --user' works)."),
            OptionSpec("--cron", help: "Use a crontab entry."),
        ],
        arguments: [("action", "install, remove or status.")],
        argumentChoices: ["install", "remove", "status"],
        discussion: "The job runs 'tokenctl refresh --all --if-expiring-within <2 x interval + 60 s>'. Installing twice replaces the entry; 'remove' deletes exactly what 'install' created.")

    /// systemctl and crontab are bounded on their own.
    static func hasDeadline(_ options: ParsedOptions) -> Bool { false }

    static func schedule() -> RefreshSchedule {
        // The user-facing `tokenctl` beside the running binary, so schedules survive upgrades in place.
        // After the front's exec this process is tokenctl-engine; schedules run the front.
        var executable = Subprocess.currentExecutable() ?? "tokenctl"
        if executable.hasSuffix("/tokenctl-engine") {
            let front = String(executable.dropLast("-engine".count))
            // The package keeps the engine in PREFIX/libexec/tokenctl/, the front in PREFIX/bin/.
            let packagedFront = executable.hasSuffix("/libexec/tokenctl/tokenctl-engine")
                ? String(executable.dropLast("/libexec/tokenctl/tokenctl-engine".count)) + "/bin/tokenctl" : nil
            if Subprocess.locate(front) != nil {
                executable = front
            } else if let packagedFront, Subprocess.locate(packagedFront) != nil {
                executable = packagedFront
            }
        }
        return RefreshSchedule(executable: executable)
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = context.options
        guard let action = options.arguments.first else {
            throw UsageError("Missing action: install, remove or status.", command: "schedule")
        }
        if options.has("--systemd") && options.has("--cron") {
            throw UsageError("'--systemd' and '--cron' exclude each other.", command: "schedule")
        }
        let schedule = schedule()
        let chosen: RefreshSchedule.Backend? = options.has("--systemd") ? .systemd : options.has("--cron") ? .cron : nil
        switch action {
        case "install":
            let text = options.value("--every") ?? "15m"
            guard let interval = RefreshSchedule.parseInterval(text) else {
                throw UsageError("Invalid value '\(text)' for '--every': expected a duration from 1m to 24h, e.g. 15m, 1h, 900s.", command: "schedule")
            }
            let backend = chosen ?? schedule.defaultBackend()
            let description = try schedule.install(backend, interval: interval)
            Output.standardError("Installed \(description).\n")
            // One schedule at a time: switching backends removes the other one, once the new one works.
            let other = RefreshSchedule.Backend.allCases.filter { $0 != backend }
            for removed in (try? schedule.remove(other)) ?? [] { Output.standardError("Removed \(removed).\n") }
            return .success
        case "remove":
            guard options.value("--every") == nil else { throw UsageError("'--every' applies to 'install' only.", command: "schedule") }
            let removed = try schedule.remove(chosen.map { [$0] } ?? RefreshSchedule.Backend.allCases)
            for item in removed { Output.standardError("Removed \(item).\n") }
            if removed.isEmpty { Output.standardError("No tokenctl schedule was installed.\n") }
            return .success
        case "status":
            let statuses = schedule.status()
            for entry in statuses where chosen == nil || entry.backend == chosen {
                Output.standardOutput("\(entry.backend.rawValue): \(entry.detail)\n")
            }
            return statuses.contains(where: { $0.working && (chosen == nil || $0.backend == chosen) }) ? .success : .failure
        default:
            let hint = closestMatch(to: action, in: ["install", "remove", "status"]).map { " Did you mean '\($0)'?" } ?? ""
            throw UsageError("Unknown action '\(action)'.\(hint)", command: "schedule")
        }
    }
}
