// Compiled into every fuzz target (Scripts/fuzz): the input as bytes, and the `--skip-known`
// switch. A known crash's predicate lives next to the call it guards, in the target, and must
// match exactly the inputs that reach the recorded fault, nothing wider, so skipping it hides
// only that one bug.
#if canImport(Glibc)
import Glibc
#endif

enum FuzzSupport {
    /// `Scripts/fuzz --skip-known` sets TOKENCTL_FUZZ_SKIP_KNOWN=1: inputs that would hit a known,
    /// recorded crash are rejected before they reach it, so fuzzing can go past it.
    static let skipKnown: Bool = {
        guard let value = getenv("TOKENCTL_FUZZ_SKIP_KNOWN") else { return false }
        return String(cString: value) == "1"
    }()

    /// libFuzzer's input, copied (the parsers take arrays and strings).
    static func bytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
        guard let data, size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: size))
    }

    /// Whether `Int64(value.rounded(.down))` can be computed (what `Timestamp.iso8601` does first).
    static func fitsInt64(_ value: Double) -> Bool {
        let down = value.rounded(.down)
        return down >= -9_223_372_036_854_775_808.0 && down < 9_223_372_036_854_775_808.0
    }
}

/// A property the target checks: on failure, say which and why on stderr, then abort (a crash
/// for libFuzzer). Not `precondition`, whose message -O drops.
func check(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID,
    line: UInt = #line
) {
    if !condition() { fail(message(), file: file, line: line) }
}

func fail(_ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) -> Never {
    let text = Array("fuzz check failed (\(file):\(line)): \(message())\n".utf8)
    _ = text.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    abort()
}
