@testable import TokenctlCore

// The one fixture that needs the core's internals (TokenResponse's memberwise initializer);
// the other doubles and fixtures are in TokenctlTestSupport.

extension TokenResponse {
    static func fixture(
        accessToken: String = "access-1", expiresIn: Double? = 3600, refreshToken: String? = "refresh-1",
        idToken: String? = nil, scope: String? = nil
    ) -> TokenResponse {
        TokenResponse(
            accessToken: accessToken, tokenType: "Bearer", expiresIn: expiresIn, refreshToken: refreshToken,
            idToken: idToken, scope: scope)
    }
}
