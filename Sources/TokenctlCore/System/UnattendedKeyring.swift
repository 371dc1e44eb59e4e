import TokenctlEssentials

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
}
