#if canImport(Glibc)
import Glibc
#endif
import TokenctlCore
import TokenctlEssentials

let toolVersion = TokenctlVersion.string

/// Everything a command needs: the parsed options, the profile and the core service.
struct CommandContext {
    let options: ParsedOptions
    let profile: ProfileName
    /// Whether the profile was chosen (--profile or TOKENCTL_PROFILE) rather than the default.
    let profileChosen: Bool
    let verbose: Bool
    let paths: Paths
    let timeout: Double
    /// `--timeout` from the start of the command: the lock wait, every HTTP attempt and every
    /// Secret Service call end by then. Nil for `login`, whose flows wait for a person.
    let deadline: Double?

    func service() -> TokenctlService { serviceAndBus().service }

    /// The core service, after locating the session bus once (cron gives no
    /// DBUS_SESSION_BUS_ADDRESS), and the bus found, with where it was found.
    func serviceAndBus() -> (service: TokenctlService, bus: (address: String, source: String)?) {
        let bus = locateSessionBus(verbose: verbose)
        var retry = RetryPolicy(deadline: timeout, attemptTimeout: min(15, timeout))
        retry.commandDeadline = deadline
        // A provider's prompt can be answered only by a person at a terminal; say what it asks.
        let interactive = isatty(2) == 1
        let notice: @Sendable (String) -> Void = { notice in Output.standardError("tokenctl: \(notice)\n") }
        let storeOptions = SecretServiceStore.Options(callTimeout: 10, interactive: interactive, promptNotice: interactive ? notice : nil)
        let narrate: TokenBroker.Narrator? = verbose ? { @Sendable (line: String) in Output.standardError("tokenctl: " + Output.printable(line) + "\n") } : nil
        let service = TokenctlService.live(
            paths: paths, retry: retry, userAgent: "tokenctl/\(toolVersion)", lockTimeout: timeout, storeOptions: storeOptions,
            narrate: narrate)
        return (service, bus)
    }

    func verboseLog(_ message: String) {
        if verbose { Output.standardError("tokenctl: \(message)\n") }
    }

    /// A non-negative number of seconds from an option, or a usage error naming it.
    func seconds(_ key: String, command: String, default value: Double, allowZero: Bool = true) throws(UsageError) -> Double {
        guard let text = options.value(key) else { return value }
        guard let number = Double(text), number.isFinite, allowZero ? number >= 0 : number > 0, number <= 31_536_000 else {
            throw UsageError("Invalid value '\(text)' for '\(key)': expected \(allowZero ? "a non-negative" : "a positive") number of seconds.", command: command)
        }
        return number
    }
}

/// The session bus for this process (cron gives no DBUS_SESSION_BUS_ADDRESS): found by the core,
/// exported here for GLib, and reported with -v.
func locateSessionBus(verbose: Bool) -> (address: String, source: String)? {
    guard let bus = SessionBus.locate() else {
        if verbose { Output.standardError("tokenctl: no D-Bus session bus found (DBUS_SESSION_BUS_ADDRESS unset, no bus socket in the runtime directory)\n") }
        return nil
    }
    if !bus.fromVariable {
        setenv("DBUS_SESSION_BUS_ADDRESS", bus.address, 1)
        if verbose { Output.standardError("tokenctl: DBUS_SESSION_BUS_ADDRESS was unset; using the session bus at \(bus.address.dropFirst("unix:path=".count)) (\(bus.source))\n") }
    }
    return (bus.address, bus.source)
}

/// This engine's own path (what `--version` and `doctor` report: beside the front, or under
/// libexec in a package).
let enginePath: String = {
    var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
    let length = buffer.withUnsafeMutableBytes { readlink("/proc/self/exe", $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count - 1) }
    return length > 0 ? String(decoding: buffer[0..<length], as: UTF8.self) : "unknown"
}()

func run(_ arguments: [String]) async -> ExitStatus {
    let startedAt = TokenctlCore.Clock.system.now()
    let invocation: Invocation
    do { invocation = try Commands.parser.parse(arguments) } catch { return Output.usageError(error) }
    let formatter = HelpFormatter(toolName: "tokenctl")

    let command: any EngineCommand.Type
    switch invocation.action {
    case .version:
        Output.standardOutput("tokenctl \(toolVersion) (engine \(enginePath))\n")
        return .success
    case .topLevelHelp:
        Output.standardOutput(formatter.topLevelHelp(
            overview: "OAuth 2.0 / OpenID Connect access tokens for shells, scripts and cron, kept in the Secret Service.",
            commands: Commands.all.map { $0.spec },
            footer: "  See 'tokenctl help <command>' for detailed help, and tokenctl(1) for exit statuses and files."))
        return .success
    case .commandHelp(let name):
        Output.standardOutput(formatter.help(for: Commands.parser.command(named: name)!))
        return .success
    case .run(let name):
        guard let named = Commands.named(name) else { return .failure }  // the parser knows only these
        command = named
    }
    let commandName = command.spec.name

    let profileText = invocation.profileName ?? Environment.process[EnvironmentSwitches.profile.description] ?? ProfileName.default.rawValue
    guard let profile = ProfileName(rawValue: profileText) else {
        return Output.usageError(UsageError(
            "Invalid profile name '\(profileText)': use 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'.",
            command: commandName))
    }
    let paths: Paths
    do { paths = try Paths.resolve() } catch {
        Output.report(TokenctlError(.configuration, error.description))
        return .configuration
    }
    let timeoutOption = invocation.options.value("--timeout")
    let timeout: Double
    if let timeoutOption {
        // Under a second cannot hold a lock wait, a round trip and a keyring write: a refresh
        // sent and then abandoned may leave the server's rotation unseen.
        guard let value = Double(timeoutOption), value.isFinite, value >= 1, value <= 3600 else {
            return Output.usageError(UsageError("Invalid value '\(timeoutOption.prefix(40))' for '--timeout': expected seconds between 1 and 3600.", command: commandName))
        }
        timeout = value
    } else {
        timeout = 30
    }
    let context = CommandContext(
        options: invocation.options, profile: profile,
        profileChosen: invocation.profileName != nil || !(Environment.process[EnvironmentSwitches.profile.description] ?? "").isEmpty,
        verbose: invocation.verbose, paths: paths, timeout: timeout,
        deadline: command.hasDeadline(invocation.options) ? startedAt + timeout : nil)

    do {
        return try await command.run(context)
    } catch let error as UsageError {
        return Output.usageError(error)
    } catch let error as TokenctlError {
        Output.report(error)
        return error.exitStatus
    } catch {
        Output.standardError("Error: \(error)\n")
        return .failure
    }
}

// Scripts read our stdout through pipes that may close early: never die of SIGPIPE.
signal(SIGPIPE, SIG_IGN)
let status = await run(Array(CommandLine.arguments.dropFirst()))
exit(status.rawValue)
