#if canImport(Glibc)
import Glibc
#endif
import TokenctlCore
import TokenctlEssentials

/// Reading what another program writes to tokenctl's standard input, within the command's time.
enum StandardInput {
    /// Lines until end of input or an empty line (git's credential protocol), at most 64 KiB,
    /// waiting at most `timeout` seconds in all.
    ///
    /// - Throws: `TokenctlError(.invalidInput)` when the input does not end in time or is too large.
    static func lines(timeout: Double, what: String) throws(TokenctlError) -> [String] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        defer { for index in buffer.indices { buffer[index] = 0 } }
        let deadline = TokenctlCore.Clock.system.now() + timeout
        let input = IOStreams.current.input
        func endsWithBlankLine() -> Bool {
            bytes.count == 1 && bytes[0] == 0x0A || bytes.suffix(2) == [0x0A, 0x0A] || bytes.suffix(4) == [0x0D, 0x0A, 0x0D, 0x0A]
        }
        while !endsWithBlankLine() {
            guard bytes.count <= 65536 else {
                throw TokenctlError(.invalidInput, "the \(what) on standard input is larger than 64 KiB")
            }
            var ready = pollfd(fd: input, events: Int16(POLLIN), revents: 0)
            let left = deadline - TokenctlCore.Clock.system.now()
            let polled = left > 0 ? poll(&ready, 1, Int32(left * 1000)) : 0
            if polled < 0 && errno == EINTR { continue }
            if polled == 0 {
                throw TokenctlError(.invalidInput, "standard input did not end within \(Int(saturating: timeout)) s (reading the \(what))")
            }
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasSuffix("\r") ? String($0.dropLast()) : String($0) }
            .prefix { !$0.isEmpty }
            .map { $0 }
    }
}
