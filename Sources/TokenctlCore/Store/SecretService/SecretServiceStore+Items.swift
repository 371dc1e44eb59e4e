// Finding tokenctl's items: their attributes, searches, per-item locks, and the paths remembered for a write.
import CSecret
import CSecretShim

extension SecretServiceStore {
    /// Which of tokenctl's items: a profile's session, its client secret or its client key,
    /// or a proxy user's password (found by the proxy and the user, not by a profile).
    struct ItemKey: Hashable {
        let identity: SessionIdentity
        let kind: String
        var proxyAccount: ProxyAccount? = nil
    }

    /// An item's D-Bus path at the daemon (unique bus name) that reported it. Every keyring program
    /// tokenctl knows names an item by one path for the daemon's life and never gives a deleted
    /// item's path to another (gnome-keyring counts up, KeePassXC uses UUIDs: KeyringProgramTests
    /// checks all three), so the pair names that item until it is deleted or the daemon exits.
    struct KnownItem {
        let path: String
        let owner: String
    }

    /// The D-Bus paths of the items matching `table` (consumed): unlocked, and locked.
    private func searchPaths(_ table: OpaquePointer) throws(StoreError) -> (unlocked: [String], locked: [String]) {
        defer { g_hash_table_unref(table) }
        let service = try connect()
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var locked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var error: UnsafeMutablePointer<GError>?
        if secret_service_search_for_dbus_paths_sync(
            service, tokenctl_secret_schema(), table, nil, &unlocked, &locked, &error) == 0
        {
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
    func unlockedPaths(_ table: OpaquePointer) throws(StoreError) -> [String] {
        let (unlocked, locked) = try searchPaths(table)
        guard unlocked.isEmpty, !locked.isEmpty else { return unlocked }
        let service = try connect()
        try requireUnlockedDefaultCollection(service)
        // The collection is open, the items are not: a per-item lock.
        guard options.interactive else { throw perItemLockedError() }
        let program = keyringProgram()
        let milliseconds = try boundMilliseconds("ask \(program.name) for access")
        let name = program.name
        var error: UnsafeMutablePointer<GError>?
        var newlyUnlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        let count = try withWatchdog(
            milliseconds, prompt: { "\(name) asks whether tokenctl may use its item: allow it in the \(name) window." }
        ) { cancellable in
            var pointers: [UnsafePointer<CChar>?] = locked.map { UnsafePointer(system_strdup($0)) } + [nil]
            defer { for pointer in pointers { system_free(UnsafeMutableRawPointer(mutating: pointer)) } }
            return pointers.withUnsafeMutableBufferPointer { buffer in
                secret_service_unlock_dbus_paths_sync(service, buffer.baseAddress, cancellable, &newlyUnlocked, &error)
            }
        }
        defer { g_strfreev(newlyUnlocked) }
        if let error {
            throw storeError(error, operation: "ask \(program.name) for access to tokenctl's item", mayPrompt: true)
        }
        let paths = Self.strings(newlyUnlocked)
        guard count > 0, !paths.isEmpty else { throw perItemLockedError() }
        return paths
    }

    /// Where `key`'s item was last found, if that was at the daemon that owns the Secret Service
    /// name now.
    func knownItem(_ key: ItemKey, service: UnsafeMutablePointer<SecretService>) -> KnownItem? {
        let owner = Self.nameOwner(service)
        return connection.state.withLock { state in
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
    func remember(
        _ key: ItemKey, at path: String, reportedBy owner: String?, service: UnsafeMutablePointer<SecretService>
    ) {
        guard let owner, Self.nameOwner(service) == owner else { return }
        connection.state.withLock { $0.knownItems[key] = KnownItem(path: path, owner: owner) }
    }

    func forget(_ key: ItemKey) {
        connection.state.withLock { $0.knownItems[key] = nil }
    }

    /// The attributes that find `key`'s item (a new table: the caller owns it).
    func attributes(_ key: ItemKey) -> OpaquePointer {
        let table = tokenctl_attributes_new()!
        tokenctl_attributes_insert(table, "application", Self.application)
        if let account = key.proxyAccount {
            tokenctl_attributes_insert(table, "proxy", account.proxy)
            tokenctl_attributes_insert(table, "user", account.user)
            tokenctl_attributes_insert(table, "kind", key.kind)
            return table
        }
        tokenctl_attributes_insert(table, "profile", key.identity.profile.rawValue)
        // A client key's item has neither (it belongs to the profile, made before a login).
        if !key.identity.issuer.isEmpty { tokenctl_attributes_insert(table, "issuer", key.identity.issuer) }
        if !key.identity.clientID.isEmpty { tokenctl_attributes_insert(table, "client_id", key.identity.clientID) }
        tokenctl_attributes_insert(table, "kind", key.kind)
        return table
    }

    /// The found items, owning their references until `release()`.
    struct ItemList {
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
    func search(_ table: OpaquePointer, loadSecrets: Bool) throws(StoreError) -> ItemList {
        defer { g_hash_table_unref(table) }
        let service = try connect()
        let milliseconds = try boundMilliseconds("search the Secret Service")
        var flags = SECRET_SEARCH_ALL.rawValue
        if loadSecrets { flags |= SECRET_SEARCH_LOAD_SECRETS.rawValue }
        var error: UnsafeMutablePointer<GError>?
        let list = try withWatchdog(milliseconds) { cancellable in
            secret_service_search_sync(
                service, tokenctl_secret_schema(), table, SecretSearchFlags(flags), cancellable, &error)
        }
        if let error { throw storeError(error, operation: "search the Secret Service") }
        return ItemList(list: list, timeoutMilliseconds: milliseconds)
    }
}
