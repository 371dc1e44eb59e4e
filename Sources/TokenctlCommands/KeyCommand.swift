import TokenctlCore
import TokenctlEssentials

/// `tokenctl key`: the profile's client key for private_key_jwt (RFC 7523 §2.2) and mTLS
/// (RFC 8705): make it (in the Secret Service or a TPM), show what to register, import one,
/// rotate it, remove it.
enum KeyCommand: EngineCommand {
    static let typeOption = OptionSpec(
        "--type", value: "type", choices: ["ec", "rsa"],
        help: "The key type for create and rotate: ec (P-256, ES256; the default) or rsa (RS256, PS256).")
    static let bitsOption = OptionSpec(
        "--bits", value: "bits", choices: ["2048", "3072"], help: "The size of an RSA key: 2048 (default) or 3072.")
    static let certificateOption = OptionSpec(
        "--certificate", help: "With create and rotate: also make a self-signed certificate for the key (mTLS).")
    static let daysOption = OptionSpec(
        "--days", value: "days", help: "How long the self-signed certificate is valid, in days (default 365).")
    static let commonNameOption = OptionSpec(
        "--common-name", value: "name",
        help: "The certificate's subject CN (default: the profile's client_id).")
    static let tpmOption = OptionSpec(
        "--tpm", help: "With create and rotate: make the key inside the TPM 2.0; it can never be exported.")
    static let formatOption = OptionSpec(
        "--format", value: "format", choices: ShowFormat.allCases.map(\.rawValue),
        help: "What show prints: jwk, jwks (the current and next keys), pem (the public key) or certificate.")
    static let nextOption = OptionSpec(
        "--next", help: "show, import and remove: the next key (made by rotate) instead of the current one.")
    static let commitOption = OptionSpec(
        "--commit", help: "With rotate: make the next key the current one (the old one is removed).")
    static let bundleOption = OptionSpec(
        "--bundle", value: "file", valueKind: .file,
        help: "With import: read a PKCS#12 file (key and certificate) instead of PEM on standard input.")
    static let passwordStdinOption = OptionSpec(
        "--password-stdin", help: "With import --bundle: read the PKCS#12 password from standard input.")

    static let spec = CommandSpec(
        name: "key",
        abstract: "Create, show, import, rotate or remove the profile's client key (private_key_jwt, mTLS).",
        usage:
            "create|show|import|rotate|remove [--type <type>] [--bits <bits>] [--certificate] [--days <days>] [--common-name <name>] [--tpm] [--format <format>] [--next] [--commit] [--bundle <file>] [--password-stdin]",
        options: [
            typeOption, bitsOption, certificateOption, daysOption, commonNameOption, tpmOption, formatOption,
            nextOption, commitOption, bundleOption, passwordStdinOption, Commands.timeout,
        ],
        arguments: [("action", "create, show, import, rotate or remove.")],
        argumentChoices: Action.allCases.map(\.rawValue),
        discussion: """
            The private key never leaves the machine: it is kept in the Secret Service, or with
            --tpm made inside the TPM, whose wrapped blob (useless on another TPM) is kept in
            tokenctl's state directory. 'create' prints the public JWK to register with the
            server (and the certificate with --certificate). 'rotate' makes a next key while the
            current one keeps working; register it, then 'rotate --commit'.
            """)

    enum Action: String, CaseIterable, Sendable {
        case create, show, `import`, rotate, remove
    }

    enum ShowFormat: String, CaseIterable, Sendable {
        case jwk, jwks, pem, certificate
    }

    /// `key`'s action and options, checked.
    struct Options: Equatable, Sendable {
        var action: Action
        var kind: ClientKey.Kind?
        var bits: Int
        var certificate: Bool
        var days: Int
        var commonName: String?
        var tpm: Bool
        var format: ShowFormat?
        var next: Bool
        var commit: Bool
        var pkcs12: String?
        var passwordStdin: Bool

        init(_ parsed: ParsedOptions) throws(UsageError) {
            action = try parsed.action(Action.self, command: "key")
            kind = try Self.checkedKind(parsed.value(typeOption))
            bits = try Self.checkedBits(parsed.value(bitsOption), kind: kind)
            certificate = parsed.has(certificateOption)
            let daysText = parsed.value(daysOption)
            days = try Self.checkedDays(daysText)
            commonName = parsed.value(commonNameOption)
            tpm = parsed.has(tpmOption)
            format = try Self.checkedFormat(parsed.value(formatOption))
            next = parsed.has(nextOption)
            commit = parsed.has(commitOption)
            pkcs12 = parsed.value(bundleOption)
            passwordStdin = parsed.has(passwordStdinOption)
            try checkActions(daysGiven: daysText != nil)
            try checkCombinations(daysGiven: daysText != nil)
        }

        /// `--type`'s value.
        static func checkedKind(_ text: String?) throws(UsageError) -> ClientKey.Kind? {
            try checkedChoice(text, of: "--type", expected: "ec or rsa")
        }

        /// A value among `T`'s, or the usage error that says which `option` takes.
        static func checkedChoice<T: RawRepresentable<String>>(_ text: String?, of option: String, expected: String)
            throws(UsageError) -> T?
        {
            try text.map { text throws(UsageError) in
                guard let value = T(rawValue: text) else {
                    throw UsageError(
                        "Invalid value '\(Output.printable(String(text.prefix(40))))' for '\(option)': expected \(expected).",
                        command: "key")
                }
                return value
            }
        }

        /// `--bits`' value (2048 when absent), which only an RSA key takes.
        static func checkedBits(_ text: String?, kind: ClientKey.Kind?) throws(UsageError) -> Int {
            guard text == nil || text == "2048" || text == "3072" else {
                throw UsageError("Invalid value for '--bits': expected 2048 or 3072.", command: "key")
            }
            if text != nil && kind != .rsa {
                throw UsageError("'--bits' applies to '--type rsa' only.", command: "key")
            }
            return text.flatMap { Int($0) } ?? 2048
        }

        /// `--days`' value (365 when absent).
        static func checkedDays(_ text: String?) throws(UsageError) -> Int {
            guard let days = Int(text ?? "365"), (1...3650).contains(days) else {
                throw UsageError(
                    "Invalid value for '--days': expected a number of days from 1 to 3650.", command: "key")
            }
            return days
        }

        /// `--format`'s value.
        static func checkedFormat(_ text: String?) throws(UsageError) -> ShowFormat? {
            try checkedChoice(text, of: "--format", expected: "jwk, jwks, pem or certificate")
        }

        /// Each option only with the actions it applies to.
        func checkActions(daysGiven: Bool) throws(UsageError) {
            func only(_ option: OptionSpec, _ used: Bool, for actions: [Action]) throws(UsageError) {
                guard !used || actions.contains(action) else {
                    throw UsageError(
                        "'\(option.key)' applies to \(actions.map { "'\($0.rawValue)'" }.joined(separator: " and ")) only.",
                        command: "key")
                }
            }
            let making: [Action] = [.create, .rotate]
            try only(typeOption, kind != nil, for: making)
            try only(certificateOption, certificate, for: making)
            try only(daysOption, daysGiven, for: making)
            try only(commonNameOption, commonName != nil, for: making)
            try only(tpmOption, tpm, for: making)
            try only(formatOption, format != nil, for: [.show])
            try only(nextOption, next, for: [.show, .import, .remove])
            try only(commitOption, commit, for: [.rotate])
            try only(bundleOption, pkcs12 != nil, for: [.import])
            try only(passwordStdinOption, passwordStdin, for: [.import])
        }

        /// The options that need, or exclude, one another.
        func checkCombinations(daysGiven: Bool) throws(UsageError) {
            if passwordStdin && pkcs12 == nil {
                throw UsageError(
                    "'--password-stdin' needs '--bundle FILE' (the file; the password on standard input).",
                    command: "key")
            }
            if commit && (kind != nil || certificate || tpm || daysGiven || commonName != nil) {
                throw UsageError(
                    "'rotate --commit' promotes the next key as it is: it takes no other option.", command: "key")
            }
            if tpm && certificate && kind == .rsa {
                // RFC 8446 §4.2.3: TLS 1.3 signs with RSA by RSASSA-PSS only, with a salt as long
                // as the hash, which the tpm2 provider refuses.
                throw UsageError(
                    "A certificate for a key inside the TPM is for mTLS, which needs an EC key there ('--type ec'): TLS 1.3 signs with RSA-PSS only, which the TPM's provider refuses.",
                    command: "key")
            }
            if (daysGiven || commonName != nil) && !certificate {
                throw UsageError(
                    "'--days' and '--common-name' describe the certificate: add '--certificate'.", command: "key")
            }
        }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = try Options(context.options)
        let service = context.service()
        let configuration = try? service.profiles.load(context.profile)
        if options.action != .show, options.action != .remove, let keyFile = configuration?.keyFile {
            throw keptElsewhere(context.profile, keyFile: keyFile, service: service)
        }
        switch options.action {
        case .create: try create(options, context: context, service: service)
        case .show: return try show(options, context: context, keys: service.clientKeys, configuration: configuration)
        case .import: try importKey(options, context: context, keys: service.clientKeys)
        case .rotate: try rotate(options, context: context, service: service)
        case .remove: try remove(options, context: context, keys: service.clientKeys)
        }
        return .success
    }

    /// Why a profile whose key is a `key_file` takes no new key from `key`.
    static func keptElsewhere(_ profile: ProfileName, keyFile: String, service: TokenctlService) -> TokenctlError {
        TokenctlError(
            .configuration,
            "profile '\(profile)' uses the key in \(Output.printable(keyFile)) (key_file), which another program keeps",
            hint:
                "Replace that file to change the key, or remove 'key_file' from \(service.profiles.paths.profileFile(profile))."
        )
    }

    /// `key create`: the profile's first key.
    static func create(_ options: Options, context: CommandContext, service: TokenctlService) throws {
        let keys = service.clientKeys
        let profile = context.profile
        if let existing = try keys.key(of: profile, slot: .current, absentSecretServiceIsEmpty: options.tpm) {
            throw TokenctlError(
                .configuration,
                "profile '\(profile)' already has a client key (\(describe(existing)))",
                hint:
                    "Replace it with '\(CommandHint.tokenctl(profile, "key rotate"))', or remove it with '\(CommandHint.tokenctl(profile, "key remove"))'."
            )
        }
        let key = try make(options, context: context, service: service, slot: .current)
        try keys.save(key, for: profile, slot: .current)
        context.io.standardError("Created \(describe(key)) for profile '\(profile)'. Register its public key:\n")
        context.io.standardOutput(registration(key))
    }

    /// `key import`: a key made elsewhere, as the current or the next key.
    static func importKey(_ options: Options, context: CommandContext, keys: ClientKeys) throws {
        let profile = context.profile
        let slot: ClientKey.Slot = options.next ? .next : .current
        if let existing = try keys.key(of: profile, slot: slot) {
            throw TokenctlError(
                .configuration,
                "profile '\(profile)' already has a\(slot == .next ? " next" : "") client key (\(describe(existing)))",
                hint:
                    "Import it as the next key with '\(CommandHint.tokenctl(profile, "key import --next"))', or remove the old one with '\(CommandHint.tokenctl(profile, "key remove\(slot == .next ? " --next" : "")"))'."
            )
        }
        let key = try importedKey(options, context: context)
        try keys.save(key, for: profile, slot: slot)
        context.io.standardError(
            "Imported \(describe(key)) as the \(slot == .next ? "next" : "current") key of profile '\(profile)'.\n")
        context.io.standardOutput(registration(key))
    }

    /// `key rotate`: a next key beside the current one, or with `--commit` the next key made current.
    static func rotate(_ options: Options, context: CommandContext, service: TokenctlService) throws {
        let keys = service.clientKeys
        let profile = context.profile
        if options.commit {
            let promoted = try keys.promote(profile)
            context.io.standardError(
                "The next key is now the current key of profile '\(profile)' (\(describe(promoted))); the old key was removed.\n"
            )
            return
        }
        guard let current = try keys.key(of: profile, slot: .current) else {
            throw TokenctlError(
                .configuration, "profile '\(profile)' has no client key to rotate",
                hint: "Make one with '\(CommandHint.tokenctl(profile, "key create"))'.")
        }
        if let next = try keys.key(of: profile, slot: .next) {
            throw TokenctlError(
                .configuration, "profile '\(profile)' already has a next key (\(describe(next)))",
                hint:
                    "Promote it with '\(CommandHint.tokenctl(profile, "key rotate --commit"))' once it is registered, or remove it with '\(CommandHint.tokenctl(profile, "key remove --next"))'."
            )
        }
        // The next key is of the current one's kind and home, with a certificate if it had one, unless told otherwise.
        var settings = options
        if settings.kind == nil { settings.kind = current.kind }
        if !settings.tpm, current.isTPM { settings.tpm = true }
        if !settings.certificate, current.certificate != nil { settings.certificate = true }
        let key = try make(settings, context: context, service: service, slot: .next)
        try keys.save(key, for: profile, slot: .next)
        context.io.standardError(
            "Created the next key of profile '\(profile)' (\(describe(key))); the current key keeps working. Register this public key (or the set from 'key show --format jwks'), then run '\(CommandHint.tokenctl(profile, "key rotate --commit"))':\n"
        )
        context.io.standardOutput(registration(key))
    }

    /// `key remove`: both keys, or with `--next` the next one only.
    static func remove(_ options: Options, context: CommandContext, keys: ClientKeys) throws {
        let profile = context.profile
        let slots: [ClientKey.Slot] = options.next ? [.next] : [.current, .next]
        var removed: [String] = []
        for slot in slots where try keys.remove(profile, slot: slot) { removed.append(slot.rawValue) }
        if removed.isEmpty {
            context.io.standardError("Profile '\(profile)' has no\(options.next ? " next" : "") client key.\n")
        } else {
            context.io.standardError(
                "Removed the \(removed.joined(separator: " and ")) client key\(removed.count > 1 ? "s" : "") of profile '\(profile)'.\n"
            )
        }
    }

    /// A new key as `options` say, with its certificate when asked.
    static func make(_ options: Options, context: CommandContext, service: TokenctlService, slot: ClientKey.Slot)
        throws(TokenctlError) -> ClientKey
    {
        var commonName = options.commonName
        if options.certificate, commonName == nil {
            commonName = try service.profiles.load(context.profile)?.clientID
            guard commonName != nil else {
                throw TokenctlError(
                    .configuration,
                    "profile '\(context.profile)' has no client_id for the certificate's subject",
                    hint: "Name it with '--common-name CLIENT_ID'.")
            }
        }
        let keys = service.clientKeys
        let location: ClientKey.Location =
            options.tpm ? .tpm(blobFile: keys.tpmKeyFile(context.profile, slot: slot)) : .keyring
        var key = try ClientKey.generate(
            options.kind ?? .ec, rsaBits: options.bits, location: location,
            now: Date(timeIntervalSince1970: context.clock.now()))
        if options.certificate, let commonName {
            let certificate = try key.selfSignedCertificate(commonName: commonName, lifetime: options.days * 86400)
            try key.attach(certificatePEM: certificate)
        }
        return key
    }

    /// The key `import` reads: PEM on standard input (a private key, and optionally its
    /// certificate), or a PKCS#12 file, its password on standard input.
    static func importedKey(_ options: Options, context: CommandContext) throws(TokenctlError) -> ClientKey {
        if let path = options.pkcs12 {
            let bundle: [UInt8]
            do {
                guard let read = try FileIO.readBytes(path, limit: ClientKeys.maximumFileBytes) else {
                    throw TokenctlError(.invalidInput, "no PKCS#12 file \(Output.printable(path))")
                }
                bundle = read
            } catch let error as TokenctlError {
                throw error
            } catch {
                throw TokenctlError(.invalidInput, "cannot read \(Output.printable(path)): \(error)")
            }
            var password: String?
            if options.passwordStdin {
                password = try StandardInput.secret(
                    from: context.io, what: "PKCS#12 password", timeout: context.timeout)
            }
            return try ClientKeyImport.pkcs12(
                bundle, password: password, now: Date(timeIntervalSince1970: context.clock.now()))
        }
        let input = try StandardInput.bytes(from: context.io, what: "key", timeout: context.timeout)
        return try ClientKeyImport.standardInput(input, now: Date(timeIntervalSince1970: context.clock.now()))
    }

    static func show(
        _ options: Options, context: CommandContext, keys: ClientKeys, configuration: ProfileConfiguration?
    ) throws(TokenctlError) -> ExitStatus {
        let profile = context.profile
        let current = try keys.key(of: profile, slot: .current, configuration: configuration)
        let next = try keys.key(of: profile, slot: .next)
        let chosen = options.next ? next : current
        guard let format = options.format else {
            guard current != nil || next != nil else {
                throw TokenctlError(
                    .configuration, "profile '\(profile)' has no client key",
                    hint: "Make one with '\(CommandHint.tokenctl(profile, "key create"))'.")
            }
            var text = ""
            for (name, key) in [("current", current), ("next", next)] {
                guard let key, !options.next || name == "next" else { continue }
                text += summary(key, name: name)
            }
            context.io.standardOutput(text)
            return .success
        }
        if format == .jwks {
            let members = [current, next].compactMap { $0 }.map { JSONText.Value(raw: $0.registeredJWK) }
            guard !members.isEmpty else { throw noKey(profile, next: false) }
            context.io.standardOutput(JSONText.object([("keys", .array(members))]) + "\n")
            return .success
        }
        guard let key = chosen else { throw noKey(profile, next: options.next) }
        switch format {
        case .jwk: context.io.standardOutput(key.registeredJWK + "\n")
        case .pem: context.io.standardOutput(key.publicKeyPEM)
        case .certificate:
            guard let certificate = key.certificate else {
                throw TokenctlError(
                    .configuration, "the client key of profile '\(profile)' has no certificate",
                    hint:
                        "Make a key with one: '\(CommandHint.tokenctl(profile, "key rotate --certificate"))', or import a certificate with its key."
                )
            }
            context.io.standardOutput(String(decoding: certificate.certificatePEM, as: UTF8.self))
        case .jwks: break
        }
        return .success
    }

    static func noKey(_ profile: ProfileName, next: Bool) -> TokenctlError {
        next
            ? TokenctlError(
                .configuration, "profile '\(profile)' has no next client key",
                hint: "Make one with '\(CommandHint.tokenctl(profile, "key rotate"))'.")
            : TokenctlError(
                .configuration, "profile '\(profile)' has no client key",
                hint: "Make one with '\(CommandHint.tokenctl(profile, "key create"))'.")
    }

    /// What to register: the public JWK, and the certificate when the key has one.
    static func registration(_ key: ClientKey) -> String {
        var text = key.registeredJWK + "\n"
        if let certificate = key.certificate { text += String(decoding: certificate.certificatePEM, as: UTF8.self) }
        return text
    }

    /// "an EC P-256 key (thumbprint …) kept in the Secret Service"
    static func describe(_ key: ClientKey) -> String {
        "\(kindName(key)) key (thumbprint \(key.thumbprint)) \(home(key))"
    }

    static func kindName(_ key: ClientKey) -> String {
        switch key.kind {
        case .ec: "an EC P-256"
        case .rsa: "an RSA"
        }
    }

    static func home(_ key: ClientKey) -> String {
        switch key.location {
        case .keyring: "kept in the Secret Service"
        case .tpm: "inside the TPM (\(Output.printable(TPMAccess.tcti())))"
        case .file(let path): "read from \(Output.printable(path))"
        }
    }

    /// `key show`'s and `status`'s lines for one key.
    static func summary(_ key: ClientKey, name: String) -> String {
        var lines = [
            "\(name) key:",
            "  type:        \(key.kind == .ec ? "EC P-256 (ES256)" : "RSA (RS256, PS256)")",
            "  thumbprint:  \(key.thumbprint)",
            "  where:       \(home(key))",
        ]
        if let certificate = key.certificate {
            lines.append("  certificate: \(Output.printable(certificate.subject)), x5t#S256 \(certificate.thumbprint)")
            lines.append("  expires:     \(Output.timestamp(certificate.notAfter.timeIntervalSince1970))")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
