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
    /// The systemd user manager the socket is enabled with.
    public var units: SystemdUserUnits
    public var packagedUnitDirectory: String { units.packagedUnitDirectory }

    public init(executable: String, environment: Environment = .process, units: SystemdUserUnits = .live) {
        self.executable = executable
        self.environment = environment
        self.units = units
    }

    var unitDirectory: String? { SystemdUserUnits.directory(environment) }

    /// Whether a systemd user manager answers (`systemctl --user`).
    public func managerAvailable() -> Bool { units.managerAnswers() }

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
            "ExecStart=\(SystemdUserUnits.quoted(executable)) forward serve",
            "StandardInput=null",
            "StandardError=journal",
        ]
        // Where the profiles are, and the lock directory when it is moved: every process of the
        // user must lock the same files, or a forwarded refresh and a local one race.
        for name in ["XDG_CONFIG_HOME", "XDG_STATE_HOME", EnvironmentSwitches.runtimeDirectory] {
            if let value = environment[name] {
                lines.append("Environment=\(SystemdUserUnits.quoted("\(name)=\(value)"))")
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
        if SystemdUserUnits.isOurs(formerPath, marker: Self.marker) { try? FileIO.removeFile(formerPath) }
        var wrote = false
        if !packagedUnitsServe() || SystemdUserUnits.exists(socketPath) {
            try SystemdUserUnits.write([(socketPath, socketUnit()), (servicePath, serviceUnit())], into: unitDirectory)
            wrote = true
        }
        if let failed = units.reloadAndEnable(Self.socketName) {
            if wrote {
                try? FileIO.removeFile(socketPath)
                try? FileIO.removeFile(servicePath)
            }
            throw TokenctlError(
                .serviceUnavailable, "cannot enable the forward socket: '\(failed.command)' failed: \(failed.output)",
                hint: "Serve it in the foreground instead: 'tokenctl forward listen'.")
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
            SystemdUserUnits.isOurs($0, marker: Self.marker)
        }
        if !ours.isEmpty || units.isEnabled(Self.socketName) {
            if units.disable(Self.socketName) { done.append("disabled \(Self.socketName)") }
        }
        for path in ours where (try? FileIO.removeFile(path)) != nil { done.append("removed \(path)") }
        if !ours.isEmpty { units.daemonReload() }
        return done
    }

    /// `systemctl --user is-active` of the socket, or nil without a manager.
    public func state() -> String? {
        guard managerAvailable() else { return nil }
        return units.activity(Self.socketName).state
    }
}
