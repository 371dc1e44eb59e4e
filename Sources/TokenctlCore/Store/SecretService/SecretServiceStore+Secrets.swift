// Reading, writing and deleting the secret of an item.
import CSecret
import CSecretShim

extension SecretServiceStore {
    /// The secret of the item `key` names, or nil when there is none.
    ///
    /// By D-Bus object path: SearchItems, then GetSecrets through the open session — no item
    /// proxy is built (that would cost a property load and signal subscriptions per read).
    /// A match that is only among the locked items is reported as locked, never as absent.
    /// The path is remembered for the write that follows a refresh.
    func readSecret(_ key: ItemKey, operation: String) throws(StoreError) -> OpaquePointer? {
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
                if attempt == 0,
                    Self.classify(
                        domain: error.pointee.domain, code: error.pointee.code, remoteName: "", mayPrompt: false) == nil
                {
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
        throw StoreError(
            .other, "the Secret Service\(keyringProgram().label) returned no secret for tokenctl's item (\(operation))",
            hint: "Try again; if it persists, restart your Secret Service provider. The session is kept.")
    }

    /// Replace the secret of the item `key` names with `Item.SetSecret`, or create the item when
    /// there is none. After a read of the same item (a refresh) the write goes to the path the
    /// read found: one call at the daemon instead of a search, a property load and the write,
    /// which is what makes `refresh --all` scale (the daemon serves one call at a time).
    func storeSecret(_ bytes: [UInt8], contentType: String, key: ItemKey, label: String, operation: String)
        throws(StoreError)
    {
        do { try storeSecretOnce(bytes, contentType: contentType, key: key, label: label, operation: operation) } catch
        {
            // An error of no known class (kwalletd5 losing our session: "Can't find session"),
            // as reads see it too: once more on a new session (both writes replace the secret).
            guard error.reason == .other else { throw error }
            dropSession()
            try storeSecretOnce(bytes, contentType: contentType, key: key, label: label, operation: operation)
        }
    }

    private func storeSecretOnce(_ bytes: [UInt8], contentType: String, key: ItemKey, label: String, operation: String)
        throws(StoreError)
    {
        let service = try connect()
        let value = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { secret_value_new($0.baseAddress, buffer.count, contentType) }
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        let milliseconds = try boundMilliseconds(operation, floor: Self.minimumWriteTime)
        if let known = knownItem(key, service: service) {
            switch try setSecret(
                value, at: known.path, of: known.owner, service: service, milliseconds: milliseconds,
                operation: operation)
            {
            case .written: return
            case .noSuchItem, .daemonGone: forget(key) // deleted, or the daemon restarted: search as below
            }
        }
        let owner = Self.nameOwner(service)
        if let path = try unlockedPaths(attributes(key)).first {
            switch try setSecret(
                value, at: path, of: Self.busName, service: service, milliseconds: milliseconds, operation: operation)
            {
            case .written:
                remember(key, at: path, reportedBy: owner, service: service)
                return
            case .noSuchItem, .daemonGone:
                // Deleted meanwhile: create it below (the well-known name is never "gone").
                break
            }
        }
        try requireUnlockedDefaultCollection(service)
        let table = attributes(key)
        defer { g_hash_table_unref(table) }
        try withWatchdog(
            milliseconds, prompt: { "\(self.keyringProgram().name) asks to confirm a new item for tokenctl: allow it." }
        ) { (cancellable) throws(StoreError) in
            var error: UnsafeMutablePointer<GError>?
            if secret_service_store_sync(
                service, tokenctl_secret_schema(), table, nil, label, value, cancellable, &error) == 0
            {
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
        try withWatchdog(
            milliseconds,
            prompt: { "\(self.keyringProgram().name) asks to confirm a change to tokenctl's item: allow it." }
        ) { (cancellable) throws(StoreError) -> SetSecretOutcome in
            var error: UnsafeMutablePointer<GError>?
            if tokenctl_item_set_secret(service, destination, path, value, milliseconds, cancellable, &error) != 0 {
                return .written
            }
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

    func deleteItems(
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
            let ok = try withWatchdog(
                milliseconds,
                prompt: { "\(self.keyringProgram().name) asks to confirm deleting tokenctl's item: allow it." }
            ) { cancellable in
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

    func decodeSecret(of item: UnsafeMutablePointer<SecretItem>) throws(StoreError) -> TokenSet? {
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

    func decode(_ value: OpaquePointer) throws(StoreError) -> TokenSet {
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length = 0
        guard let pointer = secret_value_get(value, &length) else {
            throw StoreError(.corruptItem, "the stored session is empty")
        }
        let bytes = pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
            Array(UnsafeBufferPointer(start: $0, count: length))
        }
        do { return try TokenSet.decode(bytes) } catch {
            throw StoreError(
                .corruptItem, "the stored session is not a tokenctl token set",
                hint: "Run '\(tokenctl: .default, .logout([.noRevoke]))' for its profile and log in again.")
        }
    }
}
