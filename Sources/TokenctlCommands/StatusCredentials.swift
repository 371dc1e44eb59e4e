import TokenctlCore
import TokenctlEssentials

/// What `status` says of the credentials a profile's client authenticates with: its keys (the
/// current one and a rotated one not yet promoted) and the files of a platform's tokens a
/// machine profile reads. The same facts as text lines and as JSON fields (`client_keys`,
/// `platform_files`), never a secret or a token.
struct StatusCredentials {
    struct Key {
        var slot: ClientKey.Slot
        var key: ClientKey
        /// Where the private key is: `software` (the Secret Service), `tpm` or `file`.
        var kind: String {
            switch key.location {
            case .keyring: "software"
            case .tpm: "tpm"
            case .file: "file"
            }
        }
    }

    struct File {
        /// The profile key that names the file.
        var profileKey: String
        var path: String
        var inspection: PlatformTokenFile.Inspection
    }

    var keys: [Key] = []
    var files: [File] = []

    /// The credentials of `profile`; nil when it uses none (a person's session with a secret or
    /// none): only a profile that authenticates with a key, names one, or is a machine is asked
    /// for its keys, each slot a Secret Service call a person's `status` should not pay for.
    static func gather(_ service: TokenctlService, _ profile: ProfileName, now: Double) -> StatusCredentials? {
        guard let configuration = try? service.profiles.load(profile),
            configuration.isMachine || configuration.keyFile != nil
                || configuration.tokenEndpointAuthMethod.map({ !$0.usesSecret }) == true
        else { return nil }
        var credentials = StatusCredentials()
        // A federated client assertion stands for the key: there is none to look up.
        if configuration.clientAssertionFile == nil {
            for slot in [ClientKey.Slot.current, .next] {
                guard let key = try? service.clientKeys.key(of: profile, slot: slot, configuration: configuration)
                else { continue }
                credentials.keys.append(Key(slot: slot, key: key))
            }
        }
        let type = configuration.subjectTokenType
        let files: [(String, String?, PlatformTokenFile.Role, Bool)] = [
            (
                "subject_token_file", configuration.subjectTokenFile, .subjectToken,
                PlatformTokenFile.subjectToken("", tokenType: type).mustBeJWT
            ),
            ("assertion_file", configuration.assertionFile, .assertion, true),
            ("client_assertion_file", configuration.clientAssertionFile, .clientAssertion, true),
        ]
        for (key, path, role, mustBeJWT) in files {
            guard let path else { continue }
            let file = PlatformTokenFile(path: path, role: role, mustBeJWT: mustBeJWT)
            credentials.files.append(File(profileKey: key, path: path, inspection: file.inspect(now: now)))
        }
        return credentials
    }

    /// A certificate's SHA-256 fingerprint in the colon-separated hex of `openssl x509 -fingerprint`.
    static func fingerprint(_ certificate: ClientCertificate) -> String? {
        guard let digest = UnverifiedJWT.base64URLDecode(certificate.thumbprint) else { return nil }
        let hex = Array("0123456789ABCDEF")
        return digest.map { String([hex[Int($0 >> 4)], hex[Int($0 & 15)]]) }.joined(separator: ":")
    }

    /// `status`'s lines.
    var text: String {
        var lines: [String] = []
        for entry in keys {
            let key = entry.key
            let label = entry.slot == .current ? "client key:    " : "next key:      "
            var line =
                "  \(label)\(key.kind == .ec ? "EC P-256" : "RSA"), thumbprint \(key.thumbprint), \(KeyCommand.home(key))"
            if let certificate = key.certificate {
                line +=
                    "; certificate \(certificate.subject), SHA-256 \(Self.fingerprint(certificate) ?? "?"), expires \(Output.timestamp(certificate.notAfter.timeIntervalSince1970))"
            }
            lines.append(Output.printable(line))
        }
        for file in files {
            var line = "  \(file.profileKey): \(file.path)"
            if let problem = file.inspection.problem {
                line += " (\(problem))"
            } else {
                line += " (readable"
                if let expiry = file.inspection.expiresAt { line += ", its token expires \(Output.timestamp(expiry))" }
                line += ")"
            }
            lines.append(Output.printable(line))
        }
        return lines.map { $0 + "\n" }.joined()
    }

    /// `status --json`'s fields (null when the profile uses no such credential).
    static func jsonFields(_ credentials: StatusCredentials?) -> [(String, JSONText.Value)] {
        let keys = credentials.map { credentials in
            JSONText.Value.array(
                credentials.keys.map { entry in
                    let key = entry.key
                    let certificate = key.certificate.map { certificate in
                        JSONText.Value(
                            raw: JSONText.object([
                                ("subject", .string(certificate.subject)),
                                ("sha256_fingerprint", .string(fingerprint(certificate))),
                                ("x5t#S256", .string(certificate.thumbprint)),
                                ("not_after", .string(Output.timestamp(certificate.notAfter.timeIntervalSince1970))),
                            ]))
                    }
                    return JSONText.Value(
                        raw: JSONText.object([
                            ("slot", .string(entry.slot.rawValue)), ("kind", .string(entry.kind)),
                            ("type", .string(key.kind == .ec ? "EC" : "RSA")), ("thumbprint", .string(key.thumbprint)),
                            ("certificate", certificate ?? .null),
                        ]))
                })
        }
        let files = credentials.map { credentials in
            JSONText.Value.array(
                credentials.files.map { file in
                    JSONText.Value(
                        raw: JSONText.object([
                            ("key", .string(file.profileKey)), ("path", .string(file.path)),
                            ("usable", .bool(file.inspection.problem == nil)),
                            ("problem", .string(file.inspection.problem)),
                            ("token_expires_at", .string(file.inspection.expiresAt.map(Output.timestamp))),
                        ]))
                })
        }
        return [("client_keys", keys ?? .null), ("platform_files", files ?? .null)]
    }
}
