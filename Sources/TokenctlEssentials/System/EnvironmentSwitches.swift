/// Every environment variable of tokenctl's own, in one place (tokenctl(1), ENVIRONMENT): the
/// default profile, and the switches the tests and the benchmark use to keep off a machine's real locks,
/// crontab and kernel keyring. Each is also an honest feature a user may set. (The XDG base
/// directories and DBUS_SESSION_BUS_ADDRESS are the desktop's, read where they are used.)
public enum EnvironmentSwitches {
    /// The profile to use without `--profile`.
    public static let profile: StaticString = "TOKENCTL_PROFILE"
    /// `1`: never use the kernel keyring (no hot cache, no rotation journal): every token comes
    /// from the Secret Service. The tests of that path and Scripts/bench's fallback run set it.
    public static let disableKernelKeyring: StaticString = "TOKENCTL_TEST_DISABLE_KERNEL_KEYRING"
    /// `1`: run each refresh exchange in the calling process instead of a detached child (what
    /// tokenctl did before; a kill of the caller may then lose the refresh in flight).
    /// Scripts/bench sets it to measure what the detached exchange costs.
    public static let refreshInProcess = "TOKENCTL_TEST_REFRESH_IN_PROCESS"
    /// The directory for profile locks instead of /run/user/UID/tokenctl; it must be the user's
    /// own 0700 directory. The tests give each test its own.
    public static let runtimeDirectory = "TOKENCTL_RUNTIME_DIR"
    /// Seconds without a connection after which `forward serve` (the socket unit's serving
    /// process) exits, 1 to 86400 (default 120); the socket starts it again on the next one.
    public static let forwardIdleExit = "TOKENCTL_FORWARD_IDLE_EXIT"
    /// The program used as crontab(1): other crontab implementations, and tests that must not
    /// touch the real crontab.
    public static let crontab = "TOKENCTL_CRONTAB"
}
