import TokenctlEssentials

/// The server clock offset (`TokenSet.serverClockOffset`, see `ClockSkew`) measured for a
/// profile whose tokens live in the kernel keyring only (`KernelKeyringTokenStore`), kept in the
/// user keyring beside its token: the hot-cache entry has no room for it, and without it every
/// new process would sign its client assertions' `iat`, `nbf` and `exp` (RFC 7523 §3) on the
/// local clock until an answer measured it again — and a token is asked for exactly when the
/// last one has left the keyring. A number, no secret, readable by this user only; replaced by
/// every answer's measurement and dropped with the profile's token at logout.
enum KernelKeyringClockOffset {
    /// A week after the last answer: clocks drift slowly, and the next answer replaces it.
    static let lifetime: UInt32 = 7 * 24 * 3600

    /// "tokenctl:clock:v1:PROFILE:HASH", beside the hot cache's "tokenctl:v1:PROFILE:HASH".
    static func description(_ identity: SessionIdentity) -> String {
        let entry = HotCacheEntry.keyDescription(
            profile: identity.profile, issuer: identity.issuer, clientID: identity.clientID)
        return "tokenctl:clock:" + entry.dropFirst("tokenctl:".count)
    }

    static func remember(_ offset: Double, for identity: SessionIdentity) {
        guard offset.isFinite, abs(offset) <= 1e9 else { return }
        _ = KernelKeyring.replace(
            description(identity), payload: Array(String(offset).utf8),
            permissions: KernelKeyring.userOnlyPermissions, timeout: lifetime)
    }

    /// The offset kept for `identity`, or nil (none, unreadable, or not a number in bounds).
    static func recall(_ identity: SessionIdentity) -> Double? {
        guard case .success(let key?) = KernelKeyring.search(description(identity)),
            case .success(let payload) = KernelKeyring.read(key, limit: 64),
            let offset = Double(String(decoding: payload, as: UTF8.self)), offset.isFinite, abs(offset) <= 1e9
        else { return nil }
        return offset
    }

    static func forget(_ identity: SessionIdentity) {
        guard case .success(let key?) = KernelKeyring.search(description(identity)) else { return }
        _ = KernelKeyring.invalidate(key)
    }
}
