import Testing
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials

/// A command set shaped like tokenctl's own (the real one lives in the executable target).
private enum TestCommands {
    static let token = CommandSpec(
        name: "token", abstract: "Print a valid access token.", usage: "[--min-ttl <seconds>] [--force]",
        options: [
            OptionSpec("--min-ttl", value: "seconds", help: "Minimum time to live."),
            OptionSpec("--force", help: "Refresh even if fresh."),
            OptionSpec("--format", value: "format", help: "raw, header or json."),
        ])
    static let status = CommandSpec(
        name: "status", abstract: "Show the session state.", usage: "[--all] [--json]",
        options: [OptionSpec("--all", help: "Every profile."), OptionSpec("--json", help: "JSON output.")])
    static let login = CommandSpec(
        name: "login", abstract: "Sign in.", usage: "--issuer <url> --client-id <id>",
        options: [
            OptionSpec("--issuer", value: "url", help: "Issuer."),
            OptionSpec("--client-id", value: "id", help: "Client."),
        ])
    static let show = CommandSpec(
        name: "show", abstract: "Show one thing.", usage: "<name>", options: [],
        arguments: [("name", "What to show.")])

    static let parser = CommandLineParser(toolName: "tokenctl", commands: [token, status, login, show])
}

private func parse(_ arguments: String...) throws(UsageError) -> Invocation {
    try TestCommands.parser.parse(arguments)
}

private func usageError(_ arguments: String...) -> UsageError? {
    do {
        _ = try TestCommands.parser.parse(arguments)
        return nil
    } catch {
        return error
    }
}

@Suite("CommandLineParser")
struct CommandLineParserTests {
    @Test("no arguments show the top-level help")
    func empty() throws {
        let invocation = try parse()
        #expect(invocation.action == .topLevelHelp)
        #expect(invocation.profileName == nil)
        #expect(invocation.verbose == false)
    }

    @Test("a bare command runs with no options")
    func bareCommand() throws {
        let invocation = try parse("token")
        #expect(invocation.action == .run("token"))
        #expect(invocation.options == ParsedOptions())
        #expect(invocation.profileName == nil)
    }

    @Test("options with separate values and flags are collected under their long name")
    func optionsAndFlags() throws {
        let invocation = try parse("token", "--min-ttl", "120", "--force")
        #expect(invocation.action == .run("token"))
        #expect(invocation.options.value("--min-ttl") == "120")
        #expect(invocation.options.has("--force"))
        #expect(!invocation.options.has("--format"))
    }

    @Test("--opt=value takes everything after the first '='")
    func inlineValue() throws {
        let invocation = try parse("token", "--min-ttl=30", "--format=a=b")
        #expect(invocation.options.value("--min-ttl") == "30")
        #expect(invocation.options.value("--format") == "a=b")
    }

    @Test("--opt= gives an empty value")
    func inlineEmptyValue() throws {
        #expect(try parse("token", "--format=").options.value("--format") == "")
    }

    @Test("a value may start with a dash when given separately")
    func dashValue() throws {
        #expect(try parse("token", "--min-ttl", "-5").options.value("--min-ttl") == "-5")
    }

    @Test("unknown command suggests the closest one")
    func unknownCommandWithHint() {
        let error = usageError("tokn")
        #expect(error == UsageError("Unknown command 'tokn'. Did you mean 'token'?", command: nil))
    }

    @Test("unknown command far from every name has no hint")
    func unknownCommandWithoutHint() {
        let error = usageError("frobnicate")
        #expect(error == UsageError("Unknown command 'frobnicate'.", command: nil))
    }

    @Test("unknown option of a command suggests the closest option and names the command")
    func unknownOptionWithHint() {
        let error = usageError("token", "--min-tll", "5")
        #expect(
            error == UsageError("Unknown option '--min-tll' for 'token'. Did you mean '--min-ttl'?", command: "token"))
    }

    @Test("unknown option of a command can suggest a global option")
    func unknownOptionSuggestsGlobal() {
        let error = usageError("status", "--profil", "x")
        #expect(error?.message == "Unknown option '--profil' for 'status'. Did you mean '--profile'?")
    }

    @Test("unknown option without a hint")
    func unknownOptionWithoutHint() {
        let error = usageError("status", "--completely-different")
        #expect(error == UsageError("Unknown option '--completely-different' for 'status'.", command: "status"))
    }

    @Test("unknown option before any command is reported at the top level")
    func unknownTopLevelOption() {
        let error = usageError("--profle", "x", "token")
        #expect(error == UsageError("Unknown option '--profle'. Did you mean '--profile'?", command: nil))
    }

    @Test("a command option before the command is unknown at the top level")
    func commandOptionBeforeCommand() {
        let error = usageError("--force", "token")
        #expect(error?.command == nil)
        #expect(error?.message.hasPrefix("Unknown option '--force'.") == true)
    }

    @Test("unknown single-dash option")
    func unknownShortOption() {
        let error = usageError("token", "-x")
        #expect(error == UsageError("Unknown option '-x' for 'token'.", command: "token"))
    }

    @Test("an option without its value at the end is a usage error")
    func missingValue() {
        #expect(
            usageError("token", "--min-ttl") == UsageError("Missing value for '--min-ttl <seconds>'.", command: "token")
        )
    }

    @Test("--profile without its value is a usage error")
    func missingProfileValue() {
        #expect(usageError("--profile") == UsageError("Missing value for '--profile <name>'.", command: nil))
        #expect(
            usageError("token", "--profile") == UsageError("Missing value for '--profile <name>'.", command: "token"))
    }

    @Test("-- ends option parsing: later words are arguments even if they look like options")
    func endOfOptions() throws {
        let invocation = try parse("show", "--", "--weird")
        #expect(invocation.action == .run("show"))
        #expect(invocation.options.arguments == ["--weird"])
        #expect(invocation.options.flags.isEmpty)
    }

    @Test("-- before the command: the command name is still a word")
    func endOfOptionsBeforeCommand() throws {
        #expect(try parse("--", "show", "x").options.arguments == ["x"])
        #expect(try parse("--", "show", "x").action == .run("show"))
    }

    @Test("-- before 'help' makes it a command name, not the help topic")
    func endOfOptionsHelp() {
        #expect(usageError("--", "help")?.message.hasPrefix("Unknown command 'help'.") == true)
    }

    @Test("a lone '-' is an argument")
    func loneDash() throws {
        #expect(try parse("show", "-").options.arguments == ["-"])
    }

    @Test("a flag given a value is a usage error")
    func flagWithValue() {
        #expect(usageError("token", "--force=yes") == UsageError("'--force' does not take a value.", command: "token"))
        #expect(
            usageError("token", "--verbose=1") == UsageError("'--verbose' does not take a value.", command: "token"))
        #expect(usageError("--verbose=1", "token") == UsageError("'--verbose' does not take a value.", command: nil))
    }

    @Test("an option given twice is a usage error, whatever the spelling")
    func optionTwice() {
        #expect(
            usageError("token", "--min-ttl", "1", "--min-ttl=2")
                == UsageError("'--min-ttl' was given more than once.", command: "token"))
        #expect(
            usageError("--profile", "a", "token", "--profile=b")
                == UsageError("'--profile' was given more than once.", command: "token"))
        #expect(
            usageError("--profile", "a", "--profile", "b")
                == UsageError("'--profile' was given more than once.", command: nil))
    }

    @Test("a flag given twice is accepted")
    func flagTwice() throws {
        #expect(try parse("token", "--force", "--force").options.flags == ["--force"])
    }

    @Test("too many positional arguments")
    func tooManyArguments() {
        #expect(usageError("token", "extra") == UsageError("Unexpected argument 'extra'.", command: "token"))
        #expect(usageError("show", "a", "b") == UsageError("Unexpected argument 'b'.", command: "show"))
    }

    @Test("positional arguments up to the maximum are kept")
    func positionalArguments() throws {
        let invocation = try parse("show", "thing")
        #expect(invocation.options.arguments == ["thing"])
    }

    @Test("help alone is the top-level help")
    func helpAlone() throws {
        #expect(try parse("help").action == .topLevelHelp)
    }

    @Test("help COMMAND shows the command's help")
    func helpCommand() throws {
        #expect(try parse("help", "token").action == .commandHelp("token"))
        #expect(try parse("--profile", "x", "help", "status").action == .commandHelp("status"))
    }

    @Test("help of an unknown command is an unknown-command error with a hint")
    func helpUnknown() {
        #expect(usageError("help", "nope") == UsageError("Unknown command 'nope'.", command: nil))
        #expect(
            usageError("help", "statu") == UsageError("Unknown command 'statu'. Did you mean 'status'?", command: nil))
    }

    @Test("help takes one command name only")
    func helpTooMany() {
        #expect(usageError("help", "token", "status") == UsageError("'help' takes one command name.", command: nil))
    }

    @Test(
        "-h and --help anywhere ask for help",
        arguments: [
            (["-h"], Invocation.Action.topLevelHelp),
            (["--help"], .topLevelHelp),
            (["token", "-h"], .commandHelp("token")),
            (["-h", "token"], .commandHelp("token")),
            (["--help", "token"], .commandHelp("token")),
            (["token", "--min-ttl", "5", "--help"], .commandHelp("token")),
            (["--profile", "x", "status", "--all", "-h"], .commandHelp("status")),
            (["show", "thing", "--help"], .commandHelp("show")),
        ])
    func helpAnywhere(arguments: [String], expected: Invocation.Action) throws {
        #expect(try TestCommands.parser.parse(arguments).action == expected)
    }

    @Test("--version before a command prints the version")
    func version() throws {
        #expect(try parse("--version").action == .version)
        let withProfile = try parse("--profile", "work", "--version")
        #expect(withProfile.action == .version)
        #expect(withProfile.profileName == "work")
    }

    @Test("--version after a command is not an option of that command")
    func versionAfterCommand() {
        #expect(usageError("token", "--version")?.message.hasPrefix("Unknown option '--version' for 'token'.") == true)
    }

    @Test(
        "global --profile before or after the command, in either spelling",
        arguments: [
            ["--profile", "work", "token"],
            ["--profile=work", "token"],
            ["token", "--profile", "work"],
            ["token", "--profile=work"],
            ["token", "--min-ttl", "5", "--profile", "work"],
        ])
    func globalProfile(arguments: [String]) throws {
        let invocation = try TestCommands.parser.parse(arguments)
        #expect(invocation.profileName == "work")
        #expect(invocation.action == .run("token"))
        #expect(invocation.options.values["--profile"] == nil)
    }

    @Test(
        "--verbose and -v before or after the command",
        arguments: [
            ["--verbose", "token"], ["-v", "token"], ["token", "--verbose"], ["token", "-v"],
        ])
    func verbose(arguments: [String]) throws {
        let invocation = try TestCommands.parser.parse(arguments)
        #expect(invocation.verbose)
        #expect(invocation.action == .run("token"))
        #expect(invocation.options.flags.isEmpty)
    }

    @Test("global options without a command show the top-level help")
    func globalOptionsOnly() throws {
        let invocation = try parse("--profile", "work", "--verbose")
        #expect(invocation.action == .topLevelHelp)
        #expect(invocation.profileName == "work")
        #expect(invocation.verbose)
    }

    @Test("command(named:) finds only known commands")
    func commandNamed() {
        #expect(TestCommands.parser.command(named: "status")?.name == "status")
        #expect(TestCommands.parser.command(named: "help") == nil)
    }

    @Test("UsageError describes itself by its message")
    func usageErrorDescription() {
        #expect(UsageError("bad", command: "x").description == "bad")
    }
}

@Suite("editDistance and closestMatch")
struct EditDistanceTests {
    @Test(
        "Levenshtein distances",
        arguments: [
            ("", "", 0), ("", "abc", 3), ("abc", "", 3), ("token", "token", 0),
            ("kitten", "sitting", 3), ("flaw", "lawn", 2), ("tokn", "token", 1),
            ("statsu", "status", 2), ("é", "e", 1), ("abc", "cba", 2),
        ])
    func distance(a: String, b: String, expected: Int) {
        #expect(editDistance(a, b) == expected)
        #expect(editDistance(b, a) == expected)
    }

    @Test("closest candidate within the typo allowance")
    func closest() {
        let commands = ["login", "token", "refresh", "logout", "status"]
        #expect(closestMatch(to: "tokn", in: commands) == "token")
        #expect(closestMatch(to: "refersh", in: commands) == "refresh")
        #expect(closestMatch(to: "logot", in: commands) == "logout")
        #expect(closestMatch(to: "xyzzy", in: commands) == nil)
        #expect(closestMatch(to: "token", in: []) == nil)
    }

    @Test("the allowance grows with the word: a third of its length, at least 2")
    func allowance() {
        // 12 characters allow 4 edits.
        #expect(closestMatch(to: "if-expiring", in: ["--if-expiring-within"]) == nil)
        #expect(closestMatch(to: "--if-expirng-withn", in: ["--if-expiring-within"]) == "--if-expiring-within")
        // 3 characters still allow 2 edits, but not 3.
        #expect(closestMatch(to: "abc", in: ["axx"]) == "axx")
        #expect(closestMatch(to: "abc", in: ["xyz"]) == nil)
    }
}

@Suite("HelpFormatter")
struct HelpFormatterTests {
    let formatter = HelpFormatter(toolName: "tokenctl")

    @Test("command help has OVERVIEW, USAGE and OPTIONS, including the global options")
    func commandHelp() {
        let text = formatter.help(for: TestCommands.token)
        #expect(text.hasPrefix("OVERVIEW: Print a valid access token.\n"))
        #expect(text.contains("\nUSAGE: tokenctl [--profile <name>] token [--min-ttl <seconds>] [--force]\n"))
        #expect(text.contains("\nOPTIONS:\n"))
        #expect(text.contains("  --min-ttl <seconds>"))
        #expect(text.contains("  --force "))
        #expect(text.contains("  --profile <name>"))
        #expect(text.contains("  -v, --verbose"))
        #expect(text.contains("  -h, --help"))
        #expect(!text.contains("ARGUMENTS:"))
        #expect(!text.contains("--version"))
    }

    @Test("OPTIONS come after USAGE")
    func sectionOrder() throws {
        let text = formatter.help(for: TestCommands.token)
        let overview = try #require(text.firstRange(of: "OVERVIEW:"))
        let usage = try #require(text.firstRange(of: "USAGE:"))
        let options = try #require(text.firstRange(of: "OPTIONS:"))
        #expect(overview.lowerBound < usage.lowerBound)
        #expect(usage.lowerBound < options.lowerBound)
    }

    @Test("arguments and discussion appear when the command has them")
    func argumentsAndDiscussion() {
        let command = CommandSpec(
            name: "show", abstract: "Show.", usage: "<name>", options: [],
            arguments: [("name", "What to show.")], discussion: "Some words.")
        let text = formatter.help(for: command)
        #expect(text.contains("\nARGUMENTS:\n  <name>"))
        #expect(text.contains("What to show."))
        #expect(text.contains("\nSome words.\n"))
    }

    @Test("a command with an empty usage has no trailing space")
    func emptyUsage() {
        let command = CommandSpec(name: "doctor", abstract: "Check.", usage: "", options: [])
        #expect(formatter.usageLine(for: command) == "USAGE: tokenctl [--profile <name>] doctor")
    }

    @Test("help texts line up in one column; long labels wrap to the next line")
    func alignment() {
        let command = CommandSpec(
            name: "x", abstract: "X.", usage: "",
            options: [OptionSpec("--a-very-long-option-name-indeed", value: "value", help: "LONGHELP")])
        let text = formatter.help(for: command)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let index = lines.firstIndex { $0.contains("--a-very-long-option-name-indeed") }!
        #expect(lines[index].hasSuffix("<value>"))
        #expect(lines[index + 1].drop(while: { $0 == " " }) == "LONGHELP")
        let helpLine = lines.first { $0.contains("-h, --help") }!
        #expect(helpLine.contains("Show help information."))
    }

    @Test("top-level help has OVERVIEW, USAGE, OPTIONS with --version, SUBCOMMANDS and the footer")
    func topLevel() {
        let text = formatter.topLevelHelp(
            overview: "Manage tokens.", commands: TestCommands.parser.commands, footer: "See 'tokenctl help <command>'."
        )
        #expect(text.hasPrefix("OVERVIEW: Manage tokens.\n"))
        #expect(text.contains("\nUSAGE: tokenctl [--profile <name>] <command> [<options>]\n"))
        #expect(text.contains("\nOPTIONS:\n"))
        #expect(text.contains("--version"))
        #expect(text.contains("\nSUBCOMMANDS:\n"))
        for name in ["token", "status", "login", "show", "help"] {
            #expect(text.contains("\n  \(name) "))
        }
        #expect(text.hasSuffix("See 'tokenctl help <command>'.\n"))
    }
}
