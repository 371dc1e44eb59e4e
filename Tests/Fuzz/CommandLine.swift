// Fuzz target: the engine's argv parser (CommandLineParser with every command of
// TokenctlCommands), and the help it prints for help actions and
// the "did you mean" hints of its errors.
//
// Input: argv after argv[0], split on NUL; each argument decoded as UTF-8 with repair (as
// CommandLine.arguments decodes the process's argv).
// fuzz-extra-sources:
import TokenctlEssentials

@testable import TokenctlCommands

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCommandLine(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzSupport.bytes(data, size)
    let arguments =
        bytes.isEmpty
        ? [] : bytes.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    let parser = Commands.parser
    let formatter = HelpFormatter(toolName: "tokenctl")
    let invocation: Invocation
    do { invocation = try parser.parse(arguments) } catch {
        _ = error.description
        if let name = error.command {
            check(parser.command(named: name) != nil, "a usage error names an unknown command")
        }
        return 0
    }
    switch invocation.action {
    case .topLevelHelp, .version:
        break
    case .topicHelp(let topic):
        check(parser.topics.contains(topic), "help for an unknown topic")
    case .commandHelp(let name):
        guard let command = parser.command(named: name) else { fail("help for an unknown command") }
        _ = formatter.help(for: command)
    case .run(let name):
        guard let command = parser.command(named: name) else { fail("running an unknown command") }
        let known = command.options + GlobalOptions.all
        check(invocation.options.arguments.count <= command.maximumArguments, "too many arguments accepted")
        for (key, _) in invocation.options.valueList {
            check(known.contains { $0.key == key && !$0.isFlag }, "a value for an option the command does not take")
        }
        for key in invocation.options.flagList {
            check(known.contains { $0.key == key && $0.isFlag }, "a flag the command does not take")
        }
        _ = invocation.options.values
        _ = invocation.options.flags
        _ = formatter.usageLine(for: command)
    }
    return 0
}
