#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed system call's error number, typed (errno(3)): what the front and the engine keep
/// and compare instead of a bare Int32, and its text (strerror(3)) for messages.
public struct Errno: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    public let code: Int32

    public init(_ code: Int32) { self.code = code }

    /// The calling thread's errno now: read it right after the call that failed.
    public static var current: Errno { Errno(errno) }

    /// The system's words for it, e.g. "No such file or directory".
    public var description: String { String(cString: strerror(code)) }

    /// A non-blocking call that would have had to wait (EAGAIN, EWOULDBLOCK).
    public var wouldBlock: Bool { code == EAGAIN || code == EWOULDBLOCK }
}
