/// The systemd user manager and its unit files (systemctl(1) `--user`, systemd.unit(5)): where
/// user units go, how a value is quoted in them, writing a set of marked units, and the
/// manager's verbs. The one place tokenctl's units talk to it: the refresh timer
/// (`RefreshSchedule`) and the forward socket (`ForwardSocketUnit`).
public enum SystemdUserUnits {
    /// Whether a systemd user manager answers.
    public static func managerAnswers() -> Bool { systemctl("show-environment").status == 0 }

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
    public static func reloadAndEnable(_ unit: String) -> (command: String, output: String)? {
        for arguments in [["daemon-reload"], ["enable", "--now", unit]] {
            if let failure = failure(of: arguments) { return failure }
        }
        return nil
    }

    /// `systemctl --user enable --now UNIT`: nil when it worked, else the command and its words.
    public static func enable(_ unit: String) -> (command: String, output: String)? {
        failure(of: ["enable", "--now", unit])
    }

    /// `systemctl --user disable --now UNIT`: whether it worked.
    @discardableResult
    public static func disable(_ unit: String) -> Bool { systemctl("disable", "--now", unit).status == 0 }

    public static func daemonReload() { _ = systemctl("daemon-reload") }

    public static func isEnabled(_ unit: String) -> Bool { systemctl("is-enabled", unit).status == 0 }

    /// `systemctl --user is-active UNIT`: whether it is, and the state it printed.
    public static func activity(_ unit: String) -> (active: Bool, state: String) {
        let result = systemctl("is-active", unit)
        return (result.status == 0, result.output.trimmingCharacters(in: " \n"))
    }

    private static func systemctl(_ arguments: String...) -> Subprocess.Result {
        Subprocess.run(["systemctl", "--user"] + arguments)
    }

    private static func failure(of arguments: [String]) -> (command: String, output: String)? {
        let command = ["systemctl", "--user"] + arguments
        let result = Subprocess.run(command)
        guard result.status != 0 else { return nil }
        return (command.joined(separator: " "), result.output.trimmingCharacters(in: " \n"))
    }
}
