import TokenctlCore
import TokenctlEssentials

enum EventsCommand: EngineCommand {
    static let followOption = OptionSpec(
        "-f", "--follow", help: "Keep printing events as they are appended, until interrupted.")
    static let sinceOption = OptionSpec(
        "--since", value: "time",
        help: "Only events at or after this time: an ISO 8601 time (2026-11-29T10:00:00Z) or an age (90s, 30m, 2h, 7d)."
    )
    static let significanceOption = OptionSpec(
        "--min-significance", value: "level", choices: EventSignificance.allCases.map(\.rawValue),
        help: "low (everything, default), medium, or high.")
    static let jsonOption = OptionSpec("--json", help: "Print the log's JSON lines as they are.")

    static let spec = CommandSpec(
        name: "events",
        abstract: "Show the audit event log (logins, refreshes, logouts, ended sessions).",
        usage: "[--follow] [--since <time>] [--min-significance <level>] [--json]",
        options: [followOption, sinceOption, significanceOption, jsonOption],
        discussion:
            "Events of all profiles are shown unless --profile names one. The log is $XDG_STATE_HOME/tokenctl/events.jsonl; it never holds a token and is never sent anywhere."
    )

    /// --follow runs until interrupted.
    static func hasDeadline(_ options: ParsedOptions) -> Bool { false }

    /// `events`' options, checked.
    struct Options: Equatable, Sendable {
        var follow: Bool
        var since: Double?
        var minimumSignificance: EventSignificance
        var json: Bool

        init(_ parsed: ParsedOptions, now: Double = Clock.system.now()) throws(UsageError) {
            follow = parsed.has(followOption)
            json = parsed.has(jsonOption)
            if let text = parsed.value(sinceOption) {
                guard let time = EventsCommand.parseTime(text, now: now) else {
                    throw UsageError(
                        "Invalid value '\(Output.printable(String(text.prefix(40))))' for '--since': expected an ISO 8601 time (2026-11-29T10:00:00Z) or an age (90s, 30m, 2h, 7d).",
                        command: "events")
                }
                since = time
            }
            minimumSignificance = try parsed.choice(significanceOption, command: "events", default: .low)
        }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let profileFilter = context.profileChosen ? context.profile.rawValue : nil
        let options = try Options(context.options, now: context.clock.now())
        let log = EventLog(stateDirectory: context.paths.stateDirectory)
        let (since, minimum, json) = (options.since, options.minimumSignificance, options.json)
        func show(_ records: [EventRecord]) {
            guard !records.isEmpty else { return }
            context.io.standardOutput(records.map { json ? $0.jsonLine() : line($0) }.joined())
        }
        let filter = EventLog.Filter(since: since, minimumSignificance: minimum, profile: profileFilter)
        guard options.follow else {
            show(log.records(since: since, minimumSignificance: minimum, profile: profileFilter))
            return .success
        }
        // Follow appends by counting each file's complete lines, read once for the backlog
        // and again only when the file's size or inode changes; a rotation (new inode) first
        // drains what was appended to the old file before it was renamed. The event log and
        // the forward's refusal log are followed alike.
        var followers = [Follower(log: log)] + (log.refusals.map { [Follower(log: $0)] } ?? [])
        show(log.records(since: since, minimumSignificance: minimum, profile: profileFilter))
        while true {
            try? await context.clock.sleep(0.2)
            for index in followers.indices {
                show(followers[index].appended().compactMap(EventRecord.parse).filter(filter.matches))
            }
        }
    }

    /// The lines appended to one log since the last look.
    struct Follower {
        let log: EventLog
        var last: (size: Int, inode: UInt64)?
        var inode: UInt64?
        var consumed: Int

        init(log: EventLog) {
            self.log = log
            last = log.fingerprint()
            inode = last?.inode
            consumed = log.completeLines(of: log.path).count
        }

        mutating func appended() -> [Substring] {
            guard let fingerprint = log.fingerprint() else { return [] }
            if let last, fingerprint.size == last.size, fingerprint.inode == last.inode { return [] }
            last = fingerprint
            var lines: [Substring] = []
            if fingerprint.inode != inode {
                lines += log.completeLines(of: log.rotatedPath).dropFirst(consumed)
                inode = fingerprint.inode
                consumed = 0
            }
            let live = log.completeLines(of: log.path)
            if live.count > consumed {
                lines += live.dropFirst(consumed)
                consumed = live.count
            }
            return lines
        }
    }

    static func line(_ record: EventRecord) -> String {
        var text =
            "\(Output.timestamp(record.time))  \(Output.padded(record.event.significance.rawValue, to: 6))  \(Output.padded(record.event.rawValue, to: 16)) \(record.profile)"
        if let subject = record.subject { text += " " + Output.printable(subject) }
        if let reason = record.reason { text += " (\(Output.printable(reason)))" }
        if let issuer = record.issuer { text += "  \(Output.printable(issuer))" }
        return text + "\n"
    }

    /// An ISO 8601 time, or an age before `now` such as 90s, 30m, 2h, 7d.
    static func parseTime(_ text: String, now: Double) -> Double? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        if let unit = text.last, let scale = units[unit], let value = Double(text.dropLast()), value >= 0 {
            return now - value * scale
        }
        return (try? Date(text, strategy: .iso8601))?.timeIntervalSince1970
    }
}
