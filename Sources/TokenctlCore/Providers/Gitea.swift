// Gitea (https://docs.gitea.com/development/oauth2-provider) and Forgejo, its fork: an instance
// of one's own, no device flow, tokenctl's default scopes.

extension Provider {
    public static let gitea = Provider(
        "gitea", displayName: "Gitea", takesHost: true, hostExample: "gitea.example.com", offersDeviceFlow: false,
        registrationHelp: Gitea.registrationHelp)

    public static let forgejo = Provider(
        "forgejo", displayName: "Forgejo", takesHost: true, hostExample: "codeberg.org", offersDeviceFlow: false,
        registrationHelp: Gitea.registrationHelp)
}

/// What Gitea and Forgejo share.
enum Gitea {
    static let registrationHelp = """
        Settings > Applications > OAuth2 applications: redirect URI
        http://127.0.0.1/callback, "Confidential client" off. --host the instance. No
        device flow: the browser login only.
        """
}
