import Foundation
import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

/// A refresh token whose lifetime the server states (GitHub App user tokens'
/// `refresh_token_expires_in`, docs.github.com "GitHub App user tokens expire and rotate"): the
/// end is stored with the session, and past it a refresh says re-login is needed without
/// sending a request that can only be refused.
@Suite("A refresh token's stated lifetime (GitHub's refresh_token_expires_in)")
struct RefreshTokenLifetimeTests {
    let clock = VirtualClock()
    let memory = InMemorySessionStore()
    let profile = ResolvedProfile(
        name: ProfileName(rawValue: "gh")!,
        configuration: ProfileConfiguration(issuer: try! EndpointURL("https://github.com"), clientID: "Iv1.abc"),
        tokenEndpoint: "https://github.com/login/oauth/access_token")

    func broker(_ http: FakeHTTPClient) -> TokenBroker {
        let clock = self.clock
        let policy = RetryPolicy(initialDelay: 0.5, maximumDelay: 8, timeout: 30, attemptTimeout: 15, random: { 0.5 })
        return TokenBroker(store: memory, locks: NoProfileLocks(), clock: clock.clock) { _ in
            TokenEndpointClient(http: http, clock: clock.clock, retry: policy)
        }
    }

    @Test(
        "refresh_token_expires_in (a number or a numeric string) sets when the refresh token dies; a kept one keeps its end"
    )
    func storedFromTheAnswer() throws {
        for lifetime in [#"15897600"#, #""15897600""#] {
            let body =
                #"{"access_token":"ghu_a","token_type":"bearer","expires_in":28800,"refresh_token":"ghr_a","refresh_token_expires_in":\#(lifetime)}"#
            let response = try TokenResponse.parse(Array(body.utf8))
            #expect(response.refreshTokenExpiresIn == 15_897_600)
            let set = TokenSet(response: response, receivedAt: 1_700_000_000, serverDate: nil, previous: nil)
            let end: Double = 1_700_000_000 + 15_897_600
            #expect(set.refreshTokenExpiresAt == end)
            // Stored and read back (both readers).
            let bytes = try set.encoded()
            #expect(try TokenSet.decode(bytes).refreshTokenExpiresAt == set.refreshTokenExpiresAt)
            #expect(
                try JSONDecoder().decode(TokenSet.self, from: Data(bytes)).refreshTokenExpiresAt
                    == set.refreshTokenExpiresAt)
            // A later answer without a refresh token keeps the stored one and its end.
            let kept = TokenSet(
                response: TokenResponse.fixture(accessToken: "ghu_b", refreshToken: nil), receivedAt: 1_700_001_000,
                serverDate: nil, previous: set)
            #expect(kept.refreshToken == "ghr_a" && kept.refreshTokenExpiresAt == set.refreshTokenExpiresAt)
            // A new refresh token without a stated lifetime has no stated end.
            let rotated = TokenSet(
                response: TokenResponse.fixture(accessToken: "ghu_c", refreshToken: "ghr_c"), receivedAt: 1_700_002_000,
                serverDate: nil, previous: set)
            #expect(rotated.refreshTokenExpiresAt == nil)
        }
    }

    @Test("an entry stored before the field existed still decodes, with no stated end")
    func oldEntriesDecode() throws {
        let old = Array(
            #"{"access_token":"a","token_type":"Bearer","refresh_token":"r","obtained_at":1700000000}"#.utf8)
        #expect(try TokenSet.decode(old).refreshTokenExpiresAt == nil)
        #expect(try JSONDecoder().decode(TokenSet.self, from: Data(old)).refreshTokenExpiresAt == nil)
    }

    @Test("past the stated end: 77 're-login needed' with the login hint, no request sent, the session kept")
    func pastTheEndSendsNothing() async throws {
        let http = FakeHTTPClient { _, _ in .success(.json(200, #"{"access_token":"ghu_new","token_type":"bearer"}"#)) }
        var stored = TokenSet.fixture(
            accessToken: "ghu_old", refreshToken: "ghr_old", obtainedAt: clock.now - 30000, expiresIn: 28800)
        stored.refreshTokenExpiresAt = clock.now - 1
        try memory.write(stored, for: profile.identity)
        do {
            _ = try await broker(http).validTokenSet(for: profile, minimumTimeToLive: 60)
            Issue.record("expected a failure")
        } catch {
            #expect(error.exitStatus == .loginRequired)
            #expect(error.message.contains("re-login needed"), "\(error.message)")
            #expect(
                error.hint?.rendered.contains("'tokenctl --profile gh login'") == true, "\(error.hint?.rendered ?? "")")
            let hint = error.hint?.rendered ?? ""
            #expect(Hint.problems(in: hint).isEmpty)
        }
        #expect(http.requestCount == 0)
        #expect(try memory.read(profile.identity) == stored)
        // Before the end, the refresh goes out as usual.
        stored.refreshTokenExpiresAt = clock.now + 3600
        try memory.write(stored, for: profile.identity)
        #expect(try await broker(http).validTokenSet(for: profile, minimumTimeToLive: 60).accessToken == "ghu_new")
        #expect(http.requestCount == 1)
    }
}
