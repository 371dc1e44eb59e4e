import TokenctlEssentials

/// An identity provider tokenctl knows by name (`login --provider NAME`, `provider = NAME` in
/// the profile), and everything it needs beyond the standards, from its documentation: its
/// hosts, the options a login needs, its preset (endpoints, scopes, issuer rule, revocation:
/// `ProviderPreset`), its error rows (`ProviderErrorClasses`), its device-flow words, what
/// stays valid when logout cannot revoke, and its help text.
///
/// Each provider is one file in this folder (`GitHub.swift`, `Google.swift`, …) that defines its
/// value as a static member; `all` lists them. A new provider is a new file and a line in `all`
/// (and its name in `ProfileFileSyntax.providerNames`, the static front's copy).
public struct Provider: Sendable, Hashable, RawRepresentable, CaseIterable {
    /// Every provider tokenctl knows, in the order help and messages list them.
    public static let all: [Provider] = [
        .github, .githubApp, .google, .entra, .gitlab, .keycloak, .okta, .auth0, .gitea, .forgejo,
    ]

    /// The name of `--provider` and of the profile's `provider` key.
    public let rawValue: String
    /// The name people know it by, for messages.
    public let displayName: String
    /// The provider's one public home, which makes `--host` optional; nil: none.
    public let defaultHost: String?
    /// Whether the issuer is the user's own (a realm, an org, a tenant domain): `--issuer` is required.
    public let needsIssuer: Bool
    /// What the messages about `--issuer` and `--host` end with: where the issuer is, or just
    /// the full stop.
    let issuerAdvice: String
    /// Whether `--host` names the instance (GitHub Enterprise Server, self-managed GitLab, Gitea,
    /// Forgejo, Entra's national clouds).
    public let takesHost: Bool
    /// The example host a message names when `--host` is missing.
    let hostExample: String?
    /// The issuer at the host's base URL (`https://HOST`) with `--tenant` (nil: not given) in
    /// it; nil: the provider has no tenants, the base URL is the issuer.
    let issuerWithTenant: (@Sendable (_ base: String, _ tenant: String?) throws(PresetError) -> String)?
    /// Whether the provider offers the device flow at all.
    public let offersDeviceFlow: Bool
    /// Whether the provider refuses a client without its secret.
    public let requiresClientSecret: Bool
    /// Whether the authorization code exchange needs the client's secret although the device
    /// flow does not.
    public let codeExchangeNeedsSecret: Bool
    /// What the provider changes in a preset made with tokenctl's defaults for `preset.issuer`.
    let configurePreset: @Sendable (_ preset: inout ProviderPreset) -> Void
    /// The provider's own error answers, as rows of `ProviderErrorClasses`.
    let errorRows: ProviderErrorRows
    /// The provider's words in the device flow (RFC 8628) that the RFC does not have.
    let deviceFlowWords: DeviceFlowWords
    /// What stays valid at the server when logout could not revoke the session with
    /// `revocation` there, and where to end it by hand; nil where revocation is possible.
    let unrevoked: @Sendable (_ revocation: ProviderRevocation, _ issuer: EndpointURL, _ hasSecret: Bool) -> String?
    /// What to register at the provider and how to sign in, for `tokenctl help providers`
    /// (which indents each line by four spaces).
    public let registrationHelp: String

    init(
        _ name: String, displayName: String, defaultHost: String? = nil, needsIssuer: Bool = false,
        issuerAdvice: String = ".", takesHost: Bool = false, hostExample: String? = nil,
        issuerWithTenant: (@Sendable (_ base: String, _ tenant: String?) throws(PresetError) -> String)? = nil,
        offersDeviceFlow: Bool = true, requiresClientSecret: Bool = false, codeExchangeNeedsSecret: Bool = false,
        configurePreset: @escaping @Sendable (_ preset: inout ProviderPreset) -> Void = { _ in },
        errorRows: ProviderErrorRows = ProviderErrorRows(), deviceFlowWords: DeviceFlowWords = DeviceFlowWords(),
        unrevoked: @escaping @Sendable (ProviderRevocation, EndpointURL, Bool) -> String? = { _, _, _ in nil },
        registrationHelp: String
    ) {
        rawValue = name
        self.displayName = displayName
        self.defaultHost = defaultHost
        self.needsIssuer = needsIssuer
        self.issuerAdvice = issuerAdvice
        self.takesHost = takesHost
        self.hostExample = hostExample
        self.issuerWithTenant = issuerWithTenant
        self.offersDeviceFlow = offersDeviceFlow
        self.requiresClientSecret = requiresClientSecret
        self.codeExchangeNeedsSecret = codeExchangeNeedsSecret
        self.configurePreset = configurePreset
        self.errorRows = errorRows
        self.deviceFlowWords = deviceFlowWords
        self.unrevoked = unrevoked
        self.registrationHelp = registrationHelp
    }

    /// The provider named `rawValue` exactly.
    public init?(rawValue: String) {
        guard let known = Self.all.first(where: { $0.rawValue == rawValue }) else { return nil }
        self = known
    }

    public static var allCases: [Provider] { all }

    /// Whether `--tenant` applies.
    public var takesTenant: Bool { issuerWithTenant != nil }

    /// The closest known name, for "did you mean".
    public static func named(_ text: String) -> Provider? { Provider(rawValue: text.lowercased()) }

    public static var names: [String] { all.map(\.rawValue) }

    // A provider is its name.
    public static func == (a: Provider, b: Provider) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}

extension Provider: CustomStringConvertible {
    public var description: String { rawValue }
}

/// A provider's error answers, read whichever server sent them (a profile names no provider):
/// `ProviderErrorClasses` gathers every provider's rows into its tables.
struct ProviderErrorRows: Sendable {
    /// Rows by the provider's own code (Entra's `AADSTSnnnn`), found by `providerCode`.
    var byProviderCode: [String: ProviderErrorClasses.Row] = [:]
    /// The provider's own code in an error answer: its `error_codes` member and its `error_description`.
    var providerCode: (@Sendable (_ errorCodes: JSONValue?, _ description: String?) -> String?)? = nil
    /// Rows by the answer's `error` code.
    var byCode: [String: ProviderErrorClasses.Row] = [:]
    /// `invalid_grant` rows by the exact `error_description`.
    var byInvalidGrantText: [String: ProviderErrorClasses.Row] = [:]
    /// Provider codes that refuse what a narrowed refresh asked for, not the grant, with the hint.
    var targetRefusals: [String: Suggestion] = [:]
}

/// A provider's words in the device flow (RFC 8628) beyond the RFC's, read whichever server
/// sends them, but where they say so, only for the provider's own preset.
struct DeviceFlowWords: Sendable {
    /// Member names of the verification URI besides RFC 8628 §3.2's `verification_uri`.
    var verificationURIAliases: [String] = []
    /// Poll `error` codes besides §3.5's `access_denied` that say the user declined.
    var declinedCodes: Set<String> = []
    /// Poll `error` codes that say the codes expired once they have (besides §3.5's `expired_token`).
    var expiredCodes: Set<String> = []
    /// `error` codes that say the device flow is switched off for this client.
    var switchedOffCodes: Set<String> = []
    /// Whether `unauthorized_client` from this provider's preset says the device flow is switched off.
    var unauthorizedClientMeansSwitchedOff = false
    /// What to do when the device flow is switched off for the client.
    var switchedOnAdvice: String? = nil
}

extension Provider {
    /// The verification URI's member names besides `verification_uri`, of every provider.
    static let verificationURIAliases: [String] = all.flatMap(\.deviceFlowWords.verificationURIAliases)
    /// Poll codes that say the user declined, of every provider.
    static let deviceFlowDeclinedCodes: Set<String> = Set(all.flatMap(\.deviceFlowWords.declinedCodes))
    /// Poll codes that say the codes expired once they have, of every provider.
    static let deviceFlowExpiredCodes: Set<String> = Set(all.flatMap(\.deviceFlowWords.expiredCodes))
    /// Codes that say the device flow is switched off for the client, of every provider.
    static let deviceFlowSwitchedOffCodes: Set<String> = Set(all.flatMap(\.deviceFlowWords.switchedOffCodes))

    /// What to do about a device flow switched off for the client, in the words of the provider
    /// whose `code` it is, or of `provider` (the preset) when it says so with `unauthorized_client`.
    static func deviceFlowSwitchedOnAdvice(code: String, provider: Provider?) -> String? {
        if let owner = all.first(where: { $0.deviceFlowWords.switchedOffCodes.contains(code) }) {
            return owner.deviceFlowWords.switchedOnAdvice
        }
        guard let provider, provider.deviceFlowWords.unauthorizedClientMeansSwitchedOff else { return nil }
        return provider.deviceFlowWords.switchedOnAdvice
    }
}
