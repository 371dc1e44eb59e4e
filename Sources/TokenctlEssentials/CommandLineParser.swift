/// The hand-written argv parser: global options, a command, its options.
///
/// Accepts `--opt value`, `--opt=value`, `--` (everything after is an argument), global
/// options before or after the command, `-h/--help` anywhere, `help COMMAND`, `--version`.
public struct CommandLineParser: Sendable {
    public let toolName: String
    public let commands: [CommandSpec]

    public init(toolName: String, commands: [CommandSpec]) {
        self.toolName = toolName
        self.commands = commands
    }

    public func command(named name: String) -> CommandSpec? {
        commands.first { $0.name == name }
    }

    public func parse(_ arguments: [String]) throws(UsageError) -> Invocation {
        var invocation = Invocation(action: .topLevelHelp, options: ParsedOptions(), profileName: nil, verbose: false)
        var index = 0
        var command: CommandSpec?
        var helpRequested = false
        var endOfOptions = false

        func takeValue(_ option: OptionSpec, inline: String?, spelled: String) throws(UsageError) -> String {
            if let inline { return inline }
            index += 1
            guard index < arguments.count else {
                throw UsageError("Missing value for '\(spelled) <\(option.valueName!)>'.", command: command?.name)
            }
            return arguments[index]
        }

        while index < arguments.count {
            let argument = arguments[index]
            defer { index += 1 }

            // Byte-level tests (here and below): Character-level String operations page in the
            // Unicode tables, which the static front's `token` hits must not pay for.
            if endOfOptions || argument.utf8.first != UInt8(ascii: "-") || argument == "-" {
                if command == nil {
                    if argument == "help" && !endOfOptions {
                        // `tokenctl help [COMMAND]`
                        let rest = arguments[(index + 1)...]
                        guard let topic = rest.first else { return withAction(.topLevelHelp, invocation) }
                        if topic == "help" || GlobalOptions.help.names.contains(topic) {
                            return withAction(.topLevelHelp, invocation)
                        }
                        guard rest.count == 1 else {
                            throw UsageError("'help' takes one command name.", command: nil)
                        }
                        guard self.command(named: topic) != nil else { throw unknownCommand(topic) }
                        return withAction(.commandHelp(topic), invocation)
                    }
                    guard let found = self.command(named: argument) else { throw unknownCommand(argument) }
                    command = found
                    continue
                }
                invocation.options.arguments.append(argument)
                if command!.takesCommandLine { endOfOptions = true }
                if invocation.options.arguments.count > command!.maximumArguments {
                    throw UsageError("Unexpected argument '\(argument)'.", command: command!.name)
                }
                continue
            }
            if argument == "--" {
                endOfOptions = true
                continue
            }

            let spelled: String
            let inline: String?
            if argument.utf8.starts(with: "--".utf8), let equals = argument.utf8.firstIndex(of: UInt8(ascii: "=")) {
                spelled = String(decoding: argument.utf8[..<equals], as: UTF8.self)
                inline = String(decoding: argument.utf8[argument.utf8.index(after: equals)...], as: UTF8.self)
            } else {
                spelled = argument
                inline = nil
            }

            if spelled == GlobalOptions.version.key && command == nil {
                return withAction(.version, invocation)
            }
            if GlobalOptions.help.names.contains(spelled) {
                helpRequested = true
                continue
            }
            if spelled == GlobalOptions.profile.key {
                guard invocation.profileName == nil else {
                    throw UsageError("'--profile' was given more than once.", command: command?.name)
                }
                invocation.profileName = try takeValue(GlobalOptions.profile, inline: inline, spelled: spelled)
                continue
            }
            if GlobalOptions.verbose.names.contains(spelled) {
                guard inline == nil else { throw UsageError("'\(spelled)' does not take a value.", command: command?.name) }
                invocation.verbose = true
                continue
            }

            let candidates = (command?.options ?? []) + GlobalOptions.all + (command == nil ? [GlobalOptions.version] : [])
            guard let option = candidates.first(where: { $0.names.contains(spelled) }) else {
                let spellings = candidates.flatMap(\.names).filter { $0.hasPrefix("--") }
                let hint = closestMatch(to: spelled, in: spellings).map { " Did you mean '\($0)'?" } ?? ""
                if command == nil {
                    throw UsageError("Unknown option '\(spelled)'.\(hint)", command: nil)
                }
                throw UsageError("Unknown option '\(spelled)' for '\(command!.name)'.\(hint)", command: command!.name)
            }
            if option.isFlag {
                guard inline == nil else { throw UsageError("'\(spelled)' does not take a value.", command: command?.name) }
                invocation.options.insertFlag(option.key)
            } else {
                guard invocation.options.value(option.key) == nil else {
                    throw UsageError("'\(option.key)' was given more than once.", command: command?.name)
                }
                invocation.options.setValue(try takeValue(option, inline: inline, spelled: spelled), for: option.key)
            }
        }

        if let command {
            invocation.action = helpRequested ? .commandHelp(command.name) : .run(command.name)
        } else {
            // No command (`tokenctl`, `tokenctl --profile x`): show the top-level help.
            invocation.action = .topLevelHelp
        }
        return invocation
    }

    private func withAction(_ action: Invocation.Action, _ invocation: Invocation) -> Invocation {
        var copy = invocation
        copy.action = action
        return copy
    }

    private func unknownCommand(_ name: String) -> UsageError {
        let hint = closestMatch(to: name, in: commands.map(\.name)).map { " Did you mean '\($0)'?" } ?? ""
        return UsageError("Unknown command '\(name)'.\(hint)", command: nil)
    }
}

/// The closest candidate by edit distance, if it is close enough to be a likely typo.
public func closestMatch(to word: String, in candidates: [String]) -> String? {
    let scored = candidates.map { ($0, editDistance(word, $0)) }
    guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
    let allowed = max(2, word.count / 3)
    return best.1 <= allowed ? best.0 : nil
}

/// Levenshtein distance over Unicode scalars.
public func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.unicodeScalars), b = Array(b.unicodeScalars)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
            current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}
