import Foundation
import Testing
import TokenctlTestSupport

/// Keycloak as it really behaves (keycloak.org/docs), through the built binary against the test
/// server's `keycloak` persona: "Revoke Refresh Token" on with Refresh Token Max Reuse 0, so a
/// reused refresh token kills the whole session, and its `invalid_grant` texts, each a sign-in
/// again (77) with a hint naming the likely cause.
@Suite("End to end: Keycloak persona", .serialized)
struct KeycloakPersonaTests {
    static func signedIn() throws -> (Sandbox, AuthServer, String) {
        let server = try AuthServer(["persona": "keycloak"])
        let sandbox = try Sandbox()
        _ = try sandbox.login(server)
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        return (sandbox, server, stored)
    }

    @Test("Keycloak: every refresh rotates, each refresh token is used once, two refreshes in a row keep the session")
    func rotationOnce() throws {
        let (sandbox, server, first) = try Self.signedIn()
        #expect(try sandbox.tokenctl("refresh").status == 0)
        let second = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        #expect(try sandbox.tokenctl("refresh").status == 0)
        let third = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        #expect(Set([first, second, third]).count == 3)
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test(
        "Keycloak reuse: Maximum allowed refresh token reuse exceeded, 77 with the hint, and the whole session is dead (keycloak.org/docs)"
    )
    func reuseKillsSession() throws {
        let (sandbox, server, stored) = try Self.signedIn()
        // Another tool refreshes with the same refresh token first (a copied session).
        let other = try runProgram(
            "/usr/bin/curl",
            [
                "-sS", "-X", "POST", server.url + "/token", "--data-urlencode", "grant_type=refresh_token",
                "--data-urlencode", "refresh_token@-", "--data-urlencode", "client_id=cli",
            ], stdin: stored)
        let fresh = try #require(
            (try JSONSerialization.jsonObject(with: Data(other.stdout.utf8)) as? [String: Any])?["refresh_token"]
                as? String)
        let result = try sandbox.tokenctl("refresh")
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("invalid_grant: Maximum allowed refresh token reuse exceeded"), "\(result)")
        #expect(result.stderr.contains("Revoke Refresh Token"), "\(result)")
        #expect(result.stderr.contains("Run 'tokenctl login' to sign in again."), "\(result)")
        #expect(!result.stderr.contains(stored), "no token in messages")
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
        #expect(try server.tokenStatus(fresh)["family_revoked"] as? Bool == true, "the fresh token died too")
        let status = try sandbox.tokenctl("status")
        #expect(status.status == 77 && status.stdout.contains("(invalid_grant)"), "\(status)")
    }

    @Test(
        "Keycloak session idle: 'Token is not active' on refresh of a session without offline_access is 77 with the SSO Session Idle hint, never retried (keycloak.org/docs)"
    )
    func tokenNotActive() throws {
        let server = try AuthServer(["persona": "keycloak"])
        let sandbox = try Sandbox()
        _ = try sandbox.login(server, scope: "openid")
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["scope"] as? String == "openid")
        try server.configure(["keycloak_errors": ["Token is not active"]])
        let before = try server.tokenRequests().count
        let result = try sandbox.tokenctl("refresh")
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("invalid_grant: Token is not active"), "\(result)")
        #expect(result.stderr.contains("SSO Session Idle"), "\(result)")
        #expect(try server.tokenRequests().count == before + 1, "not retried")
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
    }
}
