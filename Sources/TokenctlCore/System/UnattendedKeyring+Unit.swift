// The user unit tokenctl-keyring.service and the refresh timer's drop-in, as text.

extension UnattendedKeyring {
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
}
