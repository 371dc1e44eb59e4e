import TokenctlEssentials

/// The commands tokenctl understands, as help prints them.
enum Commands {
    static let timeout = SharedCommandSpecs.timeout

    static let login = CommandSpec(
        name: "login",
        abstract: "Sign in a profile by importing a refresh token.",
        usage: "--issuer <url> --client-id <id> --refresh-token-stdin [<options>]",
        options: [
            OptionSpec("--issuer", value: "url", help: "The authorization server's issuer URL (https://, or http:// to loopback)."),
            OptionSpec("--client-id", value: "id", help: "The OAuth client ID."),
            OptionSpec("--scope", value: "scope", help: "Scopes to request on refresh (space-separated)."),
            OptionSpec("--refresh-token-stdin", help: "Read the refresh token from standard input (one line)."),
            OptionSpec("--token-endpoint", value: "url", help: "Token endpoint, for servers without discovery."),
            OptionSpec("--revocation-endpoint", value: "url", help: "Revocation endpoint (RFC 7009), for servers without discovery."),
            OptionSpec("--cacert", value: "file", help: "Extra trusted CA certificates (PEM) for this issuer."),
            timeout,
        ],
        discussion: """
        The refresh token is exchanged once to prove it works; the resulting token set is
        stored in the Secret Service and the profile is written to
        $XDG_CONFIG_HOME/tokenctl/profiles/<name>.conf. Nothing is stored if anything fails.
        """)

    /// Shared with the static front, which serves `token` hot-cache hits with the same parser.
    static let token = SharedCommandSpecs.token

    static let refresh = CommandSpec(
        name: "refresh",
        abstract: "Refresh the session now (for cron and timers).",
        usage: "[--all] [--if-expiring-within <seconds>]",
        options: [
            OptionSpec("--all", help: "Refresh every configured profile; one line per profile on stderr."),
            OptionSpec("--if-expiring-within", value: "seconds", help: "Only refresh when the access token expires within this time."),
            timeout,
        ],
        discussion: "Exit status with --all is the worst outcome: 77 if any session ended, else 75 if any failed transiently, else 0.")

    static let logout = CommandSpec(
        name: "logout",
        abstract: "Revoke the refresh token and remove the stored session.",
        usage: "[--all] [--no-revoke]",
        options: [
            OptionSpec("--all", help: "Log out every configured profile."),
            OptionSpec("--no-revoke", help: "Remove the local session without asking the server to revoke it."),
        ],
        discussion: "The profile's configuration is kept; only its session is removed. A failed revocation is reported, and the local session is removed anyway.")

    static let status = CommandSpec(
        name: "status",
        abstract: "Show the session state (never a token).",
        usage: "[--all] [--json]",
        options: [
            OptionSpec("--all", help: "Show every configured profile."),
            OptionSpec("--json", help: "Print JSON on stdout (an array with --all)."),
        ],
        discussion: "Exit status: 0 authenticated, 77 signed out, 69 the Secret Service cannot be read, 78 not configured.")

    static let all = [login, token, refresh, logout, status]

    static let parser = CommandLineParser(toolName: "tokenctl", commands: all)
}
