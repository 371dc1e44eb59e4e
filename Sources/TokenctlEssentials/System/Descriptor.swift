#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The two loops every use of a file descriptor needs, in one place for the front and the
/// engine: a system call made again when a signal interrupted it (EINTR), and all of a buffer
/// written (a write may take only part of it).
public enum Descriptor {
    /// `call()` again for as long as it fails (a negative result) with EINTR.
    @inlinable @inline(__always)
    public static func retryingInterrupted<Result: BinaryInteger>(_ call: () -> Result) -> Result {
        while true {
            let result = call()
            if result < 0 && errno == EINTR { continue }
            return result
        }
    }

    /// Wait up to `seconds` for `descriptor` to be readable (poll(2), POLLIN): after EINTR, again
    /// for what is left of the time. Poll's result: above 0 readable (or closed), 0 the time ran
    /// out, below 0 an error (errno says which).
    public static func waitReadable(_ descriptor: Int32, within seconds: Double) -> Int32 {
        let end = MonotonicClock.now() + max(0, seconds)
        while true {
            var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let left = end - MonotonicClock.now()
            let polled = poll(&ready, 1, Int32(max(0, min(left * 1000, Double(Int32.max)))))
            if polled < 0 && errno == EINTR && left > 0 { continue }
            return polled
        }
    }

    /// Write the `count` bytes at `bytes` to `descriptor`: again after a short write and after EINTR.
    ///
    /// - Returns: 0 when all was written, else the errno of the write that failed.
    @inlinable @discardableResult
    public static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int32 {
        guard let bytes else { return 0 }
        var offset = 0
        while offset < count {
            let written = retryingInterrupted { write(descriptor, bytes + offset, count - offset) }
            if written < 0 { return errno }
            offset += written
        }
        return 0
    }

    /// Write all of `bytes` to `descriptor` (see `writeAll(_:_:_:)`).
    @discardableResult
    public static func writeAll(_ descriptor: Int32, _ bytes: some Collection<UInt8>) -> Int32 {
        if let done = bytes.withContiguousStorageIfAvailable({ writeAll(descriptor, $0.baseAddress, $0.count) }) {
            return done
        }
        return Array(bytes).withUnsafeBytes { writeAll(descriptor, $0.baseAddress, $0.count) }
    }

    /// Write all of `text`, as UTF-8, to `descriptor` (see `writeAll(_:_:_:)`).
    @discardableResult
    public static func writeAll(_ descriptor: Int32, _ text: String) -> Int32 {
        var text = text
        return text.withUTF8 { writeAll(descriptor, $0.baseAddress, $0.count) }
    }
}
