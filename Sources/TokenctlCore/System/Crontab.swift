import TokenctlEssentials

/// The user's crontab, through crontab(1): `crontab -l` reads it, `crontab -` replaces it with
/// what it is given on standard input (`RefreshSchedule` reads and writes its block through
/// these). A value, so that the engine hands `schedule` the live program and a test a double
/// holding the table (or failing as told).
public struct Crontab: Sendable {
    /// Whether the program is installed.
    public var isInstalled: @Sendable () -> Bool
    /// Runs the program with `arguments` (`-l`, `-`) and `input` on its standard input.
    public var run: @Sendable (_ arguments: [String], _ input: String?) -> Subprocess.Result

    public init(
        isInstalled: @escaping @Sendable () -> Bool,
        run: @escaping @Sendable (_ arguments: [String], _ input: String?) -> Subprocess.Result
    ) {
        self.isInstalled = isInstalled
        self.run = run
    }

    /// `program` (searched in PATH) as crontab(1).
    public static func live(program: String) -> Crontab {
        Crontab(isInstalled: { Subprocess.locate(program) != nil }) { arguments, input in
            Subprocess.run([program] + arguments, input: input)
        }
    }

    /// crontab(1), or the program `TOKENCTL_CRONTAB` names in `environment` (alternative crontab
    /// implementations, and tests that must not touch the real crontab).
    public static func live(_ environment: Environment) -> Crontab {
        live(program: environment[EnvironmentSwitches.crontab] ?? "crontab")
    }
}
