// Unsealing the keyring password, and the plain-language readings of why it would not unseal
// or why no seal can be made.

extension UnattendedKeyring {
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
        "An administrator can seal a keyring password to this machine's host key (/var/lib/systemd/credential.secret): '\(program: hostKeySealCommand(user: user))', then install a system unit that runs as \(user) after user@UID.service with 'LoadCredentialEncrypted=tokenctl-keyring:/etc/credstore.encrypted/tokenctl-keyring-\(user).cred' and feeds \"$CREDENTIALS_DIRECTORY/tokenctl-keyring\" to 'gnome-keyring-daemon --replace --unlock --foreground --components=secrets' (HOST KEY in tokenctl-keyring(1) has the unit). Nothing was changed."
    }

    /// The root command that seals a new random keyring password for `user` with the host key
    /// (it is never shown: systemd-creds reads it from the pipe).
    static func hostKeySealCommand(user: String) -> String {
        "sudo sh -c \"umask 077; mkdir -p /etc/credstore.encrypted; head -c 32 /dev/urandom | base64 -w0 | tr +/ -_ | tr -d = | systemd-creds encrypt --with-key=host --name=tokenctl-keyring - /etc/credstore.encrypted/tokenctl-keyring-\(user).cred\""
    }
}
