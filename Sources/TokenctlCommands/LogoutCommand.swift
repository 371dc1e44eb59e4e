import TokenctlCore
import TokenctlEssentials

enum LogoutCommand: EngineCommand {
    static let allOption = OptionSpec("--all", help: "Log out every configured profile.")
    static let forgetOption = OptionSpec(
        "--forget",
        help:
            "Also remove the profile: its configuration file, client secret and caches (other profiles are left alone)."
    )
    static let orphansOption = OptionSpec(
        "--orphans", help: "Remove keyring sessions that no profile uses any more (see 'status --all').")
    static let noRevokeOption = OptionSpec(
        "--no-revoke", help: "Remove the local session without asking the server to revoke it.")

    static let spec = CommandSpec(
        name: "logout",
        abstract: "Revoke the refresh token and remove the stored session.",
        usage: "[--all] [--forget] [--no-revoke] | --orphans",
        options: [allOption, forgetOption, orphansOption, noRevokeOption, Commands.timeout],
        discussion: """
            Without --forget the profile's configuration is kept, so 'tokenctl login' signs it
            in again with the same settings, and 'refresh --all' skips it (signed out by you)
            until then. When the server refuses the revocation or cannot be reached, the local
            session is removed anyway, the event log records revocationFailed, and the exit
            status is 76: the refresh token may stay valid at the server until it expires.
            A profile signed in with --provider revokes as its provider does (GitHub with the
            app's secret; Entra cannot, and logout says what stays valid; see tokenctl-logout(1)).
            """)

    /// `logout`'s options, checked.
    struct Options: Equatable, Sendable {
        var all: Bool
        var forget: Bool
        var orphans: Bool
        var revoke: Bool

        init(_ parsed: ParsedOptions) throws(UsageError) {
            (all, forget, orphans, revoke) = (
                parsed.has(allOption), parsed.has(forgetOption), parsed.has(orphansOption), !parsed.has(noRevokeOption)
            )
            if orphans && all {
                throw UsageError("'--orphans' and '--all' exclude each other.", command: "logout")
            }
            if orphans && forget {
                throw UsageError(
                    "'--orphans' and '--forget' exclude each other ('--orphans' removes keyring items no profile uses).",
                    command: "logout")
            }
        }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = try Options(context.options)
        let service = context.service()
        let forget = options.forget
        if options.orphans {
            let removed = try service.removeOrphanedSessions()
            for identity in removed {
                context.io.standardError(
                    "Removed the orphaned session of profile '\(identity.profile)' (issuer \(identity.issuer), client id \(identity.clientID)).\n"
                )
            }
            if removed.isEmpty { context.io.standardError("No orphaned sessions.\n") }
            return .success
        }
        let names = options.all ? try service.profiles.all() : [context.profile]
        var status = ExitStatus.success
        for name in names {
            let report = try await service.logout(name, revoke: options.revoke, forget: forget)
            switch report.revocation {
            case .failure(let error)?:
                // Honest: the session is gone here, not at the server.
                let token = report.revokedTokenType == "access_token" ? "access token" : "refresh token"
                let until = report.unrevokedTokenExpiresAt.map { "until \(Output.timestamp($0))" } ?? "until it expires"
                context.io.standardError(
                    "Logged out profile '\(name)' here, but the server did not revoke its \(token): \(error.message). "
                        + "The \(token) may stay valid at the server \(until).\n")
                status = worse(status, .protocolError)
            case .success?:
                context.io.standardError(
                    report.alreadyRevoked
                        ? "Logged out profile '\(name)'; the server says its token was already revoked.\n"
                        : "Logged out profile '\(name)'; the server revoked its \(report.revokedTokenType == "access_token" ? "access token" : "refresh token").\n"
                )
            case nil:
                if report.removed, let notice = report.serverNotice {
                    context.io.standardError("Logged out profile '\(name)' here. \(notice)\n")
                } else if report.removed {
                    context.io.standardError("Logged out profile '\(name)' (not revoked at the server).\n")
                } else if !report.forgotten {
                    context.io.standardError("Profile '\(name)' was not logged in.\n")
                }
            }
            if report.forgotten {
                context.io.standardError("Removed profile '\(name)': its configuration and caches are gone.\n")
            }
        }
        return status
    }

    /// The first failure's status wins over success; a failed revocation (76) over nothing else.
    private static func worse(_ a: ExitStatus, _ b: ExitStatus) -> ExitStatus {
        a == .success ? b : a
    }
}
