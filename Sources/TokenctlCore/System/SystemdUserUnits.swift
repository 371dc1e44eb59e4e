/// The systemd user manager and its unit files (systemctl(1) `--user`, systemd.unit(5)): where
/// user units go, how a value is quoted in them, writing a set of marked units, and the
/// manager's verbs. The one place tokenctl's units talk to it: the refresh timer
/// (`RefreshSchedule`) and the forward socket (`ForwardSocketUnit`).
///
/// A value, so that the engine hands the commands the live manager (`live`) and a test a double
/// that records the verbs and answers as told; the unit files themselves are written for real,
/// into the directory the environment's XDG_CONFIG_HOME or HOME names.
public struct SystemdUserUnits: Sendable {
    /// Runs `systemctl --user ARGUMENTS`: its exit status and what it printed.
    public var systemctl: @Sendable (_ arguments: [String]) -> Subprocess.Result
    /// Where the distribution's package installs its user units (the refresh timer, the forward
    /// socket), which `schedule install` and `forward enable` enable rather than shadow.
    public var packagedUnitDirectory: String

    public init(
        packagedUnitDirectory: String = "/usr/lib/systemd/user",
        systemctl: @escaping @Sendable (_ arguments: [String]) -> Subprocess.Result
    ) {
        self.packagedUnitDirectory = packagedUnitDirectory
        self.systemctl = systemctl
    }

    /// systemctl(1) of this machine, and the package's units under /usr/lib/systemd/user.
    public static let live = SystemdUserUnits { arguments in Subprocess.run(["systemctl", "--user"] + arguments) }

    /// Whether a systemd user manager answers.
    public func managerAnswers() -> Bool { systemctl(["show-environment"]).status == 0 }

    /// Where user units go: `$XDG_CONFIG_HOME/systemd/user`, else `~/.config/systemd/user`.
    public static func directory(_ environment: Environment) -> String? {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") { return config + "/systemd/user" }
        return environment["HOME"].map { $0 + "/.config/systemd/user" }
    }

    /// A value quoted for a unit file's command line or assignment (and a crontab line): as it is
    /// when it holds only safe characters, else in single quotes.
    public static func quoted(_ text: String) -> String {
        text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "/._-=:".contains($0)) })
            ? text : "'" + text.map { $0 == "'" ? "'\\''" : String($0) }.joined() + "'"
    }

    /// Whether the file at `path` is one of ours: it starts with `marker`.
    public static func isOurs(_ path: String, marker: String) -> Bool {
        (try? FileIO.readFile(path))??.hasPrefix(marker) == true
    }

    /// Whether a file exists at `path` (a unit of ours or of the package's).
    public static func exists(_ path: String) -> Bool { (try? FileIO.readFile(path)) ?? nil != nil }

    /// Write unit files (path, text) into `directory` (made 0700 when missing).
    public static func write(_ units: [(path: String, text: String)], into directory: String) throws(TokenctlError) {
        do {
            try FileIO.makeDirectories(directory, mode: 0o700)
            for unit in units { try FileIO.writeAtomically(unit.text, to: unit.path) }
        } catch {
            throw TokenctlError(.unexpected, "cannot write the unit files: \(error)")
        }
    }

    /// `systemctl --user daemon-reload`, then `enable --now UNIT`: nil when both worked, else the
    /// command that failed and what it said.
    public func reloadAndEnable(_ unit: String) -> (command: String, output: String)? {
        for arguments in [["daemon-reload"], ["enable", "--now", unit]] {
            if let failure = failure(of: arguments) { return failure }
        }
        return nil
    }

    /// `systemctl --user enable --now UNIT`: nil when it worked, else the command and its words.
    public func enable(_ unit: String) -> (command: String, output: String)? {
        failure(of: ["enable", "--now", unit])
    }

    /// `systemctl --user disable --now UNIT`: whether it worked.
    @discardableResult
    public func disable(_ unit: String) -> Bool { systemctl(["disable", "--now", unit]).status == 0 }

    public func daemonReload() { _ = systemctl(["daemon-reload"]) }

    public func isEnabled(_ unit: String) -> Bool { systemctl(["is-enabled", unit]).status == 0 }

    /// `systemctl --user is-active UNIT`: whether it is, and the state it printed.
    public func activity(_ unit: String) -> (active: Bool, state: String) {
        let result = systemctl(["is-active", unit])
        return (result.status == 0, result.output.trimmingCharacters(in: " \n"))
    }

    private func failure(of arguments: [String]) -> (command: String, output: String)? {
        let result = systemctl(arguments)
        guard result.status != 0 else { return nil }
        return (
            (["systemctl", "--user"] + arguments).joined(separator: " "), result.output.trimmingCharacters(in: " \n")
        )
    }
}
