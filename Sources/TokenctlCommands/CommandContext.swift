// What every engine command gets: the parsed options, the profile, the paths, the deadline,
// and the core service; the version, and where this engine runs from.
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
    let deadline: Deadline?

    /// The streams, variables, clock, executable and service factory the command runs with.
    let environment: EngineEnvironment

    /// The command's standard input, output and error.
    var io: IOStreams { environment.io }
    var clock: Clock { environment.clock }
    var variables: Environment { environment.variables }

    func service() -> TokenctlService { serviceAndBus().service }

    /// The core service, after locating the session bus once (cron gives no
    /// DBUS_SESSION_BUS_ADDRESS), and the bus found, with where it was found.
    func serviceAndBus() -> (service: TokenctlService, bus: ServiceFactory.Bus?) {
        // A provider's prompt can be answered only by a person at a terminal; say what it asks.
        let interactive = environment.io.errorIsTerminal
        let io = self.io
        let notice: @Sendable (String) -> Void = { notice in io.standardError("tokenctl: \(notice)\n") }
        let storeOptions = SecretServiceStore.Options(
            callTimeout: 10, interactive: interactive, promptNotice: interactive ? notice : nil)
        let narrate: TokenBroker.Narrator? =
            verbose
            ? { @Sendable (line: String) in io.standardError("tokenctl: " + Output.printable(line) + "\n") } : nil
        return environment.services.service(
            ServiceFactory.Settings(
                paths: paths, timeout: timeout, userAgent: "tokenctl/\(toolVersion)", deadline: deadline,
                storeOptions: storeOptions, narrate: narrate,
                detachedRefreshEngine: environment.detachedRefreshEngine, verbose: verbose, variables: variables,
                io: io))
    }

    /// The forward socket this process uses, for the commands that do not ask it for a token
    /// (`status`, `git-credential erase`): the one TOKENCTL_FORWARD_SOCKET names, or the
    /// well-known one when something serves it (a probe that connects to nothing:
    /// `ForwardClient.liveness`); nil for the local session.
    var servedForwardSocket: String? {
        guard let source = environment.forwardSocketSource,
            source.explicit || ForwardClient.liveness(of: source.path) == .served
        else {
            return nil
        }
        return source.path
    }

    /// A token from the forward socket, if this process has one that serves: nil for a local
    /// session, and for a well-known socket nothing serves (the file an ended `ssh -R` leaves),
    /// which falls back to the local session.
    func forwardedToken(
        target: TokenTarget, minimumTimeToLive: Double, force: Bool, proof: ForwardedSession.ProofRequest? = nil,
        command: String, consultHotCache: Bool = true
    ) throws(TokenctlError) -> (served: ForwardedSession.Served, socket: String)? {
        guard let source = environment.forwardSocketSource else { return nil }
        guard
            let served = try ForwardedSession(
                socketPath: source.path, hotCache: HotCache(environment: variables), clock: clock
            ).token(
                profile, target: target, minimumTimeToLive: minimumTimeToLive, force: force, proof: proof,
                // What is left of --timeout: the connect, the request and the answer all end by then.
                command: command, timeout: deadline.map { max(0, $0.remaining(clock: clock)) } ?? timeout,
                consultHotCache: consultHotCache, fallBackWhenNotServed: !source.explicit)
        else {
            verboseLog("nothing serves the forward socket \(source.path) (an ended ssh -R?): using the local session")
            return nil
        }
        return (served, source.path)
    }

    /// A token to hand to a program (`exec`, `git-credential`): the forwarded session's when a
    /// forward socket is set, else the local one's (the hot cache first, as the front does).
    ///
    /// - Parameter needsGitUsername: git's user name is wanted too; it comes with the serving
    ///   side's answer, which the hot cache lacks, so a forwarded token skips the hot cache.
    func handOutToken(target: TokenTarget, minimumTimeToLive: Double, command: String, needsGitUsername: Bool = false)
        async throws(TokenctlError) -> (tokenSet: TokenSet, gitUsername: String?)
    {
        if let (served, socket) = try forwardedToken(
            target: target, minimumTimeToLive: minimumTimeToLive, force: false, command: command,
            consultHotCache: !needsGitUsername)
        {
            verboseLog(
                (served.fromHotCache ? "from the hot cache" : "forwarded from \(served.servedBy ?? "the serving side")")
                    + " over \(socket)")
            return (served.tokenSet, served.gitUsername)
        }
        let served = try await service().token(
            profile, target: target, minimumTimeToLive: minimumTimeToLive, force: false, consultHotCache: true)
        return (served.tokenSet, served.configuration.gitUsername)
    }

    func verboseLog(_ message: String) {
        if verbose { io.standardError("tokenctl: \(message)\n") }
    }
}
