// `tokenctl keyring setup --unattended`: the seal, the unit, the wait for the unlock.

extension UnattendedKeyring {
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
    func sealedPassword(_ installedSeal: Seal?, report lines: inout [String]) throws(TokenctlError) -> Seal {
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

    /// The unit and the refresh timer's drop-in written, the stock units masked and stopped, the
    /// unit enabled and (re)started.
    func installUnit(
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
    func waitUntilUnlocked(
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
}
