import TokenctlEssentials

/// Whether this user's kernel key quota has room for the rotation journal to hold the next
/// rotation of the largest session. The quota is shared by every program of the uid, and one
/// that fills it leaves the journal no room: a refresh is then written to the Secret Service
/// alone (a warning: a crash or a failing write in between loses the session), and a session
/// the Secret Service does not hold yet (a pending write) is lost by its next refresh (a
/// failure). A session is measured as its journal entry, read from the journal or the Secret
/// Service; `estimatedJournalCharge` stands in when none can be read. Made after the pending
/// writes, and only where the journal is available.
struct JournalQuotaCheck: DoctorCheck {
    /// A journal entry of a session with JWT access and ID tokens of about a kilobyte each: the
    /// measure when no session can be read.
    static let estimatedJournalCharge = 4096

    static let name = "journal quota"

    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        guard let journal = context.journal, journal.isAvailable else { return [] }
        // The quota first: the sessions are read only when there is room to compare them with.
        guard let quota = KernelKeyQuota.current() else {
            return [
                DoctorFinding(
                    Self.name, ok: true,
                    "unknown: /proc/key-users cannot be read here, so the room left for the rotation journal cannot be measured"
                )
            ]
        }
        return [Self.finding(Sessions(context), quota: quota)]
    }

    /// What the sessions take in the journal.
    struct Sessions {
        /// The largest session's charge.
        var largest: (profile: ProfileName, charge: Int)?
        /// A session too large for a journal entry.
        var tooLarge: ProfileName?
        /// Sessions only the journal holds (pending writes), with their charges.
        var pending: [(profile: ProfileName, charge: Int)] = []
        /// Whether some session could not be read because the Secret Service cannot be used.
        var unreadable = false

        init(_ context: DoctorContext) {
            let store = context.service.store
            for (profile, configuration) in context.configured {
                let identity = SessionIdentity(profile: profile, configuration: configuration)
                let pendingWrite = store.pendingWrite(identity)
                let session: TokenSet
                if let pendingWrite {
                    session = pendingWrite.tokenSet
                } else if context.storeUsable, let read = try? store.read(identity) {
                    session = read
                } else {
                    // Not signed in, or the Secret Service cannot be read: then only an estimate.
                    unreadable = unreadable || !context.storeUsable
                    continue
                }
                guard let charge = RotationJournal.quotaCharge(of: session, for: identity) else {
                    tooLarge = profile
                    continue
                }
                if pendingWrite != nil { pending.append((profile, charge)) }
                if charge > largest?.charge ?? -1 { largest = (profile, charge) }
            }
        }
    }

    /// The line, from what the sessions take and the quota's room.
    static func finding(_ sessions: Sessions, quota: KernelKeyQuota) -> DoctorFinding {
        let room =
            "\(quota.bytesLeft) of \(quota.maximumBytes) bytes and \(quota.keysLeft) of \(quota.maximumKeys) keys left in this user's kernel key quota"
        let hint: Suggestion =
            "Another program fills this user's kernel key quota: list the keys with '\(program: "keyctl show @u")' and remove those no longer needed, or raise the limit (/proc/sys/kernel/keys/maxbytes, as root)."
        func fits(_ charge: Int) -> Bool { charge <= quota.bytesLeft && quota.keysLeft >= 1 }

        if let first = sessions.pending.first(where: { !fits($0.charge) }) {
            return DoctorFinding(
                name, ok: false,
                "\(room), but the next rotation of '\(first.profile)' takes \(first.charge) bytes and one key: only the journal holds that session (a pending write above), so its next refresh would lose it",
                hint: "Make the Secret Service writable first (see the checks above), then: " + hint)
        }
        if let tooLarge = sessions.tooLarge {
            return DoctorFinding(
                name, level: .warn,
                "the session of '\(tooLarge)' is larger than a journal entry may be (\(HotCacheEntry.maximumPayloadSize) bytes): its refreshes are written to the Secret Service alone"
            )
        }
        guard let (measured, charge) = measure(sessions) else {
            return DoctorFinding(name, ok: true, room + " (no session to journal yet)")
        }
        guard fits(charge) else {
            return DoctorFinding(
                name, level: .warn,
                "\(room), but \(measured): a refresh now is written to the Secret Service alone, and a crash or a failed write before it is done loses the session",
                hint: hint)
        }
        return DoctorFinding(name, ok: true, "\(room); \(measured)")
    }

    /// The charge to fit, and how it was measured; nil when there is no session to journal.
    private static func measure(_ sessions: Sessions) -> (String, Int)? {
        if let largest = sessions.largest {
            return (
                "the largest session ('\(largest.profile)') takes \(largest.charge) bytes and one key in the journal",
                largest.charge
            )
        }
        if sessions.unreadable {
            return (
                "a session takes about \(Self.estimatedJournalCharge) bytes and one key in the journal (an estimate: the sessions cannot be read)",
                Self.estimatedJournalCharge
            )
        }
        return nil
    }
}
