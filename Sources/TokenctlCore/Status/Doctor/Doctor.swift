import TokenctlEssentials

/// One line of `tokenctl doctor`.
public struct DoctorFinding: Sendable, Equatable {
    /// `fail`: something that breaks `token`; `warn`: advice (it works, but could work better
    /// or keep working longer); `ok`: fine.
    public enum Level: String, Sendable, Equatable {
        case ok, warn, fail
    }

    public var name: String
    public var level: Level
    public var detail: String
    public var hint: Suggestion?

    /// Whether the check did not fail (a warning passes).
    public var ok: Bool { level != .fail }

    public init(_ name: String, ok: Bool, _ detail: String, hint: Suggestion? = nil) {
        self.init(name, level: ok ? .ok : .fail, detail, hint: hint)
    }

    public init(_ name: String, level: Level, _ detail: String, hint: Suggestion? = nil) {
        self.name = name
        self.level = level
        self.detail = detail
        self.hint = hint
    }
}

/// One check of `tokenctl doctor`: its lines, from what the run shares (`DoctorContext`).
protocol DoctorCheck: Sendable {
    /// Whether it runs beside the other checks from the start of the run, its lines still coming
    /// in their place: the issuers are asked while the local checks run (a hung Secret Service
    /// must not use up their time). Such a check sees the profiles, not the Secret Service's
    /// answer (`DoctorContext.storeAvailability` is nil).
    var runsMeanwhile: Bool { get }

    func findings(_ context: DoctorContext) async -> [DoctorFinding]
}

extension DoctorCheck {
    var runsMeanwhile: Bool { false }
}

/// What the checks share: the service, the profiles read once, and whether the Secret Service
/// can be used.
struct DoctorContext: Sendable {
    let service: TokenctlService
    let profiles: DoctorProfiles
    /// The Secret Service's answer to `checkAvailable`, asked once the meanwhile checks run.
    var storeAvailability: Result<Void, StoreError>?

    /// Each profile that loaded, in name order.
    var configured: [(ProfileName, ProfileConfiguration)] { profiles.configured }

    /// Whether the Secret Service can be used (reachable, its default collection unlocked).
    var storeUsable: Bool {
        if case .success? = storeAvailability { true } else { false }
    }

    /// The profiles that need no Secret Service (machine profiles with a TPM key and no
    /// secret: `SessionStoreRouter`).
    var withoutSecretService: [ProfileName] {
        configured.map(\.0).filter { service.store.needsNoSecretService($0) }
    }

    /// Whether no profile needs the Secret Service: there are profiles, and none needs it.
    var secretServiceUnneeded: Bool {
        !configured.isEmpty && withoutSecretService.count == configured.count
    }

    /// The line of a Secret Service (or its bus) that is missing but not needed.
    static let secretServiceUnneededDetail =
        "not needed: every profile is a machine profile whose key is in the TPM, its token cached in the kernel keyring only"

    /// The rotation journal, when the store has one.
    var journal: RotationJournal? { (service.store.secretServiceSide as? JournaledSessionStore)?.journal }
}

/// The profiles `doctor` checks, read once at the start.
struct DoctorProfiles: Sendable {
    /// The names in the profiles directory, or why it could not be listed.
    var names: Result<[ProfileName], TokenctlError>
    /// Each profile that loaded, in name order.
    var configured: [(ProfileName, ProfileConfiguration)] = []
    /// Why each of the others could not be loaded, in name order.
    var failures: [TokenctlError] = []

    init(reading profiles: ProfileRepository) {
        do {
            let names = try profiles.all()
            self.names = .success(names)
            for name in names {
                do {
                    if let configuration = try profiles.load(name) { configured.append((name, configuration)) }
                } catch {
                    failures.append(error)
                }
            }
        } catch {
            names = .failure(error)
        }
    }
}

/// The checks, in the order of their lines, and the run.
struct Doctor {
    let service: TokenctlService
    let checks: [any DoctorCheck]

    /// Every check `tokenctl doctor` makes, in the order it prints them.
    static func checks(
        bus: (address: String, source: String)?, schedule: RefreshSchedule, keyring: UnattendedKeyring?
    ) -> [any DoctorCheck] {
        var checks: [any DoctorCheck] = [
            ConfigurationCheck(),
            SessionBusCheck(bus: bus),
            SecretServiceCheck(),
            HotCacheCheck(),
            RotationJournalCheck(),
            PendingWriteCheck(),
            JournalQuotaCheck(),
            SessionCheck(),
            KeyringResidueCheck(),
            DPoPCheck(),
            ClientKeyCheck(),
            NetworkCheck(),
            IssuerCheck(),
            LockDirectoryCheck(),
            RefreshScheduleCheck(schedule: schedule),
        ]
        // Will it keep working after a reboot with nobody logged in?
        if let keyring {
            checks += [
                LingerCheck(keyring: keyring), KeyringUnitCheck(keyring: keyring), KeyringSealCheck(keyring: keyring),
                HostKeySealCheck(keyring: keyring),
            ]
        }
        return checks
    }

    func run() async -> [DoctorFinding] {
        var context = DoctorContext(service: service, profiles: DoctorProfiles(reading: service.profiles))
        let meanwhile = checks.map { check in
            check.runsMeanwhile ? Task { [context] in await check.findings(context) } : nil
        }
        do {
            try service.store.checkAvailable()
            context.storeAvailability = .success(())
        } catch {
            context.storeAvailability = .failure(error)
        }
        var findings: [DoctorFinding] = []
        for (check, started) in zip(checks, meanwhile) {
            if let started {
                findings += await started.value
            } else {
                findings += await check.findings(context)
            }
        }
        return findings
    }
}

extension TokenctlService {
    /// Everything that must hold for tokens to be served unattended, one check at a time
    /// (`Doctor.checks`).
    ///
    /// The whole run is bounded by the command's deadline (`deadline`): the
    /// Secret Service checks share it (each call ends by then, and one that cannot start says
    /// the time ran out), the issuers are asked meanwhile, each within it, and every check
    /// still gets its line.
    public func diagnose(
        bus: (address: String, source: String)?, schedule: RefreshSchedule, keyring: UnattendedKeyring? = nil
    ) async -> [DoctorFinding] {
        await Doctor(service: self, checks: Doctor.checks(bus: bus, schedule: schedule, keyring: keyring)).run()
    }
}
