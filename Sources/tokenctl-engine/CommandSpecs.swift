import TokenctlEssentials

/// The commands tokenctl understands, as help prints them.
enum Commands {
    static let timeout = SharedCommandSpecs.timeout

    static let login = CommandSpec(
        name: "login",
        abstract: "Sign in a profile: device code, browser, or an imported refresh token.",
        usage: "[--issuer <url> --client-id <id>] [--device | --browser | --refresh-token-stdin] [<options>]",
        options: [
            OptionSpec("--issuer", value: "url", help: "The authorization server's issuer URL (https://, or http:// to loopback). Default: the profile's saved one."),
            OptionSpec("--client-id", value: "id", help: "The OAuth client ID. Default: the profile's saved one."),
            OptionSpec("--device", help: "Device authorization grant (RFC 8628): show a code to enter on any device. The default without a display or terminal."),
            OptionSpec("--browser", help: "Authorization code with PKCE in the system browser, redirected to 127.0.0.1 (RFC 8252)."),
            OptionSpec("--port", value: "port", help: "With --browser: listen on this loopback port instead of a free one."),
            OptionSpec("--no-open", help: "With --browser: print the URL instead of starting xdg-open."),
            OptionSpec("--login-timeout", value: "seconds", help: "With --browser: how long to wait for the browser (default: 300)."),
            OptionSpec("--refresh-token-stdin", help: "Import a refresh token read from standard input (one line)."),
            OptionSpec("--client-secret-stdin", help: "A confidential client: read its secret from standard input and keep it in the Secret Service."),
            OptionSpec("--scope", value: "scope", help: "Scopes to request (default: openid offline_access, as far as the server supports them)."),
            OptionSpec("--audience", value: "audience", help: "Pass an 'audience' parameter (e.g. Auth0 APIs)."),
            OptionSpec("--resource", value: "uri", help: "Resource indicator(s) (RFC 8707), space-separated."),
            OptionSpec("--token-endpoint", value: "url", help: "Token endpoint, for servers without (complete) discovery."),
            OptionSpec("--revocation-endpoint", value: "url", help: "Revocation endpoint (RFC 7009)."),
            OptionSpec("--device-authorization-endpoint", value: "url", help: "Device authorization endpoint (RFC 8628)."),
            OptionSpec("--authorization-endpoint", value: "url", help: "Authorization endpoint, for --browser."),
            OptionSpec("--jwks-uri", value: "url", help: "The issuer's JSON Web Key Set, to verify ID token signatures."),
            OptionSpec("--cacert", value: "file", help: "CA certificates (PEM) to trust for this issuer instead of the system bundle."),
            timeout,
        ],
        discussion: """
        A profile that logged in before signs in again with a plain 'tokenctl login' (with
        --profile for another profile): the issuer, client id, scope, audience, resources,
        endpoints, CA bundle and client authentication it saved apply; options given replace
        them and are saved. Endpoints come from the issuer's discovery document (OpenID
        Connect, then RFC 8414), cached for a day under $XDG_CACHE_HOME/tokenctl/; options
        given now win, then the profile's saved endpoints. Without
        --device, --browser or --refresh-token-stdin, tokenctl uses the browser when a display
        (DISPLAY or WAYLAND_DISPLAY) and a terminal are present, and the device flow otherwise.
        An ID token is checked (issuer, audience, expiry; the nonce after a browser login; its
        RS256, PS256, ES256 or EdDSA signature when the issuer's JWKS is known) before anything
        is stored. The token set (and a client secret) go to the Secret Service; the
        profile is written to $XDG_CONFIG_HOME/tokenctl/profiles/<name>.conf. Nothing is stored
        if anything fails. Exit status: 77 denied, expired or rejected; 75 server unreachable;
        78 discovery or endpoint problems; 69 the keyring cannot be used (checked before you
        approve anything); 64 bad options or a --port already in use.
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
        usage: "[--all] [--forget] [--no-revoke] | --orphans",
        options: [
            OptionSpec("--all", help: "Log out every configured profile."),
            OptionSpec("--forget", help: "Also remove the profile: its configuration file, client secret and caches (other profiles are left alone)."),
            OptionSpec("--orphans", help: "Remove keyring sessions that no profile uses any more (see 'status --all')."),
            OptionSpec("--no-revoke", help: "Remove the local session without asking the server to revoke it."),
            timeout,
        ],
        discussion: """
        Without --forget the profile's configuration is kept, so 'tokenctl login' signs it
        in again with the same settings, and 'refresh --all' skips it (signed out by you)
        until then. When the server refuses the revocation or cannot be reached, the local
        session is removed anyway, the event log records revocationFailed, and the exit
        status is 76: the refresh token may stay valid at the server until it expires.
        """)

    static let status = CommandSpec(
        name: "status",
        abstract: "Show the session state (never a token).",
        usage: "[--all] [--json] [--watch] [--offline] [--timeout <seconds>]",
        options: [
            OptionSpec("--all", help: "Show every configured profile, and orphaned keyring sessions."),
            OptionSpec("--json", help: "Print JSON on stdout (an array with --all); schema in tokenctl(1)."),
            OptionSpec("--watch", help: "Print the state, then one line per change (login, refresh, logout, expiry) until interrupted."),
            OptionSpec("--offline", help: "Never contact the server: the signature verdict comes from the cached keys only."),
            timeout,
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
        options: [OptionSpec("--json", help: "Print the checks as JSON on stdout."), timeout],
        discussion: "Checks the configuration, the session bus, the Secret Service and its lock state, each profile's session, orphaned sessions, each issuer's reachability and clock, the lock directory, and the refresh schedule. Each check is ok, warn (advice: tokens work) or fail (what breaks 'token'). Exit status 0 unless a check fails, else 1.")

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
