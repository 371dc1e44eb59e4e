#if canImport(Glibc)
import Glibc
#endif
import TokenctlCore
import TokenctlEssentials

enum DoctorCommand {
    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let (service, bus) = context.serviceAndBus()
        let checks = await service.diagnose(bus: bus, schedule: ScheduleCommand.schedule())
        let allPassed = checks.allSatisfy(\.ok)
        if context.options.has("--json") {
            let items = checks.map { check in
                "{\"name\":\(Output.jsonString(check.name)),\"ok\":\(check.ok),\"level\":\"\(check.level.rawValue)\",\"detail\":\(Output.jsonString(check.detail)),\"hint\":\(check.hint.map(Output.jsonString) ?? "null")}"
            }
            Output.standardOutput("{\"ok\":\(allPassed),\"checks\":[\(items.joined(separator: ","))]}\n")
        } else {
            let (pass, warn, fail) = Output.prefersUnicode ? ("✓", "!", "✗") : ("[ok]  ", "[warn]", "[FAIL]")
            var text = ""
            for check in checks {
                let mark = check.level == .ok ? pass : check.level == .warn ? warn : fail
                text += "\(mark) \(Output.printable(check.name)): \(Output.printable(check.detail))\n"
                if check.level != .ok, let hint = check.hint { text += "    \(Output.printable(hint))\n" }
            }
            Output.standardOutput(text)
        }
        return allPassed ? .success : .failure
    }
}
