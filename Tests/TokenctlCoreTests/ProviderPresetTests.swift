import Testing
import TokenctlEssentials

@testable import TokenctlCore

@Suite("Provider presets and issuer rules")
struct ProviderPresetUnitTests {
    static func url(_ text: String) -> EndpointURL { try! EndpointURL(text) }

    @Test("GitHub: fixed paths on the host, no discovery, revocation at api.github.com or the GHES API")
    func gitHub() {
        let dotcom = ProviderPreset(.github, issuer: Self.url("https://github.com"))
        #expect(!dotcom.discovers)
        #expect(dotcom.fallbackEndpoints.token?.string == "https://github.com/login/oauth/access_token")
        #expect(dotcom.fallbackEndpoints.deviceAuthorization?.string == "https://github.com/login/device/code")
        #expect(dotcom.fallbackEndpoints.authorization?.string == "https://github.com/login/oauth/authorize")
        #expect(dotcom.revocation == .gitHubApplicationToken(api: "https://api.github.com"))
        let enterprise = ProviderPreset(.githubApp, issuer: Self.url("https://ghe.example.com"))
        #expect(enterprise.revocation == .gitHubApplicationToken(api: "https://ghe.example.com/api/v3"))
        #expect(enterprise.defaultScope == nil)
        let request = ProviderRevocation.gitHubRequest(
            api: "https://api.github.com", clientID: "Iv1.abc", secret: "s", accessToken: "ghu_x")
        #expect(request.method == .delete && request.url == "https://api.github.com/applications/Iv1.abc/token")
        #expect(request.body.map { String(decoding: $0, as: UTF8.self) } == #"{"access_token":"ghu_x"}"#)
        #expect(request.headers.contains { $0.name == "Authorization" && $0.value == "Basic SXYxLmFiYzpz" })
    }

    @Test(
        "Google: access_type=offline and prompt=consent, never offline_access, the device endpoint when discovery has none"
    )
    func google() {
        let preset = ProviderPreset(.google, issuer: Self.url("https://accounts.google.com"))
        #expect(preset.authorizationParameters.map { "\($0.0)=\($0.1)" } == ["access_type=offline", "prompt=consent"])
        #expect(preset.defaultScope == "openid email profile" && preset.refusedScopes["offline_access"] != nil)
        #expect(preset.fallbackEndpoints.deviceAuthorization?.string == "https://oauth2.googleapis.com/device/code")
        #expect(preset.revocation == .standardTreatingInvalidTokenAsGone)
        #expect(Provider.google.requiresClientSecret)
    }

    @Test("Entra: offline_access by default, no revocation, the end-session endpoint of the tenant")
    func entra() {
        let preset = ProviderPreset(.entra, issuer: Self.url("https://login.microsoftonline.com/common/v2.0"))
        #expect(preset.defaultScope == "openid profile offline_access")
        #expect(preset.issuerRule == .entraTenantTemplate(segment: "common"))
        #expect(preset.revocation == .none(endSession: "https://login.microsoftonline.com/common/oauth2/v2.0/logout"))
        let single = ProviderPreset(
            .entra, issuer: Self.url("https://login.microsoftonline.com/\(EntraTenant.consumersID)/v2.0"))
        #expect(single.issuerRule == .exact)
    }

    static let tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"

    @Test("Entra multi-tenant: the {tenantid} template in discovery, the ID token's iss with its own tid; nothing else")
    func entraTemplate() {
        let configured = Self.url("https://login.microsoftonline.com/organizations/v2.0")
        let rule = IssuerRule.entraTenantTemplate(segment: "organizations")
        #expect(
            rule.acceptsDiscoveryIssuer("https://login.microsoftonline.com/{tenantid}/v2.0", configured: configured))
        #expect(
            !IssuerRule.exact.acceptsDiscoveryIssuer(
                "https://login.microsoftonline.com/{tenantid}/v2.0", configured: configured))
        #expect(!rule.acceptsDiscoveryIssuer("https://evil.example/{tenantid}/v2.0", configured: configured))
        let iss = "https://login.microsoftonline.com/\(Self.tenant)/v2.0"
        #expect(rule.acceptsTokenIssuer(iss, claims: ["tid": .string(Self.tenant)], configured: configured.string))
        // tid missing, not a GUID, another tenant than the iss names, the template itself
        #expect(!rule.acceptsTokenIssuer(iss, claims: [:], configured: configured.string))
        #expect(!rule.acceptsTokenIssuer(iss, claims: ["tid": .string("common")], configured: configured.string))
        #expect(
            !rule.acceptsTokenIssuer(
                iss, claims: ["tid": .string("00000000-0000-0000-0000-000000000000")], configured: configured.string))
        #expect(
            !rule.acceptsTokenIssuer(
                "https://login.microsoftonline.com/{tenantid}/v2.0", claims: ["tid": .string("{tenantid}")],
                configured: configured.string))
        #expect(
            !IssuerRule.exact.acceptsTokenIssuer(
                iss, claims: ["tid": .string(Self.tenant)], configured: configured.string))
    }

    @Test("Google: iss without its scheme for Google's preset only")
    func schemeless() {
        #expect(
            IssuerRule.schemelessAlias.acceptsTokenIssuer(
                "accounts.google.com", claims: [:], configured: "https://accounts.google.com"))
        #expect(
            !IssuerRule.exact.acceptsTokenIssuer(
                "accounts.google.com", claims: [:], configured: "https://accounts.google.com"))
        #expect(
            !IssuerRule.schemelessAlias.acceptsTokenIssuer(
                "evil.example", claims: [:], configured: "https://accounts.google.com"))
    }

    @Test("a discovery mismatch with Entra's template says to use the preset")
    func mismatchHint() {
        #expect(
            ServerMetadata.mismatchHint(named: "https://login.microsoftonline.com/{tenantid}/v2.0").rendered.contains(
                "--provider entra"))
        #expect(
            ServerMetadata.mismatchHint(named: "https://other.example").rendered.hasSuffix(
                "--issuer https://other.example"))
    }

    @Test("every provider's profile key round-trips through the file")
    func profileKey() throws {
        for provider in Provider.allCases {
            var configuration = ProfileConfiguration(issuer: Self.url("https://a.example"), clientID: "c")
            configuration.provider = provider
            let text = configuration.serialized(profile: .default)
            #expect(try ProfileConfiguration.parse(text, path: "p").provider == provider)
        }
    }
    @Test("--provider's usage errors: each provider's words for the option to give")
    func issuerMessages() {
        func message(_ provider: Provider, host: String? = nil, tenant: String? = nil) -> String? {
            do {
                _ = try ProviderPreset.issuer(for: provider, host: host, tenant: tenant, issuer: nil)
                return nil
            } catch { return error.message }
        }
        #expect(
            message(.google, host: "a.example") == "--host does not apply to --provider google; Google has one home.")
        #expect(
            message(.keycloak, host: "a.example")
                == "--host does not apply to --provider keycloak (the realm's URL, e.g. https://sso.example.com/realms/NAME)."
        )
        #expect(
            message(.okta)
                == "--provider okta needs --issuer (https://ORG.okta.com/oauth2/default for the default authorization server)."
        )
        #expect(message(.auth0) == "--provider auth0 needs --issuer (https://TENANT.auth0.com/, with the slash).")
        #expect(message(.github, tenant: "common") == "--tenant applies to --provider entra only.")
        #expect(
            message(.gitea)
                == "--provider gitea needs --host, the instance's host name (for example --host gitea.example.com).")
        #expect(
            message(.forgejo)
                == "--provider forgejo needs --host, the instance's host name (for example --host codeberg.org).")
        #expect(
            message(.entra)
                == "--provider entra needs --tenant: your directory (tenant) ID, or common, organizations or consumers."
        )
        #expect(
            (try? ProviderPreset.issuer(for: .entra, host: nil, tenant: "Consumers", issuer: nil))?.string
                == "https://login.microsoftonline.com/\(EntraTenant.consumersID)/v2.0")
        #expect(
            (try? ProviderPreset.issuer(for: .githubApp, host: nil, tenant: nil, issuer: nil))?.string
                == "https://github.com")
        #expect(
            (try? ProviderPreset.issuer(for: .gitlab, host: "git.example.com", tenant: nil, issuer: nil))?.string
                == "https://git.example.com")
    }

    @Test("the providers' device-flow words: Entra's declined, Auth0's expired, GitHub's switched off, Google's URL")
    func deviceFlowWords() throws {
        #expect(
            DeviceFlow.pollCodes == [
                "authorization_pending", "slow_down", "access_denied", "authorization_declined", "expired_token",
                "device_flow_disabled", "unauthorized_client",
            ])
        #expect(Provider.deviceFlowExpiredCodes == ["invalid_grant"])
        #expect(DeviceFlow.saysDeviceFlowOff(code: "device_flow_disabled", description: nil, provider: nil))
        #expect(DeviceFlow.saysDeviceFlowOff(code: "unauthorized_client", description: nil, provider: .githubApp))
        #expect(!DeviceFlow.saysDeviceFlowOff(code: "unauthorized_client", description: nil, provider: .gitlab))
        let gitHubAdvice =
            "Or have the app's owner enable the device flow (GitHub: the app's settings, \"Enable Device Flow\")."
        #expect(Provider.deviceFlowSwitchedOnAdvice(code: "device_flow_disabled", provider: .keycloak) == gitHubAdvice)
        #expect(Provider.deviceFlowSwitchedOnAdvice(code: "unauthorized_client", provider: .github) == gitHubAdvice)
        #expect(Provider.deviceFlowSwitchedOnAdvice(code: "unauthorized_client", provider: .keycloak) == nil)
        let answer = try DeviceAuthorization.parse(
            [
                "device_code": .string("d"), "user_code": .string("ABCD-EFGH"),
                "verification_url": .string("https://www.google.com/device"),
            ], endpoint: "https://oauth2.googleapis.com/device/code")
        #expect(answer.verificationURI == "https://www.google.com/device")
    }

    @Test("what stays valid when logout cannot revoke, in the provider's words")
    func unrevokedNotices() {
        let github = Self.url("https://github.com")
        #expect(
            ProviderRevocation.gitHubApplicationToken(api: "https://api.github.com").unrevokedNotice(
                .github, issuer: github, hasSecret: false)
                == "GitHub revokes a token only for the app itself (with its client secret, which this profile does not have): the token stays valid at GitHub (a GitHub OAuth App token never expires on its own); revoke it at https://github.com/settings/applications."
        )
        #expect(
            ProviderRevocation.gitHubApplicationToken(api: "https://ghe.example.com/api/v3").unrevokedNotice(
                .githubApp, issuer: Self.url("https://ghe.example.com/"), hasSecret: false)
                == "GitHub revokes a token only for the app itself (with its client secret, which this profile does not have): the token stays valid at GitHub (a GitHub App token expires within 8 hours); revoke it at https://ghe.example.com/settings/applications."
        )
        #expect(
            ProviderRevocation.gitHubApplicationToken(api: "https://api.github.com").unrevokedNotice(
                .github, issuer: github, hasSecret: true) == nil)
        #expect(
            ProviderRevocation.none(endSession: "https://login.microsoftonline.com/common/oauth2/v2.0/logout")
                .unrevokedNotice(
                    .entra, issuer: Self.url("https://login.microsoftonline.com/common/v2.0"), hasSecret: false)
                == "Microsoft Entra ID has no revocation endpoint: the refresh token stays valid at the server until it expires or an administrator revokes your sessions. To end the browser session, open https://login.microsoftonline.com/common/oauth2/v2.0/logout"
        )
        #expect(
            ProviderRevocation.standardTreatingInvalidTokenAsGone.unrevokedNotice(
                .google, issuer: Self.url("https://accounts.google.com"), hasSecret: false) == nil)
    }
}
