import Synchronization
import TokenctlEssentials

/// Where token sets live. The real one is the freedesktop Secret Service (`SecretServiceStore`)
/// behind the rotation journal (`JournaledSessionStore`); the unit tests bring their own.
public protocol SessionStore: Sendable {
    /// The token set stored for exactly this identity, or `nil` when signed out.
    func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet?
    /// Replace the identity's token set in one write.
    func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError)
    /// Remove the identity's item. Returns whether one existed.
    @discardableResult
    func delete(_ identity: SessionIdentity) throws(StoreError) -> Bool
    /// Remove the item only if it still holds `refreshToken` (another process may have rotated it).
    /// Returns whether it was removed.
    @discardableResult
    func delete(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) throws(StoreError) -> Bool
    /// The identities of every stored session item.
    func storedIdentities() throws(StoreError) -> [SessionIdentity]
    /// The confidential client's secret (its own item, `kind=client-secret`), or `nil`.
    func readClientSecret(_ identity: SessionIdentity) throws(StoreError) -> String?
    /// Store the client secret in its own item.
    func writeClientSecret(_ secret: String, for identity: SessionIdentity) throws(StoreError)
    /// Remove the client secret item. Returns whether one existed.
    @discardableResult
    func deleteClientSecret(_ identity: SessionIdentity) throws(StoreError) -> Bool
    /// A profile's client key in `slot` (its own item, `kind=client-key` or `client-key-next`,
    /// found by the profile alone: a key is made before the first login), as `ClientKey.stored`.
    func readClientKey(_ profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) -> [UInt8]?
    /// Store a client key (`ClientKey.stored`) in its own item.
    func writeClientKey(_ stored: [UInt8], for profile: ProfileName, slot: ClientKey.Slot) throws(StoreError)
    /// Remove a client key item. Returns whether one existed.
    @discardableResult
    func deleteClientKey(_ profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) -> Bool
    /// The password of a proxy user (its own item, `kind=proxy-password`, found by the proxy
    /// and the user alone: every profile naming them shares it), or `nil`.
    func readProxyPassword(_ account: ProxyAccount) throws(StoreError) -> String?
    /// Store a proxy user's password in its own item.
    func writeProxyPassword(_ password: String, for account: ProxyAccount) throws(StoreError)
    /// Remove a proxy user's password item. Returns whether one existed.
    @discardableResult
    func deleteProxyPassword(_ account: ProxyAccount) throws(StoreError) -> Bool
    /// Throws when items could not be written now (no service, no default keyring, locked).
    func checkAvailable() throws(StoreError)
    /// Throws unless `identity`'s session could be written now: `checkAvailable`, then the
    /// search a write begins with, in the collection it writes to (a service that answers the
    /// session set-up and then hangs fails here, under the same bound as the write).
    func checkWritable(_ identity: SessionIdentity) throws(StoreError)
    /// This store with every call bounded by `deadline` (on `Clock.system`) as well as by the
    /// command's own: for a command with phases apart in time (`login`: the checks before a
    /// person approves, the writes after), each phase's own bound. The connection is shared.
    func bounded(until deadline: Deadline) -> any SessionStore

    /// Persist an accepted token set (a rotation, a login): into the rotation journal first when
    /// this store has one, then into the Secret Service.
    ///
    /// - Returns: `.stored`, or `.pending` when only the journal holds it (the Secret Service
    ///   write failed; the next reader completes it).
    /// - Parameter previous: the set `tokenSet` was refreshed from (nil: a login). The journal
    ///   entry remembers the refresh tokens it supersedes, so that an entry is taken over the
    ///   stored set only when the stored set is one of them (see `RotationJournal.Entry.isNewer`).
    /// - Throws: when nothing holds it (no journal, or the journal could not take it, and the
    ///   write failed); with a journal, `StoreError.journalFailure` says why it could not.
    func persist(_ tokenSet: TokenSet, for identity: SessionIdentity, replacing previous: TokenSet?) throws(StoreError)
        -> PersistOutcome

    /// Under the profile lock: write a pending journal entry newer than the stored set to the
    /// Secret Service, and drop entries it already holds.
    ///
    /// - Returns: the set written, or nil when there was nothing to complete.
    /// - Throws: when the Secret Service still cannot take it (the entry stays pending).
    @discardableResult
    func completePendingWrite(_ identity: SessionIdentity) throws(StoreError) -> TokenSet?

    /// The rotation waiting in the journal for this identity, if any (for `status` and `doctor`).
    func pendingWrite(_ identity: SessionIdentity) -> RotationJournal.Entry?
}

/// Where an accepted token set ended up.
public enum PersistOutcome: Sendable, Equatable {
    /// In the Secret Service.
    case stored
    /// In the rotation journal only; the Secret Service write failed with this error.
    case pending(StoreError)
}

extension SessionStore {
    // Stores without client secrets (test doubles) need not implement these.
    public func readClientSecret(_ identity: SessionIdentity) throws(StoreError) -> String? { nil }
    public func writeClientSecret(_ secret: String, for identity: SessionIdentity) throws(StoreError) {
        throw StoreError(.other, "this store cannot hold client secrets")
    }
    public func deleteClientSecret(_ identity: SessionIdentity) throws(StoreError) -> Bool { false }
    public func readClientKey(_ profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) -> [UInt8]? { nil }
    public func writeClientKey(_ stored: [UInt8], for profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) {
        throw StoreError(.other, "this store cannot hold client keys")
    }
    public func deleteClientKey(_ profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) -> Bool { false }
    public func readProxyPassword(_ account: ProxyAccount) throws(StoreError) -> String? { nil }
    public func writeProxyPassword(_ password: String, for account: ProxyAccount) throws(StoreError) {
        throw StoreError(.other, "this store cannot hold proxy passwords")
    }
    public func deleteProxyPassword(_ account: ProxyAccount) throws(StoreError) -> Bool { false }
    public func checkAvailable() throws(StoreError) {}
    public func checkWritable(_ identity: SessionIdentity) throws(StoreError) { try checkAvailable() }
    /// Stores without bounded calls (test doubles) are their own bounded store.
    public func bounded(until deadline: Deadline) -> any SessionStore { self }
    public func persist(_ tokenSet: TokenSet, for identity: SessionIdentity, replacing previous: TokenSet?)
        throws(StoreError) -> PersistOutcome
    {
        try write(tokenSet, for: identity)
        return .stored
    }
    /// A set that replaces no known one (a login).
    public func persist(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) -> PersistOutcome {
        try persist(tokenSet, for: identity, replacing: nil)
    }
    public func completePendingWrite(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? { nil }
    public func pendingWrite(_ identity: SessionIdentity) -> RotationJournal.Entry? { nil }
}

/// Why the Secret Service cannot be used. Every case maps to exit status 69.
public struct StoreError: Error, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable, Equatable {
        case noSessionBus = "no-session-bus"
        case noSecretService = "no-secret-service"
        case noDefaultCollection = "no-default-collection"
        case locked = "locked"
        /// The collection is open but the keyring program locks tokenctl's items one by one until the
        /// user allows access (KeePassXC's per-client confirmation).
        case itemLocked = "item-locked"
        /// A call that may wait for a keyring program's prompt ran out of time.
        case promptPending = "prompt-pending"
        /// The command's own deadline (`--timeout`) ran out before the call could be made: a
        /// transient condition of this command, not of the Secret Service (exit 75).
        case deadline = "deadline"
        case timeout = "timeout"
        case serviceGone = "service-gone"
        case corruptItem = "corrupt-item"
        case itemTooLarge = "item-too-large"
        case other = "other"
    }

    public var reason: Reason
    public var message: String
    public var hint: Suggestion?
    /// Why the rotation journal could not hold the set either, when a persist failed with a
    /// journal present (`JournaledSessionStore.persist`): then nothing holds it.
    public var journalFailure: String?

    public init(_ reason: Reason, _ message: String, hint: Suggestion? = nil) {
        self.reason = reason
        self.message = message
        self.hint = hint
    }

    public var description: String { message }
}

/// A store that wraps another for its sessions (a journal in front of it, a choice of store
/// per profile, a keyring unlocked again) and leaves the other secrets, client secrets and keys
/// and proxy passwords, to the store it wraps.
public protocol WrappingSessionStore: SessionStore {
    /// The store that keeps the secrets other than sessions.
    var secrets: any SessionStore { get }
    /// A call to `secrets`, made as this store makes its calls (default: as it is).
    func forwarding<Value>(_ call: (any SessionStore) throws(StoreError) -> Value) throws(StoreError) -> Value
}

extension WrappingSessionStore {
    public func forwarding<Value>(_ call: (any SessionStore) throws(StoreError) -> Value) throws(StoreError)
        -> Value
    {
        try call(secrets)
    }
    public func readClientSecret(_ identity: SessionIdentity) throws(StoreError) -> String? {
        try forwarding { (store) throws(StoreError) in try store.readClientSecret(identity) }
    }
    public func writeClientSecret(_ secret: String, for identity: SessionIdentity) throws(StoreError) {
        try forwarding { (store) throws(StoreError) in try store.writeClientSecret(secret, for: identity) }
    }
    public func deleteClientSecret(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        try forwarding { (store) throws(StoreError) in try store.deleteClientSecret(identity) }
    }
    public func readClientKey(_ profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) -> [UInt8]? {
        try forwarding { (store) throws(StoreError) in try store.readClientKey(profile, slot: slot) }
    }
    public func writeClientKey(_ stored: [UInt8], for profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) {
        try forwarding { (store) throws(StoreError) in try store.writeClientKey(stored, for: profile, slot: slot) }
    }
    public func deleteClientKey(_ profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) -> Bool {
        try forwarding { (store) throws(StoreError) in try store.deleteClientKey(profile, slot: slot) }
    }
    public func readProxyPassword(_ account: ProxyAccount) throws(StoreError) -> String? {
        try forwarding { (store) throws(StoreError) in try store.readProxyPassword(account) }
    }
    public func writeProxyPassword(_ password: String, for account: ProxyAccount) throws(StoreError) {
        try forwarding { (store) throws(StoreError) in try store.writeProxyPassword(password, for: account) }
    }
    public func deleteProxyPassword(_ account: ProxyAccount) throws(StoreError) -> Bool {
        try forwarding { (store) throws(StoreError) in try store.deleteProxyPassword(account) }
    }
}
