import TokenctlCore
import TokenctlEssentials

/// `tokenctl keyring setup --unattended|status|remove`: a Secret Service that starts with the
/// user's systemd user manager and unlocks itself with a password sealed to this machine, for a
/// server nobody logs in to (`UnattendedKeyring`).
enum KeyringCommand: EngineCommand {
    static let unattendedOption = OptionSpec(
        "--unattended",
        help:
            "With setup: unlock the keyring at every start of the user manager, with a password sealed to this machine."
    )
    static let forceOption = OptionSpec(
        "--force", help: "With setup: set up even though an unlocked Secret Service answers already.")

    enum Action: String, CaseIterable, Sendable {
        case setup, status, remove
    }

    static let spec = CommandSpec(
        name: "keyring",
        abstract: "Keep the keyring unlocked on a server with nobody logged in (sealed to this machine).",
        usage: "setup|status|remove [--unattended] [--force]",
        options: [unattendedOption, forceOption],
        arguments: [("action", "setup, status or remove.")],
        argumentChoices: Action.allCases.map(\.rawValue),
        discussion: """
            'setup --unattended' generates a random keyring password, seals it to this machine's \
            TPM 2.0 with tpm2-tools, outside the TPM's dictionary-attack lockout (into \
            ~/.config/tokenctl/keyring-seal.pub and .priv), else to systemd's per-user credentials \
            (systemd 256 and later, ~/.config/tokenctl/keyring.cred), and installs the user unit \
            tokenctl-keyring.service, which unlocks gnome-keyring with it whenever the user manager \
            starts (at boot with 'loginctl enable-linger'), before the refresh timer runs. A \
            Secret Service that already answers unlocked (a desktop, KeePassXC, KWallet) is left \
            alone unless --force. 'status' says whether the sessions will be available after a \
            reboot with nobody logged in (exit status 1 if not); 'remove' undoes the setup and \
            keeps the keyring and its sessions. Root on the running machine can read everything; \
            a copied disk or backup unlocks nothing.
            """)

    /// systemctl and systemd-creds are bounded on their own; the Secret Service calls by the store.
    static func hasDeadline(_ options: ParsedOptions) -> Bool { false }

    /// `keyring`'s action and options, checked.
    struct Options: Equatable, Sendable {
        var action: Action
        var force: Bool

        init(_ parsed: ParsedOptions) throws(UsageError) {
            action = try parsed.action(Action.self, command: "keyring")
            force = parsed.has(forceOption)
            switch action {
            case .setup:
                guard parsed.has(unattendedOption) else {
                    throw UsageError(
                        "'setup' needs '--unattended' (the only kind of setup there is).", command: "keyring")
                }
            case .status, .remove:
                guard !parsed.has(unattendedOption), !force else {
                    throw UsageError("'--unattended' and '--force' apply to 'setup' only.", command: "keyring")
                }
            }
        }
    }

    static func keyring(_ context: CommandContext) -> UnattendedKeyring {
        UnattendedKeyring(
            environment: context.variables, configDirectory: context.paths.configDirectory,
            units: context.environment.userUnits, host: context.environment.unattendedHost)
    }

    /// The Secret Service's state as the store finds it.
    static func secretServiceState(_ context: CommandContext) -> UnattendedKeyring.SecretServiceState {
        do {
            try context.service().store.checkAvailable()
            return .unlocked
        } catch {
            switch error.reason {
            case .locked, .noDefaultCollection, .itemLocked, .promptPending: return .locked(error.message)
            default: return .absent(error.message)
            }
        }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = try Options(context.options)
        let keyring = keyring(context)
        switch options.action {
        case .setup:
            switch try await keyring.setup(
                force: options.force, clock: context.clock, secretService: { secretServiceState(context) })
            {
            case .leftAlone:
                context.io.standardError(
                    "An unlocked Secret Service answers already (a desktop session, KeePassXC or KWallet): it is left alone and nothing was changed. 'tokenctl keyring setup --unattended --force' replaces it with tokenctl's unit.\n"
                )
            case .installed(let lines):
                for line in lines { context.io.standardError(line + "\n") }
            }
            return .success
        case .status:
            let state = secretServiceState(context)
            var text: String
            switch state {
            case .unlocked:
                text = "secret service: answers, unlocked\n"
            case .locked(let said):
                text = "secret service: locked (\(Output.printable(said)))\n"
            case .absent(let said):
                text = "secret service: not available (\(Output.printable(said)))\n"
            }
            let facts = keyring.facts()
            for fact in facts {
                text += "\(fact.name): \(Output.printable(fact.detail))\n"
                if !fact.holds || fact.hint != nil, let hint = fact.hint {
                    text += "    \(Output.printable(hint.text))\n"
                }
            }
            let comesBack = facts.allSatisfy(\.holds)
            text +=
                comesBack
                ? "after a reboot: the keyring is unlocked again with nobody logged in\n"
                : "after a reboot: the sessions are not served with nobody logged in (see above)\n"
            context.io.standardOutput(text)
            return comesBack ? .success : .failure
        case .remove:
            let sealPath = keyring.installedSealPath ?? keyring.sealPath(.tpm2(tcti: nil))
            let removed = try keyring.remove()
            for item in removed { context.io.standardError("Removed \(item).\n") }
            if removed.isEmpty {
                context.io.standardError("No unattended keyring was set up.\n")
            } else {
                context.io.standardError(
                    "Kept the keyring, its sessions and the sealed keyring password \(Output.printable(sealPath)) (nothing unlocks the keyring at boot now; '\(CommandHint.tokenctl(context.profile, "keyring setup --unattended"))' uses the password again).\n"
                )
            }
            return .success
        }
    }
}
