import Foundation
import Testing
import TokenctlEssentials

@testable import TokenctlCore

@Suite("The forward's refusal summaries and forced-refresh limit")
struct ForwardAuditTests {
    @Test(
        "refusals: a peer's first at once, the rest of its minute as one counted record, in the refusal log; the event log keeps its own"
    )
    func summaries() throws {
        let directory = NSTemporaryDirectory() + "tokenctl-audit-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = EventLog(stateDirectory: directory)
        #expect(log.append(EventRecord(time: 1, event: .signedIn, profile: "p")))
        let refusals = try #require(log.refusals)
        #expect(refusals.path == directory + "/forward-refusals.jsonl")
        let audit = ForwardAudit(log: refusals)
        let peer = UnixSocket.Peer(pid: 7, uid: 1001, gid: 1001, command: "sshd")
        for index in 0..<10_000 {
            audit.refused(
                peer: peer, reason: index % 2 == 0 ? "malformed request" : "not forwarded", profile: "-",
                at: 10 + Double(index) / 1000)
        }
        audit.flush(at: 30)
        #expect(log.records().count == 2, "the window has not ended: only the first refusal so far")
        audit.flush(at: 71)
        let records = log.records()
        #expect(records.map(\.event) == [.signedIn, .forwardRefused, .forwardRefused])
        #expect(records.compactMap(\.count).reduce(0, +) == 10_000)
        #expect(records[1].reason == "refused from uid 1001 (sshd): malformed request")
        #expect(
            records[2].reason
                == "9999 more refused in 61 s from uid 1001 (sshd): 5000 not forwarded, 4999 malformed request")
        #expect(log.completeLines(of: log.path).count == 1, "nothing of the refusals in the event log")
        #expect(EventRecord.parse(Substring(records[2].jsonLine().dropLast()))?.count == 9999)
    }

    @Test("one forced refresh per profile per interval; a claim whose refresh reached nothing is given back")
    func forcedRefreshLimit() {
        let limit = ForcedRefreshLimit(interval: 30)
        let first = limit.claim("p", at: 100)
        #expect(first != nil && limit.claim("p", at: 129) == nil && limit.claim("q", at: 129) != nil)
        #expect(limit.claim("p", at: 130.5) != nil)
        let again = limit.claim("r", at: 200)
        limit.release(again!)
        #expect(limit.claim("r", at: 201) != nil)
    }

    @Test("client text is quoted in a reason; a peer's command keeps only plain characters")
    func quoting() {
        #expect(ForwardServer.quoted("tok; to pid 1 (sshd) uid 0", limit: 32) == "\"tok; to pid 1 (sshd) uid 0\"")
        #expect(ForwardServer.quoted("a\"b\\c", limit: 32) == "\"a\\\"b\\\\c\"")
        #expect(ForwardServer.commandName("x) uid 0; for") == "x??uid?0??for")
        #expect(
            ForwardServer.describe(UnixSocket.Peer(pid: 3, uid: 5, gid: 5, command: "a b")) == "pid 3 (a?b) uid 5")
    }
}

@Suite("A forwarded error's exit status: the front and the engine agree")
struct ForwardedStatusTests {
    @Test("every status the serving side may send exits the same from the front and from the engine")
    func sameStatus() {
        for status in Int32(-1)...Int32(256) {
            let engine = TokenctlError(ForwardedSession.kind(status), "").exitStatus
            #expect(engine == ExitStatus.passedOn(status), "status \(status)")
        }
    }
}
