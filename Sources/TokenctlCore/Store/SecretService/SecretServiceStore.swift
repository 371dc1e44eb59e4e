// The store: tokenctl's items in the Secret Service. Every libsecret call of tokenctl lives in
// this folder (Store/SecretService): the connection (+Connection), finding items (+Items), reading,
// writing and deleting them (+Secrets), GError classification (+Errors) and the keyring program's
// hints (KeyringProgram).
import CSecret
import CSecretShim
import Synchronization
import TokenctlEssentials

/// Token sets in the freedesktop Secret Service (GNOME Keyring, KeePassXC, KWallet, …) through
/// libsecret.
///
/// One item per profile, attributes `application=tokenctl`, `profile`, `issuer`, `client_id`,
/// `kind=session`; the secret is the whole `TokenSet` as JSON, so a rotation replaces the
/// access and refresh tokens in one atomic write: `Item.SetSecret` on the existing item, and
/// `CreateItem` only when there is none (KeePassXC before 2.7.6 opens an access dialog on
/// `CreateItem(replace: true)` over another client's item, even with confirmations off).
///
/// Every call is bounded: D-Bus calls by the proxy's timeout, and calls that may wait for a
/// keyring program's prompt (create, delete, unlock) or for the bus itself by a watchdog that cancels
/// them, each at the per-call timeout or the command's deadline, whichever comes first.
public final class SecretServiceStore: SessionStore, Sendable {
    /// How long calls may take, and who may answer a prompt.
    public struct Options: Sendable {
        /// The bound of one call, in seconds (default 10).
        public var callTimeout: Double
        /// The command's deadline, or nil for none. A write of a set the server has already
        /// rotated is still given `minimumWriteTime` past it.
        public var deadline: Deadline?
        /// Whether a person can answer a keyring program's prompt (stderr is a terminal).
        public var interactive: Bool
        /// Told, once per call, when a call that may show a prompt has waited a second: what
        /// to approve (on a terminal, the engine prints it to stderr).
        public var promptNotice: (@Sendable (String) -> Void)?

        public init(
            callTimeout: Double = 10, deadline: Deadline? = nil, interactive: Bool = false,
            promptNotice: (@Sendable (String) -> Void)? = nil
        ) {
            self.callTimeout = callTimeout
            self.deadline = deadline
            self.interactive = interactive
            self.promptNotice = promptNotice
        }
    }

    /// A write after the deadline still gets this long: the journal holds the set meanwhile,
    /// but where there is no journal it is the only copy.
    public static let minimumWriteTime: Double = 2

    public static let application = "tokenctl"
    /// The Secret Service's well-known bus name.
    static let busName = "org.freedesktop.secrets"
    public static let sessionKind = "session"
    /// Keyring programs and D-Bus limit message sizes; a token set is far below this.
    public static let maximumSecretBytes = 96 * 1024
    public static let clientSecretKind = "client-secret"

    let options: Options
    /// The connection, shared with the stores `bounded(until:)` makes of this one.
    let connection: SharedConnection

    public init(options: Options = Options()) {
        self.options = options
        self.connection = SharedConnection()
    }

    private init(options: Options, sharing connection: SharedConnection) {
        self.options = options
        self.connection = connection
    }

    public convenience init(timeout: Double) {
        self.init(options: Options(callTimeout: timeout))
    }

    /// The connection's state behind its lock; released with the last store that uses it.
    final class SharedConnection: Sendable {
        let state = Mutex(Connection())

        deinit {
            state.withLock { connection in
                tokenctl_object_unref(connection.service)
                if let bus = connection.bus { tokenctl_object_unref(UnsafeMutableRawPointer(bus)) }
            }
        }
    }

    // MARK: SessionStore

    public func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? {
        let key = ItemKey(identity: identity, kind: Self.sessionKind)
        guard let value = try readSecret(key, operation: "read the session") else {
            // A locked keyring hides nothing from a search here, but some keyring programs do:
            // "not found" in a locked or missing collection must not read as "signed out".
            try requireUnlockedDefaultCollection(try connect())
            return nil
        }
        do { return try decodeOnceMore(value, key: key) } catch {
            var error = error
            // Spelled for this profile, so it runs as printed.
            if error.reason == .corruptItem {
                error.hint =
                    "Run '\(tokenctl: identity.profile, .logout([.noRevoke]))', then '\(tokenctl: identity.profile, .login([]))'."
            }
            throw error
        }
    }

    /// `value` decoded; when it is not a token set, the item read once more on a new session
    /// first. kwalletd5 (KDE Frameworks 5.103) now and then agrees a session whose keys are
    /// not ours (measured with secret-tool: "Client public key size is invalid" or "Can't find
    /// session" in 17 of 1,200 calls); a secret decrypted with such keys can come back as
    /// bytes that are not a token set (seen once). An item that is corrupt stays corrupt.
    private func decodeOnceMore(_ value: OpaquePointer, key: ItemKey) throws(StoreError) -> TokenSet {
        do { return try decode(value) } catch  where error.reason == .corruptItem {
            dropSession()
            guard let again = try readSecret(key, operation: "read the session") else { throw error }
            return try decode(again)
        }
    }

    public func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) {
        let bytes: [UInt8]
        do { bytes = try tokenSet.encoded() } catch {
            throw StoreError(.other, "could not encode the token set: \(error)")
        }
        guard bytes.count <= Self.maximumSecretBytes else {
            throw StoreError(
                .itemTooLarge,
                "the token set is too large to store (\(bytes.count) bytes; the limit is \(Self.maximumSecretBytes))",
                hint: "The server issues unusually large tokens; ask for fewer scopes or claims.")
        }
        try storeSecret(
            bytes, contentType: "application/json", key: ItemKey(identity: identity, kind: Self.sessionKind),
            label: "tokenctl session: \(identity.profile) (\(identity.issuer))", operation: "store the session")
    }

    public func delete(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        try deleteItems(ItemKey(identity: identity, kind: Self.sessionKind)) { _ throws(StoreError) in true } > 0
    }

    public func delete(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) throws(StoreError) -> Bool {
        try deleteItems(ItemKey(identity: identity, kind: Self.sessionKind), loadSecrets: true) {
            item throws(StoreError) in
            try decodeSecret(of: item)?.refreshToken == refreshToken
        } > 0
    }

    public func storedIdentities() throws(StoreError) -> [SessionIdentity] {
        let table = tokenctl_attributes_new()!
        tokenctl_attributes_insert(table, "application", Self.application)
        tokenctl_attributes_insert(table, "kind", Self.sessionKind)
        let items = try search(table, loadSecrets: false)
        defer { items.release() }
        return items.items.compactMap { item in
            guard let attributes = secret_item_get_attributes(item) else { return nil }
            defer { g_hash_table_unref(attributes) }
            func value(_ key: String) -> String? {
                key.withCString { key in
                    g_hash_table_lookup(attributes, key).map { String(cString: $0.assumingMemoryBound(to: CChar.self)) }
                }
            }
            guard let name = value("profile"), let profile = ProfileName(rawValue: name),
                let issuer = value("issuer"), let clientID = value("client_id")
            else { return nil }
            return SessionIdentity(profile: profile, issuer: issuer, clientID: clientID)
        }
    }

    // MARK: Client secrets (kind=client-secret, same attributes otherwise)

    public func readClientSecret(_ identity: SessionIdentity) throws(StoreError) -> String? {
        guard
            let value = try readSecret(
                ItemKey(identity: identity, kind: Self.clientSecretKind), operation: "read the client secret")
        else {
            return nil
        }
        return Self.text(of: value)
    }

    public func writeClientSecret(_ secret: String, for identity: SessionIdentity) throws(StoreError) {
        try storeSecret(
            Array(secret.utf8), contentType: "text/plain",
            key: ItemKey(identity: identity, kind: Self.clientSecretKind),
            label: "tokenctl client secret: \(identity.profile) (\(identity.clientID) at \(identity.issuer))",
            operation: "store the client secret")
    }

    public func deleteClientSecret(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        try deleteItems(ItemKey(identity: identity, kind: Self.clientSecretKind)) { _ throws(StoreError) in true } > 0
    }

    // MARK: Client keys (kind=client-key, client-key-next; found by the profile alone)

    public static func clientKeyKind(_ slot: ClientKey.Slot) -> String {
        switch slot {
        case .current: "client-key"
        case .next: "client-key-next"
        }
    }

    private func clientKeyItem(_ profile: ProfileName, _ slot: ClientKey.Slot) -> ItemKey {
        // No issuer or client id: a key is made before the login that names them (ItemKey.attributes
        // leaves empty ones out).
        ItemKey(identity: SessionIdentity(profile: profile, issuer: "", clientID: ""), kind: Self.clientKeyKind(slot))
    }

    public func readClientKey(_ profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) -> [UInt8]? {
        guard let value = try readSecret(clientKeyItem(profile, slot), operation: "read the client key") else {
            try requireUnlockedDefaultCollection(try connect())
            return nil
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length = 0
        guard let pointer = secret_value_get(value, &length), length > 0 else { return nil }
        return pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
            Array(UnsafeBufferPointer(start: $0, count: length))
        }
    }

    public func writeClientKey(_ stored: [UInt8], for profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) {
        try storeSecret(
            stored, contentType: "application/json", key: clientKeyItem(profile, slot),
            label: "tokenctl client key: \(profile)\(slot == .next ? " (next)" : "")", operation: "store the client key"
        )
    }

    public func deleteClientKey(_ profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) -> Bool {
        try deleteItems(clientKeyItem(profile, slot)) { _ throws(StoreError) in true } > 0
    }

    // MARK: Proxy passwords (kind=proxy-password, proxy=HOST:PORT, user=NAME; no profile)

    public static let proxyPasswordKind = "proxy-password"

    private func proxyPasswordItem(_ account: ProxyAccount) -> ItemKey {
        ItemKey(
            identity: SessionIdentity(profile: .default, issuer: "", clientID: ""), kind: Self.proxyPasswordKind,
            proxyAccount: account)
    }

    public func readProxyPassword(_ account: ProxyAccount) throws(StoreError) -> String? {
        guard let value = try readSecret(proxyPasswordItem(account), operation: "read the proxy password") else {
            try requireUnlockedDefaultCollection(try connect())
            return nil
        }
        return Self.text(of: value)
    }

    /// A text secret (a client secret, a password), the value released; nil when empty.
    private static func text(of value: OpaquePointer) -> String? {
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length = 0
        guard let pointer = secret_value_get(value, &length), length > 0 else { return nil }
        return pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }

    public func writeProxyPassword(_ password: String, for account: ProxyAccount) throws(StoreError) {
        try storeSecret(
            Array(password.utf8), contentType: "text/plain", key: proxyPasswordItem(account),
            label: "tokenctl proxy password: \(account.user) at \(account.proxy)",
            operation: "store the proxy password")
    }

    public func deleteProxyPassword(_ account: ProxyAccount) throws(StoreError) -> Bool {
        try deleteItems(proxyPasswordItem(account)) { _ throws(StoreError) in true } > 0
    }

    /// Whether the default collection exists and is unlocked (for `status`, `doctor` and the
    /// check every login makes before it spends a grant).
    public func checkAvailable() throws(StoreError) {
        try requireUnlockedDefaultCollection(try connect())
    }

    /// `checkAvailable`, then the search `write` begins with (SearchItems for the item, and
    /// the per-item lock check `unlockedPaths` makes): what a login proves before it spends a
    /// grant. A keyring program that answers the session set-up but never a search fails here.
    public func checkWritable(_ identity: SessionIdentity) throws(StoreError) {
        try checkAvailable()
        _ = try unlockedPaths(attributes(ItemKey(identity: identity, kind: Self.sessionKind)))
    }

    public func bounded(until deadline: Deadline) -> any SessionStore {
        var options = self.options
        options.deadline = deadline.earlier(options.deadline)
        return SecretServiceStore(options: options, sharing: connection)
    }

    /// The program that owns `org.freedesktop.secrets` on the session bus, for hints and `doctor`.
    public func keyringProgram() -> KeyringProgram {
        // Not while connecting (errors there land here): the lock is ours then.
        func snapshot() -> (bus: BusHandle?, known: KeyringProgram?)? {
            connection.state.withLockIfAvailable { state in
                (state.bus.map { BusHandle(pointer: $0) }, state.keyringProgram)
            }
        }
        guard var current = snapshot() else { return .unknown }
        if let known = current.known { return known }
        if current.bus == nil {
            _ = try? connect()
            guard let again = snapshot() else { return .unknown }
            current = again
        }
        guard let bus = current.bus else { return .unknown }
        let pid = tokenctl_bus_name_owner_pid(
            bus.pointer, Self.busName, Int32(min(1000, max(100, (try? boundMilliseconds("ask the bus")) ?? 1000))))
        var found = KeyringProgram.unknown
        if pid != 0, let comm = try? FileIO.readFile("/proc/\(pid)/comm", limit: 256) {
            found = KeyringProgram(processName: String(comm.prefix { $0 != "\n" }))
        }
        connection.state.withLock { $0.keyringProgram = found }
        return found
    }
}
