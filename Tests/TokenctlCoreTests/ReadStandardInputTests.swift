import Testing

@testable import TokenctlCore

#if canImport(Glibc)
import Glibc
#endif

/// `readStandardInput`, through a pipe standing in for standard input.
@Suite("readStandardInput")
struct ReadStandardInputTests {
    /// A pipe with `text` written into it, the writing end closed when `close` says so.
    func pipe(_ text: String, closed: Bool) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        #expect(system_pipe(&ends) == 0)
        _ = Array(text.utf8).withUnsafeBytes { system_write(ends[1], $0.baseAddress, $0.count) }
        if closed { system_close(ends[1]) }
        return (ends[0], closed ? -1 : ends[1])
    }

    @Test("reads to the end of the input")
    func toEnd() {
        let input = pipe("line one\nline two\n", closed: true)
        defer { system_close(input.read) }
        var bytes: [UInt8] = []
        #expect(readStandardInput(input.read, into: &bytes, deadline: .after(10), limit: 100) == .ended)
        #expect(String(decoding: bytes, as: UTF8.self) == "line one\nline two\n")
    }

    @Test("stops once complete, without waiting for the end")
    func complete() {
        let input = pipe("value\n", closed: false)
        defer {
            system_close(input.read)
            system_close(input.write)
        }
        var bytes: [UInt8] = []
        let outcome = readStandardInput(input.read, into: &bytes, deadline: nil, limit: 100) { $0.contains(0x0A) }
        #expect(outcome == .ended)
        #expect(bytes == Array("value\n".utf8))
    }

    @Test("input left open past the deadline times out")
    func timedOut() {
        let input = pipe("partial", closed: false)
        defer {
            system_close(input.read)
            system_close(input.write)
        }
        var bytes: [UInt8] = []
        #expect(readStandardInput(input.read, into: &bytes, deadline: .after(0.05), limit: 100) == .timedOut)
        #expect(bytes == Array("partial".utf8))
    }

    @Test("more than the limit is too large")
    func tooLarge() {
        let input = pipe(String(repeating: "x", count: 50), closed: true)
        defer { system_close(input.read) }
        var bytes: [UInt8] = []
        #expect(readStandardInput(input.read, into: &bytes, deadline: .after(10), limit: 10) == .tooLarge)
        var exact: [UInt8] = []
        let fits = pipe(String(repeating: "x", count: 10), closed: true)
        defer { system_close(fits.read) }
        #expect(readStandardInput(fits.read, into: &exact, deadline: .after(10), limit: 10) == .ended)
    }

    @Test("a deadline already past reads nothing")
    func pastDeadline() {
        let input = pipe("ready", closed: false)
        defer {
            system_close(input.read)
            system_close(input.write)
        }
        var bytes: [UInt8] = []
        #expect(readStandardInput(input.read, into: &bytes, deadline: Deadline(0), limit: 100) == .timedOut)
        #expect(bytes.isEmpty)
    }
}
