import TokenctlEssentials

/// How a hint is put together, so that whatever a user copies out of it runs as printed:
/// every command stands in single quotes, a quoted command holds no sentence's end, and every
/// sentence ends with its full stop before the next begins (". Nothing was sent" never runs on
/// from a command). Hints that join a hint of another part to sentences of their own do it
/// with `Suggestion.sentences` (`sentences` here for text); `problems(in:)` is the rule the
/// tests hold every rendered hint to.
public enum Hint {
    /// The sentences, each ended with a full stop unless it has one, separated by one space;
    /// nil when every part is nil or empty.
    public static func sentences(_ parts: String?...) -> String? {
        let kept = parts.compactMap { $0 }.filter { !$0.isEmpty }.map { part in
            part.last.map { ".!?".contains($0) } == true ? part : part + "."
        }
        return kept.isEmpty ? nil : kept.joined(separator: " ")
    }

    /// Programs whose command lines hints give, and the first word that makes `tokenctl` a
    /// command rather than the program's name in prose ("tokenctl keeps its locks in …").
    static let programs: Set<String> = [
        "gnome-keyring-daemon", "loginctl", "printf", "apt-get", "timedatectl", "systemctl", "secret-tool", "keyctl",
        "crontab",
    ]
    static let tokenctlCommands: Set<String> = [
        "login", "token", "refresh", "logout", "status", "doctor", "schedule", "events", "exec", "git-credential",
        "completion", "help",
        "--profile", "--version",
    ]

    /// What is wrong with `hint` (empty when nothing): a command outside single quotes, a quoted
    /// command that holds a sentence's end, a quote that is never closed, or a last sentence
    /// without its full stop (`terminated`: false for a fragment that is joined to more text).
    public static func problems(in hint: String, terminated: Bool = true) -> [String] {
        var problems: [String] = []
        let characters = Array(hint)
        func isWordCharacter(_ index: Int) -> Bool {
            index >= 0 && index < characters.count && (characters[index].isLetter || characters[index].isNumber)
        }
        // Split into the text outside quotes and the quoted spans. A quote opens after a
        // non-word character and closes before one; an apostrophe (server's) does neither.
        var outside = ""
        var quoted: [String] = []
        var current: String?
        for (index, character) in characters.enumerated() {
            if character == "'" && current == nil && !isWordCharacter(index - 1) && index + 1 < characters.count
                && characters[index + 1] != " "
            {
                current = ""
                outside += " "
            } else if character == "'", let span = current, !isWordCharacter(index + 1), !span.isEmpty, span.last != " "
            {
                quoted.append(span)
                current = nil
            } else if current != nil {
                current!.append(character)
            } else {
                outside.append(character)
            }
        }
        if let span = current { problems.append("a quote is never closed: '\(span)") }
        let words = outside.split(whereSeparator: { $0 == " " || $0 == "(" || $0 == ")" || $0 == "," || $0 == ";" })
            .map(String.init)
        for (index, word) in words.enumerated() {
            let bare = String(
                word.drop(while: { ":.".contains($0) }).reversed().drop(while: { ":.".contains($0) }).reversed())
            let next = index + 1 < words.count ? words[index + 1] : nil
            if programs.contains(bare) || (bare == "tokenctl" && next.map(tokenctlCommands.contains) == true) {
                problems.append(
                    "a command outside quotes: '\(([bare] + words.dropFirst(index + 1).prefix(3)).joined(separator: " "))…'"
                )
            }
        }
        for span in quoted
        where span.split(separator: " ").first.map({ programs.contains(String($0)) || $0 == "tokenctl" }) == true {
            // "tokenctl login ..." stands for more options: an ellipsis is not a sentence's end.
            let unellipsed = span.replacingEllipses()
            if unellipsed.hasSuffix(".") || unellipsed.contains(". ") {
                problems.append("a quoted command holds a sentence's end: '\(span)'")
            }
        }
        if terminated, let last = characters.last, !".!?".contains(last),
            !(last == "'" && characters.dropLast().last.map { ".!?".contains($0) } == true)
        {
            problems.append("the last sentence has no full stop: …\(String(characters.suffix(30)))")
        }
        return problems
    }
}

extension String {
    fileprivate func replacingEllipses() -> String {
        var text = self
        while let range = text.firstRange(of: "...") { text.replaceSubrange(range, with: "…") }
        return text
    }
}
