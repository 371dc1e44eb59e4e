import Testing
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials

@testable import TokenctlCommands

/// Each converted command's `Options`: built from what the real parser collected, every value
/// checked into its type, usage errors thrown by the struct (command bodies read only fields).
@Suite("TokenctlCommands: typed options")
struct CommandOptionsTests {
    static func parsed(_ arguments: String...) throws -> ParsedOptions {
        try Commands.parser.parse(arguments).options
    }

    static func usageError(_ build: () throws -> Void) -> String? {
        do { try build() } catch let error as UsageError { return error.message } catch {
            return "not a usage error: \(error)"
        }
        return nil
    }

    @Test("token: defaults, every format, a proof request, a target")
    func token() throws {
        let defaults = try TokenCommand.Options(Self.parsed("token"))
        #expect(defaults.minimumTimeToLive == AccessTokenLifetime.defaultMinimumTimeToLive)
        #expect(defaults.format == .raw && !defaults.force && defaults.proofRequest == nil && defaults.target.isSession)
        for format in TokenCommand.Format.allCases where format != .dpop {
            #expect(try TokenCommand.Options(Self.parsed("token", "--format", format.rawValue)).format == format)
        }
        let dpop = try TokenCommand.Options(
            Self.parsed("token", "--format", "dpop", "--method", "post", "--url", "https://api.test/x", "--force"))
        #expect(dpop.proofRequest == TokenCommand.ProofRequest(method: "POST", url: "https://api.test/x", nonce: nil))
        #expect(dpop.force)
        let targeted = try TokenCommand.Options(Self.parsed("token", "--scope", "read", "--min-ttl", "120"))
        #expect(!targeted.target.isSession && targeted.minimumTimeToLive == 120)
        let wrong = try Self.parsed("token", "--format", "yaml")
        #expect(
            Self.usageError { _ = try TokenCommand.Options(wrong) }?.contains(
                "expected raw, header, json, exec-credential or dpop") == true)
        let proofless = try Self.parsed("token", "--format", "dpop")
        #expect(Self.usageError { _ = try TokenCommand.Options(proofless) }?.contains("--method") == true)
        let stray = try Self.parsed("token", "--url", "https://api.test/")
        #expect(Self.usageError { _ = try TokenCommand.Options(stray) }?.contains("go with --format dpop") == true)
    }

    @Test("git-credential: the action as an enum, min-ttl, target")
    func gitCredential() throws {
        for action in GitCredentialCommand.Action.allCases {
            #expect(try GitCredentialCommand.Options(Self.parsed("git-credential", action.rawValue)).action == action)
        }
        let options = try GitCredentialCommand.Options(Self.parsed("git-credential", "--min-ttl", "5", "get"))
        #expect(options.minimumTimeToLive == 5 && options.target.isSession)
        let negative = try Self.parsed("git-credential", "--min-ttl", "-1", "get")
        #expect(Self.usageError { _ = try GitCredentialCommand.Options(negative) }?.contains("--min-ttl") == true)
    }

    @Test("exec: the variable, the command line, min-ttl")
    func exec() throws {
        let options = try ExecCommand.Options(
            Self.parsed("exec", "--env", "API_TOKEN", "--", "curl", "-s", "https://api.test/"))
        #expect(options.variable == "API_TOKEN" && options.commandLine == ["curl", "-s", "https://api.test/"])
        #expect(try ExecCommand.Options(Self.parsed("exec", "true")).variable == ExecCommand.defaultVariable)
        let badName = try Self.parsed("exec", "--env", "1X", "--", "true")
        #expect(Self.usageError { _ = try ExecCommand.Options(badName) }?.contains("shell variable name") == true)
        let nothing = try Self.parsed("exec")
        #expect(Self.usageError { _ = try ExecCommand.Options(nothing) }?.contains("Missing the command") == true)
    }

    @Test("refresh, logout, events, schedule, completion")
    func others() throws {
        let refresh = try RefreshCommand.Options(Self.parsed("refresh", "--all", "--if-expiring-within", "600"))
        #expect(refresh.all && refresh.window == 600)
        #expect(try RefreshCommand.Options(Self.parsed("refresh")).window == nil)

        let logout = try LogoutCommand.Options(Self.parsed("logout", "--no-revoke", "--forget"))
        #expect(!logout.revoke && logout.forget && !logout.all && !logout.orphans)
        let exclusive = try Self.parsed("logout", "--orphans", "--all")
        #expect(Self.usageError { _ = try LogoutCommand.Options(exclusive) }?.contains("exclude each other") == true)

        let events = try EventsCommand.Options(
            Self.parsed("events", "-f", "--since", "90s", "--min-significance", "high"), now: 1000)
        #expect(events.follow && events.since == 910 && events.minimumSignificance == .high && !events.json)
        let level = try Self.parsed("events", "--min-significance", "urgent")
        #expect(
            Self.usageError { _ = try EventsCommand.Options(level) }?.contains("expected low, medium or high") == true)

        let install = try ScheduleCommand.Options(Self.parsed("schedule", "install", "--every", "1h", "--cron"))
        #expect(install.action == .install && install.interval == 3600 && install.backend == .cron)
        let misspelt = try Self.parsed("schedule", "instal")
        #expect(
            Self.usageError { _ = try ScheduleCommand.Options(misspelt) }?.contains("Did you mean 'install'") == true)
        let everyOnRemove = try Self.parsed("schedule", "remove", "--every", "1h")
        #expect(
            Self.usageError { _ = try ScheduleCommand.Options(everyOnRemove) }?.contains(
                "'--every' applies to 'install' only") == true)

        #expect(try CompletionCommand.Options(Self.parsed("completion", "fish")).shell == .fish)
    }

    @Test("forward: actions, profiles as operands, limits only with enable, --socket only with listen")
    func forward() throws {
        let enable = try ForwardCommand.Options(
            Self.parsed("forward", "enable", "--scope", "read  write", "--audience", "https://api.example", "a", "b"))
        #expect(enable.action == .enable && enable.profiles.map(\.rawValue) == ["a", "b"] && enable.enableUnit)
        #expect(enable.scope == ["read", "write"] && enable.audience == ["https://api.example"])
        #expect(try ForwardCommand.Options(Self.parsed("forward", "enable", "--no-unit")).enableUnit == false)
        let listen = try ForwardCommand.Options(Self.parsed("forward", "listen", "--socket", "/run/x.sock"))
        #expect(listen.action == .listen && listen.socket == "/run/x.sock")
        for (arguments, message) in [
            (["forward"], "Missing action"),
            (["forward", "enabel"], "Did you mean 'enable'"),
            (["forward", "status", "a"], "takes no profile names"),
            (["forward", "enable", ".bad"], "Invalid profile name"),
            (["forward", "listen", "--scope", "x"], "applies to 'forward enable' only"),
            (["forward", "enable", "--scope", ""], "Invalid value for '--scope'"),
            (["forward", "serve", "--socket", "/x"], "applies to 'forward listen' only"),
            (["forward", "listen", "--socket", "relative.sock"], "absolute path"),
            (["forward", "disable", "--no-unit"], "'--no-unit' applies"),
        ] {
            let parsed = try Commands.parser.parse(arguments).options
            #expect(
                Self.usageError { _ = try ForwardCommand.Options(parsed) }?.contains(message) == true, "\(arguments)")
        }
    }

    @Test("login: the flow, endpoints, scope words, DPoP choice, browser settings")
    func login() throws {
        let automatic = try LoginCommand.Options(Self.parsed("login"))
        #expect(
            automatic.flow == .automatic && automatic.issuer == nil && automatic.clientID == nil
                && automatic.dpop == nil)
        #expect(automatic.browserTimeout == 300 && automatic.opensBrowser && automatic.resources.isEmpty)
        let options = try LoginCommand.Options(
            Self.parsed(
                "login", "--issuer", "https://id.test/", "--client-id", "cli", "--device", "--scope", "openid  email",
                "--resource", "https://api.test urn:x",
                "--token-endpoint", "https://id.test/token", "--dpop"))
        #expect(options.flow == .device && options.issuer?.string == "https://id.test/" && options.clientID == "cli")
        #expect(
            options.scope == "openid email" && options.resources == ["https://api.test", "urn:x"]
                && options.dpop == true)
        #expect(options.endpoints.token?.string == "https://id.test/token" && options.endpoints.jwks == nil)
        let browser = try LoginCommand.Options(
            Self.parsed("login", "--port", "8400", "--no-open", "--login-timeout", "30"))
        #expect(
            browser.flow == .browser && browser.port == 8400 && !browser.opensBrowser && browser.browserTimeout == 30)
        #expect(try LoginCommand.Options(Self.parsed("login", "--refresh-token-stdin")).flow == .refreshTokenImport)
        let refusals: [([String], String)] = [
            (
                ["login", "--device", "--browser"],
                "Choose one of --device, --browser, --refresh-token-stdin and --grant"
            ),
            (["login", "--refresh-token-stdin", "--client-secret-stdin"], "both read standard input"),
            (["login", "--issuer", "http://id.example.com"], "--issuer"),
            (["login", "--client-id", "a b"], "--client-id"),
            (["login", "--scope", "a\u{1}b"], "--scope"),
            (["login", "--resource", "relative/path"], "not an absolute URI"),
            // The checks are token's (TokenTarget): what login accepts, `token --scope` accepts.
            (["login", "--scope", ""], "Invalid value for '--scope': empty"),
            (["login", "--scope", "a\"b"], "is not a scope"),
            (["login", "--audience", "two words"], "--audience"),
            (["login", "--resource", "https://api.test/#frag"], "without a fragment"),
            (
                [
                    "login", "--scope",
                    Array(repeating: "s", count: TokenTarget.maximumWords + 1).joined(separator: " "),
                ], "more than 32 values"
            ),
            (["login", "--port", "70000"], "--port"),
            (["login", "--device", "--no-open"], "apply to --browser only"),
            (["login", "--dpop", "--no-dpop"], "Choose one of --dpop and --no-dpop"),
            (["login", "--login-timeout", "0"], "--login-timeout"),
            (["login", "--cacert", "/nonexistent/ca.pem"], "Cannot read the CA bundle"),
            // A public client (none) sends no secret, and client credentials is a confidential
            // client's grant only (RFC 6749 §4.4).
            (
                [
                    "login", "--grant", "jwt-bearer", "--assertion-file", "/run/a", "--client-auth", "none",
                    "--client-secret-stdin",
                ], "leave out --client-secret-stdin"
            ),
            (
                ["login", "--grant", "client-credentials", "--client-auth", "none"],
                "is for confidential clients only"
            ),
        ]
        for (arguments, expected) in refusals {
            let parsed = try Commands.parser.parse(arguments).options
            let message = Self.usageError { _ = try LoginCommand.Options(parsed) }
            #expect(message?.contains(expected) == true, "\(arguments): \(message ?? "accepted")")
        }
    }

    @Test("status and doctor")
    func statusAndDoctor() throws {
        let status = try StatusCommand.Options(Self.parsed("status", "--all", "--json", "--offline"))
        #expect(status.all && status.json && status.offline && !status.watch)
        let watchAll = try Self.parsed("status", "--watch", "--all")
        #expect(
            Self.usageError { _ = try StatusCommand.Options(watchAll) }?.contains("'--watch' follows one profile")
                == true)
        #expect(DoctorCommand.Options(try Self.parsed("doctor", "--json")).json)
    }
}

@Suite("TokenctlCommands: login --provider")
struct LoginProviderOptionsTests {
    static func options(_ arguments: String...) throws -> LoginCommand.Options {
        try LoginCommand.Options(Commands.parser.parse(["login"] + arguments).options)
    }

    static func usageError(_ arguments: String...) -> String? {
        CommandOptionsTests.usageError {
            _ = try LoginCommand.Options(Commands.parser.parse(["login"] + arguments).options)
        }
    }

    @Test("each preset's issuer: the provider's home, --host, Entra's --tenant, --issuer as given")
    func issuers() throws {
        #expect(try Self.options("--provider", "github").issuer?.string == "https://github.com")
        #expect(
            try Self.options("--provider", "github", "--host", "github.example.com").issuer?.string
                == "https://github.example.com")
        #expect(try Self.options("--provider", "gitlab").issuer?.string == "https://gitlab.com")
        #expect(
            try Self.options("--provider", "gitlab", "--host", "https://git.example.com/gitlab/").issuer?.string
                == "https://git.example.com/gitlab")
        #expect(try Self.options("--provider", "google").issuer?.string == "https://accounts.google.com")
        #expect(
            try Self.options("--provider", "entra", "--tenant", "common").issuer?.string
                == "https://login.microsoftonline.com/common/v2.0")
        #expect(
            try Self.options("--provider", "entra", "--tenant", "consumers").issuer?.string
                == "https://login.microsoftonline.com/\(EntraTenant.consumersID)/v2.0")
        #expect(
            try Self.options("--provider", "entra", "--tenant", "contoso.onmicrosoft.com").issuer?.string
                == "https://login.microsoftonline.com/contoso.onmicrosoft.com/v2.0")
        #expect(
            try Self.options("--provider", "keycloak", "--issuer", "https://sso.example.com/realms/dev").issuer?.string
                == "https://sso.example.com/realms/dev")
        #expect(try Self.options("--provider", "GitHub").provider == .github)
        #expect(try Self.options("--provider", "gitea", "--host", "codeberg.org").flow == .browser)
    }

    @Test("usage errors name what to give")
    func usageErrors() {
        #expect(Self.usageError("--provider", "gihub")?.contains("did you mean 'github'") == true)
        #expect(Self.usageError("--provider", "entra")?.contains("needs --tenant") == true)
        #expect(Self.usageError("--provider", "entra", "--tenant", "not a tenant")?.contains("'--tenant'") == true)
        #expect(Self.usageError("--provider", "okta")?.contains("needs --issuer") == true)
        #expect(Self.usageError("--provider", "gitea")?.contains("needs --host") == true)
        #expect(
            Self.usageError("--provider", "google", "--host", "x.example")?.contains("--host does not apply") == true)
        #expect(Self.usageError("--provider", "github", "--tenant", "common")?.contains("entra only") == true)
        #expect(Self.usageError("--host", "github.example.com")?.contains("with --provider only") == true)
        #expect(
            Self.usageError("--provider", "forgejo", "--host", "codeberg.org", "--device")?.contains("no device flow")
                == true)
        #expect(
            Self.usageError("--provider", "gitlab", "--host", "h.example", "--issuer", "https://h.example")?.contains(
                "not both") == true)
        #expect(
            Self.usageError("--provider", "github", "--host", "http://github.example.com")?.contains("--host") == true)
    }

    @Test("help providers lists every preset with the redirect URI to register")
    func providersTopic() throws {
        #expect(try Commands.parser.parse(["help", "providers"]).action == .topicHelp("providers"))
        let text = ProvidersHelp.text
        for provider in Provider.allCases { #expect(text.contains("\n  \(provider.rawValue) ("), "\(provider)") }
        #expect(text.contains("http://127.0.0.1/callback"))
        #expect(text.split(separator: "\n").allSatisfy { $0.count <= 100 })
    }
}
