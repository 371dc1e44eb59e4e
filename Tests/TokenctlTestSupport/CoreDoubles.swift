import Synchronization
import TokenctlCore
import TokenctlEssentials

// Test doubles of the core's protocols: they live here, not in the product.

/// A store in memory, for unit tests of the broker.
public final class InMemorySessionStore: SessionStore, Sendable {
    private struct State {
        var items: [SessionIdentity: TokenSet] = [:]
        var clientSecrets: [SessionIdentity: String] = [:]
        var clientKeys: [String: [UInt8]] = [:]
        var proxyPasswords: [String: String] = [:]
        var failure: StoreError?
        var writeCount = 0
    }
    private let state = TestLock(State())

    /// When set, every operation fails with it (forces a store outage in tests).
    public var failure: StoreError? {
        get { state.withLock { $0.failure } }
        set { state.withLock { $0.failure = newValue } }
    }
    public var writeCount: Int { state.withLock { $0.writeCount } }

    public init() {}

    /// Run `body` on the state, unless a failure is set.
    private func access<T: Sendable>(_ body: (inout State) throws(StoreError) -> T) throws(StoreError) -> T {
        try state.withLock { (state) throws(StoreError) -> T in
            if let failure = state.failure { throw failure }
            return try body(&state)
        }
    }

    public func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? {
        try access { $0.items[identity] }
    }

    public func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) {
        try access {
            $0.items[identity] = tokenSet
            $0.writeCount += 1
        }
    }

    public func delete(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        try access { $0.items.removeValue(forKey: identity) != nil }
    }

    public func delete(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) throws(StoreError) -> Bool {
        try access {
            guard $0.items[identity]?.refreshToken == refreshToken else { return false }
            $0.items[identity] = nil
            return true
        }
    }

    public func storedIdentities() throws(StoreError) -> [SessionIdentity] {
        try access { Array($0.items.keys) }
    }

    public func checkAvailable() throws(StoreError) {
        try access { _ in }
    }

    public func readClientSecret(_ identity: SessionIdentity) throws(StoreError) -> String? {
        try access { $0.clientSecrets[identity] }
    }

    public func writeClientSecret(_ secret: String, for identity: SessionIdentity) throws(StoreError) {
        try access { $0.clientSecrets[identity] = secret }
    }

    public func deleteClientSecret(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        try access { $0.clientSecrets.removeValue(forKey: identity) != nil }
    }

    public func readClientKey(_ profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) -> [UInt8]? {
        try access { $0.clientKeys["\(profile.rawValue)/\(slot.rawValue)"] }
    }

    public func writeClientKey(_ stored: [UInt8], for profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) {
        try access { $0.clientKeys["\(profile.rawValue)/\(slot.rawValue)"] = stored }
    }

    public func deleteClientKey(_ profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) -> Bool {
        try access { $0.clientKeys.removeValue(forKey: "\(profile.rawValue)/\(slot.rawValue)") != nil }
    }

    public func readProxyPassword(_ account: ProxyAccount) throws(StoreError) -> String? {
        try access { $0.proxyPasswords[account.description] }
    }

    public func writeProxyPassword(_ password: String, for account: ProxyAccount) throws(StoreError) {
        try access { $0.proxyPasswords[account.description] = password }
    }

    public func deleteProxyPassword(_ account: ProxyAccount) throws(StoreError) -> Bool {
        try access { $0.proxyPasswords.removeValue(forKey: account.description) != nil }
    }

    /// The proxy passwords stored, by their account's description ("user U at HOST:PORT").
    public var proxyPasswords: [String: String] { state.withLock { $0.proxyPasswords } }
}

/// No cross-process locking (unit tests of the broker's in-process behaviour).
public struct NoProfileLocks: ProfileLocking {
    public init() {}
    public final class Token: HeldLock {}
    public func acquire(_ profile: ProfileName, until deadline: Deadline) async throws(TokenctlError) -> any HeldLock {
        Token()
    }
}
