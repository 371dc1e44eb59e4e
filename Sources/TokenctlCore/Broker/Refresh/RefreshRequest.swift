import TokenctlEssentials

/// A refresh ready to send (RFC 6749 §6): the refresh token, the client with the session's
/// credentials, and the DPoP key its proof is signed with.
struct RefreshRequest {
    var refreshToken: String
    var client: TokenEndpointClient
    var credentials: ClientCredentials
    /// The key a DPoP session signs its refresh with (RFC 9449 §5); nil for a Bearer session.
    var dpopKey: DPoPKey?
}

extension TokenBroker {
    /// Take the profile lock for a refresh, within the command's deadline; a wait that runs out
    /// is recorded (`refreshFailed`, lock-timeout) and thrown.
    func takeRefreshLock(_ profile: ResolvedProfile, snapshot: TokenSet?) async throws(TokenctlError)
        -> any HeldLock
    {
        let lock: any HeldLock
        let waitStarted = clock.now()
        do { lock = try await locks.acquire(profile.name, until: configuration.lockDeadline()) } catch {
            if error.kind == .transient {
                record(
                    .refreshFailed, profile, subject: snapshot?.subject,
                    reason: TransientReason.lockHeldTooLong.className)
            }
            throw error
        }
        narrate?("took the profile lock of '\(profile.name)' after \(Self.seconds(clock.now() - waitStarted))")
        return lock
    }

    /// The session, read again under the lock: values read before it are snapshots.
    func sessionUnderLock(_ profile: ResolvedProfile, target: TokenTarget) async throws(TokenctlError) -> TokenSet {
        guard let current = try await readSession(profile.identity) else { throw Self.notLoggedIn(profile.name) }
        narrate?(
            store.pendingWrite(profile.identity) != nil
                ? "read the session of '\(profile.name)' from the rotation journal in the kernel keyring under the lock (its Secret Service write is pending)"
                : "read the session of '\(profile.name)' from the Secret Service under the lock")
        try Self.checkScopes(target, within: current, profile.name)
        return current
    }

    /// The target's token in `current` when no request is needed: another process refreshed
    /// it meanwhile (it differs from `snapshot`), or, unforced, it is still fresh; served (and
    /// handed to `didServe`). Nil when a refresh is due.
    func servedWithoutRequest(
        _ current: TokenSet, _ profile: ResolvedProfile, target: TokenTarget, snapshot: TokenSet?,
        minimumTimeToLive: Double, force: Bool, capMargin: Bool
    ) -> TokenSet? {
        guard let served = current.served(for: target) else { return nil }
        // Without a snapshot there is nothing to compare: a forced refresh refreshes. A
        // snapshot from the hot cache keeps its time to the millisecond.
        let rotatedElsewhere =
            snapshot.map {
                served.accessToken != $0.accessToken || abs(served.obtainedAt - $0.obtainedAt) > 0.002
            } ?? false
        guard
            (rotatedElsewhere || !force)
                && served.isFresh(at: clock.now(), minimumTimeToLive: minimumTimeToLive, capped: capMargin)
        else { return nil }
        narrate?("another process refreshed '\(profile.name)' meanwhile: serving its token, no request sent")
        didServe?(served, profile.identity, target)
        return served
    }

    /// The request for refreshing `current`: its refresh token (none, or one the server said
    /// has expired, ends here with nothing sent), the client's credentials, and the DPoP key.
    func refreshRequest(for current: TokenSet, _ profile: ResolvedProfile, force: Bool) async throws(TokenctlError)
        -> RefreshRequest
    {
        guard let refreshToken = current.refreshToken else {
            throw noRefreshToken(profile, current: current, force: force)
        }
        if let end = current.refreshTokenExpiresAt, clock.now() >= end {
            // The server said when the refresh token dies (GitHub App tokens, about six months):
            // a request now can only be refused. The session stays for `status` to show.
            narrate?("the refresh token of '\(profile.name)' expired by the server's own statement: no request sent")
            throw TokenctlError(
                .loginRequired,
                "the refresh token of profile '\(profile.name)' has expired (the server stated its lifetime): re-login needed",
                hint: "Run '\(tokenctl: profile.name, .login([]))' to sign in again. Nothing was sent to the server.")
        }
        let credentials = try await clientCredentials(for: profile, serverClockOffset: current.serverClockOffset)
        var client = endpointClient(profile)
        client.narrate = narrate
        // Never in a message: what the session holds besides the refresh token the request carries.
        client.knownSecrets =
            [current.accessToken, current.idToken, current.dpopKey, credentials.secret]
            + current.targetedTokens.map { Optional($0.accessToken) }
        // A DPoP session signs its refresh with its key (RFC 9449 §5): the refresh token is bound to it.
        let dpopKey = try current.dpopSigningKey(of: profile.name, checked: true)
        if let dpopKey {
            client.http = DPoPHTTPClient(
                client.http, key: dpopKey, issuer: profile.configuration.issuer.string,
                endpoints: [profile.tokenEndpoint], clock: clock,
                serverClockOffset: current.serverClockOffset, issuerState: dpopState)
        }
        return RefreshRequest(refreshToken: refreshToken, client: client, credentials: credentials, dpopKey: dpopKey)
    }

    /// Send `request` for `target` (counted in `refreshRequestCount`), retrying transient
    /// failures inside the deadline (`TokenEndpointClient`).
    /// - Throws: a request that cannot be made (a client assertion that cannot be signed):
    ///   nothing was sent.
    func sendRefresh(_ request: RefreshRequest, _ profile: ResolvedProfile, target: TokenTarget)
        async throws(TokenctlError) -> (RefreshOutcome, receivedAt: Double)
    {
        refreshRequestCount += 1
        return try await request.client.refresh(
            refreshToken: request.refreshToken, endpoint: profile.tokenEndpoint,
            clientID: profile.configuration.clientID, scope: target.scopeField, audience: target.audience,
            resources: target.resources, credentials: request.credentials)
    }

    /// The client's credentials at the token endpoint: a public client's id, or a confidential
    /// one's secret (from the Secret Service), its assertion signer (the secret, or the
    /// profile's key: `clientKey`), or its certificate's method.
    ///
    /// - Parameter serverClockOffset: the server's clock (`TokenSet.serverClockOffset`), for an
    ///   assertion's times.
    func clientCredentials(for profile: ResolvedProfile, serverClockOffset: Double? = nil)
        async throws(TokenctlError) -> ClientCredentials
    {
        let configuration = profile.configuration
        guard let method = configuration.tokenEndpointAuthMethod, method.authenticates else {
            return ClientCredentials(clientID: configuration.clientID, method: configuration.tokenEndpointAuthMethod)
        }
        var credentials = ClientCredentials(clientID: configuration.clientID, method: method)
        if let path = configuration.clientAssertionFile {
            // A federated client assertion: no secret or key of ours signs it.
            credentials.federatedAssertion = ClientCredentials.FederatedAssertion(
                path: path, serverClockOffset: serverClockOffset, clock: clock)
            return credentials
        }
        let audience = configuration.assertionAudience ?? profile.tokenEndpoint
        if method.usesSecret {
            let secret = try await clientSecret(profile, method: method)
            credentials = ClientCredentials(clientID: configuration.clientID, secret: secret, method: method)
            if method == .clientSecretJWT {
                credentials.assertion = ClientCredentials.AssertionSigning(
                    signer: ClientSecretSigner(secret: secret), audience: audience, serverAlgorithms: nil,
                    serverClockOffset: serverClockOffset, clock: clock)
            }
            return credentials
        }
        let key = try await requiredClientKey(profile, method: method)
        if method == .privateKeyJWT {
            credentials.assertion = ClientCredentials.AssertionSigning(
                signer: key, audience: audience, serverAlgorithms: nil, serverClockOffset: serverClockOffset,
                clock: clock)
        }
        if method.usesCertificate { credentials.certificate = key.certificate }
        return credentials
    }

    /// The client secret a secret method needs, from the Secret Service.
    private func clientSecret(_ profile: ResolvedProfile, method: ClientAuthenticationMethod)
        async throws(TokenctlError) -> String
    {
        let (store, identity) = (self.store, profile.identity)
        let secret: String?
        do {
            secret = try await BlockingCall.run({ () throws(StoreError) -> String? in
                try store.readClientSecret(identity)
            })
        } catch { throw TokenctlError(error) }
        guard let secret else {
            throw TokenctlError(
                .configuration, "profile '\(profile.name)' uses \(method.rawValue) but no client secret is stored",
                hint:
                    "Run '\(tokenctl: profile.name, .login([.clientSecretStdin]))' and give the secret on standard input."
            )
        }
        return secret
    }

    /// The profile's client key a key or certificate method needs (`clientKey`).
    func requiredClientKey(_ profile: ResolvedProfile, method: ClientAuthenticationMethod)
        async throws(TokenctlError) -> ClientKey
    {
        let name = profile.name
        let lookup = clientKey
        let key = try await BlockingCall.run({ () throws(TokenctlError) -> ClientKey? in try lookup?(name) })
        guard let key else {
            throw TokenctlError(
                .configuration, "profile '\(name)' uses \(method.rawValue) but has no client key",
                hint:
                    "Make one with '\(tokenctl: name, .key(.create, []))' and register what '\(tokenctl: name, .key(.show, []))' prints with the client at \(profile.configuration.issuer)."
            )
        }
        if method.usesCertificate {
            guard let certificate = key.certificate else {
                throw TokenctlError(
                    .configuration, "profile '\(name)' uses \(method.rawValue) but its client key has no certificate",
                    hint:
                        "Make one with '\(tokenctl: name, .key(.create, [.certificate]))', or import the certificate the CA issued."
                )
            }
            try ClientCredentialsGrant.checkUsable(certificate, profile: name, now: clock.now())
        }
        return key
    }

    /// Why a session without a refresh token cannot give what was asked (exit 77). The stored
    /// session is left as it was, whatever was asked: only a server's verdict on a grant ends a
    /// session (RFC 6749 §5.2), and a forced refresh is no verdict (nor a remote client's
    /// `force`). Such a session's token is served until its stated expiry, or for good when the
    /// server stated none (GitHub OAuth App tokens never expire on their own).
    private func noRefreshToken(_ profile: ResolvedProfile, current: TokenSet, force: Bool) -> TokenctlError {
        let now = clock.now()
        if force && current.timeLeft(at: now) > 0 {
            narrate?(
                "--force: '\(profile.name)' has no refresh token, so no new access token can be had; the session is left as it was"
            )
            return TokenctlError(
                .loginRequired,
                "profile '\(profile.name)' has no refresh token (the server issued none), so a forced refresh cannot get a new access token; the stored session is kept as it was",
                hint:
                    "If a server rejected the access token, sign in again: '\(tokenctl: profile.name, .login([]))'. Without \(options: .token([.force])), '\(tokenctl: profile.name, .token([]))' still serves the stored one."
            )
        }
        if current.timeLeft(at: now) > 0 {
            return TokenctlError(
                .loginRequired,
                "profile '\(profile.name)' has no refresh token (the server issued none), so its access token cannot be renewed; it stays in use until the server rejects it",
                hint: "For a new access token, sign in again: '\(tokenctl: profile.name, .login([]))'.")
        }
        return TokenctlError(
            .loginRequired,
            "the access token of profile '\(profile.name)' has expired and the server issued no refresh token",
            hint: "Run '\(tokenctl: profile.name, .login([]))' again.")
    }
}
