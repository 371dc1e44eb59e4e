import Foundation
import Testing

@testable import TokenctlCore

@Suite("EventLog")
struct EventLogTests {
    func temporaryDirectory() -> String {
        NSTemporaryDirectory() + "tokenctl-events-" + UUID().uuidString
    }

    @Test("significance of every event")
    func significance() {
        #expect(
            SessionEvent.allCases.filter { $0.significance == .high } == [
                .signedIn, .signedOut, .sessionEnded, .sessionRevoked, .revocationFailed, .dpopDowngradeRefused,
            ])
        #expect(
            SessionEvent.allCases.filter { $0.significance == .medium } == [
                .refreshFailed, .storeUnavailable, .pendingWriteCompleted, .scopeNarrowed, .dpopBound, .tokenForwarded,
                .forwardRefused,
            ])
        #expect(SessionEvent.allCases.filter { $0.significance == .low } == [.tokenRefreshed])
        #expect(EventSignificance.low < .medium && EventSignificance.medium < .high)
    }

    @Test("a line round-trips, stays under PIPE_BUF even with huge fields, and escapes control characters")
    func lineFormat() {
        let record = EventRecord(
            time: 1_700_000_000.25, event: .sessionEnded, profile: "p", issuer: "https://x", subject: "a\nb\u{1b}[31m",
            reason: "invalid_grant")
        let line = record.jsonLine()
        #expect(line.hasSuffix("\n") && line.filter { $0 == "\n" }.count == 1)
        #expect(!line.contains("\u{1b}"))
        #expect(EventRecord.parse(Substring(line.dropLast())) == record)
        let huge = EventRecord(
            time: 1, event: .signedIn, profile: "p", issuer: String(repeating: "i", count: 10_000),
            subject: String(repeating: "s", count: 10_000))
        #expect(huge.jsonLine().utf8.count < 4096)
        let hostile = EventRecord(
            time: 1, event: .sessionEnded, profile: String(repeating: "\u{1}", count: 5000),
            issuer: String(repeating: "e\u{301}\u{302}", count: 3000),
            subject: String(repeating: "\u{7}", count: 5000), reason: String(repeating: "\"", count: 5000))
        #expect(hostile.jsonLine().utf8.count < 4096, "escapes and combining marks cannot push a line past PIPE_BUF")
    }

    @Test("rotation at the size bound keeps the previous file as .1 and reading covers both")
    func rotation() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = EventLog(stateDirectory: directory, maximumBytes: 1000)
        for index in 0..<30 {
            #expect(log.append(EventRecord(time: Double(index), event: .tokenRefreshed, profile: "p")))
        }
        #expect(FileManager.default.fileExists(atPath: log.rotatedPath))
        let size = try FileManager.default.attributesOfItem(atPath: log.path)[.size] as? Int ?? 0
        #expect(size < 1300)
        let times = log.records().map(\.time)
        #expect(times == times.sorted() && times.last == 29)
        let mode = try FileManager.default.attributesOfItem(atPath: log.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test("filters: since, significance, profile; a partial last line is ignored")
    func filters() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = EventLog(stateDirectory: directory)
        log.append(EventRecord(time: 10, event: .signedIn, profile: "a"))
        log.append(EventRecord(time: 20, event: .tokenRefreshed, profile: "a"))
        log.append(EventRecord(time: 30, event: .refreshFailed, profile: "b"))
        #expect(log.records(since: 15).map(\.time) == [20, 30])
        #expect(log.records(minimumSignificance: .medium).map(\.time) == [10, 30])
        #expect(log.records(profile: "b").map(\.time) == [30])
        let handle = try #require(FileHandle(forWritingAtPath: log.path))
        handle.seekToEndOfFile()
        handle.write(Data("{\"unix_time\":40,".utf8))
        try handle.close()
        #expect(log.records().count == 3)
    }
}
