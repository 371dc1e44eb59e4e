import TokenctlEssentials

/// The systemd user socket that serves the forward without a resident daemon: a socket unit
/// at `%t/tokenctl/forward.sock` with Accept=no (systemd.socket(5)): the first connection starts
/// one `tokenctl forward serve`, which is handed the listening socket (sd_listen_fds(3)),
/// serves every connection itself and exits when idle; the next connection starts it again.
/// No burst of connections starts more than one process, so none can trip the socket's
/// trigger limit. The Debian package installs both units; `forward enable` enables them, or
/// writes its own into ~/.config/systemd/user (marked, so `disable` removes exactly those).
public struct ForwardSocketUnit: Sendable {
    public static let socketName = "tokenctl-forward.socket"
    public static let serviceName = "tokenctl-forward.service"
    /// The per-connection template of earlier versions (Accept=yes): removed when ours.
    static let formerServiceName = "tokenctl-forward@.service"
    static let marker = "# Installed by 'tokenctl forward enable'; removed by 'tokenctl forward disable'."

    public var executable: String
    public var environment: Environment
    public var packagedUnitDirectory: String

    public init(
        executable: String, environment: Environment = .process, packagedUnitDirectory: String = "/usr/lib/systemd/user"
    ) {
        self.executable = executable
        self.environment = environment
        self.packagedUnitDirectory = packagedUnitDirectory
    }

    var unitDirectory: String? { RefreshSchedule.userUnitDirectory(environment) }

    /// Whether a systemd user manager answers (`systemctl --user`).
    public func managerAvailable() -> Bool { RefreshSchedule.userManagerAnswers() }

    /// The package's units run this very executable.
    func packagedUnitsServe() -> Bool {
        guard let service = (try? FileIO.readFile(packagedUnitDirectory + "/" + Self.serviceName)) ?? nil,
            (try? FileIO.readFile(packagedUnitDirectory + "/" + Self.socketName)) ?? nil != nil
        else { return false }
        return service.split(separator: "\n").contains { $0 == "ExecStart=\(executable) forward serve" }
    }

    public func socketUnit() -> String {
        [
            Self.marker,
            "[Unit]",
            "Description=tokenctl: access tokens for remote hosts and containers (the forward socket)",
            "Documentation=man:tokenctl-forward(1)",
            "",
            "[Socket]",
            "ListenStream=%t/tokenctl/forward.sock",
            "SocketMode=0600",
            "DirectoryMode=0700",
            "Accept=no",
            "RemoveOnStop=yes",
            "",
            "[Install]",
            "WantedBy=sockets.target",
        ].joined(separator: "\n") + "\n"
    }

    public func serviceUnit() -> String {
        var lines = [
            Self.marker,
            "[Unit]",
            "Description=tokenctl: access tokens for remote hosts and containers (serving the forward socket)",
            "Documentation=man:tokenctl-forward(1)",
            "Requires=tokenctl-forward.socket",
            "",
            "[Service]",
            "ExecStart=\(RefreshSchedule.quoted(executable)) forward serve",
            "StandardInput=null",
            "StandardError=journal",
        ]
        // Where the profiles are, and the lock directory when it is moved: every process of the
        // user must lock the same files, or a forwarded refresh and a local one race.
        for name in ["XDG_CONFIG_HOME", "XDG_STATE_HOME", EnvironmentSwitches.runtimeDirectory] {
            if let value = environment[name] {
                lines.append("Environment=\(RefreshSchedule.quoted("\(name)=\(value)"))")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Enable the socket (the package's units, else ours). A description of what serves it.
    public func enable() throws(TokenctlError) -> String {
        guard let unitDirectory else {
            throw TokenctlError(.configuration, "HOME is not set: cannot find the systemd user unit directory")
        }
        let socketPath = unitDirectory + "/" + Self.socketName
        let servicePath = unitDirectory + "/" + Self.serviceName
        let formerPath = unitDirectory + "/" + Self.formerServiceName
        if (try? FileIO.readFile(formerPath))??.hasPrefix(Self.marker) == true { try? FileIO.removeFile(formerPath) }
        var wrote = false
        if !packagedUnitsServe() || (try? FileIO.readFile(socketPath)) ?? nil != nil {
            do {
                try FileIO.makeDirectories(unitDirectory, mode: 0o700)
                try FileIO.writeAtomically(socketUnit(), to: socketPath)
                try FileIO.writeAtomically(serviceUnit(), to: servicePath)
            } catch {
                throw TokenctlError(.unexpected, "cannot write the unit files: \(error)")
            }
            wrote = true
        }
        for command in [
            ["systemctl", "--user", "daemon-reload"], ["systemctl", "--user", "enable", "--now", Self.socketName],
        ] {
            let result = Subprocess.run(command)
            guard result.status == 0 else {
                if wrote {
                    try? FileIO.removeFile(socketPath)
                    try? FileIO.removeFile(servicePath)
                }
                throw TokenctlError(
                    .serviceUnavailable,
                    "cannot enable the forward socket: '\(command.joined(separator: " "))' failed: \(result.output.trimmingCharacters(in: " \n"))",
                    hint: "Serve it in the foreground instead: 'tokenctl forward listen'.")
            }
        }
        return wrote
            ? "systemd user socket \(Self.socketName): \(socketPath)"
            : "systemd user socket \(Self.socketName), installed by the package"
    }

    /// Disable the socket and remove our unit files; what was done.
    public func disable() -> [String] {
        guard let unitDirectory else { return [] }
        var done: [String] = []
        let ours = [Self.socketName, Self.serviceName, Self.formerServiceName].map { unitDirectory + "/" + $0 }.filter {
            path in
            (try? FileIO.readFile(path))??.hasPrefix(Self.marker) == true
        }
        if !ours.isEmpty || Subprocess.run(["systemctl", "--user", "is-enabled", Self.socketName]).status == 0 {
            if Subprocess.run(["systemctl", "--user", "disable", "--now", Self.socketName]).status == 0 {
                done.append("disabled \(Self.socketName)")
            }
        }
        for path in ours where (try? FileIO.removeFile(path)) != nil { done.append("removed \(path)") }
        if !ours.isEmpty { _ = Subprocess.run(["systemctl", "--user", "daemon-reload"]) }
        return done
    }

    /// `systemctl --user is-active` of the socket, or nil without a manager.
    public func state() -> String? {
        guard managerAvailable() else { return nil }
        let result = Subprocess.run(["systemctl", "--user", "is-active", Self.socketName])
        return result.output.trimmingCharacters(in: " \n")
    }
}
