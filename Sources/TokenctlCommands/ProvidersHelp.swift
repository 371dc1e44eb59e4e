import TokenctlCore

/// `tokenctl help providers`: each preset, what to register at the provider, with which
/// redirect URI and scopes, in a few lines (the provider's `registrationHelp`, in its file in
/// TokenctlCore's `Providers/`). The PROVIDERS section of tokenctl-login(1) says
/// the same (DocumentationAgreementTests checks each provider's line there).
enum ProvidersHelp {
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
            for line in provider.registrationHelp.split(separator: "\n") { text += "    \(line)\n" }
        }
        return text + "\nSee PROVIDERS in tokenctl-login(1).\n"
    }
}
