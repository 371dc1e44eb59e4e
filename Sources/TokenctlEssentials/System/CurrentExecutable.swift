#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The running executable's absolute path, from /proc/self/exe (symbolic links resolved): what
/// the front runs the engine beside, what `--version` and `doctor` report, what schedules run.
/// `nil` when /proc cannot be read.
public func currentExecutable() -> String? {
    var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
    let length = buffer.withUnsafeMutableBytes {
        readlink("/proc/self/exe", $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count - 1)
    }
    return length > 0 ? String(decoding: buffer[0..<length], as: UTF8.self) : nil
}
