import Synchronization

/// Where the HTTP client gets the password of a profile's `proxy_user`: the Secret Service,
/// asked once per process and account, and only when a request goes through the profile's
/// proxy (a `token` served from a cache asks nothing).
public final class ProxyPasswords: Sendable {
    private let lookup: @Sendable (ProxyAccount) throws(StoreError) -> String?
    private let known = Mutex<[ProxyAccount: String]>([:])

    public init(lookup: @escaping @Sendable (ProxyAccount) throws(StoreError) -> String?) {
        self.lookup = lookup
    }

    /// The password of `account`, or nil when none is stored.
    public func password(_ account: ProxyAccount) throws(StoreError) -> String? {
        if let password = known.withLock({ $0[account] }) { return password }
        guard let password = try lookup(account) else { return nil }
        known.withLock { $0[account] = password }
        return password
    }
}
