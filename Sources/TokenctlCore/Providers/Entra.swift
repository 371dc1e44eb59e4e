import TokenctlEssentials

// Microsoft Entra ID (https://learn.microsoft.com/en-us/entra/identity-platform/): an issuer per
// tenant (`https://login.microsoftonline.com/{tenant}/v2.0`), multi-tenant issuers that are
// templates, AADSTS codes in its error answers, and no revocation endpoint.

extension Provider {
    public static let entra = Provider(
        "entra", displayName: "Microsoft Entra ID", defaultHost: "login.microsoftonline.com", takesHost: true,
        issuerWithTenant: { base, tenant throws(PresetError) in
            guard let tenant else {
                throw PresetError(
                    "--provider entra needs --tenant: your directory (tenant) ID, or common, organizations or consumers."
                )
            }
            return base + "/" + (try EntraTenant.pathSegment(tenant)) + "/v2.0"
        },
        configurePreset: { preset in
            preset.defaultScope = "openid profile offline_access"
            if let tenant = EntraTenant.multiTenantSegment(of: preset.issuer) {
                preset.issuerRule = .entraTenantTemplate(segment: tenant)
            }
            preset.revocation = .none(endSession: EntraTenant.endSessionEndpoint(of: preset.issuer))
        },
        errorRows: ProviderErrorRows(
            byProviderCode: Entra.rows, providerCode: Entra.code, targetRefusals: Entra.targetRefusals),
        // The device flow's poll answers authorization_declined where RFC 8628 says access_denied.
        deviceFlowWords: DeviceFlowWords(declinedCodes: ["authorization_declined"]),
        unrevoked: { revocation, _, _ in
            guard case .none(let endSession) = revocation else { return nil }
            return
                "Microsoft Entra ID has no revocation endpoint: the refresh token stays valid at the server until it expires or an administrator revokes your sessions."
                + (endSession.map { " To end the browser session, open \($0)" } ?? "")
        },
        registrationHelp: """
            Entra admin center > App registrations > New registration; Authentication > Add a
            platform > "Mobile and desktop applications", redirect URI http://127.0.0.1/callback
            (add it in the manifest if the portal refuses it); "Allow public client flows" on
            for --device. --tenant ID, or common, organizations or consumers. Scopes: openid
            profile offline_access (add your API's). No revocation: logout ends the local session.
            """)
}

/// Entra ID's error answers.
enum Entra {
    typealias Row = ProviderErrorClasses.Row

    static let signIn = Row(.signInAgain, "Entra")
    static let interaction = Row(
        .interactionNeeded, "Entra",
        hint:
            "Entra needs the user for this sign-in (multi-factor authentication or consent), which a refresh cannot give."
    )
    static let transient = Row(.transient(minimumBackoff: nil), "Entra")

    /// Entra ID's AADSTS codes (https://learn.microsoft.com/en-us/entra/identity-platform/reference-error-codes).
    static let rows: [String: Row] = [
        // Sign in again: the refresh token is dead.
        "AADSTS50173": signIn, // FreshTokenNeeded: revoked, or the password changed
        "AADSTS700082": Row(
            .signInAgain, "Entra",
            hint:
                "The refresh token expired from inactivity (90 days, or sooner under a Conditional Access policy): refresh it on a schedule to keep it alive."
        ),
        "AADSTS70008": signIn, // the grant expired or was revoked
        "AADSTS700084": Row(
            .signInAgain, "Entra",
            hint:
                "The refresh token was issued to a single-page-app redirect and lives 24 hours at most: register the redirect URI as \"Mobile and desktop applications\" for a command-line client."
        ),
        "AADSTS70043": signIn, // a sign-in-frequency Conditional Access check
        "AADSTS50132": signIn, // session invalid after a password change
        "AADSTS50133": signIn,
        "AADSTS54005": signIn, // the authorization code was already redeemed
        "AADSTS50089": signIn, // the flow token expired
        "AADSTS70000": signIn, // invalid grant
        // Interaction needed: multi-factor authentication, enrolment, consent, no session.
        "AADSTS50076": interaction,
        "AADSTS50079": interaction,
        "AADSTS50078": interaction,
        "AADSTS65001": interaction,
        "AADSTS50058": interaction,
        "AADSTS53003": Row(
            .blockedByPolicy, "Entra",
            hint:
                "Entra's Conditional Access blocked this sign-in (AADSTS53003): signing in again will not help until the policy allows this device, network or app; the tenant's administrator can tell which policy applies."
        ),
        // Configuration: the app registration or the profile must change.
        "AADSTS7000218": Row(
            .configuration, "Entra",
            hint:
                "Entra expects a client secret from this client (AADSTS7000218): in the app registration, enable public client flows (\"Allow public client flows\") and register the redirect URI as \"Mobile and desktop applications\", not \"Web\"; a confidential client gives its secret with \(options: .login([.clientSecretStdin]))."
        ),
        "AADSTS700025": Row(
            .configuration, "Entra",
            hint:
                "A public client must not send a secret (AADSTS700025): log in again without \(options: .login([.clientSecretStdin])).",
            followUp: .forgetSecret),
        "AADSTS7000215": Row(
            .configuration, "Entra",
            hint:
                "Entra refused the client secret (AADSTS7000215): give the secret's value, not its ID, and check that it has not expired.",
            followUp: .newSecret),
        "AADSTS50011": Row(
            .configuration, "Entra",
            hint:
                "The redirect URI is not registered for this app (AADSTS50011): register http://127.0.0.1 (any port) under \"Mobile and desktop applications\" in the app registration's manifest."
        ),
        "AADSTS70004": Row(
            .configuration, "Entra",
            hint: "The redirect URI is not valid for this app (AADSTS70004): register it exactly as tokenctl sends it."),
        "AADSTS700016": Row(
            .configuration, "Entra",
            hint:
                "No app with this client id is registered in this tenant (AADSTS700016): check \(options: .login([.clientID(.omitted)])) and the tenant in the issuer URL."
        ),
        "AADSTS50194": Row(
            .configuration, "Entra",
            hint:
                "A single-tenant app cannot sign in at /common or /organizations (AADSTS50194): use the tenant's own issuer (https://login.microsoftonline.com/TENANT-ID/v2.0), or make the app multi-tenant."
        ),
        "AADSTS70011": Row(
            .configuration, "Entra",
            hint:
                "Entra refused the scope (AADSTS70011): check \(options: .login([.scope(.omitted)])) (for example \"openid offline_access https://graph.microsoft.com/.default\")."
        ),
        "AADSTS9002313": Row(
            .configuration, "Entra",
            hint: "Entra found the request malformed (AADSTS9002313): check the profile's endpoints and options."),
        // Transient: retried with backoff; the session is kept.
        "AADSTS50033": transient, // a retry of a failed connection
        "AADSTS90006": transient,
        "AADSTS90024": transient, // RequestBudgetExceeded
        "AADSTS90055": transient, // throttled
        "AADSTS50196": Row(
            .transient(minimumBackoff: 60), "Entra",
            hint:
                "Entra saw the same request too often (AADSTS50196, loop detection): wait at least a minute before trying again."
        ),
    ]

    /// Codes that refuse what a narrowed refresh asked for, not the grant
    /// (`ProviderErrorClasses.targetRefusals`): AADSTS65001, no consent for that scope or resource
    /// (https://learn.microsoft.com/en-us/entra/identity-platform/reference-error-codes).
    static let targetRefusals: [String: Suggestion] = [
        "AADSTS65001":
            "Entra has no consent for that scope or resource (AADSTS65001): the user, or the tenant's administrator, must grant it to the app first (in the app registration's API permissions, or by signing in asking for it)."
    ]

    /// Entra's code in an error answer: the first of `error_codes` the table knows (else the
    /// first), or the `AADSTSnnnn:` that starts `error_description`.
    @Sendable static func code(errorCodes: JSONValue?, description: String?) -> String? {
        var listed: [String] = []
        if case .array(let values)? = errorCodes {
            for value in values.prefix(16) {
                let number: Double? =
                    switch value {
                    case .number(let number): number
                    case .string(let text): Double(text)
                    default: nil
                    }
                if let number, number.isFinite, number >= 0, number < 1e9, number == number.rounded() {
                    listed.append("AADSTS\(Int(number))")
                }
            }
        }
        if let known = listed.first(where: { rows[$0] != nil }) { return known }
        if let first = listed.first { return first }
        guard let description else { return nil }
        let text = description.drop(while: { $0 == " " })
        guard text.hasPrefix("AADSTS") else { return nil }
        let digits = text.dropFirst(6).prefix(while: { $0.isASCII && $0.isNumber })
        guard !digits.isEmpty, digits.count <= 9, text.dropFirst(6 + digits.count).first == ":" else { return nil }
        return "AADSTS" + digits
    }
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

    /// What stands for the tenant in the multi-tenant issuers' discovery documents.
    static let placeholder = "{tenantid}"

    /// `…/common/v2.0` as `…/{tenantid}/v2.0`.
    static func template(_ issuer: String, segment: String) -> String {
        issuer.replacing("/\(segment)/", with: "/\(placeholder)/")
    }

    /// Whether an ID token's `iss` is the multi-tenant issuer's template with the token's own
    /// `tid` claim (a GUID) put in.
    static func acceptsTokenIssuer(_ iss: String, claims: [String: JSONValue], configured: String, segment: String)
        -> Bool
    {
        // The tenant the token names must be a GUID: never a template or another path.
        guard let tenant = claims["tid"]?.stringValue, isGUID(tenant.lowercased()) else { return false }
        let expected = template(configured, segment: segment).replacing(placeholder, with: tenant)
        return EndpointURL.sameIssuer(iss, expected)
    }

    /// What the message says an ID token's issuer should have been.
    static func describeExpected(_ configured: String, segment: String) -> String {
        "'\(template(configured, segment: segment))' with the token's tenant (tid, a GUID) in it"
    }

    /// What to do when discovery names the multi-tenant template as its issuer (a login
    /// without the preset); nil for any other issuer.
    static func discoveryMismatchHint(named: String) -> Suggestion? {
        guard named.contains(placeholder) else { return nil }
        return
            "This is Microsoft Entra ID's multi-tenant issuer, a template: sign in with the preset, e.g. \(tokenctl: .default, .login([.provider(.word(Provider.entra.rawValue)), .tenant(.word("common")), .clientID(.placeholder)]))"
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
