import Foundation
import Testing
import TokenctlTestSupport

/// How messages read where a user sees them.
@Suite("End to end: message wording")
struct MessageWordingTests {
    @Test("a refresh that gets an already expired access token says 'expired N s ago', never 'valid for expired …'")
    func expiredAccessToken() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["access_ttl": 0])
        try sandbox.login(server)
        let refresh = try sandbox.tokenctl("refresh")
        #expect(refresh.status == 0, "\(refresh)")
        #expect(!refresh.stderr.contains("valid for expired"), "\(refresh)")
        #expect(
            refresh.stderr.range(
                of: #"Refreshed profile 'default'; access token expired [0-9]+ s ago\.\n"#, options: .regularExpression)
                != nil, "\(refresh)")
        let verbose = try sandbox.tokenctl("--verbose", "refresh", "--if-expiring-within", "60")
        #expect(!verbose.stderr.contains("valid for expired"), "\(verbose)")
    }
}
