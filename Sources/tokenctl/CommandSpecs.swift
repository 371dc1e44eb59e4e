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
            OptionSpec("--scope", value: "scope", help: "Scopes to request in the token exchange at login (space-separated)."),
            OptionSpec("--refresh-token-stdin", help: "Read the refresh token from standard input (one line)."),
            OptionSpec("--token-endpoint", value: "url", help: "Token endpoint, for servers without discovery."),
            OptionSpec("--revocation-endpoint", value: "url", help: "Revocation endpoint (RFC 7009), for servers without discovery."),
            OptionSpec("--cacert", value: "file", help: "CA certificates (PEM) to trust for this issuer instead of the system bundle."),
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
        usage: "[--all | --orphans] [--no-revoke]",
        options: [
            OptionSpec("--all", help: "Log out every configured profile."),
            OptionSpec("--orphans", help: "Remove keyring sessions that no profile uses any more (see 'status --all')."),
            OptionSpec("--no-revoke", help: "Remove the local session without asking the server to revoke it."),
            timeout,
        ],
        discussion: "The profile's configuration is kept; only its session is removed. A failed revocation is reported, and the local session is removed anyway.")

    static let status = CommandSpec(
        name: "status",
        abstract: "Show the session state (never a token).",
        usage: "[--all] [--json] [--watch] [--offline]",
        options: [
            OptionSpec("--all", help: "Show every configured profile, and orphaned keyring sessions."),
            OptionSpec("--json", help: "Print JSON on stdout (an array with --all); schema in tokenctl(1)."),
            OptionSpec("--watch", help: "Print the state, then one line per change (login, refresh, logout, expiry) until interrupted."),
            OptionSpec("--offline", help: "Never contact the server (status never does today; accepted for scripts)."),
        ],
        discussion: "States: authenticated, expired-refreshable, signed-out, ended (the server ended the session), store-unavailable. Exit status: 0 authenticated or expired-refreshable, 77 signed out or ended, 69 the Secret Service cannot be read, 78 not configured.")

    static let events = CommandSpec(
        name: "events",
        abstract: "Show the audit event log (logins, refreshes, logouts, ended sessions).",
        usage: "[--follow] [--since <time>] [--min-significance <level>] [--json]",
        options: [
            OptionSpec("-f", "--follow", help: "Keep printing events as they are appended, until interrupted."),
            OptionSpec("--since", value: "time", help: "Only events at or after this time: an ISO 8601 time (2026-11-29T10:00:00Z) or an age (90s, 30m, 2h, 7d)."),
            OptionSpec("--min-significance", value: "level", help: "low (everything, default), medium, or high."),
            OptionSpec("--json", help: "Print the log's JSON lines as they are."),
        ],
        discussion: "Events of all profiles are shown unless --profile names one. The log is $XDG_STATE_HOME/tokenctl/events.jsonl; it never holds a token and is never sent anywhere.")

    static let doctor = CommandSpec(
        name: "doctor",
        abstract: "Check everything unattended use needs, one line per check.",
        usage: "[--json]",
        options: [OptionSpec("--json", help: "Print the checks as JSON on stdout.")],
        discussion: "Checks the configuration, the session bus, the Secret Service and its lock state, each profile's session, orphaned sessions, each issuer's reachability and clock, the lock directory, and the refresh schedule. Exit status 0 only when every check passes, else 1.")

    static let schedule = CommandSpec(
        name: "schedule",
        abstract: "Install, remove or show the unattended refresh (systemd timer or cron).",
        usage: "install|remove|status [--every <interval>] [--systemd | --cron]",
        options: [
            OptionSpec("--every", value: "interval", help: "How often to refresh: 15m (default), 30m, 1h, 900s …"),
            OptionSpec("--systemd", help: "Use a systemd user timer (the default when 'systemctl --user' works)."),
            OptionSpec("--cron", help: "Use a crontab entry."),
        ],
        arguments: [("action", "install, remove or status.")],
        discussion: "The job runs 'tokenctl refresh --all --if-expiring-within <2 x interval + 60 s>'. Installing twice replaces the entry; 'remove' deletes exactly what 'install' created.")

    static let all = [login, token, refresh, logout, status, events, doctor, schedule]

    static let parser = CommandLineParser(toolName: "tokenctl", commands: all)
}
