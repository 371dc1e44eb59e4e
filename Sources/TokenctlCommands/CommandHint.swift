import TokenctlCore
import TokenctlEssentials

/// The command lines the command layer's own hints print, spelled so they run as printed: with
/// `--profile` whenever the profile is not `default` (`HintText` spells the core's).
enum CommandHint {
    /// `tokenctl [--profile P] ARGUMENTS`.
    static func tokenctl(_ profile: ProfileName, _ arguments: String) -> String {
        profile == .default ? "tokenctl \(arguments)" : "tokenctl \(GlobalOptions.profile.key) \(profile) \(arguments)"
    }

    /// Signs the profile in again with what it saved.
    static func login(_ profile: ProfileName) -> String { HintText.commandLine(.login(profile)) }
}
