import TokenctlEssentials

/// Everything a login writes, proved writable before anything goes to the token endpoint
/// (which spends an imported refresh token on a rotating server) or is approved by the user:
/// the profile (directories made, a probe file written and removed), the Secret Service (the
/// search a write begins with, in the collection it writes to: a service that answers the
/// session set-up and then hangs fails here), the profile lock's directory (for the flows that
/// take it only to store), and the rotation journal (a probe key). Every store call ends by
/// `deadline` (`--timeout` from the login's start).
///
/// The journal is not required: where the kernel keyring is unusable (a container's seccomp,
/// a full key quota) login goes on as it always has there, and a Secret Service write that
/// fails after the exchange then cannot keep the new session (the message says so). With it,
/// such a failure leaves the session pending in the journal.
struct LoginPreflight: LoginStep {
    let service: TokenctlService
    let identity: SessionIdentity
    /// Whether to try the profile lock (the interactive flows, which take it only to store).
    let takingTheLock: Bool
    /// When the store calls here must have ended.
    let deadline: Deadline

    /// - Returns: whether the rotation journal can hold the session if a write fails later.
    func check() async throws(TokenctlError) -> Bool {
        let store = self.store.bounded(until: deadline)
        let nothingSent: Suggestion = "Nothing was sent to the server."
        do { try profiles.checkWritable(identity.profile) } catch {
            throw TokenctlError(
                .configuration, error.message,
                hint:
                    "\(nothingSent) Make \(profiles.paths.profilesDirectory) a directory tokenctl can write (mode 0700), then log in again."
            )
        }
        do { try store.checkWritable(identity) } catch {
            throw TokenctlError(
                .storeUnavailable, error.message,
                hint: Suggestion.sentences(error.hint.map { $0.replacingSessionKept() }, nothingSent))
        }
        if takingTheLock {
            do { withExtendedLifetime(try await locks.acquire(identity.profile, until: lockDeadline)) {} } catch {
                throw TokenctlError(error.kind, error.message, hint: Suggestion.sentences(error.hint, nothingSent))
            }
        }
        return (store.secretServiceSide as? JournaledSessionStore)?.journal.canRecord() ?? false
    }
}
