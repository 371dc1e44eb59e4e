import Foundation
import Testing
import TokenctlTestSupport

/// Expiry decisions with the server's clock off from ours. The server issues JWT access tokens
/// without expires_in, so the only expiry is the token's `exp`, on the server's clock.
@Suite("End to end: clock skew")
struct ClockSkewTests {
    @Test(
        "server clock ahead or behind by 5 minutes: refresh timing follows the token's real lifetime",
        arguments: [300, -300])
    func plausibleSkew(offset: Int) throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "jwt_access_tokens": true, "omit_expires_in": true, "date_offset_seconds": offset, "access_ttl": 10,
        ])
        try sandbox.login(server)
        let afterLogin = try server.tokenRequests().count
        // Right after login the token has ~10 s left (margin 2 s): served without a refresh, with
        // room for a slow login. (A client reading `exp` on its own clock would refresh at once
        // with -300 s: any lifetime under the 5 minutes tells the two apart.)
        #expect(try sandbox.tokenctl("token").status == 0)
        #expect(try server.tokenRequests().count == afterLogin, "fresh token served from the keyring")
        // After its real lifetime it is refreshed (one reading `exp` naively would wait 5 more minutes with +300 s).
        sleep(seconds: 10.2)
        #expect(try sandbox.tokenctl("token").status == 0)
        #expect(try server.tokenRequests().count == afterLogin + 1, "expired token refreshed")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        let measured = try #require(stored["server_clock_offset"] as? Double)
        #expect(abs(measured - Double(offset)) < 3, "offset measured from the Date header: \(measured)")
    }

    @Test("an implausible skew (20 minutes) is not trusted: the token is treated as expiring and refreshed online")
    func implausibleSkew() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "jwt_access_tokens": true, "omit_expires_in": true, "date_offset_seconds": 1200, "access_ttl": 3600,
        ])
        try sandbox.login(server)
        let afterLogin = try server.tokenRequests().count
        #expect(try sandbox.tokenctl("token").status == 0)
        #expect(try server.tokenRequests().count == afterLogin + 1, "refreshed online despite a nominal hour left")
    }
}
