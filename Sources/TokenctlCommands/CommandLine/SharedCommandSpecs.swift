import TokenctlCore
import TokenctlEssentials

/// The command specifications both executables parse: the static front (`tokenctl`) serves
/// `token` hot-cache hits with exactly the options the engine (`tokenctl-engine`) accepts.
public enum SharedCommandSpecs {
    public static let timeout = OptionSpec(
        "--timeout", value: "seconds",
        help:
            "Give up after this long in all: the lock wait, the server (retries included) and the keyring (default: 30, at least 1). A refresh already sent gets at least 5 s to be answered."
    )

    /// A call's own target (see `TokenTarget`): `token`, `git-credential` and `exec` take them.
    public static let scope = OptionSpec(
        "--scope", value: "scopes",
        help:
            "A token for just these scopes (space-separated, a subset of the session's: RFC 6749 §6), with its own cache."
    )
    public static let audience = OptionSpec(
        "--audience", value: "audience",
        help: "A token for this audience (the 'audience' parameter of Auth0 and others), with its own cache.")
    public static let resource = OptionSpec(
        "--resource", value: "uris",
        help: "A token for these resources (RFC 8707 resource indicators, space-separated), with its own cache.")
    public static let target = [scope, audience, resource]

    /// What `token --format` prints: its values, in the order help lists them (the front's hits
    /// serve raw, header and json: `HotPath.Format`).
    public enum TokenFormat: String, CaseIterable, Sendable {
        case raw, header, json
        case execCredential = "exec-credential"
        case dpop
    }

    /// The options of `token`, by name.
    public enum TokenOption {
        public static let minimumTimeToLive = OptionSpec(
            "--min-ttl", value: "seconds",
            help: "Refresh when the token expires within this time (default: 60; capped at half the token's lifetime).")
        public static let force = OptionSpec("--force", help: "Refresh even if the cached token is still valid.")
        public static let format = OptionSpec(
            "--format", value: "format", choices: TokenFormat.allCases.map(\.rawValue),
            help:
                "raw (default): the token; header: 'Authorization: Bearer …'; json: token and expiry; exec-credential: a kubectl ExecCredential; dpop: the two headers of a DPoP request (needs --method and --url)."
        )
        public static let method = OptionSpec(
            "--method", value: "method",
            help: "With --format dpop or json on a DPoP session: the HTTP method of the request the proof is for.")
        public static let url = OptionSpec(
            "--url", value: "url",
            help:
                "With --format dpop or json on a DPoP session: the URL of the request the proof is for (query and fragment are not signed)."
        )
        public static let nonce = OptionSpec(
            "--nonce", value: "nonce",
            help: "With --method and --url: the DPoP-Nonce a resource server asked for (use_dpop_nonce).")
    }

    public static let token = CommandSpec(
        name: "token",
        abstract: "Print a valid access token, refreshing it if needed.",
        usage:
            "[--min-ttl <seconds>] [--force] [--format <format>] [--method <method> --url <url> [--nonce <nonce>]] [--scope <scopes>] [--audience <audience>] [--resource <uris>]",
        options: [
            TokenOption.minimumTimeToLive, TokenOption.force, TokenOption.format, TokenOption.method, TokenOption.url,
            TokenOption.nonce,
        ] + target + [timeout],
        discussion: """
            Standard output carries only the token and one newline, so it can be used as
            curl -H "Authorization: Bearer $(tokenctl token)" https://api.example.com/
            A valid token is served from a memory-only cache in the kernel user keyring when it can
            be; the Secret Service is asked otherwise.
            With --scope, --audience or --resource, the token is one for just that, obtained from
            the session's refresh token (under the same single-flight and rotation rules) and
            cached apart from the session's own; 'tokenctl status' lists them, logout removes them.
            A session bound to a DPoP key (login --dpop) needs a proof with each request:
            tokenctl token --format dpop --method GET --url https://api.example.com/x | curl -H @- https://api.example.com/x
            """)
}
