// A hot-cache entry in the kernel user keyring: the one writer that the engine (`HotCache` in
// TokenctlCore) and the front's forwarded miss share, so both keep an entry the same way.
extension HotCacheEntry {
    /// Cache this entry until its expiry minus the default margin, unless the key already holds a
    /// newer entry for the same identity (a concurrent process may have rotated meanwhile).
    /// An entry with under a second left is not cached, and removes any older one.
    ///
    /// - Returns: whether the key now holds this entry.
    public func storeInKernelKeyring(now: Double) -> Bool {
        let description = keyDescription
        let existing = Self.cachedInKernelKeyring(description)
        if let existing,
            existing.entry.belongs(to: profile, issuer: issuer, clientID: clientID, target: target)
        {
            if existing.entry == self { return true }
            let existingServable = existing.entry.isFresh(
                at: now, minimumTimeToLive: AccessTokenLifetime.defaultMinimumTimeToLive)
            if existing.entry.obtainedAt > obtainedAt && existingServable { return false }
        }
        guard let timeout = kernelTimeout(at: now), var payload = try? encoded() else {
            if let existing { _ = KernelKeyring.invalidate(existing.key) }
            return false
        }
        defer { KernelKeyring.scrub(&payload) }
        switch KernelKeyring.replace(
            description, payload: payload, permissions: KernelKeyring.userOnlyPermissions, timeout: timeout)
        {
        case .success: return true
        case .failure:
            // EDQUOT, EPERM, ENOSYS...: the Secret Service path serves instead. Never leave an
            // older entry behind a failed replacement.
            if let existing { _ = KernelKeyring.invalidate(existing.key) }
            return false
        }
    }

    /// The key with this description and the entry it holds; nil when there is none, it cannot be
    /// read, or its payload does not decode.
    public static func cachedInKernelKeyring(_ description: String) -> (
        key: KernelKeyring.KeyID, entry: HotCacheEntry
    )? {
        guard case .success(let key?) = KernelKeyring.search(description),
            case .success(var payload) = KernelKeyring.read(key, limit: maximumPayloadSize)
        else { return nil }
        defer { KernelKeyring.scrub(&payload) }
        guard let entry = try? decode(payload) else { return nil }
        return (key, entry)
    }
}
