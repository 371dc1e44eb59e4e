import Testing
import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

@Suite("Terminal text, descriptors")
struct SystemLayerTests {
    @Test("the sanitizer drops C0 controls, DEL and C1 controls, and keeps the rest")
    func printable() {
        #expect(TerminalText.printable("a\u{1B}[31mb\u{7F}c\u{9B}d\u{85}é\tz\n") == "a[31mbcdéz")
        #expect(TerminalText.printable("plain text, ünïcode") == "plain text, ünïcode")
    }

    @Test("the sanitizer replaces instead of dropping when asked, and keeps at most limit scalars")
    func replacementAndLimit() {
        #expect(TerminalText.printable("a\u{1B}b\u{9B}", replacement: "?") == "a?b?")
        #expect(TerminalText.printable(String(repeating: "x", count: 300)).count == 300)
        #expect(TerminalText.short(String(repeating: "\u{1B}x", count: 300)) == String(repeating: "x", count: 200))
        #expect(TerminalText.printable("abcdef", limit: 3, replacement: "?") == "abc")
    }

    @Test("EINTR is retried, any other failure and any success returned")
    func interrupted() {
        var calls = 0
        let result = Descriptor.retryingInterrupted { () -> Int in
            calls += 1
            if calls < 3 {
                errno = EINTR
                return -1
            }
            return 7
        }
        #expect(result == 7 && calls == 3)
        calls = 0
        let failed = Descriptor.retryingInterrupted { () -> Int32 in
            calls += 1
            errno = EBADF
            return -1
        }
        #expect(failed == -1 && calls == 1)
    }

    @Test("writeAll writes every byte, and reports the errno of a failed write")
    func writeAll() throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let text = String(repeating: "0123456789", count: 3000)
        #expect(Descriptor.writeAll(ends[1], text) == 0)
        close(ends[1])
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(ends[0], $0.baseAddress, $0.count) }
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        #expect(received == Array(text.utf8))
        // Not the closed descriptor: a test running beside this one may have opened its number.
        #expect(Descriptor.writeAll(-1, "nowhere") == EBADF)
    }
}
