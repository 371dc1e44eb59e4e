import Foundation
import Testing
import TokenctlTestSupport

/// One bad command line and what its error must say.
struct UsageCase: Sendable, CustomTestStringConvertible {
    let label: String
    let arguments: [String]
    var environment: [String: String] = [:]
    var stdin: String?
    /// The command whose usage line must be printed; `nil` for the top-level one.
    let command: String?
    var mentioning: [String] = []
    var notMentioning: [String] = []

    var testDescription: String { label }
}

private let longName = String(repeating: "a", count: 65)

/// Bad command lines, through the built binary: exit 64, `Error:`, usage, `See … --help`, empty stdout.
@Suite("End to end: command line")
struct CommandLineTests {
    static let topLevelCases: [UsageCase] = [
        UsageCase(
            label: "unknown command with a suggestion", arguments: ["tokn"], command: nil,
            mentioning: ["Unknown command 'tokn'.", "Did you mean 'token'?"]),
        UsageCase(
            label: "unknown command without a close match", arguments: ["frobnicate"], command: nil,
            mentioning: ["Unknown command 'frobnicate'."], notMentioning: ["Did you mean"]),
        UsageCase(
            label: "unknown global option with a suggestion", arguments: ["--verbos", "token"], command: nil,
            mentioning: ["Unknown option '--verbos'.", "Did you mean '--verbose'?"]),
        UsageCase(
            label: "--profile without a value", arguments: ["--profile"], command: nil,
            mentioning: ["Missing value for '--profile <name>'"]),
        UsageCase(
            label: "--profile given twice", arguments: ["--profile", "a", "--profile", "b", "token"], command: nil,
            mentioning: ["'--profile' was given more than once"]),
        UsageCase(
            label: "help for an unknown command", arguments: ["help", "nosuch"], command: nil,
            mentioning: ["Unknown command 'nosuch'."]),
        UsageCase(
            label: "help with two topics", arguments: ["help", "token", "login"], command: nil,
            mentioning: ["'help' takes one command name."]),
    ]

    static let tokenCases: [UsageCase] = [
        UsageCase(
            label: "unknown option with a suggestion", arguments: ["token", "--min-tl", "5"], command: "token",
            mentioning: ["Unknown option '--min-tl' for 'token'.", "Did you mean '--min-ttl'?"]),
        UsageCase(
            label: "option without its value", arguments: ["token", "--min-ttl"], command: "token",
            mentioning: ["Missing value for '--min-ttl <seconds>'"]),
        UsageCase(
            label: "--format without its value", arguments: ["token", "--format"], command: "token",
            mentioning: ["Missing value for '--format <format>'"]),
        UsageCase(
            label: "flag given a value", arguments: ["token", "--force=yes"], command: "token",
            mentioning: ["'--force' does not take a value"]),
        UsageCase(
            label: "option given twice", arguments: ["token", "--min-ttl", "5", "--min-ttl=10"], command: "token",
            mentioning: ["'--min-ttl' was given more than once"]),
        UsageCase(
            label: "unexpected positional argument", arguments: ["token", "extra"], command: "token",
            mentioning: ["Unexpected argument 'extra'"]),
        UsageCase(
            label: "an option after -- is an argument", arguments: ["token", "--", "--force"], command: "token",
            mentioning: ["Unexpected argument '--force'"]),
        UsageCase(
            label: "invalid --format", arguments: ["token", "--format", "xml"], command: "token",
            mentioning: ["Invalid value 'xml' for '--format'", "raw, header, json, exec-credential or dpop"]),
        UsageCase(
            label: "empty --format", arguments: ["token", "--format="], command: "token",
            mentioning: ["Invalid value '' for '--format'"]),
        UsageCase(
            label: "negative --min-ttl", arguments: ["token", "--min-ttl", "-5"], command: "token",
            mentioning: ["Invalid value '-5' for '--min-ttl'"]),
        UsageCase(
            label: "non-numeric --min-ttl", arguments: ["token", "--min-ttl", "soon"], command: "token",
            mentioning: ["Invalid value 'soon' for '--min-ttl'"]),
        UsageCase(
            label: "NaN --min-ttl", arguments: ["token", "--min-ttl=nan"], command: "token",
            mentioning: ["Invalid value 'nan' for '--min-ttl'"]),
        UsageCase(
            label: "infinite --min-ttl", arguments: ["token", "--min-ttl", "inf"], command: "token",
            mentioning: ["Invalid value 'inf' for '--min-ttl'"]),
        UsageCase(
            label: "zero --timeout", arguments: ["token", "--timeout", "0"], command: "token",
            mentioning: ["Invalid value '0' for '--timeout'"]),
        UsageCase(
            label: "negative --timeout", arguments: ["token", "--timeout", "-1"], command: "token",
            mentioning: ["Invalid value '-1' for '--timeout'"]),
        UsageCase(
            label: "non-numeric --timeout", arguments: ["token", "--timeout=abc"], command: "token",
            mentioning: ["Invalid value 'abc' for '--timeout'"]),
        UsageCase(
            label: "too long --timeout", arguments: ["token", "--timeout", "3601"], command: "token",
            mentioning: ["Invalid value '3601' for '--timeout'"]),
    ]

    static let otherCommandCases: [UsageCase] = [
        UsageCase(
            label: "refresh: negative --if-expiring-within", arguments: ["refresh", "--if-expiring-within", "-1"],
            command: "refresh",
            mentioning: ["Invalid value '-1' for '--if-expiring-within'"]),
        UsageCase(
            label: "refresh: flag given a value", arguments: ["refresh", "--all=1"], command: "refresh",
            mentioning: ["'--all' does not take a value"]),
        UsageCase(
            label: "logout: unknown option with a suggestion", arguments: ["logout", "--no-revok"], command: "logout",
            mentioning: ["Unknown option '--no-revok' for 'logout'.", "Did you mean '--no-revoke'?"]),
        UsageCase(
            label: "status: flag given a value", arguments: ["status", "--json=yes"], command: "status",
            mentioning: ["'--json' does not take a value"]),
        UsageCase(
            label: "status: unexpected argument", arguments: ["status", "default"], command: "status",
            mentioning: ["Unexpected argument 'default'"]),
    ]

    static let profileNameCases: [UsageCase] = {
        var cases: [UsageCase] = []
        for name in ["../x", ".hidden", "", longName, "-x", "a/b", "a b"] {
            let shown = name.count > 20 ? "65 characters" : "'\(name)'"
            cases.append(
                UsageCase(
                    label: "--profile \(shown)", arguments: ["--profile", name, "token"], command: "token",
                    mentioning: ["Invalid profile name '\(name)'"]))
        }
        cases.append(
            UsageCase(
                label: "--profile= after the command", arguments: ["token", "--profile=../x"], command: "token",
                mentioning: ["Invalid profile name '../x'"]))
        // An empty TOKENCTL_PROFILE counts as unset (see emptyProfileVariable below).
        for name in ["../x", ".hidden", longName, "-x", "a/b"] {
            let shown = name.count > 20 ? "65 characters" : "'\(name)'"
            cases.append(
                UsageCase(
                    label: "TOKENCTL_PROFILE=\(shown)", arguments: ["token"], environment: ["TOKENCTL_PROFILE": name],
                    command: "token", mentioning: ["Invalid profile name '\(name)'"]))
        }
        return cases
    }()

    static let loginCases: [UsageCase] = [
        UsageCase(
            label: "login without --issuer", arguments: ["login", "--client-id", "cli", "--refresh-token-stdin"],
            stdin: "rt_unused", command: "login", mentioning: ["Missing '--issuer <url>'"]),
        UsageCase(
            label: "login without --client-id",
            arguments: ["login", "--issuer", "https://issuer.example", "--refresh-token-stdin"],
            stdin: "rt_unused", command: "login", mentioning: ["Missing '--client-id <id>'"]),
        UsageCase(
            label: "login with two ways to sign in",
            arguments: [
                "login", "--issuer", "https://issuer.example", "--client-id", "cli", "--device",
                "--refresh-token-stdin",
            ],
            stdin: "rt_unused", command: "login",
            mentioning: ["Choose one of --device, --browser, --refresh-token-stdin and --grant"]),
        UsageCase(
            label: "login with plain http to a remote issuer",
            arguments: ["login", "--issuer", "http://example.com", "--client-id", "cli", "--refresh-token-stdin"],
            stdin: "rt_unused", command: "login",
            mentioning: ["Invalid value for '--issuer'", "'http://example.com'", "https://"]),
        UsageCase(
            label: "login with an ftp issuer",
            arguments: ["login", "--issuer", "ftp://x", "--client-id", "cli", "--refresh-token-stdin"],
            stdin: "rt_unused", command: "login", mentioning: ["Invalid value for '--issuer'", "'ftp://x'"]),
        UsageCase(
            label: "login with an issuer that is not a URL",
            arguments: ["login", "--issuer", "not-a-url", "--client-id", "cli", "--refresh-token-stdin"],
            stdin: "rt_unused", command: "login", mentioning: ["Invalid value for '--issuer'", "'not-a-url'"]),
        UsageCase(
            label: "login with an empty issuer",
            arguments: ["login", "--issuer=", "--client-id", "cli", "--refresh-token-stdin"],
            stdin: "rt_unused", command: "login", mentioning: ["Invalid value for '--issuer'"]),
        UsageCase(
            label: "login with an empty client id",
            arguments: ["login", "--issuer", "https://issuer.example", "--client-id", "", "--refresh-token-stdin"],
            stdin: "rt_unused", command: "login", mentioning: ["Invalid value for '--client-id'"]),
        UsageCase(
            label: "login with a client id containing a space",
            arguments: [
                "login", "--issuer", "https://issuer.example", "--client-id", "my cli", "--refresh-token-stdin",
            ],
            stdin: "rt_unused", command: "login", mentioning: ["Invalid value for '--client-id'"]),
        UsageCase(
            label: "login with an unreadable --cacert",
            arguments: [
                "login", "--issuer", "https://issuer.example", "--client-id", "cli", "--refresh-token-stdin",
                "--cacert", "/nonexistent",
            ],
            stdin: "rt_unused", command: "login", mentioning: ["'/nonexistent'"]),
        UsageCase(
            label: "login with a plain http --token-endpoint to a remote host",
            arguments: [
                "login", "--issuer", "https://issuer.example", "--client-id", "cli", "--refresh-token-stdin",
                "--token-endpoint", "http://example.com/token",
            ],
            stdin: "rt_unused", command: "login", mentioning: ["Invalid value for '--token-endpoint'"]),
    ]

    @Test("top-level usage errors", arguments: topLevelCases)
    func topLevelUsageErrors(_ usage: UsageCase) throws {
        try check(usage)
    }

    @Test("token usage errors", arguments: tokenCases)
    func tokenUsageErrors(_ usage: UsageCase) throws {
        try check(usage)
    }

    @Test("refresh, logout and status usage errors", arguments: otherCommandCases)
    func otherCommandUsageErrors(_ usage: UsageCase) throws {
        try check(usage)
    }

    @Test("invalid profile names, from --profile and TOKENCTL_PROFILE", arguments: profileNameCases)
    func invalidProfileNames(_ usage: UsageCase) throws {
        try check(usage)
    }

    @Test("login usage errors", arguments: loginCases)
    func loginUsageErrors(_ usage: UsageCase) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.runTokenctl(usage.arguments, stdin: usage.stdin, environment: usage.environment)
        expectUsageErrorOutput(result, command: usage.command, mentioning: usage.mentioning)
        #expect(!sandbox.profileFileExists(), "a rejected login writes no profile")
    }

    private func check(_ usage: UsageCase) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.runTokenctl(usage.arguments, stdin: usage.stdin, environment: usage.environment)
        expectUsageErrorOutput(result, command: usage.command, mentioning: usage.mentioning)
        for fragment in usage.notMentioning {
            #expect(!result.stderr.contains(fragment), "\(result)")
        }
    }

    // MARK: Edges that are not errors

    @Test("a 64-character profile name is valid (the profile is just not configured: 78)")
    func longestProfileName() throws {
        let sandbox = try Sandbox()
        let name = String(repeating: "a", count: 64)
        for result in [
            try sandbox.tokenctl("--profile", name, "token"),
            try sandbox.tokenctl("token", extraEnvironment: ["TOKENCTL_PROFILE": name]),
        ] {
            #expect(result.status == 78, "\(result)")
            #expect(result.stderr.contains("profile '\(name)' is not configured"), "\(result)")
        }
    }

    @Test("an empty TOKENCTL_PROFILE counts as unset: the default profile is used")
    func emptyProfileVariable() throws {
        let sandbox = try Sandbox()
        let result = try sandbox.tokenctl("token", extraEnvironment: ["TOKENCTL_PROFILE": ""])
        #expect(result.status == 78, "\(result)")
        #expect(result.stderr.contains("profile 'default' is not configured"), "\(result)")
    }

    // MARK: Help and version

    @Test(
        "top-level help goes to stdout and exits 0",
        arguments: [["--help"], ["-h"], ["help"], ["--profile", "x", "--help"]])
    func topLevelHelp(_ arguments: [String]) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.runTokenctl(arguments)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        for heading in ["OVERVIEW:", "USAGE: tokenctl [--profile <name>] <command>", "OPTIONS:", "SUBCOMMANDS:"] {
            #expect(result.stdout.contains(heading), "\(result)")
        }
        for command in ["login", "token", "refresh", "logout", "status"] {
            #expect(result.stdout.contains("  \(command) "), "the help lists '\(command)': \(result)")
        }
    }

    @Test(
        "command help goes to stdout and exits 0",
        arguments: [
            ["help", "token"], ["token", "--help"], ["token", "-h"], ["--help", "token"],
            ["token", "--min-ttl", "5", "--help"],
        ])
    func tokenHelp(_ arguments: [String]) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.runTokenctl(arguments)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        for text in [
            "OVERVIEW:", "USAGE: tokenctl [--profile <name>] token", "OPTIONS:", "--min-ttl", "--format", "--help",
        ] {
            #expect(result.stdout.contains(text), "\(result)")
        }
    }

    @Test(
        "'help COMMAND' and 'COMMAND --help' print the same help",
        arguments: ["login", "token", "refresh", "logout", "status"])
    func helpForEveryCommand(_ command: String) throws {
        let sandbox = try Sandbox()
        let viaHelp = try sandbox.tokenctl("help", command)
        let viaFlag = try sandbox.tokenctl(command, "--help")
        #expect(viaHelp.status == 0, "\(viaHelp)")
        #expect(viaFlag.status == 0, "\(viaFlag)")
        #expect(viaHelp.stderr.isEmpty && viaFlag.stderr.isEmpty)
        #expect(viaHelp.stdout == viaFlag.stdout)
        #expect(viaHelp.stdout.hasPrefix("OVERVIEW: "), "\(viaHelp)")
        #expect(viaHelp.stdout.contains("USAGE: tokenctl [--profile <name>] \(command)"), "\(viaHelp)")
        #expect(viaHelp.stdout.contains("OPTIONS:"), "\(viaHelp)")
    }

    @Test(
        "'help help' and 'help --help' show the top-level help (help is listed as a subcommand)",
        arguments: [["help", "help"], ["help", "--help"], ["help", "-h"]])
    func helpAboutHelp(_ arguments: [String]) throws {
        let sandbox = try Sandbox()
        let result = try sandbox.runTokenctl(arguments)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        #expect(result.stdout.contains("SUBCOMMANDS:"), "\(result)")
    }

    @Test("--version prints 'tokenctl <version>' on stdout and exits 0")
    func version() throws {
        let sandbox = try Sandbox()
        let result = try sandbox.tokenctl("--version")
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        #expect(
            result.stdout.wholeMatch(of: /tokenctl [0-9]+\.[0-9]+\.[0-9]+[^\s]* \(engine \/[^\n]*tokenctl-engine\)\n/)
                != nil, "\(result)")
        // One version: the man page's footer says the same.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let manual = try String(contentsOf: root.appendingPathComponent("man/tokenctl.1"), encoding: .utf8)
        let version = result.stdout.split(separator: " ")[1]
        #expect(manual.contains("\n.Os tokenctl \(version)\n"), "tokenctl(1) names version \(version)")
    }

    // MARK: A bad command line touches nothing

    @Test("bad command lines never touch a stored session or the server")
    func badCommandLinesTouchNothing() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let before = try #require(try sandbox.storedTokenSet(issuer: server.url))
        let profileBefore = try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8)
        let requestsBefore = try server.log().count

        let badLines: [([String], String?)] = [
            (["token", "--force=yes"], "token"),
            (["token", "--force", "--min-ttl", "-1"], "token"),
            (["token", "--force", "--format", "xml"], "token"),
            (["token", "--force", "--timeout", "0"], "token"),
            (["refresh", "--if-expiring-within", "soon"], "refresh"),
            (["refresh", "now"], "refresh"),
            (["logout", "--no-revok"], "logout"),
            (["logout", "--all=yes"], "logout"),
            (["logout", "default"], "logout"),
            (["--profile", "../default", "logout"], "logout"),
            (["logout", "--profile", ""], "logout"),
            (["login", "--issuer", server.url, "--client-id", "cli", "--device", "--browser"], "login"),
            (["login", "--issuer", server.url, "--client-id", "", "--refresh-token-stdin"], "login"),
            (["logou"], nil),
            (["--profile"], nil),
        ]
        for (arguments, command) in badLines {
            let result = try sandbox.runTokenctl(arguments, stdin: "rt_should_never_be_used")
            expectUsageErrorOutput(result, command: command)
        }

        let after = try #require(try sandbox.storedTokenSet(issuer: server.url))
        #expect(sameTokenSet(before, after), "the stored token set is unchanged")
        #expect(try String(contentsOfFile: sandbox.profileFile(), encoding: .utf8) == profileBefore)
        #expect(try server.log().count == requestsBefore, "the server saw no request")
        let refreshToken = try #require(after["refresh_token"] as? String)
        #expect((try server.tokenStatus(refreshToken)["active"] as? Bool) == true)

        // And the session still works.
        let token = try sandbox.tokenctl("token")
        #expect(token.status == 0, "\(token)")
        #expect(token.stdout == (after["access_token"] as? String ?? "?") + "\n")
    }
}
