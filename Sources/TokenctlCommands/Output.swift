import TokenctlCore
import TokenctlEssentials

/// What commands print and how (errors, usage errors, durations, text from servers made
/// printable), written to the command's `IOStreams`.
enum Output {
    /// Whether `io`'s stdout is a terminal with a UTF-8 locale (else ASCII marks, no decoration).
    static func prefersUnicode(_ io: IOStreams, _ variables: Environment) -> Bool {
        guard io.outputIsTerminal else { return false }
        let locale = ["LC_ALL", "LC_CTYPE", "LANG"].lazy.compactMap { variables[$0] }.first ?? ""
        return locale.uppercased().contains("UTF-8") || locale.uppercased().contains("UTF8")
    }

    /// `Error: message` and the hint, on `io`'s stderr.
    static func report(_ error: TokenctlError, to io: IOStreams) {
        // Messages quote servers, files and arguments: no escape sequence reaches a terminal,
        // and no argument floods it (a 120 KB argument is not echoed whole).
        var text = "Error: \(Output.printable(Output.shortened(error.message)))\n"
        if let hint = error.hint { text += "\(Output.printable(Output.shortened(hint)))\n" }
        io.standardError(text)
    }

    /// `Error: message`, the command's usage line and where its help is, on `io`'s stderr: 64.
    static func usageError(_ error: UsageError, to io: IOStreams) -> ExitStatus {
        let formatter = HelpFormatter(toolName: "tokenctl")
        var text = "Error: \(Output.printable(Output.shortened(error.message, limit: 400)))\n"
        if let name = error.command, let command = Commands.parser.command(named: name) {
            text += formatter.usageLine(for: command) + "\n  See 'tokenctl \(name) --help' for more information.\n"
        } else {
            text +=
                "USAGE: tokenctl [--profile <name>] <command> [<options>]\n  See 'tokenctl --help' for more information.\n"
        }
        io.standardError(text)
        return .usage
    }

    /// A duration for humans: "59 min", "2 h 5 min", "45 s".
    /// "45 s", "59 min", "2 h 5 min": a length of time (0 s for a negative one; say how long
    /// ago something expired with `validity`).
    static func duration(_ seconds: Double) -> String {
        let total = max(0, Int(saturating: seconds.rounded(.down)))
        if total < 120 { return "\(total) s" }
        if total < 7200 { return "\(total / 60) min" }
        if total >= 172_800 { return "\(total / 86400) days" }
        return "\(total / 3600) h \(total % 3600 / 60) min"
    }

    /// "valid for 5 min", or "expired 3 s ago" for a token whose time is up (never "valid for
    /// expired …").
    /// "with no expiry stated" for a token the server gave no lifetime and nothing can renew.
    static func validity(_ timeLeft: Double) -> String {
        if timeLeft == .infinity { return "with no expiry stated" }
        return timeLeft > 0
            ? "valid for \(duration(timeLeft))"
            : "expired \(duration((-timeLeft).clamped(to: 0...1e15).rounded(.up))) ago"
    }

    static func timestamp(_ seconds: Double) -> String {
        Timestamp.iso8601(seconds)
    }

    static func jsonString(_ text: String) -> String { JSONText.quoted(text) }

    /// A message as a sentence of its own: a final full stop unless it has one, so a hint
    /// printed after it never runs on from it.
    static func sentence(_ text: String) -> String {
        guard let last = text.last, !".!?".contains(last) else { return text }
        return text + "."
    }

    /// `text` padded with spaces to `width` columns, for aligned human output.
    static func padded(_ text: String, to width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    /// At most `limit` characters of a message, marked where cut.
    static func shortened(_ text: String, limit: Int = 2000) -> String { TerminalText.shortened(text, limit: limit) }

    /// Server-provided text for a terminal: control characters dropped (no escape sequences).
    static func printable(_ text: String) -> String { TerminalText.printable(text) }
}
