import TokenctlCore
import TokenctlEssentials

enum RefreshCommand: EngineCommand {
    static let allOption = OptionSpec(
        "--all", help: "Refresh every configured profile; one line per profile on stderr.")
    static let windowOption = OptionSpec(
        "--if-expiring-within", value: "seconds", help: "Only refresh when the access token expires within this time.")

    static let spec = CommandSpec(
        name: "refresh",
        abstract: "Refresh the session now (for cron and timers).",
        usage: "[--all] [--if-expiring-within <seconds>]",
        options: [allOption, windowOption, Commands.timeout],
        discussion:
            "Exit status with --all is the worst outcome: 77 if any session ended, else 76 if any server answered with tokens that cannot be used, else 75 if any failed transiently, else 0."
    )

    /// `refresh`'s options, checked.
    struct Options: Equatable, Sendable {
        var all: Bool
        /// Refresh only when the access token expires within this many seconds; nil: always.
        var window: Double?

        init(_ parsed: ParsedOptions) throws(UsageError) {
            all = parsed.has(allOption)
            window = try parsed.optionalSeconds(windowOption, command: "refresh")
        }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = try Options(context.options)
        let window = options.window
        let service = context.service()
        guard options.all else {
            let report = await service.refresh(context.profile, ifExpiringWithin: window)
            let tokenSet = try report.result.get()
            let validity = Output.validity(tokenSet.timeLeft(at: context.clock.now()))
            context.io.standardError(
                report.skipped
                    ? "Profile '\(context.profile)' not refreshed: the access token is \(validity).\n"
                    : "Refreshed profile '\(context.profile)'; access token \(validity).\n")
            return .success
        }
        let reports = try await service.refreshAll(ifExpiringWithin: window)
        if reports.isEmpty {
            context.io.standardError("No profiles configured.\n")
            return .success
        }
        var worst = ExitStatus.success
        for report in reports {
            if report.signedOutByUser {
                context.io.standardError(
                    "\(report.profile): skipped, signed out by 'logout' (sign it in again with '\(CommandHint.login(report.profile))', or remove it with '\(CommandHint.tokenctl(report.profile, "logout --forget"))')\n"
                )
                continue
            }
            switch report.result {
            case .success(let tokenSet):
                let expiry = tokenSet.expiresAt.map { "expires \(Output.timestamp($0))" } ?? "no expiry given"
                context.io.standardError("\(report.profile): \(report.skipped ? "fresh" : "refreshed"), \(expiry)\n")
            case .failure(let error):
                let outcome =
                    switch error.kind {
                    case .loginRequired: "login required"
                    case .transient: "transient failure"
                    case .protocolError: "unusable answer"
                    case .storeUnavailable: "keyring unavailable"
                    case .configuration: "configuration error"
                    default: "failed"
                    }
                context.io.standardError("\(report.profile): \(outcome): \(error.message)\n")
                worst = worse(worst, error.exitStatus)
            }
        }
        return worst
    }

    /// 77 beats 76 beats 75 beats everything else non-zero beats 0.
    static func worse(_ a: ExitStatus, _ b: ExitStatus) -> ExitStatus {
        func rank(_ status: ExitStatus) -> Int {
            switch status {
            case .success: 0
            case .loginRequired: 5
            case .protocolError: 4
            case .temporaryFailure: 3
            default: 2
            }
        }
        return rank(b) > rank(a) ? b : a
    }
}
