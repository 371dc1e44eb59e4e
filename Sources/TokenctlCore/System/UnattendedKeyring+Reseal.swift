// The password an earlier tokenctl sealed with systemd-creds, sealed again with tpm2-tools.

extension UnattendedKeyring {
    /// The password an earlier tokenctl sealed with `systemd-creds --with-key=tpm2` (inside the
    /// TPM's dictionary-attack protection), sealed again with `TPMSeal`; the old credential
    /// removed once the new seal unseals. Nil (and the old seal kept) when the decrypt's output
    /// is not exactly such a password (43 base64url characters: systemd-creds prints its
    /// warnings on the same stream) or the new seal fails.
    func resealed(_ named: String?, report lines: inout [String]) -> Seal? {
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
}
