import TokenctlEssentials

extension TokenctlService {
    /// The outcome of refreshing one profile (for `refresh --all`).
    public struct RefreshReport: Sendable {
        public var profile: ProfileName
        public var result: Result<TokenSet, TokenctlError>
        /// True when the profile was not due and was left alone.
        public var skipped: Bool
        /// True when the profile has no session because the user logged it out (`refresh
        /// --all` reports it and goes on; a session the server ended still fails).
        public var signedOutByUser = false
    }
}

/// `refresh` and `refresh --all` (`TokenctlService.refresh`, `refreshAll`): each profile
/// through the broker, single-flight, `TokenctlService.refreshAllConcurrency` at a time.
struct ProfileRefresh: Sendable {
    let service: TokenctlService

    /// See `TokenctlService.refresh`.
    func refresh(_ name: ProfileName, ifExpiringWithin window: Double?) async -> TokenctlService.RefreshReport {
        let (broker, serving) = (service.broker, TokenServing(service: service))
        do {
            let profile = try service.resolve(name)
            if let window {
                let started = service.clock.now()
                let tokenSet = try await serving.forgettingEndedSession(profile.identity) {
                    () async throws(TokenctlError) -> TokenSet in
                    try await broker.validTokenSet(
                        for: profile, minimumTimeToLive: window, force: false, capMargin: false)
                }
                // Refreshed by this call (or by another process while we waited for the lock).
                let refreshed = tokenSet.obtainedAt >= started
                return TokenctlService.RefreshReport(profile: name, result: .success(tokenSet), skipped: !refreshed)
            }
            let tokenSet = try await serving.forgettingEndedSession(profile.identity) {
                () async throws(TokenctlError) -> TokenSet in
                try await broker.validTokenSet(for: profile, minimumTimeToLive: 0, force: true, readFirst: false)
            }
            return TokenctlService.RefreshReport(profile: name, result: .success(tokenSet), skipped: false)
        } catch {
            return TokenctlService.RefreshReport(profile: name, result: .failure(error), skipped: false)
        }
    }

    /// See `TokenctlService.refreshAll`.
    func refreshAll(ifExpiringWithin window: Double?) async throws(TokenctlError) -> [TokenctlService.RefreshReport] {
        let names = try service.profiles.all().sorted()
        return await BoundedConcurrency.map(names, limit: TokenctlService.refreshAllConcurrency) { name in
            var report = await self.refresh(name, ifExpiringWithin: window)
            if case .failure(let error) = report.result, error.kind == .loginRequired, self.wasSignedOutByUser(name) {
                report.signedOutByUser = true
            }
            return report
        }
    }

    /// Whether the profile has no session because its last sign-out was the user's own
    /// `logout` (the event log says so), rather than the server ending it or a lost item.
    func wasSignedOutByUser(_ name: ProfileName) -> Bool {
        guard let configuration = try? service.profiles.load(name),
            (try? service.store.read(SessionIdentity(profile: name, configuration: configuration))) == .some(nil),
            let last = service.events?.records(minimumSignificance: .high, profile: name.rawValue).last(where: {
                $0.issuer == configuration.issuer.string
            })
        else { return false }
        return last.event == .signedOut || last.event == .revocationFailed
    }
}
