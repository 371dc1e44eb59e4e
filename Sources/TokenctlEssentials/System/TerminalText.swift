/// Text from elsewhere (a server, a file, an argument) made safe to show on a terminal: the one
/// sanitizer for messages. Control characters are what a terminal acts on (an escape sequence
/// starts with ESC or a C1 control), so none of them passes.
public enum TerminalText {
    /// Whether a terminal shows `scalar` rather than acting on it: not a C0 control, DEL or a C1 control.
    @inlinable
    public static func isPrintable(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value >= 0x20 && scalar.value != 0x7F && !(0x80...0x9F).contains(scalar.value)
    }

    /// `text` without control characters (or with each replaced by `replacement`), at most
    /// `limit` Unicode scalars of it.
    public static func printable(_ text: String, limit: Int = .max, replacement: Unicode.Scalar? = nil) -> String {
        var kept = String.UnicodeScalarView()
        var count = 0
        for scalar in text.unicodeScalars {
            if count == limit { break }
            guard let shown = isPrintable(scalar) ? scalar : replacement else { continue }
            kept.append(shown)
            count += 1
        }
        return String(kept)
    }

    /// Server-provided text in a message: printable, and at most 200 Unicode scalars of it.
    /// Line breaks and tabs separate words (Entra's descriptions hold "\r\n" before their
    /// "Trace ID:" line): each run of them is one space, never nothing, and none is kept at the
    /// ends; other control characters are dropped.
    public static func short(_ text: String) -> String {
        let limit = 200
        var kept = String.UnicodeScalarView()
        var count = 0
        var separated = false
        for scalar in text.unicodeScalars {
            if count == limit { break }
            if isSeparator(scalar) {
                separated = true
                continue
            }
            guard isPrintable(scalar) else { continue }
            if separated, count > 0, kept.last != " " {
                kept.append(" ")
                count += 1
                if count == limit { break }
            }
            separated = false
            kept.append(scalar)
            count += 1
        }
        if kept.last == " " { kept.removeLast() }
        return String(kept)
    }

    /// Line breaks and tabs: characters that stand between words.
    @inlinable
    static func isSeparator(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x85, 0x2028, 0x2029: true
        default: false
        }
    }

    /// At most `limit` characters of `text`, and how many more there were: no message floods a
    /// terminal (a 120 KB argument is not echoed whole).
    public static func shortened(_ text: String, limit: Int = 2000) -> String {
        text.count <= limit ? text : String(text.prefix(limit)) + "… (\(text.count - limit) more characters)"
    }

}
