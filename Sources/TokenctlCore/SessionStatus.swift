import TokenctlEssentials

/// What `tokenctl status` reports for one profile. Never holds a token.
public struct SessionStatus: Sendable, Equatable {
    public enum State: String, Sendable, Equatable, CaseIterable {
        /// An access token is valid now.
        case authenticated
        /// The access token has expired but a refresh token is held: the next `token` refreshes.
        case expiredRefreshable = "expired-refreshable"
        /// No session is stored for this profile's issuer and client.
        case signedOut = "signed-out"
        /// The server ended the session (a terminal refresh failure); log in again.
        case ended
        /// The Secret Service could not be read.
        case storeUnavailable = "store-unavailable"
    }

    public var profile: ProfileName
    public var issuer: String
    public var clientID: String
    public var state: State
    public var subject: String?
    public var scope: String?
    /// Identity claims of the ID token (or of a JWT access token), as shown: never a token.
    public var claims: [(name: String, value: JSONValue)] = []
    /// Which token the claims come from: "id_token" or "access_token".
    public var claimsSource: String?
    /// "jwt" or "opaque".
    public var accessTokenFormat: String?
    /// Seconds of access-token validity left (negative once expired), skew-corrected.
    public var accessTokenTimeLeft: Double?
    public var hasRefreshToken: Bool
    public var obtainedAt: Double?
    public var lastRefreshAt: Double?
    /// Why the server ended the session (state `ended`).
    public var endedReason: String?
    /// The store problem, when `state` is `storeUnavailable`.
    public var storeProblem: String?
    /// Where sessions live.
    public var store = "secret-service"
    /// Which cache serves `token` hits: `kernel-keyring`, or `none` (the Secret Service every time).
    public var cache: String = "none"

    public static func == (lhs: SessionStatus, rhs: SessionStatus) -> Bool {
        lhs.profile == rhs.profile && lhs.issuer == rhs.issuer && lhs.clientID == rhs.clientID && lhs.state == rhs.state
            && lhs.subject == rhs.subject && lhs.obtainedAt == rhs.obtainedAt && lhs.hasRefreshToken == rhs.hasRefreshToken
            && lhs.endedReason == rhs.endedReason && lhs.storeProblem == rhs.storeProblem
    }

    public var exitStatus: ExitStatus {
        switch state {
        case .authenticated, .expiredRefreshable: .success
        case .signedOut, .ended: .loginRequired
        case .storeUnavailable: .unavailable
        }
    }

    /// The claims `status` shows, in this order, when present.
    public static let shownClaims = ["sub", "sid", "iss", "aud", "azp", "org_id", "role", "roles", "permissions", "email", "name"]
}

extension TokenctlService {
    /// The state of one profile's session, from the keyring (and the event log for `ended`).
    public func status(_ name: ProfileName) throws(TokenctlError) -> SessionStatus {
        let configuration = try profiles.require(name)
        let identity = SessionIdentity(profile: name, configuration: configuration)
        var status = SessionStatus(
            profile: name, issuer: configuration.issuer.string, clientID: configuration.clientID, state: .signedOut,
            hasRefreshToken: false)
        status.cache = (hotCache?.state ?? .none).rawValue
        let stored: TokenSet?
        do { stored = try store.read(identity) } catch {
            status.state = .storeUnavailable
            status.storeProblem = error.message + (error.hint.map { " " + $0 } ?? "")
            return status
        }
        guard let stored else {
            // Signed out, or ended by the server: the log says which happened last.
            let last = events?.records(minimumSignificance: .high, profile: name.rawValue)
                .last { $0.issuer == configuration.issuer.string }
            if let last, last.event == .sessionEnded {
                status.state = .ended
                status.endedReason = last.reason
                status.subject = last.subject
            }
            return status
        }
        let now = clock.now()
        status.subject = stored.subject
        status.scope = stored.scope
        status.accessTokenTimeLeft = stored.timeLeft(at: now)
        status.hasRefreshToken = stored.hasRefreshToken
        status.obtainedAt = stored.obtainedAt
        status.lastRefreshAt = stored.lastRefreshAt
        let accessClaims = UnverifiedJWT.claims(of: stored.accessToken)
        status.accessTokenFormat = accessClaims == nil ? "opaque" : "jwt"
        if let idClaims = stored.idToken.flatMap(UnverifiedJWT.claims(of:)) {
            status.claimsSource = "id_token"
            status.claims = Self.shown(idClaims)
        } else if let accessClaims {
            status.claimsSource = "access_token"
            status.claims = Self.shown(accessClaims)
        }
        if stored.timeLeft(at: now) > 0 {
            status.state = .authenticated
        } else {
            status.state = stored.hasRefreshToken ? .expiredRefreshable : .signedOut
        }
        return status
    }

    static func shown(_ claims: [String: JSONValue]) -> [(name: String, value: JSONValue)] {
        SessionStatus.shownClaims.compactMap { name in claims[name].map { (name, $0) } }
    }

    /// The profile's state now, then again each time it changes: after a login, refresh or
    /// logout by any process (woken by the event log), and when the access token expires
    /// (woken by a timer). The keyring is read only when one of those happens.
    public func watch(_ name: ProfileName, pollInterval: Double = 0.2) -> AsyncStream<SessionStatus> {
        AsyncStream { continuation in
            let task = Task {
                var last: SessionStatus?
                var fingerprint = events?.fingerprint()
                var wakeAt: Double?
                while !Task.isCancelled {
                    let current: SessionStatus
                    do { current = try status(name) } catch {
                        continuation.finish()
                        return
                    }
                    if current != last {
                        continuation.yield(current)
                        last = current
                    }
                    wakeAt = current.state == .authenticated ? current.accessTokenTimeLeft.map { clock.now() + $0 + 0.05 } : nil
                    // Sleep until the log changes or the token expires.
                    while !Task.isCancelled {
                        try? await clock.sleep(pollInterval)
                        let now = events?.fingerprint()
                        if now?.size != fingerprint?.size || now?.inode != fingerprint?.inode {
                            fingerprint = now
                            break
                        }
                        if let wakeAt, clock.now() >= wakeAt { break }
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
