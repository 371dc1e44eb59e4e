import TokenctlEssentials

/// Each profile's session, when the Secret Service can be used.
struct SessionCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        guard context.storeUsable else {
            let kernelOnly = context.withoutSecretService
            return context.configured.map { name, _ in
                // Such a profile needs no Secret Service: it is checked all the same.
                if kernelOnly.contains(name) { return Self.finding(name, service: context.service) }
                return DoctorFinding(
                    "session '\(name)'", ok: false, "not checked: the Secret Service cannot be used (see above)")
            }
        }
        return context.configured.map { name, _ in Self.finding(name, service: context.service) }
    }

    static func finding(_ name: ProfileName, service: TokenctlService) -> DoctorFinding {
        let status: SessionStatus
        do { status = try service.status(name) } catch {
            return DoctorFinding("session '\(name)'", ok: false, error.message, hint: error.hint)
        }
        if let grant = status.grant {
            return machineFinding(name, status: status, grant: grant, service: service)
        }
        switch status.state {
        case .authenticated, .expiredRefreshable:
            return DoctorFinding(
                "session '\(name)'", ok: true,
                "\(status.state.rawValue)" + (status.subject.map { " as \($0)" } ?? ""))
        case .signedOut:
            return DoctorFinding(
                "session '\(name)'", ok: false,
                "signed out (no session for \(status.issuer), client \(status.clientID))",
                hint: "Run '\(tokenctl: name, .login([]))'.")
        case .ended:
            return DoctorFinding(
                "session '\(name)'", ok: false,
                "ended by the server (\(status.endedReason ?? "terminal failure"))",
                hint: "Run '\(tokenctl: name, .login([]))'.")
        case .storeUnavailable:
            return DoctorFinding(
                "session '\(name)'", ok: false, status.storeProblem ?? "store unavailable",
                hint: status.storeHint)
        }
    }
}

extension SessionCheck {
    /// A machine profile: its cached token needs no person; what can fail is the client's
    /// means to get the next one (its key and certificate, for the methods that use them).
    static func machineFinding(_ name: ProfileName, status: SessionStatus, grant: String, service: TokenctlService)
        -> DoctorFinding
    {
        let title = "machine '\(name)'"
        let method = status.clientAuth.flatMap(ClientAuthenticationMethod.init(rawValue:))
        var what = "\(grant), \(status.clientAuth ?? "no client authentication"); \(status.state.rawValue)"
        if status.state == .storeUnavailable {
            return DoctorFinding(title, ok: false, status.storeProblem ?? "store unavailable", hint: status.storeHint)
        }
        let configuration = try? service.profiles.load(name)
        if let configuration, let problem = platformFileProblem(configuration, now: service.clock.now()) {
            return DoctorFinding(
                title, ok: false, problem, hint: "The platform that writes it must keep a current token there.")
        }
        if let configuration,
            let refusal = ClientCredentialsGrant.publicClientRefusal(configuration, profile: name)
        {
            return DoctorFinding(title, ok: false, refusal.message, hint: refusal.hint)
        }
        // A federated client assertion stands for a key of ours; a public client (none) has
        // nothing to check.
        guard let method, method.usesAssertion && method != .clientSecretJWT || method.usesCertificate,
            configuration?.clientAssertionFile == nil
        else {
            return DoctorFinding(title, ok: true, what)
        }
        let key: ClientKey?
        do { key = try service.clientKey(of: name) } catch {
            return DoctorFinding(title, ok: false, error.message, hint: error.hint)
        }
        guard let key else {
            return DoctorFinding(
                title, ok: false, "\(method.rawValue) needs a client key, and there is none",
                hint: "Run '\(tokenctl: name, .key(.create, []))' and register it.")
        }
        what += "; key \(key.thumbprint)"
        if method.usesCertificate {
            guard let certificate = key.certificate else {
                return DoctorFinding(
                    title, ok: false, "\(method.rawValue) needs a certificate, and the client key has none",
                    hint: "Run '\(tokenctl: name, .key(.create, [.certificate]))', or import the CA's.")
            }
            let left = certificate.notAfter.timeIntervalSince1970 - service.clock.now()
            guard left > 0 else {
                return DoctorFinding(
                    title, ok: false, "the client certificate (x5t#S256 \(certificate.thumbprint)) has expired",
                    hint: "Make or import a new one, and register it.")
            }
            what +=
                "; certificate \(certificate.thumbprint), expires \(Timestamp.iso8601(certificate.notAfter.timeIntervalSince1970))"
        }
        return DoctorFinding(title, ok: true, what)
    }

    /// The first of a machine profile's platform token files that the next request could not
    /// send (`PlatformTokenFile`), in words naming the file; nil when all can be sent.
    static func platformFileProblem(_ configuration: ProfileConfiguration, now: Double) -> String? {
        let files = [
            configuration.subjectTokenFile.map {
                PlatformTokenFile.subjectToken($0, tokenType: configuration.subjectTokenType)
            },
            configuration.assertionFile.map { PlatformTokenFile(path: $0, role: .assertion) },
            configuration.clientAssertionFile.map { PlatformTokenFile(path: $0, role: .clientAssertion) },
        ]
        for case let file? in files {
            if let problem = file.inspect(now: now).problem {
                return
                    "the \(file.role.rawValue) file \(TerminalText.short(file.path)) (\(file.role.profileKey)) \(problem)"
            }
        }
        return nil
    }
}

/// Sessions in the Secret Service that no profile uses, when it can be used.
struct KeyringResidueCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        guard context.storeUsable, let orphans = try? context.service.orphanedSessions(), !orphans.isEmpty else {
            return []
        }
        return [
            DoctorFinding(
                "keyring residue", level: .warn, "\(orphans.count) orphaned session(s) no profile uses",
                hint:
                    "See '\(tokenctl: .default, .status([.all]))'; remove them with '\(tokenctl: .default, .logout([.orphans]))'."
            )
        ]
    }
}
