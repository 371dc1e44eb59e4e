import TokenctlEssentials

extension TokenctlService {
    /// Replace the stored secret of a confidential client whose session is alive, keeping the
    /// session: `login --client-secret-stdin` with no other login option, after a server
    /// refused the client (RFC 6749 §5.2 `invalid_client`: a rotated or expired secret). The
    /// grant was never the problem, so no new sign-in is asked for; the next refresh sends the
    /// new secret, and a server that refuses it too answers 78 again.
    ///
    /// Nothing is sent to the server. The secret is written under the profile lock, so that a
    /// refresh in flight finishes with the secret it read.
    ///
    /// - Returns: false when there is no session to keep: the profile is not saved, saves no
    ///   client authentication (a public client; a login with the secret makes it a confidential
    ///   one), or has no stored session with a refresh token; the caller then signs in as usual.
    /// - Throws: when the Secret Service cannot be read or written, or the lock not taken.
    public func replaceClientSecret(_ secret: String, of profile: ProfileName) async throws(TokenctlError) -> Bool {
        let store = self.store.bounded(until: .after(retry.timeout, clock: clock))
        guard let configuration = try? profiles.load(profile),
            configuration.tokenEndpointAuthMethod?.authenticates == true
        else {
            return false
        }
        let identity = SessionIdentity(profile: profile, configuration: configuration)
        let lock = try await locks.acquire(profile, until: lockDeadline)
        defer { withExtendedLifetime(lock) {} }
        do {
            guard let session = try store.read(identity), session.hasRefreshToken else { return false }
            try store.writeClientSecret(secret, for: identity)
        } catch {
            throw TokenctlError(error)
        }
        return true
    }
}
