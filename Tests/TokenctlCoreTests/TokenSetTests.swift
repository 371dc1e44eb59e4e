import Testing
import TokenctlTestSupport

@testable import TokenctlCore

private let t0: Double = 1_700_000_000

@Suite("TokenSet freshness")
struct TokenSetFreshnessTests {
    @Test("margin is min(min-ttl, half the issued lifetime)")
    func refreshMargin() {
        let hour = TokenSet.fixture(obtainedAt: t0, expiresIn: 3600)
        #expect(hour.refreshMargin(minimumTimeToLive: 60) == 60)
        #expect(hour.refreshMargin(minimumTimeToLive: 7200) == 1800)
        #expect(hour.refreshMargin(minimumTimeToLive: 0) == 0)
        #expect(hour.refreshMargin(minimumTimeToLive: -10) == 0)
    }

    @Test("30-second tokens: a 60 s min-ttl is capped at 15 s, so not every call refreshes")
    func shortLivedTokens() {
        let set = TokenSet.fixture(obtainedAt: t0, expiresIn: 30)
        #expect(set.refreshMargin(minimumTimeToLive: 60) == 15)
        #expect(set.isFresh(at: t0, minimumTimeToLive: 60))
        #expect(set.isFresh(at: t0 + 14.9, minimumTimeToLive: 60))
        #expect(!set.isFresh(at: t0 + 15, minimumTimeToLive: 60))
        #expect(!set.isFresh(at: t0 + 31, minimumTimeToLive: 60))
    }

    @Test("an hour token is fresh until min-ttl before its expiry")
    func hourToken() {
        let set = TokenSet.fixture(obtainedAt: t0, expiresIn: 3600)
        #expect(set.isFresh(at: t0 + 3539, minimumTimeToLive: 60))
        #expect(!set.isFresh(at: t0 + 3540, minimumTimeToLive: 60))
        #expect(set.isFresh(at: t0 + 3599, minimumTimeToLive: 0))
        #expect(!set.isFresh(at: t0 + 3600, minimumTimeToLive: 0))
    }

    @Test("unknown lifetime: the assumed 300 s lifetime bounds both margin and expiry")
    func unknownLifetime() {
        let set = TokenSet(accessToken: "a", refreshToken: "r", expiresAt: nil, issuedLifetime: nil, obtainedAt: t0)
        #expect(TokenSet.assumedLifetime == 300)
        #expect(set.refreshMargin(minimumTimeToLive: 600) == 150)
        #expect(set.refreshMargin(minimumTimeToLive: 60) == 60)
        #expect(set.timeLeft(at: t0 + 100) == 200)
        #expect(set.isFresh(at: t0 + 239, minimumTimeToLive: 60))
        #expect(!set.isFresh(at: t0 + 240, minimumTimeToLive: 60))
    }

    @Test("known expiry with unknown lifetime uses the assumed lifetime for the margin only")
    func expiryWithoutLifetime() {
        let set = TokenSet(
            accessToken: "a", refreshToken: "r", expiresAt: t0 + 3600, issuedLifetime: nil, obtainedAt: t0)
        #expect(set.isFresh(at: t0 + 3449, minimumTimeToLive: 600))
        #expect(!set.isFresh(at: t0 + 3450, minimumTimeToLive: 600))
    }

    @Test("timeLeft goes negative once expired")
    func timeLeft() {
        let set = TokenSet.fixture(obtainedAt: t0, expiresIn: 60)
        #expect(set.timeLeft(at: t0 + 100) == -40)
        #expect(set.hasRefreshToken)
        #expect(!TokenSet.fixture(refreshToken: nil, obtainedAt: t0).hasRefreshToken)
    }

    @Test("the stored encoding round-trips and uses snake_case keys")
    func encoding() throws {
        let set = TokenSet(
            accessToken: "a", refreshToken: "r", idToken: "i", scope: "s", expiresAt: t0 + 60, issuedLifetime: 60,
            obtainedAt: t0, lastRefreshAt: t0, serverClockOffset: -3, subject: "alice")
        let encoded = try set.encoded()
        #expect(try TokenSet.decode(encoded) == set)
        let text = String(decoding: encoded, as: UTF8.self)
        #expect(text.contains(#""refresh_token":"r""#))
        #expect(text.contains(#""expires_at":"#))
        #expect(throws: (any Error).self) { try TokenSet.decode(bytes("not json")) }
    }
}

@Suite("TokenSet from a token response")
struct TokenSetFromResponseTests {
    let previous = TokenSet(
        accessToken: "old-access", refreshToken: "old-refresh", idToken: "old-id", scope: "openid",
        expiresAt: t0 - 10, issuedLifetime: 3600, obtainedAt: t0 - 3610, subject: "alice")

    @Test("keeps the old refresh token when the server returns none")
    func keepsRefreshToken() {
        let set = TokenSet(
            response: .fixture(accessToken: "new-access", refreshToken: nil), receivedAt: t0, serverDate: nil,
            previous: previous)
        #expect(set.accessToken == "new-access")
        #expect(set.refreshToken == "old-refresh")
        #expect(set.idToken == "old-id")
        #expect(set.scope == "openid")
        #expect(set.subject == "alice")
    }

    @Test("takes the rotated refresh token when one is returned")
    func takesNewRefreshToken() {
        let set = TokenSet(
            response: .fixture(accessToken: "new-access", refreshToken: "new-refresh", scope: "openid api"),
            receivedAt: t0, serverDate: nil, previous: previous)
        #expect(set.refreshToken == "new-refresh")
        #expect(set.scope == "openid api")
    }

    @Test("times: expiry from expires_in, obtained and refreshed now")
    func times() {
        let set = TokenSet(response: .fixture(expiresIn: 120), receivedAt: t0, serverDate: nil, previous: previous)
        #expect(set.expiresAt == t0 + 120)
        #expect(set.issuedLifetime == 120)
        #expect(set.obtainedAt == t0)
        #expect(set.lastRefreshAt == t0)
        #expect(set.serverClockOffset == nil)
    }

    @Test("after login (no previous set) there is no last refresh")
    func firstSet() {
        let set = TokenSet(response: .fixture(refreshToken: nil), receivedAt: t0, serverDate: nil, previous: nil)
        #expect(set.lastRefreshAt == nil)
        #expect(set.refreshToken == nil)
    }

    @Test("no expires_in and no JWT: expiry unknown")
    func noExpiry() {
        let set = TokenSet(response: .fixture(expiresIn: nil), receivedAt: t0, serverDate: nil, previous: nil)
        #expect(set.expiresAt == nil)
        #expect(set.issuedLifetime == nil)
    }

    @Test("subject from the ID token, else the JWT access token")
    func subject() {
        let id = unsignedJWT(#"{"sub":"from-id","exp":1}"#)
        let access = unsignedJWT(#"{"sub":"from-access"}"#)
        #expect(
            TokenSet(
                response: .fixture(accessToken: access, idToken: id), receivedAt: t0, serverDate: nil, previous: nil
            ).subject == "from-id")
        #expect(
            TokenSet(response: .fixture(accessToken: access), receivedAt: t0, serverDate: nil, previous: nil).subject
                == "from-access")
    }
}

@Suite("ClockSkew")
struct ClockSkewTests {
    @Test("offset is server minus local; sub-1.5 s noise counts as none")
    func offset() {
        #expect(ClockSkew.offset(serverDate: nil, receivedAt: t0) == nil)
        #expect(ClockSkew.offset(serverDate: t0, receivedAt: t0) == 0)
        #expect(ClockSkew.offset(serverDate: t0 - 1, receivedAt: t0 + 0.4) == 0)
        #expect(ClockSkew.offset(serverDate: t0 + 300, receivedAt: t0) == 300)
        #expect(ClockSkew.offset(serverDate: t0 - 300, receivedAt: t0) == -300)
    }

    @Test("trust bound is ±600 s")
    func trust() {
        #expect(ClockSkew.isTrusted(nil))
        #expect(ClockSkew.isTrusted(600))
        #expect(ClockSkew.isTrusted(-600))
        #expect(!ClockSkew.isTrusted(600.5))
        #expect(!ClockSkew.isTrusted(-601))
    }

    /// The server issues a 1-hour JWT access token at its "now" (our t0 plus `skew`).
    private func jwtResponse(skew: Double, expiresIn: Double?) -> (TokenResponse, serverDate: Double) {
        let serverNow = t0 + skew
        let token = unsignedJWT(#"{"sub":"alice","exp":\#(Int(serverNow + 3600))}"#)
        return (.fixture(accessToken: token, expiresIn: expiresIn), serverNow)
    }

    @Test(
        "a JWT exp on a skewed server clock maps to the same local expiry as expires_in",
        arguments: [300.0, -300.0, 0, 599])
    func skewCorrected(skew: Double) {
        let (response, serverDate) = jwtResponse(skew: skew, expiresIn: 3600)
        let set = TokenSet(response: response, receivedAt: t0, serverDate: serverDate, previous: nil)
        #expect(set.expiresAt == t0 + 3600)
        #expect(set.serverClockOffset == skew)
        #expect(set.subject == "alice")

        // The exp alone (no expires_in) gives the same answer.
        let (expOnly, _) = jwtResponse(skew: skew, expiresIn: nil)
        #expect(
            ClockSkew.expiry(
                response: expOnly, receivedAt: t0, offset: ClockSkew.offset(serverDate: serverDate, receivedAt: t0))
                == t0 + 3600)
    }

    @Test("without correction the skew would have mattered (the test is meaningful)")
    func uncorrectedWouldDiffer() {
        let (expOnly, _) = jwtResponse(skew: 300, expiresIn: nil)
        #expect(ClockSkew.expiry(response: expOnly, receivedAt: t0, offset: nil) == t0 + 3900)
    }

    @Test("the earlier of expires_in and exp wins")
    func earlierWins() {
        let token = unsignedJWT(#"{"exp":\#(Int(t0 + 100))}"#)
        #expect(
            ClockSkew.expiry(response: .fixture(accessToken: token, expiresIn: 3600), receivedAt: t0, offset: 0) == t0
                + 100)
        let late = unsignedJWT(#"{"exp":\#(Int(t0 + 9000))}"#)
        #expect(
            ClockSkew.expiry(response: .fixture(accessToken: late, expiresIn: 3600), receivedAt: t0, offset: 0) == t0
                + 3600)
    }

    @Test("untrusted skew beyond 600 s: a JWT token is treated as expiring now", arguments: [900.0, -900.0, 86400])
    func untrustedSkew(skew: Double) {
        let (response, serverDate) = jwtResponse(skew: skew, expiresIn: 3600)
        let set = TokenSet(response: response, receivedAt: t0, serverDate: serverDate, previous: nil)
        #expect(set.expiresAt == t0)
        #expect(!set.isFresh(at: t0, minimumTimeToLive: 0))
    }

    @Test("opaque tokens need no correction: expires_in is relative")
    func opaqueTokenWithSkew() {
        let set = TokenSet(
            response: .fixture(accessToken: "opaque", expiresIn: 3600), receivedAt: t0, serverDate: t0 + 5000,
            previous: nil)
        #expect(set.expiresAt == t0 + 3600)
        #expect(set.serverClockOffset == 5000)
    }

    @Test("UnverifiedJWT reads claims and rejects non-JWTs")
    func unverifiedJWT() {
        #expect(UnverifiedJWT.claims(of: unsignedJWT(#"{"sub":"x","exp":5}"#))?["exp"] == .number(5))
        #expect(UnverifiedJWT.claims(of: "opaque-token") == nil)
        #expect(UnverifiedJWT.claims(of: "a.b") == nil)
        #expect(UnverifiedJWT.claims(of: "a.!!!.c") == nil)
        #expect(UnverifiedJWT.claims(of: unsignedJWT("[1]")) == nil)
    }
}
