import TokenctlEssentials

/// What a provider needs that the standards do not say (its documentation), derived from the
/// provider and the profile's issuer, so a profile that saved `provider = NAME` behaves the
/// same at every login, refresh and logout: fixed endpoints where there is no discovery,
/// default scopes, extra authorization parameters, how the issuer is matched, how to revoke.
///
/// The loopback redirect is always `http://127.0.0.1:PORT/callback` (never `[::1]`, which
/// Entra refuses), so no provider changes it.
public struct ProviderPreset: Sendable, Equatable {
    public var provider: Provider
    public var issuer: EndpointURL
    /// Endpoints used when neither an option, nor the profile, nor discovery names one.
    public var fallbackEndpoints: ExplicitEndpoints
    /// Whether the provider publishes a discovery document (GitHub does not).
    public var discovers: Bool
    /// The scopes a login asks for when `--scope` is not given; nil: tokenctl's default
    /// (`openid offline_access`, as far as the server advertises them).
    public var defaultScope: String?
    /// Scopes the provider refuses outright, with why (Google: `offline_access`).
    public var refusedScopes: [String: String]
    /// Parameters added to the authorization request of a browser login.
    public var authorizationParameters: [(String, String)]
    /// How a confidential client authenticates when discovery does not say.
    public var preferredAuthMethod: ClientAuthenticationMethod?
    public var issuerRule: IssuerRule
    public var revocation: ProviderRevocation

    public static func == (a: ProviderPreset, b: ProviderPreset) -> Bool {
        a.provider == b.provider && a.issuer == b.issuer && a.fallbackEndpoints == b.fallbackEndpoints
            && a.discovers == b.discovers && a.defaultScope == b.defaultScope && a.refusedScopes == b.refusedScopes
            && a.authorizationParameters.elementsEqual(b.authorizationParameters, by: ==)
            && a.preferredAuthMethod == b.preferredAuthMethod && a.issuerRule == b.issuerRule
            && a.revocation == b.revocation
    }

    /// The behaviour of `provider` at `issuer` (a login's resolved issuer, or a profile's saved one).
    public init(_ provider: Provider, issuer: EndpointURL) {
        self.provider = provider
        self.issuer = issuer
        fallbackEndpoints = ExplicitEndpoints()
        discovers = true
        defaultScope = nil
        refusedScopes = [:]
        authorizationParameters = []
        preferredAuthMethod = nil
        issuerRule = .exact
        revocation = .standard
        let base = issuer.withoutTrailingSlash
        func url(_ text: String) -> EndpointURL? { try? EndpointURL(text) }
        switch provider {
        case .github, .githubApp:
            // No discovery, no ID token: GitHub's fixed paths on the host (GHES: the same paths).
            discovers = false
            fallbackEndpoints = ExplicitEndpoints(
                token: url(base + "/login/oauth/access_token"), deviceAuthorization: url(base + "/login/device/code"),
                authorization: url(base + "/login/oauth/authorize"))
            // gh's minimum; GitHub Apps ignore scopes (their permissions are the app's).
            defaultScope = provider == .github ? "repo read:org gist" : nil
            preferredAuthMethod = .clientSecretPost
            let api = issuer.host == "github.com" ? "https://api.github.com" : base + "/api/v3"
            revocation = .gitHubApplicationToken(api: api)
        case .google:
            defaultScope = "openid email profile"
            refusedScopes = [
                "offline_access":
                    "Google refuses the offline_access scope (invalid_scope); tokenctl asks for a refresh token with access_type=offline instead"
            ]
            // A refresh token only with access_type=offline, and again only when consent is shown.
            authorizationParameters = [("access_type", "offline"), ("prompt", "consent")]
            if issuer.host == "accounts.google.com" {
                fallbackEndpoints.deviceAuthorization = url("https://oauth2.googleapis.com/device/code")
            }
            issuerRule = .schemelessAlias
            revocation = .standardTreatingInvalidTokenAsGone
        case .entra:
            defaultScope = "openid profile offline_access"
            if let tenant = EntraTenant.multiTenantSegment(of: issuer) {
                issuerRule = .entraTenantTemplate(segment: tenant)
            }
            revocation = .none(endSession: EntraTenant.endSessionEndpoint(of: issuer))
        case .gitlab:
            defaultScope = "openid read_repository write_repository"
        case .keycloak, .okta, .auth0:
            defaultScope = "openid offline_access"
        case .gitea, .forgejo:
            defaultScope = nil
        }
    }

    /// The issuer a login with `--provider` uses: `--issuer` when given, else the provider's
    /// home (or `--host`'s), with Entra's `--tenant` in it.
    ///
    /// - Throws: a message for a usage error (exit 64), naming the option to give.
    public static func issuer(
        for provider: Provider, host: String?, tenant: String?, issuer: EndpointURL?
    ) throws(PresetError) -> EndpointURL {
        if host != nil, !provider.takesHost {
            throw PresetError("--host does not apply to --provider \(provider.rawValue)" + issuerAdvice(provider))
        }
        if tenant != nil, provider != .entra { throw PresetError("--tenant applies to --provider entra only.") }
        if let issuer {
            if host != nil || tenant != nil {
                throw PresetError("Give --issuer or --host/--tenant, not both: --issuer names the issuer exactly.")
            }
            return issuer
        }
        if provider.needsIssuer {
            throw PresetError("--provider \(provider.rawValue) needs --issuer" + issuerAdvice(provider))
        }
        guard let home = host ?? provider.defaultHost else {
            throw PresetError(
                "--provider \(provider.rawValue) needs --host, the instance's host name (for example --host \(provider == .forgejo ? "codeberg.org" : "gitea.example.com"))."
            )
        }
        var base = try baseURL(home)
        if provider == .entra {
            guard let tenant else {
                throw PresetError(
                    "--provider entra needs --tenant: your directory (tenant) ID, or common, organizations or consumers."
                )
            }
            base += "/" + (try EntraTenant.pathSegment(tenant)) + "/v2.0"
        }
        do { return try EndpointURL(base) } catch { throw PresetError("Invalid value for '--host': \(error).") }
    }

    /// `HOST`, `HOST:PORT` (https) or a URL (`https://HOST/PATH`; `http://` only to this machine).
    static func baseURL(_ host: String) throws(PresetError) -> String {
        let text = host.contains("://") ? host : "https://" + host
        let url: EndpointURL
        do { url = try EndpointURL(text) } catch { throw PresetError("Invalid value for '--host': \(error).") }
        guard !url.string.contains("?") else { throw PresetError("Invalid value for '--host': it has a query.") }
        return url.withoutTrailingSlash
    }

    private static func issuerAdvice(_ provider: Provider) -> String {
        switch provider {
        case .keycloak: " (the realm's URL, e.g. https://sso.example.com/realms/NAME)."
        case .okta: " (https://ORG.okta.com/oauth2/default for the default authorization server)."
        case .auth0: " (https://TENANT.auth0.com/, with the slash)."
        case .google: "; Google has one home."
        default: "."
        }
    }
}

/// A preset's problem with the options given: a usage error.
public struct PresetError: Error, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Entra's tenants in issuer URLs: `https://login.microsoftonline.com/{tenant}/v2.0`.
public enum EntraTenant {
    /// The consumers tenant's ID: its discovery document names this issuer, not `consumers`.
    public static let consumersID = "9188040d-6c67-4c5b-b112-36a304b66dad"

    /// The path segment for `--tenant`: a GUID, a domain, or common/organizations; consumers as its ID.
    static func pathSegment(_ tenant: String) throws(PresetError) -> String {
        let lowered = tenant.lowercased()
        if lowered == "consumers" { return consumersID }
        if ["common", "organizations"].contains(lowered) || isGUID(lowered) { return lowered }
        let domainCharacters = lowered.utf8.allSatisfy {
            ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")
        }
        guard domainCharacters, lowered.contains("."), !lowered.hasPrefix("."), lowered.count <= 253 else {
            throw PresetError(
                "Invalid value '\(TerminalText.short(String(tenant.prefix(60))))' for '--tenant': expected a tenant ID (GUID), a domain, common, organizations or consumers."
            )
        }
        return lowered
    }

    /// `common` or `organizations` when the issuer is a multi-tenant one.
    static func multiTenantSegment(of issuer: EndpointURL) -> String? {
        let parts = issuer.withoutTrailingSlash.split(separator: "/")
        guard parts.count >= 2, parts.last == "v2.0" else { return nil }
        let tenant = String(parts[parts.count - 2])
        return ["common", "organizations"].contains(tenant) ? tenant : nil
    }

    /// `…/{tenant}/oauth2/v2.0/logout`, Entra's end_session_endpoint for the issuer's tenant.
    static func endSessionEndpoint(of issuer: EndpointURL) -> String? {
        let base = issuer.withoutTrailingSlash
        guard base.hasSuffix("/v2.0") else { return nil }
        return String(base.dropLast("/v2.0".count)) + "/oauth2/v2.0/logout"
    }

    /// 8-4-4-4-12 hexadecimal digits.
    public static func isGUID(_ text: String) -> Bool {
        let groups = text.split(separator: "-", omittingEmptySubsequences: false)
        guard groups.map(\.count) == [8, 4, 4, 4, 12] else { return false }
        return groups.allSatisfy {
            $0.utf8.allSatisfy { byte in byte < 0x80 && Character(Unicode.Scalar(byte)).isHexDigit }
        }
    }
}
