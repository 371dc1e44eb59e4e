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
        provider.configurePreset(&self)
    }

    /// The issuer a login with `--provider` uses: `--issuer` when given, else the provider's
    /// home (or `--host`'s), with Entra's `--tenant` in it.
    ///
    /// - Throws: a message for a usage error (exit 64), naming the option to give.
    public static func issuer(
        for provider: Provider, host: String?, tenant: String?, issuer: EndpointURL?
    ) throws(PresetError) -> EndpointURL {
        if host != nil, !provider.takesHost {
            throw PresetError("--host does not apply to --provider \(provider.rawValue)" + provider.issuerAdvice)
        }
        if tenant != nil, !provider.takesTenant {
            let tenanted = Provider.all.filter(\.takesTenant).map(\.rawValue).joined(separator: " or ")
            throw PresetError("--tenant applies to --provider \(tenanted) only.")
        }
        if let issuer {
            if host != nil || tenant != nil {
                throw PresetError("Give --issuer or --host/--tenant, not both: --issuer names the issuer exactly.")
            }
            return issuer
        }
        if provider.needsIssuer {
            throw PresetError("--provider \(provider.rawValue) needs --issuer" + provider.issuerAdvice)
        }
        guard let home = host ?? provider.defaultHost else {
            throw PresetError(
                "--provider \(provider.rawValue) needs --host, the instance's host name (for example --host \(provider.hostExample ?? "host.example.com"))."
            )
        }
        var base = try baseURL(home)
        if let issuerWithTenant = provider.issuerWithTenant { base = try issuerWithTenant(base, tenant) }
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
}

/// A preset's problem with the options given: a usage error.
public struct PresetError: Error, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
