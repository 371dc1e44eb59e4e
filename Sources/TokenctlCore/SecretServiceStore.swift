// Every libsecret call of tokenctl lives in this file.
import CSecret
import Synchronization
import TokenctlEssentials

/// Token sets in the freedesktop Secret Service (GNOME Keyring, KeePassXC, …) through libsecret.
///
/// One item per profile, attributes `application=tokenctl`, `profile`, `issuer`, `client_id`,
/// `kind=session`; the secret is the whole `TokenSet` as JSON, so a rotation replaces the
/// access and refresh tokens in one atomic `CreateItem(replace: true)`.
public final class SecretServiceStore: SessionStore, Sendable {
    public static let application = "tokenctl"
    public static let sessionKind = "session"
    /// Secret Service providers and D-Bus limit message sizes; a token set is far below this.
    public static let maximumSecretBytes = 96 * 1024
    public static let clientSecretKind = "client-secret"

    /// D-Bus call timeout for every store operation, in milliseconds.
    private let timeoutMilliseconds: Int32
    /// The connection, made on first use and kept: GIO's shared session-bus connection and the
    /// Secret Service proxy with its open session.
    private struct Connection: @unchecked Sendable {
        var service: UnsafeMutablePointer<SecretService>?
        var bus: OpaquePointer?
    }
    private let connection = Mutex(Connection())

    public init(timeout: Double = 10) {
        self.timeoutMilliseconds = Int32(timeout * 1000)
    }

    deinit {
        connection.withLock { connection in
            tokenctl_object_unref(connection.service)
            if let bus = connection.bus { tokenctl_object_unref(UnsafeMutableRawPointer(bus)) }
        }
    }

    // MARK: SessionStore

    public func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? {
        guard let value = try readSecret(attributes(identity), operation: "read the session") else {
            // A locked keyring hides nothing from a search here, but some providers do:
            // "not found" in a locked or missing collection must not read as "signed out".
            try requireUnlockedDefaultCollection(try connect())
            return nil
        }
        return try decode(value)
    }

    public func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) {
        let service = try connect()
        try requireUnlockedDefaultCollection(service)
        let bytes: [UInt8]
        do { bytes = try tokenSet.encoded() } catch {
            throw StoreError(.other, "could not encode the token set: \(error)")
        }
        guard bytes.count <= Self.maximumSecretBytes else {
            throw StoreError(
                .itemTooLarge, "the token set is too large to store (\(bytes.count) bytes; the limit is \(Self.maximumSecretBytes))",
                hint: "The server issues unusually large tokens; ask for fewer scopes or claims.")
        }
        let table = attributes(identity)
        defer { g_hash_table_unref(table) }
        let value = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { secret_value_new($0.baseAddress, buffer.count, "application/json") }
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        let label = "tokenctl session: \(identity.profile) (\(identity.issuer))"
        var error: UnsafeMutablePointer<GError>?
        let stored = secret_service_store_sync(service, tokenctl_secret_schema(), table, nil, label, value, nil, &error)
        if stored == 0 { throw storeError(error, operation: "store the session") }
    }

    public func delete(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        try deleteItems(matching: attributes(identity)) { _ throws(StoreError) in true } > 0
    }

    public func delete(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) throws(StoreError) -> Bool {
        try deleteItems(matching: attributes(identity), loadSecrets: true) { item throws(StoreError) in
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
        guard let value = try readSecret(attributes(identity, kind: Self.clientSecretKind), operation: "read the client secret") else {
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
        let service = try connect()
        try requireUnlockedDefaultCollection(service)
        let table = attributes(identity, kind: Self.clientSecretKind)
        defer { g_hash_table_unref(table) }
        let bytes = Array(secret.utf8)
        let value = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { secret_value_new($0.baseAddress, buffer.count, "text/plain") }
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        let label = "tokenctl client secret: \(identity.profile) (\(identity.clientID) at \(identity.issuer))"
        var error: UnsafeMutablePointer<GError>?
        if secret_service_store_sync(service, tokenctl_secret_schema(), table, nil, label, value, nil, &error) == 0 {
            throw storeError(error, operation: "store the client secret")
        }
    }

    public func deleteClientSecret(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        try deleteItems(matching: attributes(identity, kind: Self.clientSecretKind)) { _ throws(StoreError) in true } > 0
    }

    /// Whether the default collection exists and is unlocked (for `status` and diagnostics).
    public func checkAvailable() throws(StoreError) {
        try requireUnlockedDefaultCollection(try connect())
    }

    // MARK: libsecret plumbing

    private func connect() throws(StoreError) -> UnsafeMutablePointer<SecretService> {
        try connection.withLock { (state) throws(StoreError) -> ServiceHandle in
            if let service = state.service { return ServiceHandle(service) }
            var error: UnsafeMutablePointer<GError>?
            guard getenv("DBUS_SESSION_BUS_ADDRESS") != nil else {
                // GLib would try to autolaunch a bus through X11 and report that instead.
                throw StoreError(
                    .noSessionBus,
                    "no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is unset and there is no bus socket at $XDG_RUNTIME_DIR/bus or /run/user/\(getuid())/bus",
                    hint: Self.noBusHint)
            }
            // GIO's shared session connection (the one the proxy below uses), kept referenced for
            // the life of the store so that it stays open between calls.
            guard let bus = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else {
                throw storeError(error, operation: "connect to the session bus")
            }
            if let previous = state.bus { tokenctl_object_unref(UnsafeMutableRawPointer(previous)) }
            state.bus = bus
            // A lean proxy: building it sends nothing to the Secret Service, so the first call
            // that reaches the daemon is OpenSession, already under our timeout (a stopped
            // daemon must not hang a cron job for D-Bus's default 25 s).
            guard let service = tokenctl_secret_service_open(timeoutMilliseconds, &error) else {
                throw storeError(error, operation: "connect to the Secret Service")
            }
            if secret_service_ensure_session_sync(service, nil, &error) == 0 {
                tokenctl_object_unref(service)
                throw storeError(error, operation: "open a session with the Secret Service")
            }
            state.service = service
            return ServiceHandle(service)
        }.pointer
    }

    /// The proxy pointer, handed out of the lock (it lives as long as the store).
    private struct ServiceHandle: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<SecretService>
        init(_ pointer: UnsafeMutablePointer<SecretService>) { self.pointer = pointer }
    }

    static let noBusHint = "Run tokenctl inside your login session, or set DBUS_SESSION_BUS_ADDRESS (e.g. unix:path=/run/user/$(id -u)/bus); for cron and timers without a login, enable lingering: loginctl enable-linger $USER."

    /// The secret of the first item matching `table` (consumed), or nil when there is none.
    ///
    /// By D-Bus object path: SearchItems, then GetSecrets through the open session — no item
    /// proxy is built (that would cost a property load and signal subscriptions per read).
    /// A match that is only among the locked items is reported as locked, never as absent.
    private func readSecret(_ table: OpaquePointer, operation: String) throws(StoreError) -> OpaquePointer? {
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
        guard let path = unlocked?.pointee else {
            if locked?.pointee != nil { throw lockedError() }
            return nil
        }
        let value = secret_service_get_secret_for_dbus_path_sync(service, path, nil, &error)
        if let error {
            // Deleted by another process between the search and the read: absent.
            if Self.isUnknownObject(error) {
                g_error_free(error)
                return nil
            }
            throw storeError(error, operation: operation)
        }
        return value
    }

    private func attributes(_ identity: SessionIdentity, kind: String = SecretServiceStore.sessionKind) -> OpaquePointer {
        let table = tokenctl_attributes_new()!
        tokenctl_attributes_insert(table, "application", Self.application)
        tokenctl_attributes_insert(table, "profile", identity.profile.rawValue)
        tokenctl_attributes_insert(table, "issuer", identity.issuer)
        tokenctl_attributes_insert(table, "client_id", identity.clientID)
        tokenctl_attributes_insert(table, "kind", kind)
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
        var flags = SECRET_SEARCH_ALL.rawValue
        if loadSecrets { flags |= SECRET_SEARCH_LOAD_SECRETS.rawValue }
        var error: UnsafeMutablePointer<GError>?
        let list = secret_service_search_sync(service, tokenctl_secret_schema(), table, SecretSearchFlags(flags), nil, &error)
        if let error { throw storeError(error, operation: "search the Secret Service") }
        return ItemList(list: list, timeoutMilliseconds: timeoutMilliseconds)
    }

    private func deleteItems(
        matching table: OpaquePointer, loadSecrets: Bool = false,
        where shouldDelete: (UnsafeMutablePointer<SecretItem>) throws(StoreError) -> Bool
    ) throws(StoreError) -> Int {
        let items = try search(table, loadSecrets: loadSecrets)
        defer { items.release() }
        var deleted = 0
        for item in items.items {
            if secret_item_get_locked(item) != 0 { throw lockedError() }
            guard try shouldDelete(item) else { continue }
            var error: UnsafeMutablePointer<GError>?
            if secret_item_delete_sync(item, nil, &error) == 0 {
                // Another process deleted it between our search and our delete: that is done too.
                if let error, Self.isUnknownObject(error) {
                    g_error_free(error)
                    continue
                }
                throw storeError(error, operation: "delete the session")
            }
            deleted += 1
        }
        return deleted
    }

    private static func isUnknownObject(_ error: UnsafeMutablePointer<GError>) -> Bool {
        var remoteName = ""
        if let remote = tokenctl_error_remote_name(error) {
            remoteName = String(cString: remote)
            g_free(remote)
        }
        let message = error.pointee.message.map { String(cString: $0) } ?? ""
        return remoteName == "org.freedesktop.DBus.Error.UnknownObject" || remoteName == "org.freedesktop.DBus.Error.UnknownMethod"
            || message.contains("No such interface") || message.contains("No such object")
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
                hint: "Run 'tokenctl logout --no-revoke' and log in again.")
        }
    }

    private func requireUnlockedDefaultCollection(_ service: UnsafeMutablePointer<SecretService>) throws(StoreError) {
        var error: UnsafeMutablePointer<GError>?
        let collection = secret_collection_for_alias_sync(service, "default", SECRET_COLLECTION_NONE, nil, &error)
        if let error { throw storeError(error, operation: "open the default keyring") }
        guard let collection else {
            throw StoreError(
                .noDefaultCollection, "the Secret Service has no default keyring (collection)",
                hint: "Create one, e.g. by unlocking gnome-keyring once: printf %s \"$PASSWORD\" | gnome-keyring-daemon --replace --unlock --components=secrets")
        }
        defer { tokenctl_object_unref(collection) }
        tokenctl_proxy_set_timeout(collection, timeoutMilliseconds)
        if secret_collection_get_locked(collection) != 0 { throw lockedError() }
    }

    private func lockedError() -> StoreError {
        StoreError(
            .locked, "the keyring is locked",
            hint: "Unlock it (log in to the desktop, or run: printf %s \"$PASSWORD\" | gnome-keyring-daemon --replace --unlock --components=secrets) and try again. The session is kept.")
    }

    /// Classify a GError (consumed) from libsecret/GDBus.
    private func storeError(_ error: UnsafeMutablePointer<GError>?, operation: String) -> StoreError {
        guard let error else { return StoreError(.other, "could not \(operation)") }
        defer { g_error_free(error) }
        let message = error.pointee.message.map { String(cString: $0) } ?? "unknown error"
        var remoteName = ""
        if let remote = tokenctl_error_remote_name(error) {
            remoteName = String(cString: remote)
            g_free(remote)
        }
        let domain = String(cString: tokenctl_error_domain_name(error))
        let hintBus = Self.noBusHint
        if message.contains("autolaunch") || message.contains("DISPLAY") || message.contains("Could not connect")
            || (domain == "g-io-error-quark" && remoteName.isEmpty && message.contains("bus")) {
            return StoreError(.noSessionBus, "no D-Bus session bus: \(message)", hint: hintBus)
        }
        if remoteName == "org.freedesktop.DBus.Error.ServiceUnknown" || remoteName == "org.freedesktop.DBus.Error.NameHasNoOwner"
            || remoteName == "org.freedesktop.DBus.Error.Spawn.ChildExited" || remoteName.hasPrefix("org.freedesktop.DBus.Error.Spawn") {
            return StoreError(
                .noSecretService, "no Secret Service on the session bus (\(remoteName))",
                hint: "Install and start a Secret Service provider, e.g. gnome-keyring: gnome-keyring-daemon --start --components=secrets")
        }
        if remoteName == "org.freedesktop.DBus.Error.NoReply" || remoteName == "org.freedesktop.DBus.Error.Timeout"
            || message.localizedCaseInsensitiveContainsASCII("timed out") || message.localizedCaseInsensitiveContainsASCII("timeout") {
            return StoreError(.timeout, "the Secret Service did not answer in time (\(operation))", hint: "Check that the keyring daemon is running and not waiting for a prompt.")
        }
        if message.contains("disconnected") || message.contains("closed") || remoteName == "org.freedesktop.DBus.Error.Disconnected"
            || remoteName == "org.freedesktop.DBus.Error.UnknownObject" || remoteName == "org.freedesktop.DBus.Error.UnknownMethod" {
            return StoreError(.serviceGone, "the Secret Service went away during the operation (\(operation)): \(message)", hint: "Restart the keyring daemon and try again; the session is kept.")
        }
        if remoteName == "org.freedesktop.Secret.Error.IsLocked" || message.contains("locked") {
            return lockedError()
        }
        return StoreError(.other, "could not \(operation): \(message)")
    }
}

extension String {
    func localizedCaseInsensitiveContainsASCII(_ other: String) -> Bool {
        lowercased().contains(other.lowercased())
    }
}
