import Synchronization
import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

/// `UnattendedRelockStore`'s decision, with an in-memory store whose collection is locked on
/// demand and a restart that is counted (faults a real keyring cannot be made to produce here;
/// UnattendedKeyringTests locks a real one under a real user manager).
@Suite("Unattended keyring: a locked collection unlocked by restarting the unit (fault-injected store)")
struct UnattendedRelockStoreTests {
    /// A Secret Service stand-in that fails with `failure` until the restart double clears it.
    final class LockableStore: SessionStore, Sendable {
        let inner = InMemorySessionStore()
        let state = Mutex<(failure: StoreError?, calls: Int)>((nil, 0))
        func call<Value>(_ body: () throws(StoreError) -> Value) throws(StoreError) -> Value {
            let failure = state.withLock { state in
                state.calls += 1
                return state.failure
            }
            if let failure { throw failure }
            return try body()
        }
        func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? {
            try call { () throws(StoreError) in try inner.read(identity) }
        }
        func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) {
            try call { () throws(StoreError) in try inner.write(tokenSet, for: identity) }
        }
        func delete(_ identity: SessionIdentity) throws(StoreError) -> Bool { try inner.delete(identity) }
        func delete(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) throws(StoreError) -> Bool {
            try inner.delete(identity, ifRefreshTokenIs: refreshToken)
        }
        func storedIdentities() throws(StoreError) -> [SessionIdentity] { try inner.storedIdentities() }
    }

    /// A store failing with `reason`, a restart double that unlocks it when `unlocks`, and the
    /// restarts and what was narrated, counted.
    final class Rig: Sendable {
        let store = LockableStore()
        let restarts = Mutex(0)
        let reconnects = Mutex(0)
        let narrated = Mutex<[String]>([])

        init(_ reason: StoreError.Reason?) {
            store.state.withLock { $0.failure = reason.map { StoreError($0, "the keyring is locked") } }
        }

        func wrapped(installed: Bool = true, interactive: Bool = false, unlocks: Bool = true) -> any SessionStore {
            UnattendedRelockStore.wrapping(
                store, installed: installed, interactive: interactive, deadline: .after(60),
                narrate: { [self] line in narrated.withLock { $0.append(line) } },
                restart: { [self] timeout in
                    restarts.withLock { $0 += 1 }
                    if unlocks { store.state.withLock { $0.failure = nil } }
                    return timeout > 0
                },
                reconnect: { [self] in reconnects.withLock { $0 += 1 } })
        }
        var restartCount: Int { restarts.withLock { $0 } }
        var calls: Int { store.state.withLock { $0.calls } }
    }

    static let identity = SessionIdentity(
        profile: ProfileName(rawValue: "relock")!, issuer: "https://issuer.example", clientID: "cli")

    @Test("a locked collection: one restart, one retry that reads the session, narrated")
    func lockedRestartsOnce() throws {
        let rig = Rig(nil)
        try rig.store.inner.write(
            .fixture(accessToken: "at", refreshToken: "rt", obtainedAt: 1_700_000_000), for: Self.identity)
        rig.store.state.withLock { $0.failure = StoreError(.locked, "the keyring is locked") }
        let store = rig.wrapped()
        #expect(try store.read(Self.identity)?.refreshToken == "rt")
        #expect(rig.restartCount == 1 && rig.calls == 2)
        #expect(rig.reconnects.withLock { $0 } == 1, "the retry goes to the restarted daemon")
        #expect(
            rig.narrated.withLock { $0 }
                == ["the login keyring was locked: restarted tokenctl-keyring.service, which unlocked it"])
    }

    @Test("the restart did not unlock it: the locked error stands, and no second restart in the command")
    func stillLocked() {
        let rig = Rig(.locked)
        let store = rig.wrapped(unlocks: false)
        #expect(throws: StoreError(.locked, "the keyring is locked")) { try store.read(Self.identity) }
        #expect(rig.restartCount == 1 && rig.calls == 2)
        // A later call of the same command, also through a bounded copy: not restarted again.
        #expect(throws: StoreError.self) { try store.bounded(until: .after(30)).read(Self.identity) }
        #expect(rig.restartCount == 1 && rig.calls == 3)
        #expect(rig.narrated.withLock { $0.isEmpty })
    }

    @Test(
        "never restarted: not installed (a desktop), interactive, or another error",
        arguments: [
            (false, false, StoreError.Reason.locked), (true, true, .locked), (true, false, .noSecretService),
            (true, false, .timeout), (true, false, .itemLocked),
        ])
    func noRestart(installed: Bool, interactive: Bool, reason: StoreError.Reason) {
        let rig = Rig(reason)
        let store = rig.wrapped(installed: installed, interactive: interactive)
        #expect(throws: StoreError.self) { try store.write(.fixture(obtainedAt: 1_700_000_000), for: Self.identity) }
        #expect(rig.restartCount == 0 && rig.calls == 1)
        #expect((store is LockableStore) == (!installed || interactive), "unwrapped where it cannot help")
    }
}
