#if canImport(Glibc)
import Glibc
#endif

/// Whether a descriptor is a terminal, and typing on one without echo.
public enum Terminal {
    /// isatty(3).
    public static func isTerminal(_ descriptor: Int32) -> Bool { system_isatty(descriptor) == 1 }

    /// `body` with the terminal at `descriptor` not echoing what is typed (a secret being
    /// entered), its settings restored after; just `body` when it is not a terminal.
    static func withoutEcho<Result>(_ descriptor: Int32, _ body: () -> Result) -> Result {
        guard isTerminal(descriptor) else { return body() }
        var saved = termios()
        system_tcgetattr(descriptor, &saved)
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        system_tcsetattr(descriptor, TCSANOW, &quiet)
        defer { system_tcsetattr(descriptor, TCSANOW, &saved) }
        return body()
    }
}
