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
    /// Where root keeps credentials sealed with the host key (systemd's credential store,
    /// systemd.exec(5) "Credentials": `/etc/credstore.encrypted`).
    public var credentialStoreDirectory = "/etc/credstore.encrypted"
    /// Where root installs the system unit that decrypts such a credential at boot.
    public var systemUnitDirectory = "/etc/systemd/system"

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
