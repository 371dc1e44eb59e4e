import TokenctlCore
import TokenctlEssentials

/// The one renderer of hints: a core `Suggestion` as the text tokenctl prints, every tokenctl
/// command line spelled from the command table (each command's `CommandSpec` name, its actions
/// and its `OptionSpec`s), so that renaming an option renames it in every hint.
public enum HintText {
    /// The text of `suggestion`, as stderr, JSON fields, doctor and the forward protocol carry it.
    public static func render(_ suggestion: Suggestion) -> String {
        suggestion.parts.map { part in
            switch part {
            case .text(let text), .program(let text): text
            case .command(let command): commandLine(command)
            case .options(let command): words(of: command).options.joined(separator: " ")
            case .pipeline(let program, let command): "\(program) | \(commandLine(command))"
            }
        }.joined()
    }

    /// `tokenctl [--profile P] COMMAND OPTIONS`, with `--profile` unless the profile is `default`.
    public static func commandLine(_ command: SuggestedCommand) -> String {
        var line = ["tokenctl"]
        if command.profile != .default || command.namesDefaultProfile {
            line += [GlobalOptions.profile.key, command.profile.rawValue]
        }
        let spelled = words(of: command.command)
        return (line + spelled.command + spelled.options).joined(separator: " ")
    }

    /// `command`'s arguments, as a job that runs the executable passes them (the refresh schedule).
    public static func arguments(_ command: TokenctlCommand) -> [String] {
        let spelled = words(of: command)
        return spelled.command + spelled.options
    }

    /// The command table hints spell from: every command's specification.
    public static var commandSpecs: [CommandSpec] { Commands.all.map { $0.spec } }

    /// Every long option of the command table, global ones included (`--profile`, `--version`).
    public static var longOptionNames: Set<String> {
        let options = commandSpecs.flatMap(\.options) + GlobalOptions.all + [GlobalOptions.version]
        return Set(options.flatMap(\.names).filter { $0.hasPrefix("--") })
    }

    /// The command's words (its name, and its action) and its options' words.
    static func words(of command: TokenctlCommand) -> (command: [String], options: [String]) {
        let (name, action, options) = spelling(command)
        return ([name] + (action.map { [$0] } ?? []), options.flatMap { words($0.spec, $0.value) })
    }

    /// The command's name from its spec, its action, and each option's spec with its value.
    static func spelling(_ command: TokenctlCommand) -> (
        name: String, action: String?, options: [(spec: OptionSpec, value: SuggestedValue?)]
    ) {
        switch command {
        case .login(let options): (LoginCommand.spec.name, nil, options.map(spelling))
        case .logout(let options): (LogoutCommand.spec.name, nil, options.map(spelling))
        case .status(let options): (StatusCommand.spec.name, nil, options.map(spelling))
        case .doctor(let options): (DoctorCommand.spec.name, nil, options.map(spelling))
        case .token(let options): (TokenCommand.spec.name, nil, options.map(spelling))
        case .refresh(let options): (RefreshCommand.spec.name, nil, options.map(spelling))
        case .schedule(let action, let options): (ScheduleCommand.spec.name, spelling(action), options.map(spelling))
        case .forward(let action, let options): (ForwardCommand.spec.name, spelling(action), options.map(spelling))
        case .key(let action, let options): (KeyCommand.spec.name, spelling(action), options.map(spelling))
        case .keyring(let action, let options):
            (KeyringCommand.spec.name, spelling(action), options.map(spelling))
        case .proxyPassword(let action, let options):
            (ProxyPasswordCommand.spec.name, spelling(action), options.map(spelling))
        }
    }

    static func words(_ spec: OptionSpec, _ value: SuggestedValue?) -> [String] {
        switch value {
        case nil, .omitted: [spec.key]
        case .word(let word): [spec.key, word]
        case .quoted(let text): [spec.key, "\"\(text)\""]
        case .placeholder: [spec.key, (spec.valueName ?? "value").uppercased()]
        }
    }

    static func spelling(_ option: TokenctlCommand.LoginOption) -> (spec: OptionSpec, value: SuggestedValue?) {
        typealias Option = LoginCommand.Option
        return switch option {
        case .provider(let value): (Option.provider, value)
        case .tenant(let value): (Option.tenant, value)
        case .issuer(let value): (Option.issuer, value)
        case .clientID(let value): (Option.clientID, value)
        case .device: (Option.device, nil)
        case .browser: (Option.browser, nil)
        case .port(let value): (Option.port, value)
        case .clientSecretStdin: (Option.clientSecretStdin, nil)
        case .scope(let value): (Option.scope, value)
        case .audience(let value): (Option.audience, value)
        case .resource(let value): (Option.resource, value)
        case .tokenEndpoint(let value): (Option.tokenEndpoint, value)
        case .revocationEndpoint(let value): (Option.revocationEndpoint, value)
        case .deviceAuthorizationEndpoint(let value): (Option.deviceAuthorizationEndpoint, value)
        case .authorizationEndpoint(let value): (Option.authorizationEndpoint, value)
        case .jwksURI(let value): (Option.jwksURI, value)
        case .caBundle(let value): (Option.caBundle, value)
        case .dpop: (Option.dpop, nil)
        case .noDPoP: (Option.noDPoP, nil)
        case .grant(let value): (Option.grant, value)
        case .clientAuth(let value): (Option.clientAuth, value)
        case .subjectTokenFile(let value): (Option.subjectTokenFile, value)
        case .assertionFile(let value): (Option.assertionFile, value)
        case .clientAssertionFile(let value): (Option.clientAssertionFile, value)
        }
    }

    static func spelling(_ option: TokenctlCommand.LogoutOption) -> (spec: OptionSpec, value: SuggestedValue?) {
        switch option {
        case .noRevoke: (LogoutCommand.noRevokeOption, nil)
        case .forget: (LogoutCommand.forgetOption, nil)
        case .orphans: (LogoutCommand.orphansOption, nil)
        }
    }

    static func spelling(_ option: TokenctlCommand.RefreshOption) -> (spec: OptionSpec, value: SuggestedValue?) {
        switch option {
        case .all: (RefreshCommand.allOption, nil)
        case .ifExpiringWithin(let value): (RefreshCommand.windowOption, value)
        }
    }

    static func spelling(_ option: TokenctlCommand.StatusOption) -> (spec: OptionSpec, value: SuggestedValue?) {
        switch option {
        case .all: (StatusCommand.allOption, nil)
        }
    }

    static func spelling(_ option: TokenctlCommand.DoctorOption) -> (spec: OptionSpec, value: SuggestedValue?) {
        switch option {
        case .timeout(let value): (DoctorCommand.timeoutOption, value)
        }
    }

    static func spelling(_ option: TokenctlCommand.TokenOption) -> (spec: OptionSpec, value: SuggestedValue?) {
        switch option {
        case .force: (SharedCommandSpecs.TokenOption.force, nil)
        case .format(let format): (SharedCommandSpecs.TokenOption.format, .word(spelling(format)))
        case .timeout(let value): (SharedCommandSpecs.timeout, value)
        }
    }

    static func spelling(_ format: TokenctlCommand.TokenFormat) -> String {
        switch format {
        case .dpop: SharedCommandSpecs.TokenFormat.dpop.rawValue
        }
    }

    static func spelling(_ action: TokenctlCommand.ScheduleAction) -> String {
        switch action {
        case .install: ScheduleCommand.Action.install.rawValue
        }
    }

    static func spelling(_ option: TokenctlCommand.ScheduleOption) -> (spec: OptionSpec, value: SuggestedValue?) {
        switch option {
        case .systemd: (ScheduleCommand.systemdOption, nil)
        case .cron: (ScheduleCommand.cronOption, nil)
        }
    }

    static func spelling(_ action: TokenctlCommand.ForwardAction) -> String {
        switch action {
        case .enable: ForwardCommand.Action.enable.rawValue
        case .status: ForwardCommand.Action.status.rawValue
        case .listen: ForwardCommand.Action.listen.rawValue
        }
    }

    static func spelling(_ action: TokenctlCommand.KeyAction) -> String {
        switch action {
        case .create: KeyCommand.Action.create.rawValue
        case .show: KeyCommand.Action.show.rawValue
        case .import: KeyCommand.Action.import.rawValue
        case .rotate: KeyCommand.Action.rotate.rawValue
        case .remove: KeyCommand.Action.remove.rawValue
        }
    }

    static func spelling(_ option: TokenctlCommand.KeyOption) -> (spec: OptionSpec, value: SuggestedValue?) {
        switch option {
        case .certificate: (KeyCommand.certificateOption, nil)
        case .next: (KeyCommand.nextOption, nil)
        case .commit: (KeyCommand.commitOption, nil)
        case .format(let value): (KeyCommand.formatOption, value)
        case .type(let value): (KeyCommand.typeOption, value)
        case .bundle(let value): (KeyCommand.bundleOption, value)
        case .passwordStdin: (KeyCommand.passwordStdinOption, nil)
        }
    }

    static func spelling(_ action: TokenctlCommand.KeyringAction) -> String {
        switch action {
        case .setup: KeyringCommand.Action.setup.rawValue
        case .status: KeyringCommand.Action.status.rawValue
        case .remove: KeyringCommand.Action.remove.rawValue
        }
    }

    static func spelling(_ option: TokenctlCommand.KeyringOption) -> (spec: OptionSpec, value: SuggestedValue?) {
        switch option {
        case .unattended: (KeyringCommand.unattendedOption, nil)
        case .force: (KeyringCommand.forceOption, nil)
        }
    }

    static func spelling(_ action: TokenctlCommand.ProxyPasswordAction) -> String {
        switch action {
        case .set: ProxyPasswordCommand.Action.set.rawValue
        case .remove: ProxyPasswordCommand.Action.remove.rawValue
        }
    }

    static func spelling(_ option: TokenctlCommand.ProxyPasswordOption) -> (spec: OptionSpec, value: SuggestedValue?) {
        switch option {
        case .passwordStdin: (ProxyPasswordCommand.passwordStdinOption, nil)
        }
    }

    static func spelling(_ option: TokenctlCommand.ForwardOption) -> (spec: OptionSpec, value: SuggestedValue?) {
        switch option {
        case .scope(let value): (ForwardCommand.scopeOption, value)
        case .audience(let value): (ForwardCommand.audienceOption, value)
        }
    }
}

extension Suggestion {
    /// The text tokenctl prints (`HintText.render`).
    var text: String { HintText.render(self) }
}
