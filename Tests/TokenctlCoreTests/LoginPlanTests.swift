import Testing
import TokenctlEssentials

@testable import TokenctlCore

@Suite("LoginPlan: the options, completed from the saved profile")
struct LoginPlanTests {
    static let work = ProfileName(rawValue: "work")!

    static func request(_ method: LoginMethod, issuer: String = "https://issuer.example") throws
        -> TokenctlService.LoginRequest
    {
        TokenctlService.LoginRequest(
            profile: work, issuer: try EndpointURL(issuer), clientID: "cli", scope: nil, method: method)
    }

    static func saved() throws -> ProfileConfiguration {
        var configuration = ProfileConfiguration(
            issuer: try EndpointURL("https://issuer.example"), clientID: "cli", scope: "openid saved",
            tokenEndpoint: try EndpointURL("https://issuer.example/token"), caBundle: "/etc/ca.pem")
        configuration.audience = "api"
        configuration.resources = ["https://api.example"]
        configuration.dpop = true
        configuration.dpopAllowBearer = true
        return configuration
    }

    @Test("at the same issuer the saved scope, audience, resources, CA bundle, DPoP and endpoints apply")
    func sameIssuer() throws {
        let plan = try LoginPlan(try Self.request(.device), previous: try Self.saved())
        #expect(plan.request.scope == "openid saved")
        #expect(plan.request.audience == "api")
        #expect(plan.request.resources == ["https://api.example"])
        #expect(plan.request.caBundle == "/etc/ca.pem")
        #expect(plan.dpop && plan.allowBearer)
        #expect(plan.saved.token?.string == "https://issuer.example/token")
        #expect(plan.extraParameters.map { "\($0.0)=\($0.1)" } == ["audience=api", "resource=https://api.example"])
    }

    @Test("the import takes no saved scope; another issuer takes nothing saved")
    func importAndOtherIssuer() throws {
        let imported = try LoginPlan(try Self.request(.refreshToken("rt")), previous: try Self.saved())
        #expect(imported.request.scope == nil)
        #expect(imported.scope(supported: ["openid", "offline_access"]) == nil)
        #expect(imported.request.audience == "api")
        let elsewhere = try LoginPlan(
            try Self.request(.device, issuer: "https://other.example"), previous: try Self.saved())
        #expect(elsewhere.request.scope == nil && elsewhere.request.audience == nil)
        #expect(!elsewhere.dpop && !elsewhere.allowBearer && elsewhere.saved == ExplicitEndpoints())
        #expect(elsewhere.scope(supported: ["openid", "offline_access"]) == "openid offline_access")
    }
}
