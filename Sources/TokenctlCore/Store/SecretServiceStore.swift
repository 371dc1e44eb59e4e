// Every libsecret call of tokenctl lives in this file.
import CSecret
import Dispatch
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
/// provider's prompt (create, delete, unlock) or for the bus itself by a watchdog that cancels
/// them, each at the per-call timeout or the command's deadline, whichever comes first.
public final class SecretServiceStore: SessionStore, Sendable {
    /// How long calls may take, and who may answer a prompt.
    public struct Options: Sendable {
        /// The bound of one call, in seconds (default 10).
        public var callTimeout: Double
        /// The command's deadline (`Clock.system` time), or nil for none. A write of a set the
        /// server has already rotated is still given `minimumWriteTime` past it.
        public var deadline: Double?
        /// Whether a person can answer a provider's prompt (stderr is a terminal).
        public var interactive: Bool
        /// Told, once per call, when a call that may show a prompt has waited a second: what
        /// to approve (on a terminal, the engine prints it to stderr).
        public var promptNotice: (@Sendable (String) -> Void)?

        public init(callTimeout: Double = 10, deadline: Double? = nil, interactive: Bool = false, promptNotice: (@Sendable (String) -> Void)? = nil) {
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
    /// Secret Service providers and D-Bus limit message sizes; a token set is far below this.
    public static let maximumSecretBytes = 96 * 1024
    public static let clientSecretKind = "client-secret"

    private let options: Options
    /// The connection, made on first use and kept: GIO's shared session-bus connection and the
    /// Secret Service proxy with its open session.
    private struct Connection: @unchecked Sendable {
        var service: UnsafeMutablePointer<SecretService>?
        var bus: OpaquePointer?
        var provider: SecretServiceProvider?
        /// The daemon (unique bus name) this connection primed (`prime`): a restarted one
        /// must be primed again.
        var primedOwner: String?
        /// Where each item was last found (`readSecret`, `storeSecret`): a write after a read goes
        /// straight to it (`storeSecret`, `knownItem`).
        var knownItems: [ItemKey: KnownItem] = [:]
    }

    /// Which of tokenctl's items: a profile's session or its client secret.
    private struct ItemKey: Hashable {
        let identity: SessionIdentity
        let kind: String
    }

    /// An item's D-Bus path at the daemon (unique bus name) that reported it. Every provider
    /// tokenctl knows names an item by one path for the daemon's life and never gives a deleted
    /// item's path to another (gnome-keyring counts up, KeePassXC uses UUIDs: ProviderTests
    /// checks all three), so the pair names that item until it is deleted or the daemon exits.
    private struct KnownItem {
        let path: String
        let owner: String
    }
    private let connection = Mutex(Connection())
    /// A bound besides `options.deadline` (`limitCalls(until:)`).
    private let callDeadline = Mutex<Double?>(nil)

    public init(options: Options = Options()) {
        self.options = options
    }

    public convenience init(timeout: Double) {
        self.init(options: Options(callTimeout: timeout))
    }

    deinit {
        connection.withLock { connection in
            tokenctl_object_unref(connection.service)
            if let bus = connection.bus { tokenctl_object_unref(UnsafeMutableRawPointer(bus)) }
        }
    }

    // MARK: SessionStore

    public func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? {
        guard let value = try readSecret(ItemKey(identity: identity, kind: Self.sessionKind), operation: "read the session") else {
            // A locked keyring hides nothing from a search here, but some providers do:
            // "not found" in a locked or missing collection must not read as "signed out".
            try requireUnlockedDefaultCollection(try connect())
            return nil
        }
        do { return try decode(value) } catch {
            var error = error
            // Spelled for this profile, so it runs as printed.
            if error.reason == .corruptItem {
                error.hint = "Run '\(CommandHint.tokenctl(identity.profile, "logout --no-revoke"))', then '\(CommandHint.login(identity.profile))'."
            }
            throw error
        }
    }

    public func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) {
        let bytes: [UInt8]
        do { bytes = try tokenSet.encoded() } catch {
            throw StoreError(.other, "could not encode the token set: \(error)")
        }
        guard bytes.count <= Self.maximumSecretBytes else {
            throw StoreError(
                .itemTooLarge, "the token set is too large to store (\(bytes.count) bytes; the limit is \(Self.maximumSecretBytes))",
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
        try deleteItems(ItemKey(identity: identity, kind: Self.sessionKind), loadSecrets: true) { item throws(StoreError) in
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
                  let issuer = value("issuer"), let clientID = value("client_id") else { return nil }
            return SessionIdentity(profile: profile, issuer: issuer, clientID: clientID)
        }
    }

    // MARK: Client secrets (kind=client-secret, same attributes otherwise)

    public func readClientSecret(_ identity: SessionIdentity) throws(StoreError) -> String? {
        guard let value = try readSecret(ItemKey(identity: identity, kind: Self.clientSecretKind), operation: "read the client secret") else {
            return nil
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length = 0
        guard let pointer = secret_value_get(value, &length), length > 0 else { return nil }
        return pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }

    public func writeClientSecret(_ secret: String, for identity: SessionIdentity) throws(StoreError) {
        try storeSecret(
            Array(secret.utf8), contentType: "text/plain", key: ItemKey(identity: identity, kind: Self.clientSecretKind),
            label: "tokenctl client secret: \(identity.profile) (\(identity.clientID) at \(identity.issuer))",
            operation: "store the client secret")
    }

    public func deleteClientSecret(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        try deleteItems(ItemKey(identity: identity, kind: Self.clientSecretKind)) { _ throws(StoreError) in true } > 0
    }

    /// Whether the default collection exists and is unlocked (for `status`, `doctor` and the
    /// check every login makes before it spends a grant).
    public func checkAvailable() throws(StoreError) {
        try requireUnlockedDefaultCollection(try connect())
    }

    /// `checkAvailable`, then the search `write` begins with (SearchItems for the item, and
    /// the per-item lock check `unlockedPaths` makes): what a login proves before it spends a
    /// grant. A provider that answers the session set-up but never a search fails here.
    public func checkWritable(_ identity: SessionIdentity) throws(StoreError) {
        try checkAvailable()
        _ = try unlockedPaths(attributes(ItemKey(identity: identity, kind: Self.sessionKind)))
    }

    public func limitCalls(until deadline: Double?) {
        callDeadline.withLock { $0 = deadline }
    }

    /// The program that owns `org.freedesktop.secrets` on the session bus, for hints and `doctor`.
    public func provider() -> SecretServiceProvider {
        // Not while connecting (errors there land here): the lock is ours then.
        func snapshot() -> (bus: BusHandle?, known: SecretServiceProvider?)? {
            connection.withLockIfAvailable { state in (state.bus.map { BusHandle(pointer: $0) }, state.provider) }
        }
        guard var current = snapshot() else { return .unknown }
        if let known = current.known { return known }
        if current.bus == nil {
            _ = try? connect()
            guard let again = snapshot() else { return .unknown }
            current = again
        }
        guard let bus = current.bus else { return .unknown }
        let pid = tokenctl_bus_name_owner_pid(bus.pointer, Self.busName, Int32(min(1000, max(100, (try? boundMilliseconds("ask the bus")) ?? 1000))))
        var found = SecretServiceProvider.unknown
        if pid != 0, let comm = try? FileIO.readFile("/proc/\(pid)/comm", limit: 256) {
            found = SecretServiceProvider(processName: String(comm.prefix { $0 != "\n" }))
        }
        connection.withLock { $0.provider = found }
        return found
    }

    // MARK: Bounds

    /// The bound of the next call, in milliseconds: the per-call timeout or what is left of the
    /// command's deadline (`floor` past it, for the write of a rotated set).
    private func boundMilliseconds(_ operation: String, floor: Double = 0) throws(StoreError) -> Int32 {
        var seconds = options.callTimeout
        let limit = callDeadline.withLock { $0 }
        if let deadline = [options.deadline, limit].compactMap({ $0 }).min() {
            let left = max(deadline - Clock.system.now(), floor)
            guard left > 0.05 else {
                throw StoreError(
                    .deadline, "the command's time ran out (--timeout) before tokenctl could \(operation)",
                    hint: "Give it more time with --timeout SECONDS; the session is kept.")
            }
            seconds = min(seconds, left)
        }
        return Int32(max(50, min(seconds * 1000, Double(Int32.max))))
    }

    /// Run `body` with a GCancellable that a watchdog cancels after `milliseconds`: prompts
    /// (CreateItem, Delete, Unlock) and the bus connection have no D-Bus timeout of their own.
    /// When `prompt` is given and the call is still running after a second, `promptNotice`
    /// hears what to approve.
    private func withWatchdog<T>(
        _ milliseconds: Int32, prompt: (@Sendable () -> String)? = nil,
        _ body: (UnsafeMutablePointer<GCancellable>) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        let cancellable = CancellableHandle()
        let finished = FinishedFlag()
        // A call that cannot prompt has the proxy's D-Bus timeout, whose error says more: the
        // watchdog is only its backstop (connecting to the bus has no timeout at all).
        let bound = Int(milliseconds) + (prompt == nil ? 500 : 0)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(bound)) { [cancellable, finished] in
            if !finished.isSet { g_cancellable_cancel(cancellable.pointer) }
        }
        if let prompt, let notice = options.promptNotice, milliseconds > 1000 {
            DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(1)) { [finished] in
                if !finished.isSet { notice(prompt()) }
            }
        }
        defer { finished.set() }
        return try body(cancellable.pointer)
    }

    // MARK: libsecret plumbing

    private func connect() throws(StoreError) -> UnsafeMutablePointer<SecretService> {
        let milliseconds = try boundMilliseconds("connect to the Secret Service", floor: 0)
        let handle = try connection.withLock { (state) throws(StoreError) -> ServiceHandle in
            if let service = state.service {
                // A daemon restarted since (`status --watch`): prime it before anything else.
                if let owner = Self.nameOwner(service), owner != state.primedOwner {
                    try prime(service, milliseconds: milliseconds)
                    state.primedOwner = owner
                }
                return ServiceHandle(service)
            }
            guard system_getenv("DBUS_SESSION_BUS_ADDRESS") != nil else {
                // GLib would try to autolaunch a bus through X11 and report that instead.
                throw StoreError(
                    .noSessionBus,
                    "no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is unset and there is no bus socket at $XDG_RUNTIME_DIR/bus or /run/user/\(system_getuid())/bus",
                    hint: Self.noBusHint)
            }
            // GIO's shared session connection (the one the proxy below uses), kept referenced for
            // the life of the store so that it stays open between calls. Connecting has no
            // timeout of its own (a stopped bus daemon never answers the handshake).
            let bus = try withWatchdog(milliseconds) { (cancellable) throws(StoreError) -> OpaquePointer in
                var error: UnsafeMutablePointer<GError>?
                guard let bus = g_bus_get_sync(G_BUS_TYPE_SESSION, cancellable, &error) else {
                    let message = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "unknown error"
                    if let error { g_error_free(error) }
                    throw StoreError(.noSessionBus, "cannot connect to the D-Bus session bus: \(message)", hint: Self.noBusHint)
                }
                return bus
            }
            if let previous = state.bus { tokenctl_object_unref(UnsafeMutableRawPointer(previous)) }
            state.bus = bus
            var error: UnsafeMutablePointer<GError>?
            // A lean proxy: building it sends nothing to the Secret Service, so the first call
            // that reaches the daemon is OpenSession, already under our timeout (a stopped
            // daemon must not hang a cron job for D-Bus's default 25 s).
            guard let service = tokenctl_secret_service_open(milliseconds, &error) else {
                throw storeError(error, operation: "connect to the Secret Service")
            }
            do throws(StoreError) { try prime(service, milliseconds: milliseconds) } catch {
                tokenctl_object_unref(service)
                throw error
            }
            state.primedOwner = Self.nameOwner(service)
            var opened = try withWatchdog(milliseconds) { cancellable in secret_service_ensure_session_sync(service, cancellable, &error) }
            // kwalletd5 now and then fails to negotiate an encrypted session ("Client public key
            // size is invalid"): one more try, for an error of no known class only.
            if opened == 0, let failed = error, Self.classify(domain: failed.pointee.domain, code: failed.pointee.code, remoteName: "", mayPrompt: false) == nil {
                g_error_free(failed)
                error = nil
                opened = try withWatchdog(milliseconds) { cancellable in secret_service_ensure_session_sync(service, cancellable, &error) }
            }
            if opened == 0 {
                tokenctl_object_unref(service)
                throw storeError(error, operation: "open a session with the Secret Service")
            }
            state.service = service
            return ServiceHandle(service)
        }
        tokenctl_proxy_set_timeout(handle.pointer, milliseconds)
        return handle.pointer
    }

    /// The first call of a connection to the Secret Service: see `tokenctl_secret_service_prime`
    /// (gnome-keyring 42 aborts when a connection's first call loses a race on a busy daemon).
    private func prime(_ service: UnsafeMutablePointer<SecretService>, milliseconds: Int32) throws(StoreError) {
        var error: UnsafeMutablePointer<GError>?
        let primed = try withWatchdog(milliseconds) { cancellable in tokenctl_secret_service_prime(service, milliseconds, cancellable, &error) }
        if primed == 0 { throw storeError(error, operation: "connect to the Secret Service") }
    }

    private static func nameOwner(_ service: UnsafeMutablePointer<SecretService>) -> String? {
        guard let owner = tokenctl_proxy_name_owner(service) else { return nil }
        defer { g_free(owner) }
        return String(cString: owner)
    }

    /// The proxy pointer, handed out of the lock (it lives as long as the store).
    private struct ServiceHandle: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<SecretService>
        init(_ pointer: UnsafeMutablePointer<SecretService>) { self.pointer = pointer }
    }

    private struct BusHandle: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    static let noBusHint = "Run tokenctl inside your login session, or set DBUS_SESSION_BUS_ADDRESS (e.g. unix:path=/run/user/$(id -u)/bus); for cron and timers without a login, enable lingering: 'loginctl enable-linger $USER'."

    /// The D-Bus paths of the items matching `table` (consumed): unlocked, and locked.
    private func searchPaths(_ table: OpaquePointer) throws(StoreError) -> (unlocked: [String], locked: [String]) {
        defer { g_hash_table_unref(table) }
        let service = try connect()
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var locked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var error: UnsafeMutablePointer<GError>?
        if secret_service_search_for_dbus_paths_sync(service, tokenctl_secret_schema(), table, nil, &unlocked, &locked, &error) == 0 {
            throw storeError(error, operation: "search the Secret Service")
        }
        defer {
            g_strfreev(unlocked)
            g_strfreev(locked)
        }
        return (Self.strings(unlocked), Self.strings(locked))
    }

    private static func strings(_ vector: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?) -> [String] {
        var result: [String] = []
        guard var cursor = vector else { return result }
        while let string = cursor.pointee {
            result.append(String(cString: string))
            cursor += 1
        }
        return result
    }

    /// The unlocked paths of the items matching `table` (consumed). Items locked one by one in
    /// an open collection (KeePassXC asks the user per client) are unlocked with
    /// `Service.Unlock` when a person can answer; otherwise, and in a locked collection, the
    /// error says which lock it is.
    private func unlockedPaths(_ table: OpaquePointer) throws(StoreError) -> [String] {
        let (unlocked, locked) = try searchPaths(table)
        guard unlocked.isEmpty, !locked.isEmpty else { return unlocked }
        let service = try connect()
        try requireUnlockedDefaultCollection(service)
        // The collection is open, the items are not: a per-item lock.
        guard options.interactive else { throw perItemLockedError() }
        let provider = provider()
        let milliseconds = try boundMilliseconds("ask \(provider.name) for access")
        let name = provider.name
        var error: UnsafeMutablePointer<GError>?
        var newlyUnlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        let count = try withWatchdog(milliseconds, prompt: { "\(name) asks whether tokenctl may use its item: allow it in the \(name) window." }) { cancellable in
            var pointers: [UnsafePointer<CChar>?] = locked.map { UnsafePointer(system_strdup($0)) } + [nil]
            defer { for pointer in pointers { system_free(UnsafeMutableRawPointer(mutating: pointer)) } }
            return pointers.withUnsafeMutableBufferPointer { buffer in
                secret_service_unlock_dbus_paths_sync(service, buffer.baseAddress, cancellable, &newlyUnlocked, &error)
            }
        }
        defer { g_strfreev(newlyUnlocked) }
        if let error { throw storeError(error, operation: "ask \(provider.name) for access to tokenctl's item", mayPrompt: true) }
        let paths = Self.strings(newlyUnlocked)
        guard count > 0, !paths.isEmpty else { throw perItemLockedError() }
        return paths
    }

    /// The secret of the item `key` names, or nil when there is none.
    ///
    /// By D-Bus object path: SearchItems, then GetSecrets through the open session — no item
    /// proxy is built (that would cost a property load and signal subscriptions per read).
    /// A match that is only among the locked items is reported as locked, never as absent.
    /// The path is remembered for the write that follows a refresh.
    private func readSecret(_ key: ItemKey, operation: String) throws(StoreError) -> OpaquePointer? {
        let owner = Self.nameOwner(try connect())
        guard let path = try unlockedPaths(attributes(key)).first else { return nil }
        for attempt in 0..<2 {
            let service = try connect()
            var error: UnsafeMutablePointer<GError>?
            let value = secret_service_get_secret_for_dbus_path_sync(service, path, nil, &error)
            if let error {
                // Deleted by another process between the search and the read: absent.
                if Self.isUnknownObject(error) {
                    g_error_free(error)
                    return nil
                }
                // An error of no known class (kwalletd5 losing our session: "Can't find
                // session"): once more on a new session.
                if attempt == 0, Self.classify(domain: error.pointee.domain, code: error.pointee.code, remoteName: "", mayPrompt: false) == nil {
                    g_error_free(error)
                    dropSession()
                    continue
                }
                throw storeError(error, operation: operation)
            }
            if let value {
                remember(key, at: path, reportedBy: owner, service: service)
                return value
            }
            // The item exists but no secret came back (a session whose keys no longer match,
            // as kwalletd5 now and then answers): never "signed out"; once more, then an error.
            if attempt == 0 {
                dropSession()
                continue
            }
        }
        throw StoreError(.other, "the Secret Service\(provider().label) returned no secret for tokenctl's item (\(operation))",
                         hint: "Try again; if it persists, restart your Secret Service provider. The session is kept.")
    }

    /// Forget the open session (and its proxy): the next call opens a new one.
    private func dropSession() {
        connection.withLock { state in
            tokenctl_object_unref(state.service)
            state.service = nil
            state.primedOwner = nil
        }
    }

    /// Replace the secret of the item `key` names with `Item.SetSecret`, or create the item when
    /// there is none. After a read of the same item (a refresh) the write goes to the path the
    /// read found: one call at the daemon instead of a search, a property load and the write,
    /// which is what makes `refresh --all` scale (the daemon serves one call at a time).
    private func storeSecret(_ bytes: [UInt8], contentType: String, key: ItemKey, label: String, operation: String) throws(StoreError) {
        let service = try connect()
        let value = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { secret_value_new($0.baseAddress, buffer.count, contentType) }
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        let milliseconds = try boundMilliseconds(operation, floor: Self.minimumWriteTime)
        if let known = knownItem(key, service: service) {
            switch try setSecret(value, at: known.path, of: known.owner, service: service, milliseconds: milliseconds, operation: operation) {
            case .written: return
            case .noSuchItem, .daemonGone: forget(key)  // deleted, or the daemon restarted: search as below
            }
        }
        let owner = Self.nameOwner(service)
        if let path = try unlockedPaths(attributes(key)).first {
            switch try setSecret(value, at: path, of: Self.busName, service: service, milliseconds: milliseconds, operation: operation) {
            case .written:
                remember(key, at: path, reportedBy: owner, service: service)
                return
            case .noSuchItem, .daemonGone: break  // deleted meanwhile: create it below (the well-known name is never "gone")
            }
        }
        try requireUnlockedDefaultCollection(service)
        let table = attributes(key)
        defer { g_hash_table_unref(table) }
        try withWatchdog(milliseconds, prompt: { "\(self.provider().name) asks to confirm a new item for tokenctl: allow it." }) { (cancellable) throws(StoreError) in
            var error: UnsafeMutablePointer<GError>?
            if secret_service_store_sync(service, tokenctl_secret_schema(), table, nil, label, value, cancellable, &error) == 0 {
                throw storeError(error, operation: operation, mayPrompt: true)
            }
        }
    }

    private enum SetSecretOutcome { case written, noSuchItem, daemonGone }

    /// `Item.SetSecret` on the item at `path` of the daemon `destination` (a unique name, or
    /// the well-known one): see `tokenctl_item_set_secret`.
    private func setSecret(
        _ value: OpaquePointer?, at path: String, of destination: String, service: UnsafeMutablePointer<SecretService>,
        milliseconds: Int32, operation: String
    ) throws(StoreError) -> SetSecretOutcome {
        try withWatchdog(milliseconds, prompt: { "\(self.provider().name) asks to confirm a change to tokenctl's item: allow it." }) { (cancellable) throws(StoreError) -> SetSecretOutcome in
            var error: UnsafeMutablePointer<GError>?
            if tokenctl_item_set_secret(service, destination, path, value, milliseconds, cancellable, &error) != 0 { return .written }
            if let error, Self.isUnknownObject(error) {
                g_error_free(error)
                return .noSuchItem
            }
            if let error, destination != Self.busName, Self.isGoneDaemon(error) {
                g_error_free(error)
                return .daemonGone
            }
            throw storeError(error, operation: operation, mayPrompt: true)
        }
    }

    /// Where `key`'s item was last found, if that was at the daemon that owns the Secret Service
    /// name now.
    private func knownItem(_ key: ItemKey, service: UnsafeMutablePointer<SecretService>) -> KnownItem? {
        let owner = Self.nameOwner(service)
        return connection.withLock { state in
            guard let known = state.knownItems[key] else { return nil }
            guard known.owner == owner else {
                state.knownItems[key] = nil
                return nil
            }
            return known
        }
    }

    /// Remember `path` for `key`, when the daemon that reported it (`owner`, read before the
    /// call) still owns the name.
    private func remember(_ key: ItemKey, at path: String, reportedBy owner: String?, service: UnsafeMutablePointer<SecretService>) {
        guard let owner, Self.nameOwner(service) == owner else { return }
        connection.withLock { $0.knownItems[key] = KnownItem(path: path, owner: owner) }
    }

    private func forget(_ key: ItemKey) {
        connection.withLock { $0.knownItems[key] = nil }
    }

    /// The attributes that find `key`'s item (a new table: the caller owns it).
    private func attributes(_ key: ItemKey) -> OpaquePointer {
        let table = tokenctl_attributes_new()!
        tokenctl_attributes_insert(table, "application", Self.application)
        tokenctl_attributes_insert(table, "profile", key.identity.profile.rawValue)
        tokenctl_attributes_insert(table, "issuer", key.identity.issuer)
        tokenctl_attributes_insert(table, "client_id", key.identity.clientID)
        tokenctl_attributes_insert(table, "kind", key.kind)
        return table
    }

    /// The found items, owning their references until `release()`.
    private struct ItemList {
        let list: UnsafeMutablePointer<GList>?
        let timeoutMilliseconds: Int32
        var items: [UnsafeMutablePointer<SecretItem>] {
            var result: [UnsafeMutablePointer<SecretItem>] = []
            var node = list
            while let current = node {
                if let data = current.pointee.data {
                    tokenctl_proxy_set_timeout(data, timeoutMilliseconds)
                    result.append(data.assumingMemoryBound(to: SecretItem.self))
                }
                node = current.pointee.next
            }
            return result
        }
        func release() {
            var node = list
            while let current = node {
                tokenctl_object_unref(current.pointee.data)
                node = current.pointee.next
            }
            g_list_free(list)
        }
    }

    /// Search with `table` (consumed). Locked items are returned too, so a locked keyring
    /// is reported as locked and never as "signed out".
    private func search(_ table: OpaquePointer, loadSecrets: Bool) throws(StoreError) -> ItemList {
        defer { g_hash_table_unref(table) }
        let service = try connect()
        let milliseconds = try boundMilliseconds("search the Secret Service")
        var flags = SECRET_SEARCH_ALL.rawValue
        if loadSecrets { flags |= SECRET_SEARCH_LOAD_SECRETS.rawValue }
        var error: UnsafeMutablePointer<GError>?
        let list = try withWatchdog(milliseconds) { cancellable in
            secret_service_search_sync(service, tokenctl_secret_schema(), table, SecretSearchFlags(flags), cancellable, &error)
        }
        if let error { throw storeError(error, operation: "search the Secret Service") }
        return ItemList(list: list, timeoutMilliseconds: milliseconds)
    }

    private func deleteItems(
        _ key: ItemKey, loadSecrets: Bool = false,
        where shouldDelete: (UnsafeMutablePointer<SecretItem>) throws(StoreError) -> Bool
    ) throws(StoreError) -> Int {
        forget(key)
        let items = try search(attributes(key), loadSecrets: loadSecrets)
        defer { items.release() }
        var deleted = 0
        for item in items.items {
            if secret_item_get_locked(item) != 0 {
                try requireUnlockedDefaultCollection(try connect())
                throw perItemLockedError()
            }
            guard try shouldDelete(item) else { continue }
            let milliseconds = try boundMilliseconds("delete the session", floor: Self.minimumWriteTime)
            var error: UnsafeMutablePointer<GError>?
            let ok = try withWatchdog(milliseconds, prompt: { "\(self.provider().name) asks to confirm deleting tokenctl's item: allow it." }) { cancellable in
                secret_item_delete_sync(item, cancellable, &error)
            }
            if ok == 0 {
                // Another process deleted it between our search and our delete: that is done too.
                if let error, Self.isUnknownObject(error) {
                    g_error_free(error)
                    continue
                }
                throw storeError(error, operation: "delete the session", mayPrompt: true)
            }
            deleted += 1
        }
        return deleted
    }

    private static func isUnknownObject(_ error: UnsafeMutablePointer<GError>) -> Bool {
        let domain = error.pointee.domain, code = error.pointee.code
        if domain == g_dbus_error_quark() {
            return code == Int32(G_DBUS_ERROR_UNKNOWN_OBJECT.rawValue) || code == Int32(G_DBUS_ERROR_UNKNOWN_METHOD.rawValue)
                || code == Int32(G_DBUS_ERROR_UNKNOWN_INTERFACE.rawValue)
        }
        if domain == secret_error_get_quark() { return code == Int32(SECRET_ERROR_NO_SUCH_OBJECT.rawValue) }
        return false
    }

    /// The daemon a call was addressed to by its unique name has exited (restarted since).
    private static func isGoneDaemon(_ error: UnsafeMutablePointer<GError>) -> Bool {
        let code = error.pointee.code
        return error.pointee.domain == g_dbus_error_quark()
            && (code == Int32(G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue) || code == Int32(G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue))
    }

    private func decodeSecret(of item: UnsafeMutablePointer<SecretItem>) throws(StoreError) -> TokenSet? {
        guard let value = secret_item_get_secret(item) else {
            var error: UnsafeMutablePointer<GError>?
            if secret_item_load_secret_sync(item, nil, &error) == 0 {
                throw storeError(error, operation: "read the session")
            }
            guard let loaded = secret_item_get_secret(item) else { return nil }
            return try decode(loaded)
        }
        return try decode(value)
    }

    private func decode(_ value: OpaquePointer) throws(StoreError) -> TokenSet {
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length = 0
        guard let pointer = secret_value_get(value, &length) else {
            throw StoreError(.corruptItem, "the stored session is empty")
        }
        let bytes = pointer.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
        do { return try TokenSet.decode(bytes) } catch {
            throw StoreError(
                .corruptItem, "the stored session is not a tokenctl token set",
                hint: "Run 'tokenctl logout --no-revoke' for its profile and log in again.")
        }
    }

    private func requireUnlockedDefaultCollection(_ service: UnsafeMutablePointer<SecretService>) throws(StoreError) {
        let milliseconds = try boundMilliseconds("open the default keyring")
        var error: UnsafeMutablePointer<GError>?
        let collection = try withWatchdog(milliseconds) { cancellable in
            secret_collection_for_alias_sync(service, "default", SECRET_COLLECTION_NONE, cancellable, &error)
        }
        if let error { throw storeError(error, operation: "open the default keyring") }
        guard let collection else {
            let provider = provider()
            throw StoreError(
                .noDefaultCollection, "the Secret Service\(provider.label) has no default keyring (collection)",
                hint: provider.noDefaultCollectionHint)
        }
        defer { tokenctl_object_unref(collection) }
        tokenctl_proxy_set_timeout(collection, milliseconds)
        if secret_collection_get_locked(collection) != 0 { throw lockedError() }
    }

    private func lockedError() -> StoreError {
        let provider = provider()
        return StoreError(.locked, "the keyring is locked" + provider.label, hint: Hint.sentences(provider.unlockHint, "The session is kept."))
    }

    private func perItemLockedError() -> StoreError {
        let provider = provider()
        return StoreError(
            .itemLocked, "\(provider.name) keeps tokenctl's item locked until you allow this program to access it",
            hint: Hint.sentences(provider.perItemUnlockHint, "The session is kept."))
    }

    /// A GError's class by its domain and code, and the remote D-Bus error name (which is
    /// never translated): never by its message, which GLib translates.
    ///
    /// - Parameter mayPrompt: the call could have been waiting for a provider's prompt (create,
    ///   delete, unlock), so a cancellation by the watchdog may mean an unanswered prompt.
    /// - Returns: nil for an error of no known class.
    static func classify(domain: GQuark, code: Int32, remoteName: String, mayPrompt: Bool) -> StoreError.Reason? {
        if remoteName == "org.freedesktop.Secret.Error.IsLocked" { return .locked }
        let code = UInt32(bitPattern: code)
        if domain == g_dbus_error_quark() {
            switch code {
            case G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue, G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue,
                 G_DBUS_ERROR_SPAWN_EXEC_FAILED.rawValue, G_DBUS_ERROR_SPAWN_FORK_FAILED.rawValue,
                 G_DBUS_ERROR_SPAWN_CHILD_EXITED.rawValue, G_DBUS_ERROR_SPAWN_CHILD_SIGNALED.rawValue,
                 G_DBUS_ERROR_SPAWN_FAILED.rawValue, G_DBUS_ERROR_SPAWN_SETUP_FAILED.rawValue,
                 G_DBUS_ERROR_SPAWN_CONFIG_INVALID.rawValue, G_DBUS_ERROR_SPAWN_SERVICE_INVALID.rawValue,
                 G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND.rawValue, G_DBUS_ERROR_SPAWN_PERMISSIONS_INVALID.rawValue,
                 G_DBUS_ERROR_SPAWN_FILE_INVALID.rawValue, G_DBUS_ERROR_SPAWN_NO_MEMORY.rawValue:
                return .noSecretService
            case G_DBUS_ERROR_NO_REPLY.rawValue, G_DBUS_ERROR_TIMEOUT.rawValue, G_DBUS_ERROR_TIMED_OUT.rawValue:
                return .timeout
            case G_DBUS_ERROR_DISCONNECTED.rawValue, G_DBUS_ERROR_UNKNOWN_OBJECT.rawValue, G_DBUS_ERROR_UNKNOWN_METHOD.rawValue,
                 G_DBUS_ERROR_UNKNOWN_INTERFACE.rawValue:
                return .serviceGone
            default:
                return nil
            }
        }
        if domain == secret_error_get_quark() {
            return code == SECRET_ERROR_IS_LOCKED.rawValue ? .locked : nil
        }
        if domain == g_io_error_quark() {
            switch code {
            case G_IO_ERROR_TIMED_OUT.rawValue: return .timeout
            // Only tokenctl's watchdog cancels: the call (or a prompt it waits for) ran out of time.
            case G_IO_ERROR_CANCELLED.rawValue: return mayPrompt ? .promptPending : .timeout
            case G_IO_ERROR_CLOSED.rawValue, G_IO_ERROR_BROKEN_PIPE.rawValue, G_IO_ERROR_CONNECTION_CLOSED.rawValue: return .serviceGone
            default: return nil
            }
        }
        return nil
    }

    /// The StoreError for a GError (consumed) from libsecret/GDBus, classified by `classify`.
    private func storeError(_ error: UnsafeMutablePointer<GError>?, operation: String, mayPrompt: Bool = false) -> StoreError {
        guard let error else { return StoreError(.other, "could not \(operation)") }
        defer { g_error_free(error) }
        let message = RefreshOutcome.sanitized(error.pointee.message.map { String(cString: $0) } ?? "unknown error")
        var remoteName = ""
        if let remote = tokenctl_error_remote_name(error) {
            remoteName = String(cString: remote)
            g_free(remote)
        }
        let kept = "Restart your Secret Service provider and try again; the session is kept."
        switch Self.classify(domain: error.pointee.domain, code: error.pointee.code, remoteName: remoteName, mayPrompt: mayPrompt) {
        case .noSecretService:
            return StoreError(
                .noSecretService, "no Secret Service on the session bus (\(remoteName.isEmpty ? "no owner" : remoteName))",
                hint: SecretServiceProvider.startAnyHint)
        case .timeout:
            return StoreError(
                .timeout, "the Secret Service\(provider().label) did not answer in time (\(operation))",
                hint: "Check that it is running and not waiting for a prompt; the session is kept.")
        case .serviceGone:
            return StoreError(.serviceGone, "the Secret Service went away during the operation (\(operation)): \(message)", hint: kept)
        case .locked:
            return lockedError()
        case .promptPending:
            let provider = provider()
            return StoreError(
                .promptPending,
                "the Secret Service\(provider.label) did not finish in time (\(operation)); it may be waiting for a confirmation prompt",
                hint: options.interactive
                    ? "Approve the request in \(provider.name) and try again; the session is kept."
                    : "Run the command again in a terminal of your desktop session and approve the request \(provider.name) shows; the session is kept.")
        default:
            return StoreError(.other, "could not \(operation): \(message)")
        }
    }
}

/// The program that provides the Secret Service, so that hints fit it.
public enum SecretServiceProvider: Sendable, Equatable {
    case gnomeKeyring, keePassXC, kWallet
    case other(String)
    case unknown

    /// From the owner's `/proc/PID/comm`.
    public init(processName: String) {
        switch processName {
        case "gnome-keyring-d", "gnome-keyring-daemon": self = .gnomeKeyring
        case let name where name.lowercased().hasPrefix("keepassxc"): self = .keePassXC
        case "kwalletd5", "kwalletd6", "ksecretd": self = .kWallet
        default: self = .other(RefreshOutcome.sanitized(processName))
        }
    }

    /// " (KeePassXC)" after "the Secret Service" in messages; nothing when unknown.
    var label: String { self == .unknown ? "" : " (\(name))" }

    public var name: String {
        switch self {
        case .gnomeKeyring: "gnome-keyring"
        case .keePassXC: "KeePassXC"
        case .kWallet: "KWallet"
        case .other(let name): name
        case .unknown: "the Secret Service provider"
        }
    }

    /// How to start one when none owns the name (the user's provider is unknown then).
    public static let startAnyHint = "Start your Secret Service provider: gnome-keyring ('gnome-keyring-daemon --start --components=secrets'), KeePassXC (Settings > Secret Service Integration, with a database open), or KWallet (apiEnabled=true under [org.freedesktop.secrets] in kwalletrc)."

    var unlockHint: String {
        switch self {
        case .gnomeKeyring:
            "Unlock it (log in to the desktop, or run 'printf %s \"$PASSWORD\" | gnome-keyring-daemon --replace --unlock --components=secrets') and try again."
        case .keePassXC:
            "Unlock the database in KeePassXC (the one exposed under Settings > Secret Service Integration) and try again."
        case .kWallet:
            "Open the wallet (log in to Plasma, or open 'kdewallet' in KWalletManager) and try again."
        case .other, .unknown:
            "Unlock it in \(name) and try again."
        }
    }

    var perItemUnlockHint: String {
        switch self {
        case .keePassXC:
            "Run 'tokenctl status --all' in a terminal of your desktop session and allow the access request KeePassXC shows (or turn off 'Confirm when passwords are retrieved by clients' in its Secret Service settings)."
        default:
            "Run 'tokenctl status --all' in a terminal of your desktop session and allow the access request \(name) shows."
        }
    }

    var noDefaultCollectionHint: String {
        switch self {
        case .gnomeKeyring:
            "Create one, e.g. by unlocking gnome-keyring once: 'printf %s \"$PASSWORD\" | gnome-keyring-daemon --replace --unlock --components=secrets'."
        case .keePassXC:
            "Expose a database group under Settings > Secret Service Integration in KeePassXC, and unlock that database."
        case .kWallet:
            "Create the wallet 'kdewallet' in KWalletManager."
        case .other, .unknown:
            "Set a default collection in \(name)."
        }
    }
}

/// A GCancellable shared with the watchdog, freed when both are done with it.
private final class CancellableHandle: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<GCancellable>
    init() { pointer = g_cancellable_new() }
    deinit { tokenctl_object_unref(pointer) }
}

/// Set once the guarded call has returned; the watchdog then does nothing.
private final class FinishedFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}
