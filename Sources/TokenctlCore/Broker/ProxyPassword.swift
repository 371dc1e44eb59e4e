import TokenctlEssentials

extension TokenctlService {
    /// The proxy account of `profile`: its `proxy` and `proxy_user` keys (tokenctl.conf(5)).
    ///
    /// - Throws: 78 when the profile is not saved or names no proxy user.
    public func proxyAccount(of profile: ProfileName) throws(TokenctlError) -> ProxyAccount {
        let configuration = try profiles.require(profile)
        guard let account = configuration.network.proxyAccount else {
            let file = profiles.paths.profileFile(profile)
            throw TokenctlError(
                .configuration,
                configuration.proxy == nil
                    ? "profile '\(profile)' has no proxy ('proxy' in \(file))"
                    : "profile '\(profile)' names no proxy user ('proxy_user' in \(file))",
                hint:
                    "Add 'proxy = http://HOST:PORT' and 'proxy_user = NAME' to \(file) (tokenctl.conf(5)); the password then goes to the Secret Service, never into the file."
            )
        }
        return account
    }

    /// Store the password of `profile`'s proxy user in the Secret Service, replacing the one
    /// there; every profile naming the same proxy and user uses it. Nothing is sent.
    public func storeProxyPassword(_ password: String, of profile: ProfileName) throws(TokenctlError)
        -> ProxyAccount
    {
        let account = try proxyAccount(of: profile)
        let store = self.store.bounded(until: .after(retry.timeout, clock: clock))
        do { try store.writeProxyPassword(password, for: account) } catch { throw TokenctlError(error) }
        return account
    }

    /// Remove the stored password of `profile`'s proxy user.
    ///
    /// - Returns: the account, and whether a password was stored.
    public func removeProxyPassword(of profile: ProfileName) throws(TokenctlError) -> (ProxyAccount, Bool) {
        let account = try proxyAccount(of: profile)
        let store = self.store.bounded(until: .after(retry.timeout, clock: clock))
        do { return (account, try store.deleteProxyPassword(account)) } catch { throw TokenctlError(error) }
    }
}
