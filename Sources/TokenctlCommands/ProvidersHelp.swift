import TokenctlCore

/// `tokenctl help providers`: each preset, what to register at the provider, with which
/// redirect URI and scopes, in a few lines. The PROVIDERS section of tokenctl-login(1) says
/// the same (DocumentationAgreementTests checks each provider's line there).
enum ProvidersHelp {
    /// What to register and how to sign in, per provider.
    static func registration(_ provider: Provider) -> String {
        switch provider {
        case .github:
            """
            OAuth App: github.com/settings/applications/new (Enterprise Server: the same on
            your host, with --host HOST). Callback URL http://127.0.0.1/callback; tick
            "Enable Device Flow" for --device. Default scopes: repo read:org gist. The browser
            login needs the app's secret (--client-secret-stdin), and so does revocation at
            logout; tokens never expire on their own.
            """
        case .githubApp:
            """
            GitHub App: github.com/settings/apps/new. Callback URL http://127.0.0.1/callback,
            "Expire user authorization tokens" on (8-hour tokens, 6-month refresh tokens),
            "Enable Device Flow" for --device. Permissions are the app's: no scopes.
            """
        case .google:
            """
            Google Cloud console, APIs & Services > Credentials > OAuth client ID, type
            "Desktop app" (loopback redirects need no registration); for --device a separate
            "TVs and Limited Input devices" client (openid, email, profile and a few Drive and
            YouTube scopes only). Both need their secret: --client-secret-stdin. Scopes: openid
            email profile; tokenctl sends access_type=offline and prompt=consent, never
            offline_access. An app in "Testing" status loses its refresh tokens after 7 days.
            """
        case .entra:
            """
            Entra admin center > App registrations > New registration; Authentication > Add a
            platform > "Mobile and desktop applications", redirect URI http://127.0.0.1/callback
            (add it in the manifest if the portal refuses it); "Allow public client flows" on
            for --device. --tenant ID, or common, organizations or consumers. Scopes: openid
            profile offline_access (add your API's). No revocation: logout ends the local session.
            """
        case .gitlab:
            """
            User Settings > Applications (self-managed: --host HOST): redirect URI
            http://127.0.0.1/callback, "Confidential" off, scopes openid read_repository
            write_repository. The device flow needs GitLab 17.2 or later.
            """
        case .keycloak:
            """
            Clients > Create client (OpenID Connect), "Client authentication" off, "Standard
            flow" and "OAuth 2.0 Device Authorization Grant" on; valid redirect URI
            http://127.0.0.1/callback (without a port, any port works). --issuer
            https://HOST/realms/REALM. Scopes: openid offline_access (the user needs the
            offline_access role).
            """
        case .okta:
            """
            Applications > Create App Integration > OIDC, "Native Application"; sign-in
            redirect URI http://127.0.0.1/callback; grant types Authorization Code, Refresh
            Token, Device Authorization. --issuer https://ORG.okta.com/oauth2/default (or the
            org server https://ORG.okta.com). Scopes: openid offline_access. If the app
            requires DPoP, add --dpop.
            """
        case .auth0:
            """
            Applications > Create Application > "Native"; Allowed Callback URLs
            http://127.0.0.1/callback; Advanced > Grant Types: Device Code and Refresh Token;
            your API: "Allow Offline Access". --issuer https://TENANT.auth0.com/ (with the
            slash) and --audience your API's identifier. Scopes: openid offline_access.
            """
        case .gitea, .forgejo:
            """
            Settings > Applications > OAuth2 applications: redirect URI
            http://127.0.0.1/callback, "Confidential client" off. --host the instance. No
            device flow: the browser login only.
            """
        }
    }

    /// The whole topic.
    static var text: String {
        var text = """
            Provider presets: tokenctl login --provider NAME --client-id ID [--host HOST |
            --tenant T | --issuer URL]. A preset fills in what the provider needs beyond the
            standards and is saved in the profile (provider = NAME), so later logins, refreshes
            and logouts behave the same. You register the client; the redirect URI is always
            http://127.0.0.1/callback, on a free port (--port PORT fixes one, for a provider
            that matches ports).

            """
        for provider in Provider.allCases {
            text += "\n  \(provider.rawValue) (\(provider.displayName))\n"
            for line in registration(provider).split(separator: "\n") { text += "    \(line)\n" }
        }
        return text + "\nSee PROVIDERS in tokenctl-login(1).\n"
    }
}
