import TokenctlCore
import TokenctlEssentials

enum DoctorCommand: EngineCommand {
    static let jsonOption = OptionSpec("--json", help: "Print the checks as JSON on stdout.")
    static let timeoutOption = OptionSpec(
        "--timeout", value: "seconds",
        help:
            "Give up after this long in all (default: 10, at least 1): the Secret Service checks share it, the issuers are asked meanwhile."
    )

    static let spec = CommandSpec(
        name: "doctor",
        abstract: "Check everything unattended use needs, one line per check.",
        usage: "[--json]",
        options: [jsonOption, timeoutOption],
        discussion:
            "Checks the configuration, the session bus, the Secret Service and its lock state, the rotation journal and its room in the kernel key quota, each profile's session, orphaned sessions, each issuer's reachability and clock, the lock directory, the refresh schedule, and what a reboot with nobody logged in needs (linger, the keyring unit and its seal). Each check is ok, warn (advice: tokens work) or fail (what breaks 'token'). The whole run ends within --timeout (10 s unless given), even against a Secret Service that never answers: every check still prints its line, and one that ran out of time says so. Exit status 0 unless a check fails, else 1."
    )

    static var defaultTimeout: Double { 10 }

    /// `doctor`'s options.
    struct Options: Equatable, Sendable {
        var json: Bool

        init(_ parsed: ParsedOptions) { json = parsed.has(jsonOption) }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = Options(context.options)
        let (service, bus) = context.serviceAndBus()
        // Which engine runs (beside the front, or the package's under libexec), then the checks.
        let checks =
            [DoctorFinding("engine", ok: true, "tokenctl \(toolVersion) at \(context.environment.enginePath)")]
            + (await service.diagnose(
                bus: bus, schedule: ScheduleCommand.schedule(context), keyring: KeyringCommand.keyring(context)))
        let allPassed = checks.allSatisfy(\.ok)
        if options.json {
            let items = checks.map { check in
                "{\"name\":\(Output.jsonString(check.name)),\"ok\":\(check.ok),\"level\":\"\(check.level.rawValue)\",\"detail\":\(Output.jsonString(check.detail)),\"hint\":\(check.hint.map { Output.jsonString($0.text) } ?? "null")}"
            }
            context.io.standardOutput("{\"ok\":\(allPassed),\"checks\":[\(items.joined(separator: ","))]}\n")
        } else {
            let (pass, warn, fail) =
                Output.prefersUnicode(context.io, context.variables) ? ("✓", "!", "✗") : ("[ok]  ", "[warn]", "[FAIL]")
            var text = ""
            for check in checks {
                let mark = check.level == .ok ? pass : check.level == .warn ? warn : fail
                text += "\(mark) \(Output.printable(check.name)): \(Output.printable(check.detail))\n"
                if check.level != .ok, let hint = check.hint { text += "    \(Output.printable(hint.text))\n" }
            }
            context.io.standardOutput(text)
        }
        return allPassed ? .success : .failure
    }
}
