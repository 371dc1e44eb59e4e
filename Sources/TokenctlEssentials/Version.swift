/// tokenctl's version: the one place it is written. `tokenctl --version`, the Debian package
/// (Scripts/package reads it from here) and tokenctl(1)'s `.Os` line agree with it (a test
/// checks the man page).
public enum TokenctlVersion {
    public static let string = "0.1.0"
}
