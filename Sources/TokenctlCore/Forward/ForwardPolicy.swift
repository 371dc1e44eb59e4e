import TokenctlEssentials

/// What a forwarded request may get of a profile: whether it is forwarded at all, and the
/// target it is served for within the profile's `forward_scope` and `forward_audience` limits.
/// The serving side's whole decision, apart from the peer's user (`ForwardServer`).
public enum ForwardPolicy {
    /// A refusal: exit 77 for the client, the message and hint it shows, and the event's reason.
    public struct Refusal: Error, Equatable, Sendable {
        public var status: ExitStatus
        public var message: String
        public var hint: Suggestion?
        public var reason: String

        init(status: ExitStatus, message: String, hint: Suggestion?, reason: String) {
            self.status = status
            self.message = message
            self.hint = hint
            self.reason = reason
        }

        /// A word asked for that the profile's limit (`forward_scope`, `forward_audience`) does
        /// not hold: what it is and how much of it to show, the limit with its key and its option
        /// of `forward enable`, and the words asked with what to call them in the hint; `reason`
        /// goes to the event.
        init(
            beyond: (word: String, what: String, shown: Int),
            limit: (words: [String], key: String, option: (SuggestedValue) -> TokenctlCommand.ForwardOption),
            asked: (words: [String], name: String), reason: String, profile: ProfileName, host: String
        ) {
            let word = ForwardProtocol.sanitized(beyond.word, limit: beyond.shown)
            self.init(
                status: .loginRequired,
                message:
                    "\(beyond.what) '\(word)' is beyond what profile '\(profile)' forwards (\(limit.key) = \(limit.words.joined(separator: " ")))",
                hint: "Ask for \(asked.name) within it, or widen it on \(host): "
                    + widening(profile, limit.option, limit.words, asked.words) + ".",
                reason: reason)
        }
    }

    /// The target to serve `request` for, or why not.
    ///
    /// - A request without a scope gets the whole `forward_scope` when one is set, else the session's own.
    /// - Every scope word asked for must be in `forward_scope` (when set).
    /// - An audience or resource asked for must be in `forward_audience` (when set).
    public static func target(
        for request: ForwardRequest, profile: ProfileName, configuration: ProfileConfiguration?, host: String
    ) -> Result<TokenTarget, Refusal> {
        guard let configuration, configuration.forward else {
            // The same words for a profile that does not exist: a remote learns nothing more.
            return .failure(
                Refusal(
                    status: .loginRequired, message: "profile '\(profile)' is not forwarded from \(host)",
                    hint:
                        "On \(host), share it with '\(SuggestedCommand(profile, .forward(.enable, []), namesDefaultProfile: true))'.",
                    reason: "not forwarded"))
        }
        var scope = request.scope
        if let limit = configuration.forwardScope {
            if let asked = scope {
                let words = asked.split(separator: " ").map(String.init)
                if let beyond = words.first(where: { !limit.contains($0) }) {
                    return .failure(
                        Refusal(
                            beyond: (beyond, "scope", 100), limit: (limit, "forward_scope", { .scope($0) }),
                            asked: (words, "scopes"), reason: "scope beyond forward_scope", profile: profile, host: host
                        ))
                }
            } else {
                scope = limit.joined(separator: " ")
            }
        }
        if let limit = configuration.forwardAudience {
            let asked =
                [request.audience].compactMap { $0 } + (request.resource?.split(separator: " ").map(String.init) ?? [])
            if let beyond = asked.first(where: { !limit.contains($0) }) {
                return .failure(
                    Refusal(
                        beyond: (beyond, "audience or resource", 200),
                        limit: (limit, "forward_audience", { .audience($0) }), asked: (asked, "one"),
                        reason: "audience beyond forward_audience", profile: profile,
                        host: host))
            }
        }
        do {
            return .success(try TokenTarget(scope: scope, audience: request.audience, resource: request.resource))
        } catch {
            return .failure(
                Refusal(status: .usage, message: error.description, hint: nil, reason: "invalid target"))
        }
    }

    /// The `forward enable` that lets `asked` through, as it runs: the limit and the words
    /// asked, double-quoted (the hint itself is in single quotes, as every hint of tokenctl's).
    static func widening(
        _ profile: ProfileName, _ option: (SuggestedValue) -> TokenctlCommand.ForwardOption, _ limit: [String],
        _ asked: [String]
    ) -> Suggestion {
        var words = limit
        for word in asked where !words.contains(word) { words.append(word) }
        let value = ForwardProtocol.sanitized(words.joined(separator: " "), limit: 2048).map { character in
            "\\\"$`".contains(character) ? "\\" + String(character) : String(character)
        }.joined()
        return "'\(SuggestedCommand(profile, .forward(.enable, [option(.quoted(value))]), namesDefaultProfile: true))'"
    }
}
