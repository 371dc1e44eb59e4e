import Testing
import TokenctlCore
import TokenctlEssentials

@testable import TokenctlCommands

/// The core suggests tokenctl commands as typed values (`Suggestion`); `HintText` spells them
/// from the command table. Every option a hint can suggest renders to an option its command
/// accepts, so every hint runs as printed.
@Suite("Hints: every suggested tokenctl command line parses as the command it names")
struct HintCommandLineTests {
    static let profile = ProfileName(rawValue: "work")!

    /// Every command a hint can name with every option it can carry, each at least once.
    static let samples: [TokenctlCommand] = [
        .login([
            .provider(.word("gitlab")), .tenant(.word("common")), .issuer(.placeholder), .clientID(.word("app-id")),
            .device, .port(.word("8400")), .clientSecretStdin, .scope(.quoted("openid read_repository")),
            .audience(.word("api")), .resource(.quoted("https://a.example https://b.example")),
            .tokenEndpoint(.word("https://id.example/token")), .revocationEndpoint(.word("https://id.example/revoke")),
            .deviceAuthorizationEndpoint(.word("https://id.example/device")),
            .authorizationEndpoint(.word("https://id.example/authorize")),
            .jwksURI(.word("https://id.example/jwks")), .caBundle(.word("/etc/ssl/id.pem")), .dpop,
        ]),
        .login([.browser, .noDPoP]),
        .logout([.noRevoke, .forget]), .logout([.orphans]),
        .status([.all]), .refresh([.all, .ifExpiringWithin(.word("1860"))]),
        .doctor([.timeout(.word("30"))]), .doctor([.timeout(.placeholder)]),
        .token([.force, .format(.dpop), .timeout(.placeholder)]),
        .schedule(.install, [.systemd]), .schedule(.install, [.cron]),
        .forward(.enable, [.scope(.quoted("read write")), .audience(.quoted("api"))]),
        .forward(.status, []), .forward(.listen, []),
        .proxyPassword(.set, [.passwordStdin]), .proxyPassword(.remove, []),
    ]

    /// A printed command line as a shell splits it (double quotes group; hints print no others).
    static func shellWords(_ line: String) -> [String] {
        var words: [String] = []
        var current: String?
        var quoted = false
        for character in line {
            if character == "\"" {
                quoted.toggle()
                current = current ?? ""
            } else if character == " " && !quoted {
                if let word = current { words.append(word) }
                current = nil
            } else {
                current = (current ?? "") + String(character)
            }
        }
        if let current { words.append(current) }
        return words
    }

    @Test("each sample parses as its command, every option spelled as one the command accepts, with its value")
    func everyOptionIsAccepted() throws {
        for command in Self.samples {
            let line = HintText.commandLine(SuggestedCommand(Self.profile, command))
            let words = Self.shellWords(line)
            try #require(words.first == "tokenctl", "\(line)")
            let invocation = try Commands.parser.parse(Array(words.dropFirst()))
            let (name, action, options) = HintText.spelling(command)
            #expect(invocation.action == .run(name), "\(line)")
            #expect(invocation.profileName == Self.profile.rawValue, "\(line)")
            let spec = try #require(Commands.named(name)?.spec)
            if let action {
                #expect(spec.argumentChoices.contains(action), "\(line)")
                #expect(invocation.options.arguments.first == action, "\(line)")
            }
            for (option, value) in options {
                #expect(spec.options.contains { $0.key == option.key }, "\(option.key) is not an option of \(name)")
                if option.isFlag {
                    #expect(value == nil && invocation.options.has(option.key), "\(line)")
                } else {
                    #expect(invocation.options.value(option.key) != nil, "\(option.key) has no value in \(line)")
                }
            }
        }
    }

    @Test("the samples name every command and action a hint can")
    func samplesCoverTheCommands() {
        let names = Set(Self.samples.map { HintText.spelling($0).name })
        #expect(
            names == [
                "login", "logout", "status", "doctor", "token", "refresh", "schedule", "forward", "proxy-password",
            ])
        let actions = Set(Self.samples.compactMap { HintText.spelling($0).action })
        let expected = Set(
            TokenctlCommand.ScheduleAction.allCases.map(HintText.spelling)
                + TokenctlCommand.ForwardAction.allCases.map(HintText.spelling)
                + TokenctlCommand.ProxyPasswordAction.allCases.map(HintText.spelling))
        #expect(actions == expected)
    }

    @Test("the text is what tokenctl printed before the hints were typed")
    func renderedText() {
        let work = Self.profile
        let cases: [(Suggestion, String)] = [
            (
                "Run '\(tokenctl: work, .logout([.noRevoke]))', then '\(tokenctl: work, .login([]))'.",
                "Run 'tokenctl --profile work logout --no-revoke', then 'tokenctl --profile work login'."
            ),
            (
                "Give it more time with \(options: .token([.timeout(.placeholder)])); the session is kept.",
                "Give it more time with --timeout SECONDS; the session is kept."
            ),
            (
                "Run '\(tokenctl: .default, .doctor([.timeout(.word("30"))]))' to give the checks more time.",
                "Run 'tokenctl doctor --timeout 30' to give the checks more time."
            ),
            (
                "run '\(program: #"printf %s "$CLIENT_SECRET""#, into: SuggestedCommand(work, .login([.clientSecretStdin])))'.",
                #"run 'printf %s "$CLIENT_SECRET" | tokenctl --profile work login --client-secret-stdin'."#
            ),
            (
                "'\(SuggestedCommand(.default, .forward(.enable, [.scope(.quoted("read write"))]), namesDefaultProfile: true))'",
                #"'tokenctl --profile default forward enable --scope "read write"'"#
            ),
            (
                "'\(tokenctl: .default, .login([.issuer(.placeholder), .clientID(.placeholder)]))'",
                "'tokenctl login --issuer URL --client-id ID'"
            ),
            ("without \(options: .token([.format(.dpop)])).", "without --format dpop."),
            (
                "'\(tokenctl: work, .login([.scope(.quoted("openid read admin"))]))'",
                #"'tokenctl --profile work login --scope "openid read admin"'"#
            ),
            (
                "'\(tokenctl: .default, .schedule(.install, [.cron]))' or '\(tokenctl: .default, .status([.all]))'",
                "'tokenctl schedule install --cron' or 'tokenctl status --all'"
            ),
        ]
        for (suggestion, text) in cases {
            #expect(HintText.render(suggestion) == text)
        }
        // The refresh schedule's job, as its units and crontab entry have always run it.
        #expect(
            HintText.arguments(.refresh([.all, .ifExpiringWithin(.word("1860"))]))
                == ["refresh", "--all", "--if-expiring-within", "1860"])
    }
}
