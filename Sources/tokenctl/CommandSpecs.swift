import TokenctlEssentials

/// The commands tokenctl understands, as help prints them.
enum Commands {
    static let timeout = OptionSpec("--timeout", value: "seconds", help: "Give up on the server after this long in all, retries included (default: 30).")

    static let login = CommandSpec(
        name: "login",
        abstract: "Sign in a profile: device code, browser, or an imported refresh token.",
        usage: "--issuer <url> --client-id <id> [--device | --browser | --refresh-token-stdin] [<options>]",
        options: [
            OptionSpec("--issuer", value: "url", help: "The authorization server's issuer URL (https://, or http:// to loopback)."),
            OptionSpec("--client-id", value: "id", help: "The OAuth client ID."),
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
            OptionSpec("--cacert", value: "file", help: "Extra trusted CA certificates (PEM) for this issuer."),
            timeout,
        ],
        discussion: """
        Endpoints come from the issuer's discovery document (OpenID Connect, then RFC 8414),
        cached for a day under $XDG_CACHE_HOME/tokenctl/; explicit options win. Without
        --device, --browser or --refresh-token-stdin, tokenctl uses the browser when a display
        (DISPLAY or WAYLAND_DISPLAY) and a terminal are present, and the device flow otherwise.
        An ID token is checked (issuer, audience, expiry, nonce, RS256/ES256 signature) before
        anything is stored. The token set (and a client secret) go to the Secret Service; the
        profile is written to $XDG_CONFIG_HOME/tokenctl/profiles/<name>.conf. Nothing is stored
        if anything fails. Exit status: 77 denied, expired or rejected; 75 server unreachable;
        78 discovery or endpoint problems; 69 the keyring cannot be used (checked before you
        approve anything); 64 bad options or a --port already in use.
        """)

    static let token = CommandSpec(
        name: "token",
        abstract: "Print a valid access token, refreshing it if needed.",
        usage: "[--min-ttl <seconds>] [--force] [--format <format>]",
        options: [
            OptionSpec("--min-ttl", value: "seconds", help: "Refresh when the token expires within this time (default: 60; capped at half the token's lifetime)."),
            OptionSpec("--force", help: "Refresh even if the cached token is still valid."),
            OptionSpec("--format", value: "format", help: "raw (default): the token; header: 'Authorization: Bearer …'; json: token and expiry."),
            timeout,
        ],
        discussion: """
        Standard output carries only the token and one newline, so it can be used as
        curl -H "Authorization: Bearer $(tokenctl token)" https://api.example.com/
        """)

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
