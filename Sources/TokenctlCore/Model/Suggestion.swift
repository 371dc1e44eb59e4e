import TokenctlEssentials

/// What to do about a failure, as the core says it: sentences in its own words, tokenctl command
/// lines as typed values (`SuggestedCommand`: a command and its options, never their spelling),
/// and command lines of other programs. The command layer renders it, spelling every option from
/// its command table, so that a renamed option is renamed in every hint; the text then holds to
/// `Hint.problems(in:)`.
///
/// Written as a string literal with interpolations: `"Run '\(tokenctl: profile, .logout([.noRevoke]))'."`.
public struct Suggestion: Sendable, Equatable, Codable {
    public enum Part: Sendable, Equatable, Codable {
        /// Words of the core's own (or a hint already rendered elsewhere, such as a forwarding host's).
        case text(String)
        /// A tokenctl command line: `tokenctl [--profile P] COMMAND OPTIONS`.
        case command(SuggestedCommand)
        /// The options of a command, named in a sentence without the command: "give it with --token-endpoint".
        case options(TokenctlCommand)
        /// A command line of another program, as it is (its options are not tokenctl's).
        case program(String)
        /// Another program's output piped into a tokenctl command line: `PROGRAM | tokenctl …`.
        case pipeline(String, SuggestedCommand)
    }

    public var parts: [Part]

    public init(parts: [Part]) { self.parts = parts.filter { $0 != .text("") } }

    /// Words of the core's own, or a hint rendered elsewhere.
    public init(_ text: String) { self.init(parts: [.text(text)]) }

    public var isEmpty: Bool { parts.isEmpty }

    /// The sentences, each ended with a full stop unless it has one, separated by one space;
    /// nil when every part is nil or empty (`Hint.sentences` for suggestions).
    public static func sentences(_ sentences: Suggestion?...) -> Suggestion? {
        let kept = sentences.compactMap { $0 }.filter { !$0.isEmpty }
        guard !kept.isEmpty else { return nil }
        var parts: [Part] = []
        for (index, sentence) in kept.enumerated() {
            if index > 0 { parts.append(.text(" ")) }
            parts += sentence.parts
            if !sentence.endsSentence { parts.append(.text(".")) }
        }
        return Suggestion(parts: parts).joiningText()
    }

    /// Whether the last part ends with a sentence's stop, as its text does (a tokenctl command
    /// line never does).
    var endsSentence: Bool {
        switch parts.last {
        case .text(let text), .program(let text): text.last.map { ".!?".contains($0) } ?? false
        default: false
        }
    }

    /// The same with neighbouring text parts joined into one.
    func joiningText() -> Suggestion {
        var joined: [Part] = []
        for part in parts {
            if case .text(let next) = part, case .text(let previous) = joined.last {
                joined[joined.count - 1] = .text(previous + next)
            } else {
                joined.append(part)
            }
        }
        return Suggestion(parts: joined)
    }

    public static func + (lhs: Suggestion, rhs: Suggestion) -> Suggestion {
        Suggestion(parts: lhs.parts + rhs.parts).joiningText()
    }
}

extension Suggestion: ExpressibleByStringInterpolation {
    public init(stringLiteral value: String) { self.init(value) }

    public init(stringInterpolation: StringInterpolation) {
        self = Suggestion(parts: stringInterpolation.parts).joiningText()
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var parts: [Part] = []

        public init(literalCapacity: Int, interpolationCount: Int) {}

        public mutating func appendLiteral(_ literal: String) { parts.append(.text(literal)) }

        /// A value in the core's own words (a profile, a URL, a number, a path).
        public mutating func appendInterpolation(_ value: some CustomStringConvertible) {
            parts.append(.text(value.description))
        }

        public mutating func appendInterpolation(_ text: String) { parts.append(.text(text)) }

        /// Another suggestion, in place.
        public mutating func appendInterpolation(_ suggestion: Suggestion) { parts += suggestion.parts }

        /// `tokenctl [--profile P] COMMAND OPTIONS`.
        public mutating func appendInterpolation(tokenctl profile: ProfileName, _ command: TokenctlCommand) {
            parts.append(.command(SuggestedCommand(profile, command)))
        }

        public mutating func appendInterpolation(_ command: SuggestedCommand) { parts.append(.command(command)) }

        /// The options of `command` alone, as a sentence names them ("--timeout SECONDS").
        public mutating func appendInterpolation(options command: TokenctlCommand) {
            parts.append(.options(command))
        }

        /// A command line of another program.
        public mutating func appendInterpolation(program commandLine: String) { parts.append(.program(commandLine)) }

        /// `PROGRAM | tokenctl …`.
        public mutating func appendInterpolation(program commandLine: String, into command: SuggestedCommand) {
            parts.append(.pipeline(commandLine, command))
        }
    }
}

/// A tokenctl command line in a hint: the profile and the command with its options, typed; the
/// command layer spells it.
public struct SuggestedCommand: Sendable, Equatable, Codable {
    public var profile: ProfileName
    /// Name the profile even when it is `default` (a hint for another host, or about a profile
    /// by the name it was asked for).
    public var namesDefaultProfile: Bool
    public var command: TokenctlCommand

    public init(_ profile: ProfileName, _ command: TokenctlCommand, namesDefaultProfile: Bool = false) {
        self.profile = profile
        self.command = command
        self.namesDefaultProfile = namesDefaultProfile
    }

    enum CodingKeys: String, CodingKey { case profile, namesDefaultProfile, command }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let name = try container.decode(String.self, forKey: .profile)
        guard let profile = ProfileName(rawValue: name) else {
            throw DecodingError.dataCorruptedError(
                forKey: .profile, in: container, debugDescription: "not a profile name")
        }
        self.init(
            profile, try container.decode(TokenctlCommand.self, forKey: .command),
            namesDefaultProfile: try container.decode(Bool.self, forKey: .namesDefaultProfile))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(profile.rawValue, forKey: .profile)
        try container.encode(namesDefaultProfile, forKey: .namesDefaultProfile)
        try container.encode(command, forKey: .command)
    }

    /// Signs the profile in again with what it saved.
    public static func login(_ profile: ProfileName) -> SuggestedCommand { SuggestedCommand(profile, .login([])) }
}

/// An option's value in a hint.
public enum SuggestedValue: Sendable, Equatable, Codable {
    /// Printed as it is: one shell word already.
    case word(String)
    /// Printed in double quotes (a value with spaces; `"`, `\`, `$` and `` ` `` escaped by the caller).
    case quoted(String)
    /// The value's name in capitals, for the user to fill in (`--timeout SECONDS`).
    case placeholder
    /// No value: the option named alone, as prose names it ("check --scope").
    case omitted
}

/// The tokenctl commands that hints suggest (and the refresh schedule runs), each with the
/// options it is given with.
public enum TokenctlCommand: Sendable, Equatable, Codable {
    case login([LoginOption])
    case logout([LogoutOption])
    case status([StatusOption])
    case doctor([DoctorOption])
    case token([TokenOption])
    case refresh([RefreshOption])
    case schedule(ScheduleAction, [ScheduleOption])
    case forward(ForwardAction, [ForwardOption])
    case key(KeyAction, [KeyOption])
    case keyring(KeyringAction, [KeyringOption])
    case proxyPassword(ProxyPasswordAction, [ProxyPasswordOption])

    public enum LoginOption: Sendable, Equatable, Codable {
        case provider(SuggestedValue)
        case tenant(SuggestedValue)
        case issuer(SuggestedValue)
        case clientID(SuggestedValue)
        case device, browser
        case port(SuggestedValue)
        case clientSecretStdin
        case scope(SuggestedValue)
        case audience(SuggestedValue)
        case resource(SuggestedValue)
        case tokenEndpoint(SuggestedValue)
        case revocationEndpoint(SuggestedValue)
        case deviceAuthorizationEndpoint(SuggestedValue)
        case authorizationEndpoint(SuggestedValue)
        case jwksURI(SuggestedValue)
        case caBundle(SuggestedValue)
        case dpop, noDPoP
        /// A machine profile's grant (`client-credentials`) and its client authentication method.
        case grant(SuggestedValue)
        case clientAuth(SuggestedValue)
        /// The files of a platform's tokens a machine profile reads (RFC 8693, RFC 7523, RFC 7521).
        case subjectTokenFile(SuggestedValue)
        case assertionFile(SuggestedValue)
        case clientAssertionFile(SuggestedValue)
    }

    public enum RefreshOption: Sendable, Equatable, Codable {
        case all
        case ifExpiringWithin(SuggestedValue)
    }

    public enum LogoutOption: Sendable, Equatable, Codable { case noRevoke, forget, orphans }
    public enum StatusOption: Sendable, Equatable, Codable { case all }
    public enum DoctorOption: Sendable, Equatable, Codable { case timeout(SuggestedValue) }
    public enum TokenOption: Sendable, Equatable, Codable {
        case force
        case format(TokenFormat)
        case timeout(SuggestedValue)
    }
    /// The formats of `token` that hints name.
    public enum TokenFormat: Sendable, Equatable, Codable, CaseIterable { case dpop }
    public enum ScheduleAction: Sendable, Equatable, Codable, CaseIterable { case install }
    public enum ScheduleOption: Sendable, Equatable, Codable, CaseIterable { case systemd, cron }
    public enum ForwardAction: Sendable, Equatable, Codable, CaseIterable { case enable, status, listen }
    public enum KeyAction: Sendable, Equatable, Codable, CaseIterable { case create, show, `import`, rotate, remove }
    public enum KeyOption: Sendable, Equatable, Codable {
        case certificate, next, commit, passwordStdin
        case format(SuggestedValue)
        case type(SuggestedValue)
        case bundle(SuggestedValue)
    }
    public enum KeyringAction: Sendable, Equatable, Codable, CaseIterable { case setup, status, remove }
    public enum ProxyPasswordAction: Sendable, Equatable, Codable, CaseIterable { case set, remove }
    public enum ProxyPasswordOption: Sendable, Equatable, Codable, CaseIterable { case passwordStdin }
    public enum KeyringOption: Sendable, Equatable, Codable, CaseIterable { case unattended, force }
    public enum ForwardOption: Sendable, Equatable, Codable {
        case scope(SuggestedValue)
        case audience(SuggestedValue)
    }
}
