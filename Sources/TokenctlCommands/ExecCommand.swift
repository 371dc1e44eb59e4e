import TokenctlCore
import TokenctlEssentials

/// `tokenctl exec -- COMMAND [ARGS…]`: run a program with a valid access token in its
/// environment. tokenctl replaces itself with the program (execvp): no wrapper stays behind,
/// signals and the exit status are the program's own, and the token is never in any argv.
enum ExecCommand: EngineCommand {
    static let defaultVariable = "TOKENCTL_ACCESS_TOKEN"

    static let environmentOption = OptionSpec(
        "--env", value: "name",
        help: "The variable that holds the token (default: \(defaultVariable)); its expiry goes to <name>_EXPIRES_AT.")
    static let minimumTimeToLiveOption = OptionSpec(
        "--min-ttl", value: "seconds",
        help:
            "The token stays valid at least this long after the program starts (default: 60; capped at half its lifetime)."
    )

    static let spec = CommandSpec(
        name: "exec",
        abstract: "Run a program with a valid access token in its environment.",
        usage:
            "[--env <name>] [--min-ttl <seconds>] [--scope <scopes>] [--audience <audience>] [--resource <uris>] [--] <command> [<argument>…]",
        options: [environmentOption, minimumTimeToLiveOption] + SharedCommandSpecs.target + [Commands.timeout],
        arguments: [
            ("command", "The program to run (found in PATH), then its arguments: everything after it is the program's.")
        ],
        discussion: """
            For example: tokenctl exec -- sh -c 'curl -H "Authorization: Bearer $TOKENCTL_ACCESS_TOKEN" https://api.example.com/'
            tokenctl replaces itself with the program, so its exit status and signals are the
            program's own. The expiry is an ISO 8601 UTC time (empty when the server gave none). The
            token lives for the program's lifetime; a long-running program should ask again with
            'tokenctl token' when it nears that time. Like tokenctl itself, the program runs with core
            dumps off (RLIMIT_CORE 0): its environment holds the token.
            """,
        takesCommandLine: true)

    /// A shell identifier: a letter or '_', then letters, digits or '_'.
    static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first,
            first == UInt8(ascii: "_") || (first | 0x20) >= UInt8(ascii: "a") && (first | 0x20) <= UInt8(ascii: "z")
        else { return false }
        return name.utf8.allSatisfy { byte in
            byte == UInt8(ascii: "_") || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || ((byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z"))
        }
    }

    /// `exec`'s options and command line, checked.
    struct Options: Equatable, Sendable {
        var variable: String
        /// The program and its arguments.
        var commandLine: [String]
        var minimumTimeToLive: Double
        var target: TokenTarget

        init(_ parsed: ParsedOptions) throws(UsageError) {
            variable = parsed.value(environmentOption) ?? defaultVariable
            guard isIdentifier(variable), variable.utf8.count <= 200 else {
                throw UsageError(
                    "Invalid value '\(Output.printable(String(variable.prefix(40))))' for '--env': expected a shell variable name (letters, digits and '_', not starting with a digit).",
                    command: spec.name)
            }
            commandLine = parsed.arguments
            guard let program = commandLine.first, !program.isEmpty else {
                throw UsageError(
                    "Missing the command to run: tokenctl exec [--env NAME] -- COMMAND [ARGUMENTS...]",
                    command: spec.name)
            }
            minimumTimeToLive = try parsed.seconds(
                minimumTimeToLiveOption, command: spec.name, default: AccessTokenLifetime.defaultMinimumTimeToLive)
            target = try parsed.target(command: spec.name)
        }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = try Options(context.options)
        let (variable, arguments, program) = (options.variable, options.commandLine, options.commandLine[0])
        let tokenSet = try await context.handOutToken(
            target: options.target, minimumTimeToLive: options.minimumTimeToLive, command: "exec"
        ).tokenSet
        context.verboseLog(
            "running \(Output.printable(program)) with the access token of '\(context.profile)' in \(variable), \(Output.validity(tokenSet.timeLeft(at: context.clock.now())))"
        )
        // The token does not stay in the environment of a process that failed to exec.
        let failure = context.environment.programs.exec(
            arguments,
            [
                (variable, tokenSet.accessToken),
                (variable + "_EXPIRES_AT", tokenSet.expiresAt.map(Output.timestamp) ?? ""),
            ], [variable])
        // As a shell does: 127 when not found, 126 when found but not runnable.
        context.io.standardError("Error: cannot run '\(Output.printable(program))': \(failure.reason).\n")
        return failure.notFound ? .commandNotFound : .commandNotRunnable
    }
}
