import Testing
import TokenctlEssentials

@testable import TokenctlCore

/// The records between a caller and its detached refresh (`DetachedRefreshWire`).
@Suite("Detached refresh: the request and report records")
struct DetachedRefreshWireTests {
    static let settings = DetachedRefresh.Settings(
        retryDeadline: 30, attemptTimeout: 15, lockTimeout: 30, storeCallTimeout: 10, interactive: true,
        verbose: false, userAgent: "tokenctl/test")

    static func request(target: TokenTarget = .session, snapshot: TokenSet? = nil) -> DetachedRefresh.Request {
        DetachedRefresh.Request(
            profile: ProfileName(rawValue: "work")!, target: target, snapshot: snapshot, minimumTimeToLive: 60,
            force: true, capMargin: false, deadline: Deadline(1_700_000_030.5), settings: settings)
    }

    @Test("a request survives the round trip: target, snapshot with every token, deadline and settings")
    func requestRoundTrip() throws {
        let target = try TokenTarget(
            scope: "read write", audience: "api", resource: "https://a.example/ https://b.example/")
        let snapshot = TokenSet(
            accessToken: "at-1", refreshToken: "rt-1", idToken: nil, scope: "read write", expiresAt: 1_700_000_100,
            issuedLifetime: 3600, obtainedAt: 1_699_999_000)
        let request = Self.request(target: target, snapshot: snapshot)
        let decoded = try DetachedRefreshWire.decodeRequest(try DetachedRefreshWire.encode(request))
        #expect(decoded == request)
        let plain = Self.request()
        #expect(try DetachedRefreshWire.decodeRequest(try DetachedRefreshWire.encode(plain)) == plain)
    }

    @Test(
        "hostile requests are refused: cut short, a field twice, a bad profile, a length past the cap, a non-number",
        arguments: [
            "profile 4\nwork", "profile 4\nworkprofile 4\nworkend 0\n", "profile 5\n../ximin-ttl 1\n1end 0\n",
            "profile 99999999999\n", "profile x\nwork", "profile 4\nworkmin-ttl 3\nnanend 0\n",
        ])
    func hostileRequests(text: String) {
        #expect(throws: (any Error).self) { try DetachedRefreshWire.decodeRequest(Array(text.utf8)) }
    }

    @Test("records split anywhere are read whole once complete; a partial one is left for later")
    func partialRecords() throws {
        let bytes = DetachedRefreshWire.record("narrate", "one") + DetachedRefreshWire.record("notice", "two")
        for cut in 0...bytes.count {
            let (records, used) = try DetachedRefreshWire.records(bytes[..<cut])
            let (rest, _) = try DetachedRefreshWire.records(bytes[used...])
            #expect((records + rest).map(\.0) == ["narrate", "notice"], "cut at \(cut)")
        }
    }

    @Test("a report: tokens come back as stored; an error keeps its kind, message and hint; anything else is no answer")
    func reports() throws {
        let set = TokenSet(
            accessToken: "at-2", refreshToken: "rt-2", scope: "read", expiresAt: 1_700_003_600, issuedLifetime: 3600,
            obtainedAt: 1_700_000_000)
        guard case .tokens(let back) = DetachedRefreshWire.outcome(["tokens": try set.encoded()]) else {
            Issue.record("expected tokens")
            return
        }
        #expect(back == set)
        for (kind, _) in DetachedRefreshWire.kinds {
            let error = TokenctlError(kind, "it failed", hint: "do this")
            let fields: [String: [UInt8]] = [
                "error-kind": Array(DetachedRefreshWire.kindName(kind).utf8), "error-message": Array("it failed".utf8),
                "error-hint": Array("do this".utf8),
            ]
            guard case .failure(let decoded) = DetachedRefreshWire.outcome(fields) else {
                Issue.record("expected an error for \(kind)")
                continue
            }
            #expect(decoded == error)
        }
        guard case .noAnswer = DetachedRefreshWire.outcome(["error-kind": Array("nonsense".utf8)]) else {
            Issue.record("expected no answer")
            return
        }
        guard case .noAnswer = DetachedRefreshWire.outcome(["tokens": Array("{".utf8)]) else {
            Issue.record("expected no answer")
            return
        }
    }

    @Test("the caller waits past the deadline by what a sent refresh and its write may take, with room to spare")
    func waitLimit() {
        let request = Self.request()
        let limit = DetachedRefresh.waitLimit(request, now: 1_700_000_000)
        #expect(
            limit >= request.deadline!.time + RetryPolicy(random: { 0 }).sentRefreshMinimum
                + SecretServiceStore.minimumWriteTime)
        var noDeadline = request
        noDeadline.deadline = nil
        #expect(DetachedRefresh.waitLimit(noDeadline, now: 1_700_000_000) >= 1_700_000_000 + 60)
    }
}
