import Testing
import TokenctlCommands
import TokenctlEssentials

@testable import TokenctlCommands

/// The engine's real command table, in-process (before TokenctlCommands, the commands lived in
/// an executable that no test could import, and only the end-to-end suites reached them).
@Suite("TokenctlCommands: the command table, parsed in-process")
struct CommandTableTests {
    static let names = [
        "login", "token", "refresh", "logout", "status", "events", "doctor", "schedule", "git-credential", "exec",
        "forward", "key", "keyring", "proxy-password", "completion",
    ]

    @Test("every command is in the table once, in the order help lists them")
    func table() {
        #expect(Commands.all.map { $0.spec.name } == Self.names)
        for name in Self.names { #expect(Commands.named(name)?.spec.name == name) }
        #expect(Commands.named("tokens") == nil)
    }

    @Test("each command's help names the command and every option it declares", arguments: names)
    func help(name: String) throws {
        let spec = try #require(Commands.parser.command(named: name))
        let help = HelpFormatter(toolName: "tokenctl").help(for: spec)
        #expect(help.contains("USAGE: tokenctl [--profile <name>] \(name)"), "\(help)")
        for option in spec.options { #expect(help.contains(option.key), "\(name) help lists \(option.key)") }
    }

    @Test("options reach the command under their long names; a misspelt one is a usage error with a suggestion")
    func parsing() throws {
        let invocation = try Commands.parser.parse([
            "--profile", "work", "token", "--min-ttl", "120", "--format", "json",
        ])
        #expect(invocation.action == .run("token"))
        #expect(invocation.profileName == "work")
        #expect(invocation.options.value("--min-ttl") == "120")
        #expect(invocation.options.value("--format") == "json")
        #expect(throws: UsageError.self) { try Commands.parser.parse(["token", "--formt", "json"]) }
        do {
            _ = try Commands.parser.parse(["token", "--formt", "json"])
        } catch {
            #expect(error.message.contains("--format"), "did you mean: \(error)")
        }
    }
}
