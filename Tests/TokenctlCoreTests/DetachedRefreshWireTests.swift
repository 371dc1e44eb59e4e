import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

/// The records between a caller and its detached refresh (`DetachedRefreshWire`).
@Suite("Detached refresh: the request and report records")
struct DetachedRefreshWireTests {
    static let settings = DetachedRefresh.Settings(
        timeout: 30, storeCallTimeout: 10, interactive: true, verbose: false, userAgent: "tokenctl/test")

    static func request(target: TokenTarget = .session, snapshot: TokenSet? = nil) -> DetachedRefresh.Request {
        DetachedRefresh.Request(
            profile: ProfileName(rawValue: "work")!, target: target, snapshot: snapshot, minimumTimeToLive: 60,
            force: true, capMargin: false, deadline: Deadline(1_700_000_030.5), settings: settings)
    }

    /// The requests `bytes` carry, as the child reads them from a pipe.
    static func readRequests(_ bytes: [UInt8]) -> [(
        UInt64, Result<DetachedRefresh.Request, DetachedRefreshWire.WireError>
    )] {
        var descriptors: [Int32] = [-1, -1]
        #expect(pipe(&descriptors) == 0)
        _ = Descriptor.writeAll(descriptors[1], bytes)
        close(descriptors[1])
        var delivered: [(UInt64, Result<DetachedRefresh.Request, DetachedRefreshWire.WireError>)] = []
        DetachedRefreshWire.readRequests(from: descriptors[0]) { delivered.append($0) }
        close(descriptors[0])
        return delivered
    }

    @Test("requests survive the round trip, two interleaved ones too: target, snapshot, deadline and settings")
    func requestRoundTrip() throws {
        let target = try TokenTarget(
            scope: "read write", audience: "api", resource: "https://a.example/ https://b.example/")
        let snapshot = TokenSet(
            accessToken: "at-1", refreshToken: "rt-1", idToken: nil, scope: "read write", expiresAt: 1_700_000_100,
            issuedLifetime: 3600, obtainedAt: 1_699_999_000)
        let first = Self.request(target: target, snapshot: snapshot)
        let second = Self.request()
        let one = try DetachedRefreshWire.encode(first, id: 1)
        let two = try DetachedRefreshWire.encode(second, id: 2)
        // Record by record, alternately: the child keeps each request's fields apart.
        let oneRecords = try DetachedRefreshWire.records(one[...]).records
        let twoRecords = try DetachedRefreshWire.records(two[...]).records
        var mixed: [UInt8] = []
        for index in 0..<max(oneRecords.count, twoRecords.count) {
            if index < twoRecords.count {
                mixed += DetachedRefreshWire.record(twoRecords[index].0, twoRecords[index].1)
            }
            if index < oneRecords.count {
                mixed += DetachedRefreshWire.record(oneRecords[index].0, oneRecords[index].1)
            }
        }
        let delivered = Self.readRequests(mixed)
        #expect(delivered.map(\.0) == [2, 1])
        #expect(try delivered.first { $0.0 == 1 }?.1.get() == first)
        #expect(try delivered.first { $0.0 == 2 }?.1.get() == second)
    }

    @Test(
        "hostile requests: a field twice, a bad profile, a non-number are refused as that request; a cut stream delivers nothing",
        arguments: [
            ("1:profile 4\nwork1:profile 4\nwork1:end 0\n", 1),
            ("1:profile 5\n../xi1:min-ttl 1\n11:end 0\n", 1),
            ("1:profile 4\nwork1:min-ttl 3\nnan1:end 0\n", 1),
            ("1:profile 4\nwork", 0),
            ("1:profile 99999999999\n", 0),
            ("0:profile 4\nwork0:end 0\n", 0),
            ("nocolon 0\n", 0),
        ])
    func hostileRequests(text: String, delivered: Int) {
        let requests = Self.readRequests(Array(text.utf8))
        #expect(requests.count == delivered)
        for (_, result) in requests {
            guard case .failure = result else {
                Issue.record("accepted: \(text)")
                continue
            }
        }
    }

    @Test("a header without a newline in its first 96 bytes is malformed, not waited for")
    func longHeader() {
        #expect(throws: DetachedRefreshWire.WireError.self) {
            try DetachedRefreshWire.records(Array(repeating: UInt8(ascii: "a"), count: 200)[...])
        }
    }

    @Test("records split anywhere are read whole once complete; a partial one is left for later")
    func partialRecords() throws {
        let bytes = DetachedRefreshWire.record("0:narrate", "one") + DetachedRefreshWire.record("3:notice", "two")
        for cut in 0...bytes.count {
            let (records, used) = try DetachedRefreshWire.records(bytes[..<cut])
            let (rest, _) = try DetachedRefreshWire.records(bytes[used...])
            #expect((records + rest).map(\.0) == ["0:narrate", "3:notice"], "cut at \(cut)")
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
            // The hint travels typed (its command is spelled by the caller's command layer).
            let hint: Suggestion = "Do this: '\(tokenctl: ProfileName(rawValue: "work")!, .logout([.noRevoke]))'."
            let error = TokenctlError(kind, "it failed", hint: hint)
            let fields: [String: [UInt8]] = [
                "error-kind": Array(DetachedRefreshWire.kindName(kind).utf8), "error-message": Array("it failed".utf8),
                "error-hint": Array(try JSONEncoder().encode(hint)),
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

#if canImport(Glibc)
import Glibc
#endif
