/// The one reader of the hot-cache payload's syntax, byte by byte, for both executables: the
/// front's hit (`HotPath.cachedToken`, no allocation) and the general decoder
/// (`HotCacheEntry.decode`), which add what each field means.
///
/// The syntax: at most `HotCacheEntry.maximumPayloadSize` bytes; the version line
/// `tokenctl-hotcache-v1`, then `key=value` lines (the first `=` splits), every line ending in LF.
public enum HotCacheEntrySyntax {
    public enum Failure: Equatable, Sendable {
        case tooLarge(Int)
        case noFinalLineBreak
        case unsupportedVersion
        case lineWithoutEquals
    }

    /// Calls `visit` with the key and value ranges of each field line, in order, until it
    /// returns false.
    ///
    /// - Returns: why the payload is not of this syntax (scanning stops there), or nil.
    @inline(__always)
    public static func scan(
        _ payload: UnsafeBufferPointer<UInt8>, _ visit: (_ key: Range<Int>, _ value: Range<Int>) -> Bool
    ) -> Failure? {
        let count = payload.count
        guard count <= HotCacheEntry.maximumPayloadSize else { return .tooLarge(count) }
        guard count > 0, payload[count - 1] == 0x0A else { return .noFinalLineBreak }
        var position = 0
        while payload[position] != 0x0A { position += 1 }
        guard isVersionLine(payload, position) else { return .unsupportedVersion }
        position += 1
        while position < count {
            var lineEnd = position
            while payload[lineEnd] != 0x0A { lineEnd += 1 } // the payload ends with one
            var equals = position
            while equals < lineEnd && payload[equals] != UInt8(ascii: "=") { equals += 1 }
            guard equals < lineEnd else { return .lineWithoutEquals }
            guard visit(position..<equals, (equals + 1)..<lineEnd) else { return nil }
            position = lineEnd + 1
        }
        return nil
    }

    /// Whether the first `length` bytes are `tokenctl-hotcache-v1`.
    @inline(__always)
    static func isVersionLine(_ payload: UnsafeBufferPointer<UInt8>, _ length: Int) -> Bool {
        let version: StaticString = "tokenctl-hotcache-v1"
        guard length == version.utf8CodeUnitCount else { return false }
        let expected = version.utf8Start
        for index in 0..<length where payload[index] != expected[index] { return false }
        return true
    }
}
