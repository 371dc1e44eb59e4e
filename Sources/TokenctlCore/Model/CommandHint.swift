import TokenctlEssentials

/// The commands tokenctl prints in hints, spelled so they run as printed: with `--profile`
/// whenever the profile is not `default` (the end-to-end suite runs every one of them).
public enum CommandHint {
    /// `tokenctl [--profile P] ARGUMENTS`.
    public static func tokenctl(_ profile: ProfileName, _ arguments: String) -> String {
        profile == .default ? "tokenctl \(arguments)" : "tokenctl --profile \(profile) \(arguments)"
    }

    /// Signs the profile in again with what it saved.
    public static func login(_ profile: ProfileName) -> String { tokenctl(profile, "login") }
}
