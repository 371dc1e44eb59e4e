// `tokenctl keyring status` (and `doctor`): whether the keyring would be unlocked after a reboot.

extension UnattendedKeyring {
    /// The host-key case (no TPM, no per-user credentials: only root can seal, to
    /// /var/lib/systemd/credential.secret): whether root's credential for this user and the
    /// system unit that decrypts it at boot are there, and else the exact command for root. Nil
    /// where this user can seal by itself (a TPM, per-user credentials) or has set up a seal.
    /// The boot-time decrypt needs the system manager and root's key: it is not tried here.
    public func hostKeyFact() -> Fact? {
        guard !isInstalled, case .failure(let why) = chooseSeal(), why.reason == .hostKeyNeedsRoot else { return nil }
        let user = host.userName()
        let credential = host.credentialStoreDirectory + "/tokenctl-keyring-\(user).cred"
        let unit = host.systemUnitDirectory + "/tokenctl-keyring-\(user).service"
        let unitInstalled = FileIO.exists(unit)
        let visible = FileIO.isSearchable(host.credentialStoreDirectory)
        let sealed = FileIO.exists(credential)
        let unitHint: Suggestion =
            "As root, install \(unit) from HOST KEY in tokenctl-keyring(1), then 'sudo systemctl enable \(unit.split(separator: "/").last.map(String.init) ?? unit)'."
        func fact(_ holds: Bool, _ detail: String, hint: Suggestion? = nil) -> Fact {
            Fact(name: "host key seal", holds: holds, detail: detail, hint: hint)
        }
        switch (sealed, unitInstalled) {
        case (true, true):
            return fact(
                true, "\(credential) (sealed by root with the host key) and \(unit), which unlocks the keyring at boot")
        case (true, false):
            return fact(
                false, "\(credential) is sealed, but no system unit decrypts it at boot (\(unit) is missing)",
                hint: unitHint)
        case (false, true) where !visible:
            // Root's directory (umask 077): this user cannot see into it; the unit names the credential.
            return fact(
                true,
                "\(unit) unlocks the keyring at boot with \(credential) (root's directory: not visible to \(user))")
        case (false, _):
            return fact(
                false,
                "no host-key credential for \(user) (\(credential)): no TPM 2.0 here and no per-user credentials, so only root can seal the keyring password",
                hint:
                    "As root, run '\(program: Self.hostKeySealCommand(user: user))', then install \(unit) from HOST KEY in tokenctl-keyring(1)."
            )
        }
    }

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
}
