import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// How `readStandardInput` ended.
public enum StandardInputOutcome: Sendable, Equatable {
    /// `complete` said so, or the input ended.
    case ended
    /// More than `limit` bytes came before either.
    case tooLarge
    /// The deadline passed first.
    case timedOut
}

/// Read what another program (or a person) writes to `descriptor`, a command's standard input,
/// into `bytes`, until `complete(bytes)` holds or the input ends: the one reader of stdin.
///
/// - Parameters:
///   - deadline: no wait for input goes past it (a pipe left open is an error, never a hang);
///     nil for none (a person typing at a terminal is not hurried).
///   - limit: more bytes than this are `tooLarge`; reading stops there.
///   - echo: false turns a terminal's echo off while reading (a secret typed in).
/// The caller owns `bytes` (and scrubs a secret from it); the read buffer is scrubbed here.
public func readStandardInput(
    _ descriptor: Int32, into bytes: inout [UInt8], deadline: Deadline?, limit: Int, echo: Bool = true,
    until complete: ([UInt8]) -> Bool = { _ in false }
) -> StandardInputOutcome {
    func readUntilDone(_ bytes: inout [UInt8]) -> StandardInputOutcome {
        var buffer = [UInt8](repeating: 0, count: 4096)
        defer { for index in buffer.indices { buffer[index] = 0 } }
        while !complete(bytes) {
            guard bytes.count <= limit else { return .tooLarge }
            if let deadline {
                let left = deadline.remaining()
                let polled = left > 0 ? Descriptor.waitReadable(descriptor, within: left) : 0
                if polled == 0 { return .timedOut }
            }
            let count = Descriptor.retryingInterrupted {
                buffer.withUnsafeMutableBytes { system_read(descriptor, $0.baseAddress, $0.count) }
            }
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return .ended
    }
    return echo ? readUntilDone(&bytes) : Terminal.withoutEcho(descriptor) { readUntilDone(&bytes) }
}
