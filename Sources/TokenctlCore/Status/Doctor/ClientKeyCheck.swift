import TokenctlEssentials

/// Client keys (private_key_jwt, mTLS): each profile's key loads (a TPM key: the TPM answers and
/// the blob is this TPM's; a key file: it can be read), and its certificate has not expired.
struct ClientKeyCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        let keys = context.service.clientKeys
        let now = context.service.clock.now()
        var findings: [DoctorFinding] = []
        for (profile, configuration) in context.configured {
            let inTPM = FileIO.isReadable(keys.tpmKeyFile(profile, slot: .current))
            // A key in the Secret Service is looked for only when it can be read.
            guard configuration.keyFile != nil || inTPM || context.storeUsable else { continue }
            let key: ClientKey
            do {
                guard let found = try keys.key(of: profile, slot: .current, configuration: configuration) else {
                    continue
                }
                key = found
            } catch {
                findings.append(
                    DoctorFinding("client key", ok: false, "profile \(profile): \(error.message)", hint: error.hint))
                continue
            }
            let place =
                switch key.location {
                case .keyring: "in the Secret Service"
                case .tpm: "inside the TPM (\(TPMAccess.tcti()))"
                case .file(let path): "read from \(path)"
                }
            var detail =
                "profile \(profile): \(key.kind == .ec ? "EC P-256" : "RSA") key \(key.thumbprint), \(place)"
            if let certificate = key.certificate {
                let expiry = Timestamp.iso8601(certificate.notAfter.timeIntervalSince1970)
                guard certificate.notAfter.timeIntervalSince1970 > now else {
                    findings.append(
                        DoctorFinding(
                            "client key", ok: false,
                            "profile \(profile): the certificate \(certificate.subject) expired at \(expiry)",
                            hint:
                                "Make a new one with '\(tokenctl: profile, .key(.rotate, [.certificate]))' and register it."
                        ))
                    continue
                }
                detail += ", certificate \(certificate.subject) until \(expiry)"
            }
            findings.append(DoctorFinding("client key", ok: true, detail))
        }
        return findings
    }
}
