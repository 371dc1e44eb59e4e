import TokenctlEssentials

/// Store everything a login produced in one locked, signal-deferred step. The server has
/// issued the session by now (an imported refresh token is spent), so nothing that holds the
/// new set is undone: it goes to the rotation journal, then to the Secret Service; then the
/// client secret and the profile are written. A step that still fails (all were proved
/// writable before the exchange) is reported with what was kept and what to run.
struct LoginPersist: LoginStep {
    let service: TokenctlService
    let tokenSet: TokenSet
    let configuration: ProfileConfiguration
    let profile: ProfileName
    /// The secret given now (one stored before stays where it is).
    let clientSecret: String?
    let previous: ProfileConfiguration?
    /// Whether the caller holds the profile lock already (the import, from its exchange on).
    let alreadyLocked: Bool
    /// Whether the rotation journal can hold the session (`LoginPreflight`).
    let journalUsable: Bool

    private var identity: SessionIdentity { SessionIdentity(profile: profile, configuration: configuration) }

    func persist() async throws(TokenctlError) {
        // The server has issued the session: if another process holds the profile lock past
        // the wait (a refresh of the old session stuck on its server), the new session is still
        // stored, without the lock: giving it up would spend the grant for nothing, and the
        // person asked for this session.
        var lock: (any HeldLock)?
        if !alreadyLocked {
            lock = try? await locks.acquire(profile, until: lockDeadline)
        }
        defer { withExtendedLifetime(lock) {} }
        // The writes get --timeout of their own from now: the person's wait and the lock's are over.
        let store = self.store.bounded(until: .after(retry.timeout, clock: clock))
        SignalDeferral.begin()
        defer { SignalDeferral.end() }
        let outcome = try storeSession(in: store)
        var secretError: StoreError?
        if let clientSecret {
            do { try store.writeClientSecret(clientSecret, for: identity) } catch { secretError = error }
        }
        var profileError: TokenctlError?
        do { try profiles.save(configuration, as: profile) } catch { profileError = error }
        hotCache?.forget(identity)
        hotCache?.remember(tokenSet, for: identity, now: clock.now())
        if profileError == nil { forgetStaleSession(in: store) }
        let pendingError = recordEvents(outcome)
        try reportFailures(profileError: profileError, secretError: secretError, pendingError: pendingError)
    }

    /// The token set to the rotation journal and the Secret Service.
    private func storeSession(in store: any SessionStore) throws(TokenctlError) -> PersistOutcome {
        do { return try store.persist(tokenSet, for: identity) } catch {
            // Only without a journal entry: the journal keeps whatever the Secret Service refuses.
            let why =
                journalUsable
                ? "the kernel keyring's rotation journal could not hold them either"
                : "there is no rotation journal here: the kernel keyring is unusable"
            throw TokenctlError(
                .storeUnavailable, "the server issued the session but it could not be saved: \(error.message)",
                hint:
                    "The tokens were not kept (\(why)) and the server may count the grant as used: log in again once the Secret Service works (see '\(tokenctl: .default, .doctor([]))')."
            )
        }
    }

    /// A profile re-pointed at another issuer or client leaves no stale item behind (unless
    /// the profile could not be re-pointed: it still uses that item).
    private func forgetStaleSession(in store: any SessionStore) {
        if let previous, SessionIdentity(profile: profile, configuration: previous) != identity {
            let stale = SessionIdentity(profile: profile, configuration: previous)
            _ = try? store.delete(stale)
            _ = try? store.deleteClientSecret(stale)
            hotCache?.forget(stale)
        }
    }

    /// `signedIn`, `dpopBound` for a bound session, and `storeUnavailable` for a write the
    /// journal holds. Returns that write's error.
    private func recordEvents(_ outcome: PersistOutcome) -> StoreError? {
        events?.append(
            EventRecord(
                time: clock.now(), event: .signedIn, profile: profile.rawValue, issuer: configuration.issuer.string,
                subject: tokenSet.subject))
        if let stored = tokenSet.dpopKey, tokenSet.tokenType == "DPoP", let key = try? DPoPKey(stored: stored) {
            events?.append(
                EventRecord(
                    time: clock.now(), event: .dpopBound, profile: profile.rawValue,
                    issuer: configuration.issuer.string, subject: tokenSet.subject,
                    reason: "jkt:" + key.thumbprint))
        }
        guard case .pending(let error) = outcome else { return nil }
        events?.append(
            EventRecord(
                time: clock.now(), event: .storeUnavailable, profile: profile.rawValue,
                issuer: configuration.issuer.string,
                subject: tokenSet.subject, reason: "write-pending:" + error.reason.rawValue))
        return error
    }

    /// Signed in, but a write after the session's failed: what was kept, and what to run.
    private func reportFailures(
        profileError: TokenctlError?, secretError: StoreError?, pendingError: StoreError?
    ) throws(TokenctlError) {
        let kept: Suggestion =
            pendingError == nil
            ? "The session is saved in the Secret Service"
            : "The session is held in memory only (the kernel keyring's rotation journal; a reboot or logout loses it) until the Secret Service takes it"
        if let profileError {
            let sameIdentity =
                previous.map { SessionIdentity(profile: profile, configuration: $0) == identity } ?? false
            let next: Suggestion =
                sameIdentity
                ? "; the profile keeps its previous settings, which find it. To save the new ones, make \(profiles.paths.profilesDirectory) writable and run '\(tokenctl: profile, .login([]))' again."
                : " (profile '\(profile)', issuer \(configuration.issuer), client \(configuration.clientID)), but no command finds it until the profile names them: make \(profiles.paths.profilesDirectory) writable, then run '\(tokenctl: profile, .login([.issuer(.word(configuration.issuer.string)), .clientID(.word(configuration.clientID))]))' again."
            throw TokenctlError(.configuration, "signed in, but \(profileError.message)", hint: kept + next)
        }
        if let secretError {
            throw TokenctlError(
                .storeUnavailable,
                "signed in, but the Secret Service could not save the client secret: \(secretError.message)",
                hint: kept
                    + ", but it cannot be refreshed without its client secret: once the Secret Service works (see '\(tokenctl: .default, .doctor([]))'), run '\(program: #"printf %s "$CLIENT_SECRET""#, into: SuggestedCommand(profile, .login([.clientSecretStdin])))'."
            )
        }
        if let pendingError {
            throw TokenctlError(
                .storeUnavailable,
                "signed in, but the Secret Service could not save the session: \(pendingError.message)",
                hint: Suggestion.sentences(
                    "\(kept); the profile is saved.", pendingError.hint.map { $0.replacingSessionKept() },
                    "Then run '\(tokenctl: profile, .status([]))': it writes the session to the Secret Service (as any tokenctl command does once it can) and shows it as pending until then."
                ))
        }
    }
}
