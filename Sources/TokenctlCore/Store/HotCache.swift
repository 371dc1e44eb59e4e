import TokenctlEssentials

/// The memory-only hot cache: one `user` key per profile in the kernel user keyring, holding a
/// `HotCacheEntry`, readable by this user only, expiring in the kernel at the access token's
/// expiry minus the default refresh margin.
///
/// A cache of the Secret Service, never the source of truth: every failure here is a miss
/// (reads) or is ignored (writes), and tokenctl carries on through the Secret Service. Used by
/// the static front (lookups) and the engine (writes after store reads and refreshes,
/// invalidation on logout, ended grants and re-pointed logins).
public struct HotCache: Sendable {
    /// Which cache serves `token` hits, as `status --json` reports it.
    public enum State: String, Sendable {
        case kernelKeyring = "kernel-keyring"
        case none
    }

    /// Set to `1` to behave as if the kernel keyring were unavailable (tests of the fallback).
    public static let disableVariable = EnvironmentSwitches.disableKernelKeyring.description

    /// True when the test switch forces the Secret Service path.
    public let isDisabled: Bool

    public init(environment: Environment = .process) {
        isDisabled = environment[HotCache.disableVariable] == "1"
    }

    public var state: State {
        !isDisabled && KernelKeyring.isAvailable() ? .kernelKeyring : .none
    }

    /// The entry cached for exactly this identity; `nil` on a miss, an identity mismatch, a
    /// payload that does not decode, or an unusable keyring.
    public func lookup(profile: ProfileName, issuer: String, clientID: String, target: TokenTarget = .session)
        -> HotCacheEntry?
    {
        guard !isDisabled else { return nil }
        return HotCacheEntry.cachedInKernelKeyring(
            HotCacheEntry.keyDescription(profile: profile, issuer: issuer, clientID: clientID, target: target)
        )
        .flatMap { $0.entry.belongs(to: profile, issuer: issuer, clientID: clientID, target: target) ? $0.entry : nil }
    }

    /// Cache `entry` (`HotCacheEntry.storeInKernelKeyring`, which the front's forwarded miss
    /// shares), unless the test switch is set.
    ///
    /// - Returns: whether the key now holds `entry` (for `--verbose` and tests).
    @discardableResult
    public func store(_ entry: HotCacheEntry, now: Double) -> Bool {
        guard !isDisabled else { return false }
        return entry.storeInKernelKeyring(now: now)
    }

    /// Remove the key of this identity, whatever it holds. Done even under the test switch:
    /// a key written before the switch was set must not outlive a logout.
    public func invalidate(profile: ProfileName, issuer: String, clientID: String, target: TokenTarget = .session) {
        let description = HotCacheEntry.keyDescription(
            profile: profile, issuer: issuer, clientID: clientID, target: target)
        // Loop: a concurrent writer could link a new key between search and invalidate.
        for _ in 0..<4 {
            guard case .success(let key?) = KernelKeyring.search(description) else { return }
            _ = KernelKeyring.invalidate(key)
        }
    }

    /// Remove every key of this identity: its own token's and those of every target (logout, an
    /// ended session, a re-pointed login). Keys of the same profile name for another issuer or
    /// client (another configuration directory of the same user) are left alone.
    public func invalidateAll(profile: ProfileName, issuer: String, clientID: String) {
        for key in KernelKeyring.keys(withPrefix: HotCacheEntry.keyPrefix(profile: profile)) {
            guard case .success(var payload) = KernelKeyring.read(key, limit: HotCacheEntry.maximumPayloadSize) else {
                continue
            }
            defer { KernelKeyring.scrub(&payload) }
            guard let entry = try? HotCacheEntry.decode(payload), entry.profile == profile, entry.issuer == issuer,
                entry.clientID == clientID
            else { continue }
            _ = KernelKeyring.invalidate(key)
        }
    }
}
