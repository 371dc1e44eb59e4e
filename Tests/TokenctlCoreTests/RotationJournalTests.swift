import Foundation
import Synchronization
import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

#if canImport(Glibc)
import Glibc
#endif

/// The rotation journal against the real kernel user keyring (each test its own identity, every
/// key removed at the end), and the broker over a journaled store whose Secret Service side is
/// an in-memory fake that can be made to fail (a fault a real keyring cannot produce on demand).
@Suite("Rotation journal", .serialized)
struct RotationJournalTests {
    /// A fresh identity per test: the user keyring is shared by every process of the uid.
    private static func identity() -> SessionIdentity {
        SessionIdentity(
            profile: ProfileName(rawValue: "journal-" + String(UUID().uuidString.prefix(8)).lowercased())!,
            issuer: "https://issuer.example", clientID: "cli")
    }

    private static let journal = RotationJournal(environment: .fixed([:]))

    @Test("an entry reads back for exactly its identity, and clear removes it")
    func roundTrip() throws {
        try #require(Self.journal.isAvailable, "the kernel keyring must be usable where the tests run")
        let identity = Self.identity()
        defer { Self.journal.clear(identity) }
        let set = TokenSet.fixture(accessToken: "at", refreshToken: "rt-2", obtainedAt: 1_700_000_000)
        #expect(Self.journal.record(set, for: identity, now: 1_700_000_001, pendingReason: "the keyring is locked"))
        let entry = try #require(Self.journal.pending(identity))
        #expect(entry.tokenSet == set)
        #expect(entry.identity == identity)
        #expect(entry.pendingReason == "the keyring is locked")
        var other = identity
        other.clientID = "another"
        #expect(Self.journal.pending(other) == nil)
        Self.journal.clear(identity)
        #expect(Self.journal.pending(identity) == nil)
    }

    @Test("clear(holding:) leaves a newer entry that another process journaled meanwhile")
    func clearOnlyWhatWasWritten() throws {
        let identity = Self.identity()
        defer { Self.journal.clear(identity) }
        let older = TokenSet.fixture(refreshToken: "rt-2", obtainedAt: 1_700_000_000)
        let newer = TokenSet.fixture(refreshToken: "rt-3", obtainedAt: 1_700_000_100)
        Self.journal.record(newer, for: identity, now: 1_700_000_100)
        Self.journal.clear(identity, holding: older)
        #expect(Self.journal.pending(identity)?.tokenSet == newer)
        Self.journal.clear(identity, ifRefreshTokenIs: "rt-2")
        #expect(Self.journal.pending(identity)?.tokenSet == newer)
        Self.journal.clear(identity, ifRefreshTokenIs: "rt-3")
        #expect(Self.journal.pending(identity) == nil)
    }

    @Test("the key is memory-only, private to the user, and never expires while pending")
    func keyPermissions() throws {
        let identity = Self.identity()
        defer { Self.journal.clear(identity) }
        #expect(Self.journal.record(TokenSet.fixture(obtainedAt: 1_700_000_000), for: identity, now: 1_700_000_000))
        let description = RotationJournal.keyDescription(identity)
        // Not String(contentsOfFile:): for a procfs file it returns only the first page, and
        // the kernel pages /proc/keys while other tests add and drop keys: read it whole, a few times.
        var line: Substring?
        for _ in 0..<5 where line == nil {
            guard let handle = FileHandle(forReadingAtPath: "/proc/keys") else { break }
            let keys = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
            try? handle.close()
            line = keys.split(separator: "\n").first { $0.contains(description) }
        }
        let found = try #require(line)
        let fields = found.split(separator: " ", omittingEmptySubsequences: true)
        // /proc/keys: serial flags usage timeout perm uid gid type description
        #expect(fields[3] == "perm", "no kernel timeout while pending: \(found)")
        #expect(fields[4] == "3f3f0000", "possessor and user only: \(found)")
    }

    @Test("the test switch that disables the kernel keyring disables the journal")
    func disabled() {
        let journal = RotationJournal(environment: .fixed([HotCache.disableVariable: "1"]))
        #expect(!journal.isAvailable)
        #expect(!journal.record(TokenSet.fixture(obtainedAt: 1), for: Self.identity(), now: 1))
    }

    @Test("a malformed payload is no entry")
    func malformed() {
        for payload in [
            "", "tokenctl-journal-v1\n", "tokenctl-journal-v2\nprofile=p\n",
            "tokenctl-journal-v1\nprofile=p\nissuer=i\nclient_id=c\njournaled_at=1\ntoken_set={}\n",
        ] {
            #expect(throws: (any Error).self) { try RotationJournal.decode(Array(payload.utf8)) }
        }
    }

    // MARK: The journaled store

    @Test("fake Secret Service write failure: the set is journaled, reads serve it, a later completion writes it")
    func pendingThenCompleted() throws {
        let identity = Self.identity()
        defer { Self.journal.clear(identity) }
        let memory = InMemorySessionStore()
        let keyring = FailingWritesStore(memory)
        let store = JournaledSessionStore(keyring, journal: Self.journal)
        let old = TokenSet.fixture(refreshToken: "rt-1", obtainedAt: 1_700_000_000)
        try memory.write(old, for: identity)
        let rotated = TokenSet.fixture(refreshToken: "rt-2", obtainedAt: 1_700_000_100)

        keyring.failure = StoreError(.locked, "the keyring is locked")
        #expect(try store.persist(rotated, for: identity) == .pending(StoreError(.locked, "the keyring is locked")))
        #expect(try memory.read(identity) == old, "the Secret Service still holds the old set")
        #expect(try store.read(identity) == rotated, "readers prefer the newer journal entry")
        #expect(store.pendingWrite(identity)?.pendingReason == "the keyring is locked")

        // The Secret Service unreadable as well: the journal is the truth.
        memory.failure = StoreError(.locked, "locked")
        #expect(try store.read(identity) == rotated)
        #expect(throws: StoreError.self) { try store.completePendingWrite(identity) }
        memory.failure = nil

        keyring.failure = nil
        #expect(try store.completePendingWrite(identity) == rotated)
        #expect(try memory.read(identity) == rotated)
        #expect(store.pendingWrite(identity) == nil)
        #expect(try store.completePendingWrite(identity) == nil, "nothing left to complete")
    }

    @Test("an entry older than the stored set is dropped, never written over it")
    func staleEntryDropped() throws {
        let identity = Self.identity()
        defer { Self.journal.clear(identity) }
        let memory = InMemorySessionStore()
        let store = JournaledSessionStore(memory, journal: Self.journal)
        let stored = TokenSet.fixture(refreshToken: "rt-3", obtainedAt: 1_700_000_200)
        try memory.write(stored, for: identity)
        Self.journal.record(
            TokenSet.fixture(refreshToken: "rt-2", obtainedAt: 1_700_000_100), for: identity, now: 1_700_000_100)
        #expect(try store.read(identity) == stored)
        #expect(try store.completePendingWrite(identity) == nil)
        #expect(try memory.read(identity) == stored)
        #expect(store.pendingWrite(identity) == nil)
    }

    @Test(
        "a leftover entry with a later clock than a newer stored set is never taken over it: not read, not completed, not refreshed from (fake Secret Service)"
    )
    func leftoverNeverWinsOverNewerStoredSet() async throws {
        // What a refresher killed between its journal write and its clear leaves behind, once a
        // later refresh has stored a newer set without displacing it (its journal write failed),
        // or with timestamps that do not say which is newer (a clock that stepped back, another
        // process's clock): an entry for rt-1, refreshed from rt-0, stamped later than the
        // stored set for rt-2, which was refreshed from rt-1. Compared by time, the entry won:
        // its spent rt-1 was sent, and a server with one-use tokens ended the session.
        let identity = Self.identity()
        defer { Self.journal.clear(identity) }
        let memory = InMemorySessionStore()
        let clock = VirtualClock()
        let store = JournaledSessionStore(memory, journal: Self.journal, clock: clock.clock)
        let original = TokenSet.fixture(accessToken: "at-0", refreshToken: "rt-0", obtainedAt: clock.now - 7200)
        var leftover = TokenSet.fixture(accessToken: "at-1", refreshToken: "rt-1", obtainedAt: clock.now + 600)
        leftover.lastRefreshAt = leftover.obtainedAt
        var stored = TokenSet.fixture(accessToken: "at-2", refreshToken: "rt-2", obtainedAt: clock.now - 4000)
        stored.lastRefreshAt = stored.obtainedAt
        #expect(
            Self.journal.record(
                leftover, for: identity, now: leftover.obtainedAt,
                supersedes: RotationJournal.lineage(of: leftover, replacing: original, pending: nil)))
        try memory.write(stored, for: identity)

        #expect(try store.read(identity) == stored, "the stored set is not one the entry supersedes: it is newer")
        #expect(try store.completePendingWrite(identity) == nil, "nothing to complete")
        #expect(try memory.read(identity) == stored, "never written over the newer set")
        #expect(store.pendingWrite(identity) == nil, "the leftover is dropped")

        // And the broker refreshes from the stored set (the entry put back, as if just left).
        Self.journal.record(
            leftover, for: identity, now: leftover.obtainedAt,
            supersedes: RotationJournal.lineage(of: leftover, replacing: original, pending: nil))
        let profile = ResolvedProfile(
            name: identity.profile,
            configuration: ProfileConfiguration(issuer: try EndpointURL(identity.issuer), clientID: identity.clientID),
            tokenEndpoint: "https://issuer.example/token")
        let http = FakeHTTPClient { request, _ in
            let sent = formFields(request)["refresh_token"] ?? "?"
            return .success(.tokens(access: "access-for-\(sent)", refresh: sent + "-n", expiresIn: 3600))
        }
        let policy = RetryPolicy(initialDelay: 0.5, maximumDelay: 8, timeout: 30, attemptTimeout: 15, random: { 0.5 })
        let broker = TokenBroker(store: store, locks: NoProfileLocks(), clock: clock.clock) { _ in
            TokenEndpointClient(http: http, clock: clock.clock, retry: policy)
        }
        let next = try await broker.validTokenSet(for: profile, minimumTimeToLive: 60)
        #expect(http.requestCount == 1)
        #expect(formFields(http.requests[0])["refresh_token"] == "rt-2", "the newer stored set's token is the one sent")
        #expect(next.refreshToken == "rt-2-n")
        #expect(try memory.read(identity) == next)
        #expect(store.pendingWrite(identity) == nil)
    }

    @Test(
        "a write the journal cannot take (a set over the kernel's key size) leaves no older entry behind for a reader that cannot reach the Secret Service (fake Secret Service)"
    )
    func unjournaledWriteDropsOlderEntry() throws {
        // The same happens when the key quota is full. Before: the older entry (what a killed
        // refresher left) stayed; the next reader whose Secret Service read timed out (a hung
        // keyring) took it as the session's truth and sent its spent refresh token.
        let identity = Self.identity()
        defer { Self.journal.clear(identity) }
        let memory = InMemorySessionStore()
        let clock = VirtualClock()
        let store = JournaledSessionStore(memory, journal: Self.journal, clock: clock.clock)
        let set0 = TokenSet.fixture(refreshToken: "rt-0", obtainedAt: clock.now - 100)
        let leftover = TokenSet.fixture(refreshToken: "rt-1", obtainedAt: clock.now - 50)
        try memory.write(set0, for: identity)
        #expect(
            Self.journal.record(
                leftover, for: identity, now: clock.now - 50,
                supersedes: RotationJournal.lineage(of: leftover, replacing: set0, pending: nil)))
        let large = TokenSet.fixture(
            accessToken: String(repeating: "a", count: HotCacheEntry.maximumPayloadSize + 1), refreshToken: "rt-2",
            obtainedAt: clock.now)
        #expect(try store.persist(large, for: identity, replacing: leftover) == .stored)
        #expect(try memory.read(identity) == large)
        #expect(store.pendingWrite(identity) == nil, "the older entry is gone with the write it did not make")
        memory.failure = StoreError(.timeout, "the Secret Service did not answer in time")
        #expect(throws: StoreError.self, "nothing older is served in its place") { try store.read(identity) }
    }

    @Test(
        "a pending entry supersedes every set it was refreshed from, across rotations the Secret Service missed (fake Secret Service)"
    )
    func lineageAcrossPendingRotations() throws {
        let identity = Self.identity()
        defer { Self.journal.clear(identity) }
        let memory = InMemorySessionStore()
        let keyring = FailingWritesStore(memory)
        let clock = VirtualClock()
        let store = JournaledSessionStore(keyring, journal: Self.journal, clock: clock.clock)
        let set0 = TokenSet.fixture(refreshToken: "rt-0", obtainedAt: clock.now)
        try memory.write(set0, for: identity)
        keyring.failure = StoreError(.timeout, "the Secret Service did not answer in time")
        // Two rotations while the Secret Service takes nothing; timestamps going backwards.
        let set1 = TokenSet.fixture(refreshToken: "rt-1", obtainedAt: clock.now - 10)
        let set2 = TokenSet.fixture(refreshToken: "rt-2", obtainedAt: clock.now - 20)
        #expect(try store.persist(set1, for: identity, replacing: set0) != .stored)
        #expect(try store.persist(set2, for: identity, replacing: set1) != .stored)
        let entry = try #require(store.pendingWrite(identity))
        #expect(entry.tokenSet == set2)
        #expect(entry.supersedes == ["rt-0", "rt-1"].map(RotationJournal.digest))
        #expect(entry.isNewer(than: set0) && entry.isNewer(than: set1))
        #expect(
            !entry.isNewer(than: TokenSet.fixture(refreshToken: "rt-3", obtainedAt: clock.now - 30)),
            "a set it does not know is newer")
        #expect(
            RotationJournal.lineage(
                of: TokenSet.fixture(refreshToken: "rt-login", obtainedAt: clock.now), replacing: nil, pending: entry
            ).isEmpty,
            "a login's lineage is unknown: it inherits none (ordered by time against the stored set)")
        #expect(try store.read(identity) == set2)
        keyring.failure = nil
        #expect(try store.completePendingWrite(identity) == set2)
        #expect(try memory.read(identity) == set2)
        // The lineage survives the payload, and a hostile one is no entry.
        #expect(try RotationJournal.decode(RotationJournal.encode(entry)) == entry)
        let text = String(decoding: try RotationJournal.encode(entry), as: UTF8.self)
        for bad in [
            "supersedes=zz", "supersedes=",
            "supersedes=" + Array(repeating: "0123456789abcdef", count: 17).joined(separator: ","),
        ] {
            let forged = text.replacingOccurrences(
                of: "supersedes=" + entry.supersedes.joined(separator: ","), with: bad)
            #expect(throws: (any Error).self) { try RotationJournal.decode(Array(forged.utf8)) }
        }
    }

    @Test(
        "logout removes a pending entry with the item; a terminal failure removes it only when it holds the token sent")
    func deleteClears() throws {
        let identity = Self.identity()
        defer { Self.journal.clear(identity) }
        let memory = InMemorySessionStore()
        let store = JournaledSessionStore(memory, journal: Self.journal)
        Self.journal.record(TokenSet.fixture(refreshToken: "rt-2", obtainedAt: 1_700_000_100), for: identity, now: 1)
        #expect(try store.delete(identity, ifRefreshTokenIs: "rt-1") == false)
        #expect(store.pendingWrite(identity) != nil)
        _ = try store.delete(identity, ifRefreshTokenIs: "rt-2")
        #expect(store.pendingWrite(identity) == nil)
        Self.journal.record(TokenSet.fixture(refreshToken: "rt-2", obtainedAt: 1_700_000_100), for: identity, now: 1)
        #expect(try store.delete(identity), "a pending entry counts as a session to log out")
        #expect(store.pendingWrite(identity) == nil)
    }

    @Test(
        "broker: a rotation whose Secret Service write fails is served and kept in the journal; the next call writes it and refreshes from it"
    )
    func brokerGoesOnFromJournal() async throws {
        let identity = Self.identity()
        defer { Self.journal.clear(identity) }
        let profile = ResolvedProfile(
            name: identity.profile,
            configuration: ProfileConfiguration(issuer: try EndpointURL(identity.issuer), clientID: identity.clientID),
            tokenEndpoint: "https://issuer.example/token")
        let clock = VirtualClock()
        let memory = InMemorySessionStore()
        let keyring = FailingWritesStore(memory)
        let store = JournaledSessionStore(keyring, journal: Self.journal, clock: clock.clock)
        let http = FakeHTTPClient { request, _ in
            let sent = formFields(request)["refresh_token"] ?? "?"
            return .success(.tokens(access: "access-for-\(sent)", refresh: sent + "-n", expiresIn: 3600))
        }
        let policy = RetryPolicy(initialDelay: 0.5, maximumDelay: 8, timeout: 30, attemptTimeout: 15, random: { 0.5 })
        let broker = TokenBroker(store: store, locks: NoProfileLocks(), clock: clock.clock) { _ in
            TokenEndpointClient(http: http, clock: clock.clock, retry: policy)
        }
        try memory.write(
            TokenSet.fixture(accessToken: "old", refreshToken: "rt", obtainedAt: clock.now - 4000), for: identity)

        keyring.failure = StoreError(.timeout, "the Secret Service did not answer in time")
        let first = try await broker.validTokenSet(for: profile, minimumTimeToLive: 60)
        #expect(first.refreshToken == "rt-n")
        #expect(try memory.read(identity)?.refreshToken == "rt", "the write failed")
        #expect(store.pendingWrite(identity)?.tokenSet == first)

        // Still failing: a forced refresh goes on from the journal's refresh token, not the spent one.
        clock.advance(10)
        let second = try await broker.validTokenSet(for: profile, minimumTimeToLive: 60, force: true)
        #expect(second.refreshToken == "rt-n-n")
        #expect(formFields(http.requests[1])["refresh_token"] == "rt-n")

        // The keyring is back: the next call completes the pending write before anything else.
        keyring.failure = nil
        clock.advance(10)
        let third = try await broker.validTokenSet(for: profile, minimumTimeToLive: 60)
        #expect(third == second)
        #expect(try memory.read(identity) == second)
        #expect(store.pendingWrite(identity) == nil)
        #expect(http.requestCount == 2)
    }
}

/// A Secret Service stand-in whose writes fail on demand (reads and deletes still work).
final class FailingWritesStore: SessionStore, Sendable {
    let inner: InMemorySessionStore
    private let state = Mutex<StoreError?>(nil)
    var failure: StoreError? {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
    init(_ inner: InMemorySessionStore) { self.inner = inner }
    func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? { try inner.read(identity) }
    func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) {
        if let failure { throw failure }
        try inner.write(tokenSet, for: identity)
    }
    func delete(_ identity: SessionIdentity) throws(StoreError) -> Bool { try inner.delete(identity) }
    func delete(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) throws(StoreError) -> Bool {
        try inner.delete(identity, ifRefreshTokenIs: refreshToken)
    }
    func storedIdentities() throws(StoreError) -> [SessionIdentity] { try inner.storedIdentities() }
}
