import TokenctlEssentials

/// How the issuer a server or an ID token names is matched against the profile's (OIDC
/// Discovery §4.3, OIDC Core §3.1.3.7). Exact everywhere (a trailing slash aside, `EndpointURL.sameIssuer`) but where a
/// preset says otherwise, and only for that preset's profiles. Entra's template is read in
/// its file (`EntraTenant`).
public enum IssuerRule: Sendable, Equatable {
    case exact
    /// Entra's multi-tenant issuers (`…/common/v2.0`, `…/organizations/v2.0`): discovery names
    /// the template `…/{tenantid}/v2.0`; an ID token's `iss` is that template with its own
    /// `tid` claim (a GUID) put in.
    case entraTenantTemplate(segment: String)
    /// Google: an ID token's `iss` may be the issuer without its scheme (`accounts.google.com`).
    case schemelessAlias

    /// Whether a discovery document naming `named` belongs to `configured`.
    public func acceptsDiscoveryIssuer(_ named: String, configured: EndpointURL) -> Bool {
        if EndpointURL.sameIssuer(named, configured.string) { return true }
        guard case .entraTenantTemplate(let segment) = self else { return false }
        return EndpointURL.sameIssuer(named, EntraTenant.template(configured.string, segment: segment))
    }

    /// Whether an ID token whose claims are `claims` was issued by `configured`.
    public func acceptsTokenIssuer(_ iss: String, claims: [String: JSONValue], configured: String) -> Bool {
        if EndpointURL.sameIssuer(iss, configured) { return true }
        switch self {
        case .exact:
            return false
        case .schemelessAlias:
            guard let schemeEnd = configured.firstRange(of: "://") else { return false }
            return EndpointURL.sameIssuer(iss, String(configured[schemeEnd.upperBound...]))
        case .entraTenantTemplate(let segment):
            return EntraTenant.acceptsTokenIssuer(iss, claims: claims, configured: configured, segment: segment)
        }
    }

    /// What the message says when an ID token's issuer is refused.
    public func describeExpected(_ configured: String) -> String {
        switch self {
        case .exact: "'\(configured)'"
        case .schemelessAlias: "'\(configured)' (or the same without its scheme)"
        case .entraTenantTemplate(let segment): EntraTenant.describeExpected(configured, segment: segment)
        }
    }
}
