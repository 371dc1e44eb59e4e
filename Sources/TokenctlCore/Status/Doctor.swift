import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// One line of `tokenctl doctor`.
public struct DoctorCheck: Sendable, Equatable {
    /// `fail`: something that breaks `token`; `warn`: advice (it works, but could work better
    /// or keep working longer); `ok`: fine.
    public enum Level: String, Sendable, Equatable {
        case ok, warn, fail
    }

    public var name: String
    public var level: Level
    public var detail: String
    public var hint: String?

    /// Whether the check did not fail (a warning passes).
    public var ok: Bool { level != .fail }

    public init(_ name: String, ok: Bool, _ detail: String, hint: String? = nil) {
        self.init(name, level: ok ? .ok : .fail, detail, hint: hint)
    }

    public init(_ name: String, level: Level, _ detail: String, hint: String? = nil) {
        self.name = name
        self.level = level
        self.detail = detail
        self.hint = hint
    }
}

extension TokenctlService {
    /// Everything that must hold for tokens to be served unattended, one check at a time.
    ///
    /// The whole run is bounded by the command's deadline (`deadline`): the
    /// Secret Service checks share it (each call ends by then, and one that cannot start says
    /// the time ran out), the issuers are asked meanwhile, each within it, and every check
    /// still gets its line.
    public func diagnose(bus: (address: String, source: String)?, schedule: RefreshSchedule) async -> [DoctorCheck] {
        var checks: [DoctorCheck] = []

        // Configuration.
        var configured: [(ProfileName, ProfileConfiguration)] = []
        do {
            let names = try profiles.all()
            if names.isEmpty {
                checks.append(
                    DoctorCheck(
                        "configuration", ok: false, "no profiles in \(profiles.paths.profilesDirectory)",
                        hint: "Sign a profile in: 'tokenctl login --issuer URL --client-id ID'."))
            }
            for name in names {
                do {
                    if let configuration = try profiles.load(name) { configured.append((name, configuration)) }
                } catch {
                    checks.append(DoctorCheck("configuration", ok: false, error.message))
                }
            }
            if !configured.isEmpty && configured.count == names.count {
                checks.append(
                    DoctorCheck(
                        "configuration", ok: true, "\(names.count) profile(s) in \(profiles.paths.profilesDirectory)"))
            }
        } catch {
            checks.append(DoctorCheck("configuration", ok: false, error.message))
        }

        // The issuers are asked while the local checks run (a hung Secret Service must not
        // use up their time); their lines come where they always did.
        let issuerChecks = Task { [configured] in
            var checks: [DoctorCheck] = []
            var seen = Set<String>()
            for (_, configuration) in configured where seen.insert(configuration.issuer.string).inserted {
                checks += await checkIssuer(configuration)
            }
            return checks
        }

        // Session bus and Secret Service.
        if let bus {
            checks.append(DoctorCheck("session bus", ok: true, "\(bus.address) (from \(bus.source))"))
        } else {
            checks.append(
                DoctorCheck(
                    "session bus", ok: false,
                    "not found: DBUS_SESSION_BUS_ADDRESS is unset and there is no bus socket in the runtime directory",
                    hint:
                        "Set DBUS_SESSION_BUS_ADDRESS, or enable lingering ('loginctl enable-linger $USER') so /run/user/$UID/bus exists."
                ))
        }
        var storeUsable = false
        let secretService =
            (store as? JournaledSessionStore)?.inner as? SecretServiceStore ?? store as? SecretServiceStore
        // After the check: naming the provider connects first, and the check must get the time.
        var providerName: String { secretService.map { " (provider: \($0.provider().name))" } ?? "" }
        do {
            try store.checkAvailable()
            checks.append(DoctorCheck("secret service", ok: true, "reachable" + providerName))
            checks.append(DoctorCheck("keyring", ok: true, "default collection unlocked"))
            storeUsable = true
        } catch {
            switch error.reason {
            case .locked, .noDefaultCollection:
                checks.append(DoctorCheck("secret service", ok: true, "reachable" + providerName))
                checks.append(DoctorCheck("keyring", ok: false, error.message, hint: error.hint))
            default:
                checks.append(DoctorCheck("secret service", ok: false, error.message, hint: error.hint))
            }
        }

        // The hot cache: either state works; the check says which one `token` uses.
        switch hotCache?.state ?? .none {
        case .kernelKeyring:
            checks.append(DoctorCheck("hot cache", ok: true, "kernel user keyring (token hits need no D-Bus)"))
        case .none:
            checks.append(
                DoctorCheck(
                    "hot cache", level: .warn,
                    "none: the kernel keyring is unavailable here, so every 'token' reads the Secret Service"))
        }

        // The rotation journal lives in the kernel keyring too.
        let journal = (store as? JournaledSessionStore)?.journal
        if let journal, journal.isAvailable {
            checks.append(
                DoctorCheck(
                    "rotation journal", ok: true,
                    "kernel user keyring (a rotated session is held in memory until the Secret Service has it)"))
        } else {
            checks.append(
                DoctorCheck(
                    "rotation journal", level: .warn,
                    "unavailable: the kernel keyring cannot be used here, so a crash or a hung keyring between a rotation and its keyring write can lose the session"
                ))
        }

        // Rotations the Secret Service does not hold yet (it may have been unusable since).
        for (name, configuration) in configured {
            let identity = SessionIdentity(profile: name, configuration: configuration)
            if storeUsable { await completePendingWrite(name) }
            guard let pending = store.pendingWrite(identity) else { continue }
            checks.append(
                DoctorCheck(
                    "pending write '\(name)'", ok: false,
                    "a rotated session is held only in memory (kernel keyring) since \(Timestamp.iso8601(pending.journaledAt))"
                        + (pending.pendingReason.map { ": \(TerminalText.short($0))" } ?? ""),
                    hint:
                        "Make the Secret Service writable (see the checks above); the next tokenctl command then writes it. Until then a reboot or logout loses it."
                ))
        }

        // Room in the kernel key quota for the journal's next entry (after the pending writes above).
        if let journal, journal.isAvailable {
            checks.append(journalQuotaCheck(configured, storeUsable: storeUsable, quota: KernelKeyQuota.current()))
        }

        // Sessions.
        if storeUsable {
            for (name, _) in configured {
                let status: SessionStatus
                do { status = try self.status(name) } catch {
                    checks.append(DoctorCheck("session '\(name)'", ok: false, error.message, hint: error.hint))
                    continue
                }
                switch status.state {
                case .authenticated, .expiredRefreshable:
                    checks.append(
                        DoctorCheck(
                            "session '\(name)'", ok: true,
                            "\(status.state.rawValue)" + (status.subject.map { " as \($0)" } ?? "")))
                case .signedOut:
                    checks.append(
                        DoctorCheck(
                            "session '\(name)'", ok: false,
                            "signed out (no session for \(status.issuer), client \(status.clientID))",
                            hint: "Run '\(CommandHint.login(name))'."))
                case .ended:
                    checks.append(
                        DoctorCheck(
                            "session '\(name)'", ok: false,
                            "ended by the server (\(status.endedReason ?? "terminal failure"))",
                            hint: "Run '\(CommandHint.login(name))'."))
                case .storeUnavailable:
                    checks.append(
                        DoctorCheck(
                            "session '\(name)'", ok: false, status.storeProblem ?? "store unavailable",
                            hint: status.storeHint))
                }
            }
            if let orphans = try? orphanedSessions(), !orphans.isEmpty {
                checks.append(
                    DoctorCheck(
                        "keyring residue", level: .warn, "\(orphans.count) orphaned session(s) no profile uses",
                        hint: "See 'tokenctl status --all'; remove them with 'tokenctl logout --orphans'."))
            }
        } else {
            for (name, _) in configured {
                checks.append(
                    DoctorCheck(
                        "session '\(name)'", ok: false, "not checked: the Secret Service cannot be used (see above)"))
            }
        }

        // DPoP profiles sign a proof for every request, with libgcrypt.
        let dpopProfiles = configured.filter { $0.1.dpop }
        if !dpopProfiles.isEmpty {
            do {
                try Gcrypt.requireLibrary()
                checks.append(
                    DoctorCheck(
                        "dpop", ok: true,
                        "libgcrypt loads: proofs can be signed for \(dpopProfiles.count) profile(s) with dpop = true"))
            } catch {
                checks.append(
                    DoctorCheck(
                        "dpop", ok: false, error.reason,
                        hint: "Install libgcrypt20: DPoP sessions cannot sign the proofs their tokens need without it.")
                )
            }
        }

        // Each issuer: reachable, and our clock against its clock.
        checks += await issuerChecks.value

        // Lock directory.
        let lockDirectory = profiles.paths.lockDirectory
        do {
            try FileIO.ensurePrivateDirectory(lockDirectory, createParents: false)
            var info = stat()
            system_stat(lockDirectory, &info)
            let writable = system_access(lockDirectory, W_OK) == 0
            checks.append(
                DoctorCheck(
                    "lock directory", ok: writable && info.st_mode & 0o777 == 0o700,
                    "\(lockDirectory) (mode \(String(info.st_mode & 0o777, radix: 8)), \(writable ? "writable" : "not writable"))"
                ))
        } catch {
            checks.append(DoctorCheck("lock directory", ok: false, "\(error)"))
        }

        // Unattended refresh.
        let installed = schedule.status().filter(\.installed)
        if installed.isEmpty {
            checks.append(
                DoctorCheck(
                    "refresh schedule", level: .warn, "no systemd timer or crontab entry",
                    hint: "Run 'tokenctl schedule install' to keep sessions alive unattended."))
        } else {
            for entry in installed {
                checks.append(
                    DoctorCheck(
                        "refresh schedule", ok: entry.working, "\(entry.backend.rawValue): \(entry.detail)",
                        hint: entry.working ? nil : "Run 'tokenctl schedule install' again from a login session."))
            }
        }
        return checks
    }

    /// Whether this user's kernel key quota has room for the rotation journal to hold the next
    /// rotation of the largest session. The quota is shared by every program of the uid, and
    /// one that fills it leaves the journal no room: a refresh is then written to the Secret
    /// Service alone (a warning: a crash or a failing write in between loses the session), and
    /// a session the Secret Service does not hold yet (a pending write) is lost by its next
    /// refresh (a failure). A session is measured as its journal entry, read from the journal
    /// or the Secret Service; `estimatedJournalCharge` stands in when none can be read.
    func journalQuotaCheck(
        _ configured: [(ProfileName, ProfileConfiguration)], storeUsable: Bool, quota: KernelKeyQuota?
    ) -> DoctorCheck {
        let name = "journal quota"
        guard let quota else {
            return DoctorCheck(
                name, ok: true,
                "unknown: /proc/key-users cannot be read here, so the room left for the rotation journal cannot be measured"
            )
        }
        let room =
            "\(quota.bytesLeft) of \(quota.maximumBytes) bytes and \(quota.keysLeft) of \(quota.maximumKeys) keys left in this user's kernel key quota"
        let hint =
            "Another program fills this user's kernel key quota: list the keys with 'keyctl show @u' and remove those no longer needed, or raise the limit (/proc/sys/kernel/keys/maxbytes, as root)."
        func fits(_ charge: Int) -> Bool { charge <= quota.bytesLeft && quota.keysLeft >= 1 }

        var largest: (profile: ProfileName, charge: Int)?
        var tooLarge: ProfileName?
        var lost: [(profile: ProfileName, charge: Int)] = []
        var unreadable = false
        for (profile, configuration) in configured {
            let identity = SessionIdentity(profile: profile, configuration: configuration)
            let pending = store.pendingWrite(identity)
            let session: TokenSet
            if let pending {
                session = pending.tokenSet
            } else if storeUsable, let read = try? store.read(identity) {
                session = read
            } else {
                // Not signed in, or the Secret Service cannot be read: then only an estimate.
                unreadable = unreadable || !storeUsable
                continue
            }
            guard let charge = RotationJournal.quotaCharge(of: session, for: identity) else {
                tooLarge = profile
                continue
            }
            if pending != nil && !fits(charge) { lost.append((profile, charge)) }
            if charge > largest?.charge ?? -1 { largest = (profile, charge) }
        }
        if let first = lost.first {
            return DoctorCheck(
                name, ok: false,
                "\(room), but the next rotation of '\(first.profile)' takes \(first.charge) bytes and one key: only the journal holds that session (a pending write above), so its next refresh would lose it",
                hint: "Make the Secret Service writable first (see the checks above), then: " + hint)
        }
        if let tooLarge {
            return DoctorCheck(
                name, level: .warn,
                "the session of '\(tooLarge)' is larger than a journal entry may be (\(HotCacheEntry.maximumPayloadSize) bytes): its refreshes are written to the Secret Service alone"
            )
        }
        let measured: String
        let charge: Int
        if let largest {
            (measured, charge) = (
                "the largest session ('\(largest.profile)') takes \(largest.charge) bytes and one key in the journal",
                largest.charge
            )
        } else if unreadable {
            (measured, charge) = (
                "a session takes about \(Self.estimatedJournalCharge) bytes and one key in the journal (an estimate: the sessions cannot be read)",
                Self.estimatedJournalCharge
            )
        } else {
            return DoctorCheck(name, ok: true, room + " (no session to journal yet)")
        }
        guard fits(charge) else {
            return DoctorCheck(
                name, level: .warn,
                "\(room), but \(measured): a refresh now is written to the Secret Service alone, and a crash or a failed write before it is done loses the session",
                hint: hint)
        }
        return DoctorCheck(name, ok: true, "\(room); \(measured)")
    }

    /// A journal entry of a session with JWT access and ID tokens of about a kilobyte each: the
    /// measure when no session can be read.
    static let estimatedJournalCharge = 4096

    private func checkIssuer(_ configuration: ProfileConfiguration) async -> [DoctorCheck] {
        let http = httpClient(configuration.caBundle)
        let url = ServerMetadata.discoveryURLs(for: configuration.issuer)[0]
        let left = deadline?.remaining(clock: clock) ?? 5
        guard left > 0.1 else {
            return [
                DoctorCheck(
                    "issuer \(configuration.issuer)", ok: false, "not checked: doctor's time ran out (--timeout)",
                    hint: "Run 'tokenctl doctor --timeout 30' to give the checks more time.")
            ]
        }
        do {
            let sentAt = clock.now()
            let response = try await http.send(.getJSON(url), timeout: min(5, left))
            let receivedAt = clock.now()
            var checks = [
                DoctorCheck(
                    "issuer \(configuration.issuer)", ok: true, "reachable (discovery: HTTP \(response.status))")
            ]
            if let offset = ClockSkew.offset(serverDate: response.serverDate, receivedAt: (sentAt + receivedAt) / 2) {
                let trusted = ClockSkew.isTrusted(offset)
                checks.append(
                    DoctorCheck(
                        "clock", level: trusted ? .ok : .warn,
                        "\(offset >= 0 ? "+" : "")\(Int(saturating: offset)) s against \(configuration.issuer.host)",
                        hint: trusted
                            ? nil
                            : "Beyond ±\(Int(ClockSkew.trustedBound)) s tokenctl refreshes online on every use; fix the system clock ('timedatectl')."
                    ))
            }
            return checks
        } catch {
            return [
                DoctorCheck(
                    "issuer \(configuration.issuer)", ok: false, "unreachable: \(error)",
                    hint: "Check the network and the issuer URL.")
            ]
        }
    }
}
