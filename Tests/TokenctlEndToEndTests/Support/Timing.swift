import Foundation
import TokenctlTestSupport

/// Wall-clock helpers for end-to-end tests (no timing thresholds: only ordering and waits).
func now() -> Double { Date().timeIntervalSince1970 }

func sleep(seconds: Double) { Thread.sleep(forTimeInterval: seconds) }

extension Sandbox {
    /// Log in with access tokens that are already stale by the time this returns, then make the
    /// server issue `nextLifetime`-second tokens.
    @discardableResult
    func loginWithExpiredAccessToken(
        _ server: AuthServer, profile: String = "default", clientID: String = "cli", nextLifetime: Int = 3600
    ) throws -> String {
        try server.configure(["access_ttl": 1])
        let refreshToken = try login(server, profile: profile, clientID: clientID)
        try server.configure(["access_ttl": nextLifetime])
        sleep(seconds: 1.05)
        return refreshToken
    }

    /// Replace the stored item behind tokenctl's back (a writer that ignores the profile lock).
    func overwriteStoredTokenSet(_ json: String, profile: String = "default", issuer: String, clientID: String = "cli")
        throws
    {
        let result = try runProgram(
            "/usr/bin/secret-tool",
            [
                "store", "--label=overwritten by test", "application", "tokenctl", "profile", profile, "issuer", issuer,
                "client_id", clientID, "kind", "session",
            ],
            environment: variables, stdin: json)
        guard result.status == 0 else { throw HarnessError("secret-tool store failed: \(result)") }
    }
}

extension AuthServer {
    /// Wait (at most 10 s) until `count` requests have arrived at /token — counted on arrival,
    /// so a slow answer can still be in flight.
    func waitForTokenRequests(_ count: Int) throws {
        let deadline = now() + 10
        while try (stats()["token_requests"] ?? 0) < count && now() < deadline { sleep(seconds: 0.02) }
    }

    /// /token requests that carried the refresh grant and were answered (not faults).
    func refreshGrants() throws -> [[String: Any]] {
        try tokenRequests().filter { ($0["grant_type"] as? String) == "refresh_token" }
    }
}
