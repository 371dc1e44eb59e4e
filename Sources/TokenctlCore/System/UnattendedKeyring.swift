import TokenctlEssentials

/// The machine facts an unattended keyring depends on, as a value: tpm2-tools, systemd-creds(1),
/// the TPM device node, systemd-logind's linger files, the user's name. The engine hands the
/// commands the live ones (`live`), a test a double that answers as told.
public struct UnattendedHost: Sendable {
    /// Runs `systemd-creds ARGUMENTS` with `input` on its standard input: its exit status and what
    /// it printed (standard output and error together).
    public var systemdCreds: @Sendable (_ arguments: [String], _ input: String?) -> Subprocess.Result
    /// Runs tpm2-tools' `tpm2_TOOL ARGUMENTS` with `input` on its standard input: its exit status
    /// and what it printed (standard output and error together).
    public var tpm2Tool: @Sendable (_ tool: String, _ arguments: [String], _ input: String?) -> Subprocess.Result
    /// The TPM resource manager's device node (tpm2-tss' default TCTI: /dev/tpmrm0).
    public var tpmDevice: String
    /// Whether this user may open `tpmDevice` for reading and writing.
    public var tpmAccessible: @Sendable () -> Bool
    /// Whether a device node is at `tpmDevice`.
    public var tpmPresent: @Sendable () -> Bool
    /// systemd-logind's linger flag files, one per user (`loginctl enable-linger` creates them).
    public var lingerDirectory: String
    /// This user's login name.
    public var userName: @Sendable () -> String
    /// Whether a program is in PATH.
    public var programInstalled: @Sendable (_ name: String) -> Bool
    /// Asks systemd-logind whether `user` lingers, for when its flag file cannot be seen
    /// (`loginctl show-user USER -p Linger --value` prints "yes"); nil: no answer.
    public var logindLinger: @Sendable (_ user: String) -> Bool?

    public init(
        tpmDevice: String = "/dev/tpmrm0", lingerDirectory: String = "/var/lib/systemd/linger",
        tpmPresent: (@Sendable () -> Bool)? = nil, tpmAccessible: (@Sendable () -> Bool)? = nil,
        userName: @escaping @Sendable () -> String, logindLinger: (@Sendable (String) -> Bool?)? = nil,
        programInstalled: @escaping @Sendable (String) -> Bool = { Subprocess.locate($0) != nil },
        tpm2Tool: (@Sendable (_ tool: String, _ arguments: [String], _ input: String?) -> Subprocess.Result)? = nil,
        systemdCreds: @escaping @Sendable (_ arguments: [String], _ input: String?) -> Subprocess.Result
    ) {
        self.tpmDevice = tpmDevice
        self.lingerDirectory = lingerDirectory
        self.tpmPresent = tpmPresent ?? { FileIO.exists(tpmDevice) }
        self.tpmAccessible = tpmAccessible ?? { FileIO.isReadableAndWritable(tpmDevice) }
        self.userName = userName
        self.logindLinger = logindLinger ?? { _ in nil }
        self.programInstalled = programInstalled
        self.systemdCreds = systemdCreds
        self.tpm2Tool =
            tpm2Tool ?? { tool, arguments, input in Subprocess.run(["tpm2_" + tool] + arguments, input: input) }
    }

    /// This machine's: tpm2-tools and systemd-creds in PATH, /dev/tpmrm0, /var/lib/systemd/linger, and the
    /// user's name from USER or LOGNAME (cron sets LOGNAME), else id(1).
    public static func live(_ environment: Environment) -> UnattendedHost {
        UnattendedHost(
            userName: {
                if let name = environment["USER"] ?? environment["LOGNAME"], !name.isEmpty { return name }
                return Subprocess.run(["id", "-un"]).output.trimmingCharacters(in: " \n")
            },
            logindLinger: { user in
                let answer = Subprocess.run(["loginctl", "show-user", user, "-p", "Linger", "--value"])
                guard answer.status == 0 else { return nil }
                return answer.output.trimmingCharacters(in: " \n") == "yes"
            },
            systemdCreds: { arguments, input in Subprocess.run(["systemd-creds"] + arguments, input: input) })
    }
}

/// A Secret Service that starts with the user's systemd user manager and is unlocked without a
/// person: `tokenctl keyring setup --unattended`, `status` and `remove`. A random password,
/// sealed to this machine's TPM with tpm2-tools (`TPMSeal`: outside the TPM's dictionary-attack
/// protection, so power losses do not lock it out), else with the per-user key of systemd-creds(1)
/// (systemd 256 and later), unlocks gnome-keyring's login collection when the unit
/// tokenctl-keyring.service starts: at boot with `loginctl enable-linger`, before the refresh
/// timer's service. The password reaches gnome-keyring-daemon through a pipe only (the unit's
/// bash reads the unseal's output into an unexported variable and writes it with the builtin
/// printf): never argv, the environment or a file. A password an earlier tokenctl sealed with
/// `systemd-creds --with-key=tpm2` is still used, and setup seals it again the new way.
/// Scripts/lib/unattended.sh holds the measured facts behind each choice here.
public struct UnattendedKeyring: Sendable {
    public static let unitName = "tokenctl-keyring.service"
    public static let credentialName = "tokenctl-keyring"
    /// gnome-keyring's own user units (Debian enables the socket for every user): masked while
    /// ours runs, or a client's D-Bus activation starts the stock daemon in our place.
    public static let stockUnits = ["gnome-keyring-daemon.socket", "gnome-keyring-daemon.service"]
    static let marker = "# Installed by 'tokenctl keyring setup --unattended'; remove with 'tokenctl keyring remove'."

    public var environment: Environment
    /// tokenctl's configuration directory: the credential is `keyring.cred` in it.
    public var configDirectory: String
    public var units: SystemdUserUnits
    public var host: UnattendedHost

    public init(environment: Environment, configDirectory: String, units: SystemdUserUnits, host: UnattendedHost) {
        self.environment = environment
        self.configDirectory = configDirectory
        self.units = units
        self.host = host
    }

    // MARK: Where things are

    /// The password sealed with systemd-creds: per-user credentials, or (by an earlier
    /// tokenctl) a TPM.
    public var credentialPath: String { configDirectory + "/keyring.cred" }
    /// The TPM seal: `keyring-seal.pub` and `keyring-seal.priv`.
    public var tpmSealPrefix: String { configDirectory + "/keyring-seal" }
    var unitDirectory: String? { SystemdUserUnits.directory(environment) }
    public var unitPath: String? { unitDirectory.map { "\($0)/\(Self.unitName)" } }
    var dropInPath: String? { unitDirectory.map { "\($0)/\(RefreshSchedule.unitName).service.d/keyring.conf" } }

    /// gnome-keyring's login collection: `$XDG_DATA_HOME/keyrings/login.keyring`.
    public var loginKeyringPath: String? {
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") { return data + "/keyrings/login.keyring" }
        return environment["HOME"].map { $0 + "/.local/share/keyrings/login.keyring" }
    }

    /// Whether our unit file is installed (the marker is ours).
    public var isInstalled: Bool { unitPath.map { SystemdUserUnits.isOurs($0, marker: Self.marker) } ?? false }

    /// Whether `tokenctl keyring setup --unattended` is installed for the user `environment`
    /// describes: for the hints of a locked keyring.
    public static func isInstalled(_ environment: Environment) -> Bool {
        SystemdUserUnits.directory(environment).map {
            SystemdUserUnits.isOurs("\($0)/\(unitName)", marker: marker)
        } ?? false
    }

    // MARK: The seal

    /// What seals the password.
    public enum Seal: Sendable, Equatable {
        /// A TPM 2.0, with tpm2-tools (`TPMSeal`): the TCTI named by TPM2TOOLS_TCTI or
        /// SYSTEMD_TPM2_DEVICE, else nil for `UnattendedHost.tpmDevice`.
        case tpm2(tcti: String?)
        /// A TPM 2.0 through `systemd-creds --with-key=tpm2`, as an earlier tokenctl sealed it
        /// (PCR 7, inside the TPM's dictionary-attack protection): used, never made now.
        case systemdCredsTPM2(tcti: String?)
        /// systemd 256's per-user credentials (`systemd-creds --user`).
        case user

        public var description: String {
            switch self {
            case .tpm2(let tcti): tcti.map { "TPM 2.0 (\($0))" } ?? "TPM 2.0"
            case .systemdCredsTPM2(let tcti): "TPM 2.0 through systemd-creds" + (tcti.map { " (\($0))" } ?? "")
            case .user: "systemd per-user credentials"
            }
        }
    }

    /// Why no seal can be made by this user, with what to do.
    public enum NoSeal: Sendable, Equatable {
        /// A TPM is there but this user may not open it.
        case tpmNotAccessible
        /// No TPM, no per-user credentials: only the host key, which needs root.
        case hostKeyNeedsRoot
    }

    /// The TCTI the environment names, as the TPM tools find it: TPM2TOOLS_TCTI (tpm2-tools),
    /// then SYSTEMD_TPM2_DEVICE (systemd-creds); both take `driver:configuration`, and
    /// systemd's may be a bare device path.
    var namedTCTI: String? {
        for name in ["TPM2TOOLS_TCTI", "SYSTEMD_TPM2_DEVICE"] {
            if let value = environment[name], !value.isEmpty { return value.hasPrefix("/") ? "device:" + value : value }
        }
        return nil
    }

    /// The TCTI of the default TPM device.
    var defaultTCTI: String { "device:" + host.tpmDevice }

    /// The seal's files and tools for the TPM `tcti` names (nil: the default device), its
    /// context files in a private directory of the user's runtime directory (XDG_RUNTIME_DIR
    /// where it is private, else where tokenctl keeps its locks).
    func tpmSeal(_ tcti: String?) -> TPMSeal {
        var runtime = Paths.runtimeLockDirectory(environment)
        if environment[Paths.runtimeDirectoryVariable] == nil, let directory = environment["XDG_RUNTIME_DIR"],
            directory.hasPrefix("/"), FileIO.isPrivateDirectory(directory, ownedBy: FileIO.userID)
        {
            runtime = directory + "/tokenctl"
        }
        return TPMSeal(
            tcti: tcti ?? defaultTCTI, prefix: tpmSealPrefix,
            workDirectory: runtime + "/keyring-seal-\(Base64URL.encode(SecureRandom.bytes(6)))", tool: host.tpm2Tool)
    }

    /// Where the password sealed with `seal` is, for messages.
    public func sealPath(_ seal: Seal) -> String {
        if case .tpm2 = seal { return tpmSealPrefix + ".{pub,priv}" }
        return credentialPath
    }

    /// Whether the sealed password's files are there.
    func sealExists(_ seal: Seal) -> Bool {
        if case .tpm2 = seal { return FileIO.exists(tpmSealPrefix + ".pub") && FileIO.exists(tpmSealPrefix + ".priv") }
        return FileIO.exists(credentialPath)
    }

    /// Whether this systemd-creds offers `--user` (systemd 256 and later; 252 says
    /// "unrecognized option '--user'").
    public func offersUserCredentials() -> Bool {
        let help = host.systemdCreds(["--help"], nil)
        return help.status == 0 && help.output.contains("--user")
    }

    /// The seal this user can make here: a TPM, else per-user credentials, else why not.
    public func chooseSeal() -> Result<Seal, SealUnavailable> {
        if let tcti = namedTCTI { return .success(.tpm2(tcti: tcti)) }
        if host.tpmPresent() {
            return host.tpmAccessible() ? .success(.tpm2(tcti: nil)) : .failure(SealUnavailable(.tpmNotAccessible))
        }
        if offersUserCredentials() { return .success(.user) }
        return .failure(SealUnavailable(.hostKeyNeedsRoot))
    }

    public struct SealUnavailable: Error, Sendable, Equatable {
        public var reason: NoSeal
        init(_ reason: NoSeal) { self.reason = reason }
    }

    /// systemd-creds' arguments before the verb, for `seal`.
    func modeArguments(_ seal: Seal) -> [String] { seal == .user ? ["--user"] : [] }

    func tpmArguments(_ seal: Seal) -> [String] {
        if case .systemdCredsTPM2(let tcti?) = seal { return ["--tpm2-device=\(tcti)"] }
        return []
    }

    /// Where the installed unit's sealed password is (nil: none installed).
    public var installedSealPath: String? { installedSeal.map(sealPath) }

    /// The seal a password was made with, as the unit records it (nil: none installed).
    var installedSeal: Seal? {
        guard let unitPath, let text = (try? FileIO.readFile(unitPath)) ?? nil, text.hasPrefix(Self.marker) else {
            return nil
        }
        func environment(_ name: String) -> String? {
            let prefix = "Environment=\(name)="
            return text.split(separator: "\n").first { $0.hasPrefix(prefix) || $0.hasPrefix("Environment='\(name)=") }
                .map {
                    String($0.dropFirst(prefix.count)).trimmingCharacters(in: "'")
                }
        }
        if text.contains("systemd-creds --user decrypt") { return .user }
        if text.contains("systemd-creds decrypt") { return .systemdCredsTPM2(tcti: environment("SYSTEMD_TPM2_DEVICE")) }
        let tcti = environment("TPM2TOOLS_TCTI")
        return .tpm2(tcti: tcti == defaultTCTI ? nil : tcti)
    }

    /// What decrypting the credential gave.
    public enum Unseal: Sendable, Equatable {
        case ok
        case missing
        /// It would not decrypt: what systemd-creds said, and the plain reading of it.
        case failed(output: String, meaning: Suggestion)
    }

    /// Unseal the password and drop the clear text (never printed, never written; the TPM
    /// seal's goes to /dev/null).
    public func unseal(_ seal: Seal) -> Unseal {
        guard sealExists(seal) else { return .missing }
        if case .tpm2(let tcti) = seal {
            do { try tpmSeal(tcti).check() } catch {
                return .failed(output: error.output, meaning: Self.meaning(ofUnsealFailure: error.output, pcr7: false))
            }
            return .ok
        }
        let result = host.systemdCreds(
            modeArguments(seal) + ["decrypt", "--name=\(Self.credentialName)"] + tpmArguments(seal) + [
                credentialPath, "-",
            ], nil)
        if result.status == 0 { return .ok }
        let said = Self.lastLines(result.output)
        return .failed(output: said, meaning: Self.meaning(ofUnsealFailure: result.output, pcr7: true))
    }

    /// The plain reading of a failed unseal: tpm2-tools 5.4's and systemd-creds 252's words,
    /// measured with swtpm (Scripts/lib/unattended.sh). `pcr7`: a systemd-creds seal, bound to
    /// the Secure Boot state.
    static func meaning(ofUnsealFailure output: String, pcr7: Bool) -> Suggestion {
        if output.contains("dictionary attack lockout") || output.contains("DA lockout mode") {
            return
                "The TPM is in dictionary-attack lockout (power losses while a lockout-protected seal was in use count as failures): root can clear it with 'tpm2_dictionarylockout -c', or it ends after the TPM's lockout interval. Nothing was deleted."
        }
        if output.contains("Failed to initialize TCTI") || output.contains("Cannot connect to swtpm")
            || output.contains("Could not load tcti")
        {
            return
                "No TPM was reachable to unseal the keyring password. Nothing was deleted; '\(tokenctl: .default, .keyring(.status, []))' says again once the TPM is back."
        }
        let causes =
            pcr7
            ? "it was sealed by another TPM, the TPM was cleared, or the Secure Boot state (PCR 7) changed"
            : "it was sealed by another TPM, or the TPM was cleared"
        return
            "This machine's TPM cannot unseal the keyring password: \(causes). The sessions on this machine need a new login ('\(tokenctl: .default, .login([]))'), or the original TPM. Nothing was deleted: the keyring and its sessions are kept."
    }

    static func lastLines(_ output: String) -> String {
        output.split(separator: "\n").suffix(2).joined(separator: "; ")
    }

    // MARK: The units

    /// Whether the configuration directory, where the sealed password is, can be written into
    /// the unit: only characters that need no quoting in bash and systemd.
    var configDirectoryFitsUnit: Bool {
        configDirectory.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "/._-+@".contains($0)) })
    }

    /// tokenctl-keyring.service. `$` is `$$` and `%` is `%%` in a unit's ExecStart
    /// (systemd.service(5), "Command lines"); `%t` is the runtime directory.
    public func keyringUnit(_ seal: Seal) -> String {
        let start =
            "exec gnome-keyring-daemon --replace --unlock --foreground --components=secrets < <(printf %%s \"$$pw\")"
        let fallback = "exec gnome-keyring-daemon --replace --foreground --components=secrets"
        let environment: [String]
        let execStart: String
        switch seal {
        case .tpm2(let tcti):
            // The context files in RuntimeDirectory= (0700, removed when the unit stops), removed
            // at once; the TPM flushed either way (a TPM without a resource manager keeps them).
            environment = [
                "RuntimeDirectory=tokenctl-keyring", "RuntimeDirectoryMode=0700",
                "Environment=\(SystemdUserUnits.quoted("TPM2TOOLS_TCTI=\(tcti ?? defaultTCTI)"))",
            ]
            execStart =
                "cd %t/tokenctl-keyring || exit 1; pw=$$(\(TPMSeal.unsealScript(prefix: tpmSealPrefix))) && ok=1 || ok=0; tpm2_flushcontext -t 2>/dev/null; rm -f primary.ctx seal.ctx; if [ $$ok = 1 ]; then \(start); fi; \(fallback)"
        case .systemdCredsTPM2(let tcti):
            environment = tcti.map { ["Environment=\(SystemdUserUnits.quoted("SYSTEMD_TPM2_DEVICE=\($0)"))"] } ?? []
            execStart =
                "if pw=$$(systemd-creds decrypt --name=\(Self.credentialName) \(credentialPath) -); then \(start); fi; \(fallback)"
        case .user:
            environment = []
            execStart =
                "if pw=$$(systemd-creds --user decrypt --name=\(Self.credentialName) \(credentialPath) -); then \(start); fi; \(fallback)"
        }
        var lines = [
            Self.marker,
            "[Unit]",
            "Description=Secret Service for tokenctl, unlocked with a password sealed to this machine",
            "Documentation=man:tokenctl-keyring(1)",
            "Before=\(RefreshSchedule.unitName).service",
            "",
            "[Service]",
            "Type=dbus",
            "BusName=org.freedesktop.secrets",
        ]
        lines += environment
        lines += [
            "ExecStart=/bin/bash -c '\(execStart)'",
            "Restart=on-failure",
            "RestartSec=1s",
            "",
            "[Install]",
            "WantedBy=default.target",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// tokenctl-refresh.service.d/keyring.conf: the timer's runs wait for the unlock.
    public static let refreshDropIn =
        [
            marker, "[Unit]", "Wants=\(unitName)", "After=\(unitName)",
        ].joined(separator: "\n") + "\n"

    // MARK: Setup

    /// The Secret Service as the command found it.
    public enum SecretServiceState: Sendable, Equatable {
        case unlocked
        /// Locked, or without a default collection: what the store said.
        case locked(String)
        case absent(String)
    }

    /// What `setup` did.
    public enum SetupOutcome: Sendable, Equatable {
        /// Another Secret Service is there and unlocked: nothing changed.
        case leftAlone
        /// Installed (or installed again): lines to print.
        case installed([String])
    }

    /// `tokenctl keyring setup --unattended`.
    ///
    /// - Parameters:
    ///   - force: set up even when an unlocked Secret Service is there.
    ///   - secretService: asks the Secret Service for its state (before and after).
    ///   - clock: waits between the questions after the start (until `unlockWait` seconds).
    public func setup(
        force: Bool, clock: Clock, unlockWait: Double = 10, secretService: () -> SecretServiceState
    ) async throws(TokenctlError) -> SetupOutcome {
        guard let unitPath, let dropInPath, let unitDirectory else {
            throw TokenctlError(.configuration, "HOME is not set: cannot find the systemd user unit directory")
        }
        guard units.managerAnswers() else {
            throw TokenctlError(
                .serviceUnavailable, "no systemd user manager answers ('systemctl --user' failed)",
                hint:
                    "Run it where the user manager runs: after 'loginctl enable-linger \(host.userName())' (root), in an SSH session of this user. Nothing was changed."
            )
        }
        let installedSeal = self.installedSeal
        let ours = installedSeal != nil && units.activity(Self.unitName).active
        if !ours, !force, secretService() == .unlocked {
            return .leftAlone
        }
        guard host.programInstalled("gnome-keyring-daemon") else {
            throw TokenctlError(
                .configuration, "gnome-keyring is not installed: the unlocked Secret Service is gnome-keyring-daemon",
                hint: "Install it ('sudo apt-get install gnome-keyring dbus-user-session') and run this again.")
        }
        guard configDirectoryFitsUnit else {
            throw TokenctlError(
                .configuration,
                "the configuration directory \(configDirectory) has characters tokenctl does not write into a unit",
                hint: "Use a configuration directory whose path has letters, digits and / . _ - + @ only.")
        }
        var lines: [String] = []
        let seal = try sealedPassword(installedSeal, report: &lines)
        try installUnit(seal, unitPath: unitPath, dropInPath: dropInPath, unitDirectory: unitDirectory)
        lines.append("Wrote \(unitPath) and \(dropInPath).")
        lines.append("Masked \(Self.stockUnits.joined(separator: " and ")); enabled and started \(Self.unitName).")
        try await waitUntilUnlocked(clock: clock, unlockWait: unlockWait, secretService: secretService)
        lines.append("The Secret Service answers, unlocked.")
        if !lingers() {
            lines.append(
                "Linger is off: the user manager (and this keyring) starts at your login only. For boot: 'sudo loginctl enable-linger \(host.userName())'."
            )
        }
        return .installed(lines)
    }

    /// The seal of the keyring's password: the one sealed before (a new one would not unlock the
    /// keyring it made), or a new password sealed the best way this machine offers.
    private func sealedPassword(_ installedSeal: Seal?, report lines: inout [String]) throws(TokenctlError) -> Seal {
        if let installedSeal, sealExists(installedSeal) {
            if case .failed(let output, let meaning) = unseal(installedSeal) {
                throw TokenctlError(
                    .serviceUnavailable,
                    "the keyring password sealed in \(sealPath(installedSeal)) does not unseal: \(output)",
                    hint: meaning)
            }
            if case .systemdCredsTPM2(let tcti) = installedSeal, let resealed = resealed(tcti, report: &lines) {
                return resealed
            }
            lines.append("Kept the sealed keyring password \(sealPath(installedSeal)) (\(installedSeal.description)).")
            return installedSeal
        }
        if let login = loginKeyringPath, FileIO.exists(login) {
            throw TokenctlError(
                .configuration,
                "a login keyring exists already (\(login)), with a password tokenctl does not know",
                hint:
                    "tokenctl does not replace a keyring. If nothing in it is needed, move it aside ('mv \(login) \(login).old') and run this again: the sessions in it then need a new login. Otherwise unlock it by hand as before. Nothing was changed."
            )
        }
        let seal: Seal
        switch chooseSeal() {
        case .success(let chosen): seal = chosen
        case .failure(let failure): throw noSealError(failure.reason)
        }
        try sealNewPassword(seal)
        lines.append("Sealed a new keyring password to \(seal.description): \(sealPath(seal))")
        return seal
    }

    /// The password an earlier tokenctl sealed with `systemd-creds --with-key=tpm2` (inside the
    /// TPM's dictionary-attack protection), sealed again with `TPMSeal`; the old credential
    /// removed once the new seal unseals. Nil (and the old seal kept) when the decrypt's output
    /// is not exactly such a password (43 base64url characters: systemd-creds prints its
    /// warnings on the same stream) or the new seal fails.
    private func resealed(_ named: String?, report lines: inout [String]) -> Seal? {
        let decrypted = host.systemdCreds(
            ["decrypt", "--name=\(Self.credentialName)"] + tpmArguments(.systemdCredsTPM2(tcti: named)) + [
                credentialPath, "-",
            ], nil)
        let password = decrypted.output
        guard decrypted.status == 0, password.utf8.count == 43,
            password.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        else {
            lines.append("Could not read the systemd-creds seal's password cleanly: kept \(credentialPath).")
            return nil
        }
        // systemd's device may be a bare path; tpm2-tools want the driver.
        let tcti = named.map { $0.hasPrefix("/") ? "device:" + $0 : $0 }
        let seal = tpmSeal(tcti)
        do {
            try seal.seal(password)
            try seal.check()
        } catch {
            lines.append(
                "Could not seal the keyring password again (\(error.tool): \(error.output)): kept \(credentialPath).")
            for path in [seal.publicPath, seal.privatePath] { _ = try? FileIO.removeFileIfPresent(path) }
            return nil
        }
        _ = try? FileIO.removeFileIfPresent(credentialPath)
        lines.append(
            "Sealed the keyring password again, outside the TPM's dictionary-attack lockout: \(sealPath(.tpm2(tcti: tcti))) (replaces \(credentialPath))."
        )
        return .tpm2(tcti: tcti)
    }

    /// The unit and the refresh timer's drop-in written, the stock units masked and stopped, the
    /// unit enabled and (re)started.
    private func installUnit(
        _ seal: Seal, unitPath: String, dropInPath: String, unitDirectory: String
    ) throws(TokenctlError) {
        do {
            try FileIO.makeDirectories(unitDirectory + "/\(RefreshSchedule.unitName).service.d", mode: 0o700)
        } catch {
            throw TokenctlError(.unexpected, "cannot create \(unitDirectory): \(error)")
        }
        try SystemdUserUnits.write(
            [(unitPath, keyringUnit(seal)), (dropInPath, Self.refreshDropIn)],
            into: unitDirectory)
        let steps: [[String]] = [
            ["daemon-reload"], ["mask"] + Self.stockUnits,
            // A stock daemon that a client's D-Bus activation started (the probe above may have)
            // would answer in place of ours: stopped (its units may not exist: not checked).
            ["stop"] + Self.stockUnits.reversed(), ["enable", Self.unitName],
            // Restart: a stock daemon that D-Bus activation started meanwhile is replaced.
            ["restart", Self.unitName],
        ]
        for step in steps {
            let result = units.systemctl(step)
            guard result.status == 0 || step.first == "stop" else {
                throw TokenctlError(
                    .serviceUnavailable,
                    "'systemctl --user \(step.joined(separator: " "))' failed: \(result.output.trimmingCharacters(in: " \n"))",
                    hint:
                        "See 'journalctl --user -u \(Self.unitName)'; '\(tokenctl: .default, .keyring(.remove, []))' undoes what was installed (the keyring stays)."
                )
            }
        }
    }

    /// Type=dbus: started once the daemon owns the name, the collection unlocked before; a
    /// client may still see the daemon it replaced for a moment, so ask until `unlockWait` ends.
    private func waitUntilUnlocked(
        clock: Clock, unlockWait: Double, secretService: () -> SecretServiceState
    ) async throws(TokenctlError) {
        let waitUntil = clock.now() + unlockWait
        var state = secretService()
        var asked = 1
        while state != .unlocked, clock.now() < waitUntil, asked < 100 {
            try? await clock.sleep(0.2)
            state = secretService()
            asked += 1
        }
        switch state {
        case .unlocked:
            return
        case .locked(let said), .absent(let said):
            throw TokenctlError(
                .serviceUnavailable, "\(Self.unitName) started, but the Secret Service is not unlocked: \(said)",
                hint:
                    "Run '\(tokenctl: .default, .keyring(.status, []))' and see 'journalctl --user -u \(Self.unitName)'."
            )
        }
    }

    /// A new random password (32 bytes from getrandom(2), base64url: 43 characters; text, since
    /// gnome-keyring reads a C string), sealed. It goes to tpm2_create or systemd-creds on
    /// standard input only, into the private configuration directory: systemd-creds' file under
    /// umask 077 (it honours the mask), tpm2_create's set to 0600 by `TPMSeal`.
    func sealNewPassword(_ seal: Seal) throws(TokenctlError) {
        do { try FileIO.ensurePrivateDirectory(configDirectory) } catch {
            throw TokenctlError(.unexpected, "cannot create \(configDirectory): \(error)")
        }
        let password = Base64URL.encode(SecureRandom.bytes(32))
        if case .tpm2(let tcti) = seal {
            guard host.programInstalled("tpm2_unseal") else {
                throw TokenctlError(
                    .configuration, "tpm2-tools is not installed: tokenctl seals the keyring password with it",
                    hint: "Install it ('sudo apt-get install tpm2-tools') and run this again. Nothing was installed.")
            }
            let tpm = tpmSeal(tcti)
            do { try tpm.seal(password) } catch {
                for path in [tpm.publicPath, tpm.privatePath] { _ = try? FileIO.removeFileIfPresent(path) }
                throw TokenctlError(
                    .serviceUnavailable, "\(error.tool) could not seal the keyring password: \(error.output)",
                    hint: "Nothing was installed.")
            }
            return
        }
        let arguments =
            modeArguments(seal) + ["encrypt"] + [
                "--name=\(Self.credentialName)", "-", credentialPath,
            ]
        let result = FileIO.withPrivateUmask { host.systemdCreds(arguments, password) }
        guard result.status == 0 else {
            _ = try? FileIO.removeFileIfPresent(credentialPath)
            throw TokenctlError(
                .serviceUnavailable,
                "systemd-creds could not seal the keyring password: \(Self.lastLines(result.output))",
                hint: "Nothing was installed.")
        }
    }

    func noSealError(_ reason: NoSeal) -> TokenctlError {
        let user = host.userName()
        switch reason {
        case .tpmNotAccessible:
            return TokenctlError(
                .configuration, "this user may not use the TPM (\(host.tpmDevice))",
                hint:
                    "The TPM's device belongs to the group 'tss' (Debian's /usr/lib/udev/rules.d/60-tpm-udev.rules). An administrator grants it with 'sudo usermod -aG tss \(user)'; then log in again (or restart the user manager) and run this again. Nothing was changed."
            )
        case .hostKeyNeedsRoot:
            return TokenctlError(
                .configuration,
                "no TPM 2.0 here and this systemd has no per-user credentials (systemd-creds --user, systemd 256 and later): only systemd's host key is left, which only root can use",
                hint: Self.hostKeyInstructions(user: user))
        }
    }

    /// What the administrator runs for the host key (systemd-creds --with-key=host): root seals a
    /// new password once, and a system unit decrypts it at every boot (a user unit cannot read
    /// /var/lib/systemd/credential.secret).
    static func hostKeyInstructions(user: String) -> Suggestion {
        "An administrator can seal a keyring password to this machine's host key (/var/lib/systemd/credential.secret): 'sudo sh -c \"umask 077; mkdir -p /etc/credstore.encrypted; head -c 32 /dev/urandom | base64 -w0 | tr +/ -_ | tr -d = | systemd-creds encrypt --with-key=host --name=tokenctl-keyring - /etc/credstore.encrypted/tokenctl-keyring-\(user).cred\"', then install a system unit that runs as \(user) after user@UID.service with 'LoadCredentialEncrypted=tokenctl-keyring:/etc/credstore.encrypted/tokenctl-keyring-\(user).cred' and feeds \"$CREDENTIALS_DIRECTORY/tokenctl-keyring\" to 'gnome-keyring-daemon --replace --unlock --foreground --components=secrets' (HOST KEY in tokenctl-keyring(1) has the unit). Nothing was changed."
    }

    // MARK: Status

    public func lingers() -> Bool {
        let user = host.userName()
        guard !user.isEmpty else { return false }
        return FileIO.exists(host.lingerDirectory + "/" + user) || host.logindLinger(user) == true
    }

    /// One line of `keyring status` (and `doctor`): a name, whether it holds for a reboot with
    /// nobody logged in, the detail and what to run.
    public struct Fact: Sendable, Equatable {
        public var name: String
        public var holds: Bool
        public var detail: String
        public var hint: Suggestion?
    }

    /// Whether linger is on: the user manager starts at boot.
    public func lingerFact() -> Fact {
        let user = host.userName()
        return lingers()
            ? Fact(name: "linger", holds: true, detail: "on for \(user): the user manager starts at boot")
            : Fact(
                name: "linger", holds: false,
                detail: "off for \(user): the user manager starts at this user's first login only",
                hint: "Run 'sudo loginctl enable-linger \(user)'.")
    }

    /// Whether the keyring unit is installed, enabled and running.
    public func unitFact() -> Fact {
        guard isInstalled, let unitPath else {
            return Fact(
                name: "keyring unit", holds: false,
                detail:
                    "\(Self.unitName) not installed: after a reboot nothing unlocks the keyring until a person does",
                hint: "On a server, run '\(tokenctl: .default, .keyring(.setup, [.unattended]))'.")
        }
        let enabled = units.isEnabled(Self.unitName)
        let activity = units.activity(Self.unitName)
        let detail =
            "\(unitPath) (\(enabled ? "enabled" : "not enabled"), \(activity.active ? "active" : activity.state))"
        return enabled
            ? Fact(
                name: "keyring unit", holds: true, detail: detail,
                hint: activity.active ? nil : "See 'journalctl --user -u \(Self.unitName)'.")
            : Fact(
                name: "keyring unit", holds: false, detail: detail,
                hint: "Run '\(tokenctl: .default, .keyring(.setup, [.unattended]))' again.")
    }

    /// Whether the credential is there and unseals (the clear text dropped unread).
    public func sealFact() -> Fact {
        guard let seal = installedSeal else {
            return Fact(
                name: "keyring seal", holds: false, detail: "no sealed keyring password",
                hint: "On a server, run '\(tokenctl: .default, .keyring(.setup, [.unattended]))'.")
        }
        let path = sealPath(seal)
        switch unseal(seal) {
        case .ok:
            if case .systemdCredsTPM2 = seal {
                return Fact(
                    name: "keyring seal", holds: true, detail: "\(path) unseals (\(seal.description))",
                    hint:
                        "It is inside the TPM's dictionary-attack protection: a few power losses in a row lock it out. Run '\(tokenctl: .default, .keyring(.setup, [.unattended]))' again to seal the same password outside it."
                )
            }
            return Fact(name: "keyring seal", holds: true, detail: "\(path) unseals (\(seal.description))")
        case .missing:
            return Fact(
                name: "keyring seal", holds: false, detail: "\(path) is missing",
                hint:
                    "The keyring's password is gone with it: the sessions need a new login. Run '\(tokenctl: .default, .keyring(.remove, []))', move the login keyring aside, then '\(tokenctl: .default, .keyring(.setup, [.unattended]))'."
            )
        case .failed(let output, let meaning):
            return Fact(
                name: "keyring seal", holds: false, detail: "\(path) does not unseal: \(output)",
                hint: meaning)
        }
    }

    /// Why the sessions would not be served after a reboot with nobody logged in (empty: they
    /// would): for `schedule install`'s warning.
    public func rebootGaps() -> [String] {
        var gaps: [String] = []
        if !lingers() { gaps.append("linger is off") }
        if !isInstalled {
            gaps.append("nothing unlocks the keyring")
        } else {
            if !unitFact().holds { gaps.append("\(Self.unitName) is not enabled") }
            if !sealFact().holds { gaps.append("the sealed keyring password does not unseal") }
        }
        return gaps
    }

    /// Every fact `keyring status` prints, in order.
    public func facts() -> [Fact] { [lingerFact(), unitFact(), sealFact()] }

    // MARK: Remove

    /// `tokenctl keyring remove`: the unit (disabled and stopped), the drop-in and the
    /// credential go, the stock units are unmasked; the keyring and its sessions stay.
    /// Returns a line for each thing removed.
    /// Undo the setup: the unit, its drop-in, the masks. Never the keyring, nor the sealed
    /// password (`installedSealPath`), without which nothing could open the keyring again.
    public func remove() throws(TokenctlError) -> [String] {
        var removed: [String] = []
        if isInstalled {
            units.disable(Self.unitName)
            removed.append("\(Self.unitName) (stopped and disabled)")
        }
        if let unitPath, SystemdUserUnits.isOurs(unitPath, marker: Self.marker) {
            try removeFile(unitPath)
            removed.append(unitPath)
        }
        if let dropInPath, SystemdUserUnits.isOurs(dropInPath, marker: Self.marker) {
            try removeFile(dropInPath)
            removed.append(dropInPath)
        }
        // The sealed password stays: it is the only copy of the keyring's password, and a
        // setup run again uses it (the keyring it unlocks holds the sessions).
        if !removed.isEmpty {
            _ = units.systemctl(["unmask"] + Self.stockUnits)
            units.daemonReload()
            removed.append("the mask of \(Self.stockUnits.joined(separator: " and "))")
        }
        return removed
    }

    private func removeFile(_ path: String) throws(TokenctlError) {
        do { try FileIO.removeFile(path) } catch { throw TokenctlError(.unexpected, "cannot remove \(path): \(error)") }
    }
}
