import TokenctlEssentials

/// A session store behind the rotation journal (see `RotationJournal`): what tokenctl really
/// uses. Accepted sets go to the journal, then to the wrapped store (the Secret Service); reads
/// prefer a pending journal entry newer than the stored set, and serve it while the Secret
/// Service cannot be read (locked, hung, a prompt pending), so refreshes go on from it.
///
/// What a killed process leaves here never wins over a newer stored set: "newer" is decided
/// by the refresh tokens an entry supersedes, not by clocks (`RotationJournal.Entry.isNewer`),
/// and a write to the Secret Service never leaves an older entry behind it (`persist`).
public final class JournaledSessionStore: WrappingSessionStore, Sendable {
    public let inner: any SessionStore
    public var secrets: any SessionStore { inner }
    public let journal: RotationJournal
    private let clock: Clock

    public init(_ inner: any SessionStore, journal: RotationJournal, clock: Clock = .system) {
        self.inner = inner
        self.journal = journal
        self.clock = clock
    }

    public func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? {
        guard let pending = journal.pending(identity) else { return try inner.read(identity) }
        let stored: TokenSet?
        do { stored = try inner.read(identity) } catch {
            // The journal is the session's truth until the Secret Service takes it.
            return pending.tokenSet
        }
        return pending.isNewer(than: stored) ? pending.tokenSet : stored
    }

    public func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) {
        _ = try persist(tokenSet, for: identity)
    }

    public func persist(_ tokenSet: TokenSet, for identity: SessionIdentity, replacing previous: TokenSet?)
        throws(StoreError) -> PersistOutcome
    {
        // Under the profile lock every set already known (the one refreshed from, any entry
        // there) is older than this one: the entry names their refresh tokens.
        let existing = journal.pending(identity)
        let supersedes = RotationJournal.lineage(of: tokenSet, replacing: previous, pending: existing)
        var journalFailure = journal.recordReporting(tokenSet, for: identity, now: clock.now(), supersedes: supersedes)
        if journalFailure != nil, existing != nil {
            // An older entry must not outlive this write (a reader that cannot reach the Secret
            // Service would take it); its bytes may be what the key quota lacked.
            journal.clear(identity)
            journalFailure = journal.recordReporting(tokenSet, for: identity, now: clock.now(), supersedes: supersedes)
        }
        let journaled = journalFailure == nil
        do { try inner.write(tokenSet, for: identity) } catch {
            guard journaled else {
                var error = error
                error.journalFailure = journalFailure
                throw error
            }
            journal.record(
                tokenSet, for: identity, now: clock.now(), pendingReason: error.message, supersedes: supersedes)
            return .pending(error)
        }
        if journaled { journal.clear(identity, holding: tokenSet) }
        return .stored
    }

    public func completePendingWrite(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? {
        guard let pending = journal.pending(identity) else { return nil }
        let stored = try inner.read(identity)
        guard pending.isNewer(than: stored) else {
            journal.clear(identity, holding: pending.tokenSet)
            return nil
        }
        do { try inner.write(pending.tokenSet, for: identity) } catch {
            journal.record(
                pending.tokenSet, for: identity, now: pending.journaledAt, pendingReason: error.message,
                supersedes: pending.supersedes)
            throw error
        }
        journal.clear(identity, holding: pending.tokenSet)
        return pending.tokenSet
    }

    public func pendingWrite(_ identity: SessionIdentity) -> RotationJournal.Entry? {
        journal.pending(identity)
    }

    public func delete(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        let hadPending = journal.pending(identity) != nil
        journal.clear(identity)
        return try inner.delete(identity) || hadPending
    }

    public func delete(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) throws(StoreError) -> Bool {
        journal.clear(identity, ifRefreshTokenIs: refreshToken)
        return try inner.delete(identity, ifRefreshTokenIs: refreshToken)
    }

    public func storedIdentities() throws(StoreError) -> [SessionIdentity] { try inner.storedIdentities() }
    public func checkAvailable() throws(StoreError) { try inner.checkAvailable() }
    public func checkWritable(_ identity: SessionIdentity) throws(StoreError) { try inner.checkWritable(identity) }
    public func bounded(until deadline: Deadline) -> any SessionStore {
        JournaledSessionStore(inner.bounded(until: deadline), journal: journal, clock: clock)
    }
}
