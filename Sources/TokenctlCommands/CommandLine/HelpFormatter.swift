import TokenctlCore
import TokenctlEssentials

/// Renders help in the layout every Swift command-line tool uses
/// (`OVERVIEW:`, `USAGE:`, `ARGUMENTS:`, `OPTIONS:`, `SUBCOMMANDS:`).
public struct HelpFormatter: Sendable {
    public let toolName: String

    public init(toolName: String) {
        self.toolName = toolName
    }

    public func usageLine(for command: CommandSpec) -> String {
        "USAGE: \(toolName) [--profile <name>] \(command.name)\(command.usage.isEmpty ? "" : " " + command.usage)"
    }

    public func help(for command: CommandSpec) -> String {
        var text = "OVERVIEW: \(command.abstract)\n\n\(usageLine(for: command))\n"
        if let discussion = command.discussion {
            text += "\n" + discussion + "\n"
        }
        if !command.arguments.isEmpty {
            text += "\nARGUMENTS:\n" + table(command.arguments.map { ("<\($0.0)>", $0.1) })
        }
        text += "\nOPTIONS:\n" + table((command.options + GlobalOptions.all).map { (label($0), $0.help) })
        return text
    }

    public func topLevelHelp(overview: String, commands: [CommandSpec], footer: String) -> String {
        var text = "OVERVIEW: \(overview)\n\nUSAGE: \(toolName) [--profile <name>] <command> [<options>]\n"
        text += "\nOPTIONS:\n" + table((GlobalOptions.all + [GlobalOptions.version]).map { (label($0), $0.help) })
        text +=
            "\nSUBCOMMANDS:\n" + table(commands.map { ($0.name, $0.abstract) } + [("help", "Show help for a command.")])
        text += "\n" + footer + "\n"
        return text
    }

    private func label(_ option: OptionSpec) -> String {
        let names = option.names.joined(separator: ", ")
        return option.valueName.map { "\(names) <\($0)>" } ?? names
    }

    private func table(_ rows: [(String, String)]) -> String {
        let width = min(28, (rows.map(\.0.count).max() ?? 0) + 2)
        var text = ""
        for (left, right) in rows {
            if left.count + 2 > width {
                text += "  \(left)\n" + String(repeating: " ", count: width + 2) + right + "\n"
            } else {
                text += "  " + left + String(repeating: " ", count: width - left.count) + right + "\n"
            }
        }
        return text
    }
}
