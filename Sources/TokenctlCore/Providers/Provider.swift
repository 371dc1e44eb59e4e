import TokenctlEssentials

/// An identity provider tokenctl knows by name (`login --provider NAME`, `provider = NAME` in
/// the profile): how it bends the standards is in `ProviderPreset`, from its documentation.
public enum Provider: String, CaseIterable, Sendable, Equatable {
    case github
    case githubApp = "github-app"
    case google
    case entra
    case gitlab
    case keycloak
    case okta
    case auth0
    case gitea
    case forgejo

    /// The name people know it by, for messages.
    public var displayName: String {
        switch self {
        case .github: "GitHub OAuth App"
        case .githubApp: "GitHub App"
        case .google: "Google"
        case .entra: "Microsoft Entra ID"
        case .gitlab: "GitLab"
        case .keycloak: "Keycloak"
        case .okta: "Okta"
        case .auth0: "Auth0"
        case .gitea: "Gitea"
        case .forgejo: "Forgejo"
        }
    }

    /// Whether the preset can run without `--host`: the provider has one public home.
    public var defaultHost: String? {
        switch self {
        case .github, .githubApp: "github.com"
        case .google: "accounts.google.com"
        case .entra: "login.microsoftonline.com"
        case .gitlab: "gitlab.com"
        case .keycloak, .okta, .auth0, .gitea, .forgejo: nil
        }
    }

    /// Whether the issuer is the user's own (a realm, an org, a tenant domain): `--issuer` is required.
    public var needsIssuer: Bool { [.keycloak, .okta, .auth0].contains(self) }

    /// Whether `--host` names the instance (GitHub Enterprise Server, self-managed GitLab, Gitea,
    /// Forgejo, Entra's national clouds).
    public var takesHost: Bool { [.github, .githubApp, .entra, .gitlab, .gitea, .forgejo].contains(self) }

    /// Whether the provider offers the device flow at all (Gitea and Forgejo do not).
    public var offersDeviceFlow: Bool { ![.gitea, .forgejo].contains(self) }

    /// Whether the provider refuses a client without its secret (Google's desktop clients: the
    /// secret is required, though Google says it is not treated as one).
    public var requiresClientSecret: Bool { self == .google }

    /// Whether the authorization code exchange needs the client's secret although the device
    /// flow does not: GitHub's token endpoint requires `client_secret` with a code
    /// (https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#2-users-are-redirected-back-to-your-site-by-github).
    public var codeExchangeNeedsSecret: Bool { self == .github || self == .githubApp || self == .google }

    /// The closest known name, for "did you mean".
    public static func named(_ text: String) -> Provider? { Provider(rawValue: text.lowercased()) }

    public static var names: [String] { allCases.map(\.rawValue) }
}
