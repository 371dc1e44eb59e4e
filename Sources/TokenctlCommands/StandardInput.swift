import TokenctlCore
import TokenctlEssentials

/// Reading what another program or a person writes to tokenctl's standard input, within the
/// command's time (`readStandardInput`, the one reader).
enum StandardInput {
    /// Lines from `io`'s standard input until its end or an empty line (git's credential
    /// protocol), at most 64 KiB, waiting at most `timeout` seconds in all.
    ///
    /// - Throws: `TokenctlError(.invalidInput)` when the input does not end in time or is too large.
    static func lines(from io: IOStreams, timeout: Double, what: String) throws(TokenctlError) -> [String] {
        var bytes: [UInt8] = []
        let outcome = readStandardInput(io.input, into: &bytes, deadline: .after(timeout), limit: 65536) { bytes in
            bytes.count == 1 && bytes[0] == 0x0A || bytes.suffix(2) == [0x0A, 0x0A]
                || bytes.suffix(4) == [0x0D, 0x0A, 0x0D, 0x0A]
        }
        switch outcome {
        case .ended: break
        case .tooLarge: throw TokenctlError(.invalidInput, "the \(what) on standard input is larger than 64 KiB")
        case .timedOut:
            throw TokenctlError(
                .invalidInput, "standard input did not end within \(Int(saturating: timeout)) s (reading the \(what))")
        }
        return String(decoding: bytes, as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasSuffix("\r") ? String($0.dropLast()) : String($0) }
            .prefix { !$0.isEmpty }
            .map { $0 }
    }

    /// One line from `io`'s stdin (the prompt and the newline after it on its stderr): a trailing newline is dropped; anything else must be the value.
    /// Input that does not end within `timeout` seconds (a pipe left open) is an error, never a
    /// hang; a person typing at a terminal is not hurried, and what they type is not echoed.
    static func line(from io: IOStreams, what: String, prompt: String, timeout: Double) throws -> String {
        let input = io.input
        let interactive = Terminal.isTerminal(input)
        if interactive { io.standardError(prompt) }
        var bytes: [UInt8] = []
        // Scrub our copy once the String exists.
        defer { for index in bytes.indices { bytes[index] = 0 } }
        let outcome = readStandardInput(
            input, into: &bytes, deadline: interactive ? nil : .after(timeout), limit: 65536, echo: false
        ) { bytes in interactive && bytes.contains(UInt8(ascii: "\n")) }
        if interactive { io.standardError("\n") }
        if outcome == .timedOut {
            throw TokenctlError(
                .invalidInput, "standard input did not end within \(Int(saturating: timeout)) s (reading the \(what))",
                hint:
                    "Close the input after the value, e.g. 'printf %s \"$VALUE\" | tokenctl login ...'; or give more time with --timeout."
            )
        }
        var text = String(decoding: bytes, as: UTF8.self)
        if text.hasSuffix("\r\n") { text.removeLast(1) } else if text.hasSuffix("\n") { text.removeLast() }
        if text.hasSuffix("\r") { text.removeLast() }
        let flag = what == "refresh token" ? "--refresh-token-stdin" : "--client-secret-stdin"
        guard !text.isEmpty else {
            throw TokenctlError(
                .invalidInput, "no \(what) on standard input",
                hint: "Pipe it in: 'printf %s \"$VALUE\" | tokenctl login ... \(flag)'.")
        }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw TokenctlError(
                .invalidInput,
                "the \(what) on standard input contains whitespace or control characters (only one line, with the \(what) alone, is accepted)"
            )
        }
        return text
    }
}
