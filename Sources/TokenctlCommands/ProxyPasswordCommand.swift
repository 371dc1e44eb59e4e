import TokenctlCore
import TokenctlEssentials

/// `tokenctl proxy-password`: the password of the profile's proxy user (`proxy` and
/// `proxy_user` in the profile file), kept in the Secret Service; given on standard input only.
enum ProxyPasswordCommand: EngineCommand {
    static let spec = CommandSpec(
        name: "proxy-password",
        abstract: "Store or remove the password of the profile's proxy user in the Secret Service.",
        usage: "set|remove [--password-stdin]",
        options: [passwordStdinOption, Commands.timeout],
        arguments: [("action", "set or remove.")],
        argumentChoices: Action.allCases.map(\.rawValue),
        discussion: """
            For a proxy that asks for a password (407): name it in the profile file with \
            'proxy = http://HOST:PORT' and its user with 'proxy_user = NAME' (tokenctl.conf(5)), \
            then 'set --password-stdin' stores the password in the Secret Service, one item for \
            that proxy and user, which every profile naming them shares. It is sent to that proxy \
            only, as Basic credentials; never to another proxy or to the server.
            """)

    enum Action: String, CaseIterable, Sendable {
        case set, remove
    }

    static let passwordStdinOption = OptionSpec(
        "--password-stdin", help: "With set: read the password from standard input (never from an argument).")

    struct Options: Equatable, Sendable {
        var action: Action

        init(_ parsed: ParsedOptions) throws(UsageError) {
            action = try parsed.action(Action.self, command: "proxy-password")
            let passwordStdin = parsed.has(passwordStdinOption)
            if action == .set && !passwordStdin {
                throw UsageError(
                    "'set' reads the password from standard input: add '--password-stdin'.", command: "proxy-password")
            }
            if action == .remove && passwordStdin {
                throw UsageError("'--password-stdin' applies to 'set' only.", command: "proxy-password")
            }
        }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = try Options(context.options)
        let service = context.service()
        let profile = context.profile
        switch options.action {
        case .set:
            // The profile first: a profile without a proxy user reads nothing.
            _ = try service.proxyAccount(of: profile)
            let password = try StandardInput.secret(from: context.io, what: "proxy password", timeout: context.timeout)
            let account = try service.storeProxyPassword(password, of: profile)
            context.io.standardError(
                "Stored the password of the proxy \(Output.printable(account.description)) in the Secret Service.\n")
        case .remove:
            let (account, removed) = try service.removeProxyPassword(of: profile)
            context.io.standardError(
                removed
                    ? "Removed the password of the proxy \(Output.printable(account.description)) from the Secret Service.\n"
                    : "No password is stored for the proxy \(Output.printable(account.description)).\n")
        }
        return .success
    }
}
