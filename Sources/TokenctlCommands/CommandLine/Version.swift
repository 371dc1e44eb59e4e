import TokenctlCore
import TokenctlEssentials

/// tokenctl's version: the one place it is written. `tokenctl --version`, the Debian package
/// (Scripts/package reads it from here) and the `.Os` line of every manual page agree with it
/// (tests check tokenctl(1), and that every other page names the same version).
public enum TokenctlVersion {
    public static let string = "0.1.0"
}
