import TokenctlCore
import TokenctlEssentials

// Reading a command's parsed options by the `OptionSpec` that declares them, never by spelling,
// each value checked once into the type the command uses. Every command's `Options` struct is
// built from these in its `init(_:)`, which throws the usage errors; command bodies read only
// the struct's fields.

extension ParsedOptions {
    func value(_ option: OptionSpec) -> String? { value(option.key) }
    func has(_ option: OptionSpec) -> Bool { has(option.key) }

    /// A number of seconds (non-negative, or positive without `allowZero`; at most a year).
    func seconds(_ option: OptionSpec, command: String, default fallback: Double, allowZero: Bool = true)
        throws(UsageError) -> Double
    {
        try optionalSeconds(option, command: command, allowZero: allowZero) ?? fallback
    }

    /// A number of seconds when the option is given.
    func optionalSeconds(_ option: OptionSpec, command: String, allowZero: Bool = true) throws(UsageError) -> Double? {
        guard let text = value(option) else { return nil }
        guard let number = Double(text), number.isFinite, allowZero ? number >= 0 : number > 0, number <= 31_536_000
        else {
            throw UsageError(
                "Invalid value '\(Output.printable(String(text.prefix(40))))' for '\(option.key)': expected \(allowZero ? "a non-negative" : "a positive") number of seconds.",
                command: command)
        }
        return number
    }

    /// One of a closed set (an enum whose raw values are the option's `choices`).
    func choice<Choice: RawRepresentable & CaseIterable>(
        _ option: OptionSpec, command: String, default fallback: Choice
    ) throws(UsageError) -> Choice
    where Choice.RawValue == String {
        guard let text = value(option) else { return fallback }
        guard let chosen = Choice(rawValue: text) else {
            let names = Choice.allCases.map(\.rawValue)
            throw UsageError(
                "Invalid value '\(Output.printable(String(text.prefix(40))))' for '\(option.key)': expected \(names.dropLast().joined(separator: ", ")) or \(names.last!).",
                command: command)
        }
        return chosen
    }

    /// The choice a command's first argument names (`schedule install`, `forward enable`,
    /// `git-credential get`, `completion bash`): one of a closed set, the enum whose raw values
    /// are the spec's `argumentChoices`.
    func action<Action: RawRepresentable & CaseIterable>(
        _: Action.Type, command: String, wording: ArgumentWording = .action
    ) throws(UsageError) -> Action
    where Action.RawValue == String {
        let names = Action.allCases.map(\.rawValue)
        let list = "\(names.dropLast().joined(separator: ", ")) or \(names.last!)"
        guard let text = arguments.first else {
            switch wording {
            case .action: throw UsageError("Missing action: \(list).", command: command)
            case .named(let noun, let note): throw UsageError("Missing the \(noun): \(list)\(note).", command: command)
            }
        }
        guard let action = Action(rawValue: text) else {
            let shown = Output.printable(String(text.prefix(40)))
            switch wording {
            case .action:
                let hint = closestMatch(to: text, in: names).map { " Did you mean '\($0)'?" } ?? ""
                throw UsageError("Unknown action '\(shown)'.\(hint)", command: command)
            case .named(let noun, _):
                throw UsageError("Unknown \(noun) '\(shown)': expected \(list).", command: command)
            }
        }
        return action
    }

    /// The token target of `--scope`, `--audience` and `--resource` (`.session` without them).
    func target(command: String) throws(UsageError) -> TokenTarget {
        do {
            return try TokenTarget(
                scope: value(SharedCommandSpecs.scope), audience: value(SharedCommandSpecs.audience),
                resource: value(SharedCommandSpecs.resource))
        } catch {
            throw UsageError(error.description, command: command)
        }
    }
}

/// How a command's usage errors name its first argument (`ParsedOptions.action`).
enum ArgumentWording {
    /// "Missing action: a, b or c." and "Unknown action 'x'. Did you mean 'a'?"
    case action
    /// "Missing the NOUN: a, b or cNOTE." and "Unknown NOUN 'x': expected a, b or c."
    case named(String, note: String = "")
}
