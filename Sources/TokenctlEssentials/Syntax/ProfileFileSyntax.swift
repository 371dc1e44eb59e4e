/// The one reader of the profile file's syntax, byte by byte, for both executables: the
/// front's hot path (`HotPath.profileIdentity`, no allocation) and the general parser
/// (`ProfileConfiguration.parse`, which adds the meaning of each key and its error messages).
///
/// The syntax: lines end at LF; spaces, tabs and CRs around a line, a key and a value are not
/// part of them (CRLF files work); blank lines and lines starting with `#` are skipped; every
/// other line is `key = value` (the first `=` splits it).
public enum ProfileFileSyntax {
    /// The values the `provider` key may take, here so the front can accept such a profile
    /// without Core. A copy of the names of `Provider.all` in TokenctlCore (HotPathTests keeps
    /// the two equal, in order): the list of the providers themselves must stay in Core, where
    /// each provider's file is, and Core cannot be imported here; deriving Core's list from
    /// this one would still need a second list from names to providers.
    public static let providerNames: [StaticString] = [
        "github", "github-app", "google", "entra", "gitlab", "keycloak", "okta", "auth0", "gitea", "forgejo",
    ]

    /// One `key = value` line: offsets into the file, and its 1-based line number.
    public struct Entry {
        public var key: Range<Int>
        public var value: Range<Int>
        public var line: Int
    }

    /// Whether `byte` is space around a line, key or value.
    @inline(__always)
    public static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D }

    /// Calls `visit` with each entry in order, until it returns false.
    ///
    /// - Returns: the number of the first line that is neither blank, a comment, nor
    ///   `key = value` (scanning stops there), or nil.
    @inline(__always)
    public static func scan(_ file: UnsafeBufferPointer<UInt8>, _ visit: (Entry) -> Bool) -> Int? {
        let count = file.count
        var lineStart = 0
        var lineNumber = 0
        while lineStart <= count {
            lineNumber += 1
            var lineEnd = lineStart
            while lineEnd < count && file[lineEnd] != 0x0A { lineEnd += 1 }
            var start = lineStart
            var end = lineEnd
            while start < end && isSpace(file[start]) { start += 1 }
            while end > start && isSpace(file[end - 1]) { end -= 1 }
            if start < end && file[start] != UInt8(ascii: "#") {
                var equals = start
                while equals < end && file[equals] != UInt8(ascii: "=") { equals += 1 }
                guard equals < end else { return lineNumber }
                var keyEnd = equals
                while keyEnd > start && isSpace(file[keyEnd - 1]) { keyEnd -= 1 }
                var valueStart = equals + 1
                while valueStart < end && isSpace(file[valueStart]) { valueStart += 1 }
                guard visit(Entry(key: start..<keyEnd, value: valueStart..<end, line: lineNumber)) else { return nil }
            }
            if lineEnd == count { break }
            lineStart = lineEnd + 1
        }
        return nil
    }
}
