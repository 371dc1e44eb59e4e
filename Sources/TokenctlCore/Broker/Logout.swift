import TokenctlEssentials

extension TokenctlService {
    public struct LogoutReport: Sendable {
        public var profile: ProfileName
        /// Whether a stored session was removed.
        public var removed: Bool
        /// `nil`: not attempted (no endpoint, --no-revoke, nothing stored). Otherwise the revocation result.
        public var revocation: Result<Void, TokenctlError>?
        /// Which token the revocation was about: `refresh_token`, or `access_token` when the
        /// server issued no refresh token.
        public var revokedTokenType = "refresh_token"
        /// When the token that was not revoked expires, if known (an access token's expiry;
        /// servers do not say when a refresh token expires).
        public var unrevokedTokenExpiresAt: Double?
        /// With `forget`: whether the profile's file was removed.
        public var forgotten = false
        /// What stays valid at the server because its provider cannot revoke it here, and
        /// where to end it (GitHub without the app's secret, Entra).
        public var serverNotice: String?
        /// The server said the token was already gone (Google's 400 `invalid_token`).
        public var alreadyRevoked = false
    }
}

/// `logout` (`TokenctlService.logout`): under the profile lock, revoke the session's token
/// when asked (`TokenctlService.revoke(_:_:secret:)`), remove the session's item, record what
/// happened, and with `forget` the profile too.
struct Logout {
    let service: TokenctlService

    /// See `TokenctlService.logout`.
    func run(_ name: ProfileName, revoke: Bool, forget: Bool) async throws(TokenctlError)
        -> TokenctlService.LogoutReport
    {
        let configuration: ProfileConfiguration
        do { configuration = try service.profiles.require(name) } catch {
            if forget, error.kind == .configuration, try service.profiles.remove(name) {
                return TokenctlService.LogoutReport(profile: name, removed: false, revocation: nil, forgotten: true)
            }
            throw error
        }
        let identity = SessionIdentity(profile: name, configuration: configuration)
        // A token kept in the kernel keyring only (a TPM key's machine profile) is read before
        // the forget below drops it: it is what is revoked and reported removed.
        var kernelOnly: TokenSet?
        if service.store.tokensInKernelKeyringOnly(name) { kernelOnly = try? service.store.read(identity) }
        // First, whatever else fails: no cached access token outlives a logout.
        service.hotCache?.forget(identity)
        let lock = try await service.locks.acquire(name, until: service.lockDeadline)
        defer { withExtendedLifetime(lock) {} }
        let stored = kernelOnly != nil ? kernelOnly : try readSession(identity)
        let secret =
            configuration.tokenEndpointAuthMethod?.authenticates == true
            ? try? service.store.readClientSecret(identity) : nil
        var revocation = TokenctlService.RevocationAttempt()
        if revoke, let stored {
            revocation = await service.revoke(stored, configuration, secret: secret, profile: name)
        }
        let removed: Bool
        do { removed = try service.store.delete(identity) || kernelOnly != nil } catch { throw TokenctlError(error) }
        // Again after the delete: a `token` racing the logout may have cached meanwhile.
        service.hotCache?.forget(identity)
        var report = Self.report(name, removed: removed, revocation, configuration: configuration, stored: stored)
        record(revocation, removed: removed, identity, stored: stored)
        if forget { report.forgotten = try forgetProfile(name, configuration: configuration, identity) }
        return report
    }

    /// The stored session; an unreadable item (nil) can still be removed, but nothing can be
    /// while the store cannot be read (locked, no bus).
    private func readSession(_ identity: SessionIdentity) throws(TokenctlError) -> TokenSet? {
        do { return try service.store.read(identity) } catch {
            guard error.reason == .corruptItem else { throw TokenctlError(error) }
            return nil
        }
    }

    /// The report of a logout that removed the session (`removed`) after `revocation`.
    private static func report(
        _ name: ProfileName, removed: Bool, _ revocation: TokenctlService.RevocationAttempt,
        configuration: ProfileConfiguration, stored: TokenSet?
    ) -> TokenctlService.LogoutReport {
        var report = TokenctlService.LogoutReport(
            profile: name, removed: removed, revocation: revocation.result.map { $0.mapError(\.error) })
        report.serverNotice = revocation.serverNotice
        report.alreadyRevoked = revocation.alreadyRevoked
        if case .gitHubApplicationToken = configuration.preset?.revocation ?? .standard {
            report.revokedTokenType = "access_token" // GitHub revokes the app's token, the grant with it
        } else if stored?.refreshToken == nil {
            report.revokedTokenType = "access_token"
        }
        if case .failure? = revocation.result, stored?.refreshToken == nil {
            report.revokedTokenType = "access_token"
            report.unrevokedTokenExpiresAt = stored?.expiresAt
        }
        return report
    }

    /// The events of a logout: the revocation's outcome, then the sign-out.
    private func record(
        _ revocation: TokenctlService.RevocationAttempt, removed: Bool, _ identity: SessionIdentity,
        stored: TokenSet?
    ) {
        let (events, now) = (service.events, service.clock.now)
        func append(_ event: SessionEvent, reason: String? = nil) {
            events?.append(
                EventRecord(
                    time: now(), event: event, profile: identity.profile.rawValue, issuer: identity.issuer,
                    subject: stored?.subject, reason: reason))
        }
        switch revocation.result {
        case .success?: append(.sessionRevoked)
        case .failure(let failure)?: append(.revocationFailed, reason: failure.reason)
        case nil: break
        }
        if removed { append(.signedOut) }
    }

    /// `--forget`: the profile's client secret item and file, and the issuer's discovery, JWKS
    /// and DPoP nonce caches unless another profile uses the same issuer.
    ///
    /// - Returns: whether the profile's file was removed.
    private func forgetProfile(_ name: ProfileName, configuration: ProfileConfiguration, _ identity: SessionIdentity)
        throws(TokenctlError) -> Bool
    {
        let profiles = service.profiles
        _ = try? service.store.deleteClientSecret(identity)
        let forgotten = try profiles.remove(name)
        let others = ((try? profiles.all()) ?? []).compactMap { try? profiles.load($0) }
        if !others.contains(where: { $0.issuer == configuration.issuer }) {
            DiscoveryCache(directory: profiles.paths.discoveryCacheDirectory, clock: service.clock).remove(
                configuration.issuer)
            service.jwksCache.remove(configuration.issuer.string)
            service.dpopState.persisted?.remove(configuration.issuer.string)
        }
        return forgotten
    }
}
