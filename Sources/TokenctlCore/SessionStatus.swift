import TokenctlEssentials

/// What `tokenctl status` reports for one profile. Never holds a token.
public struct SessionStatus: Sendable, Equatable {
    public enum State: String, Sendable, Equatable {
        /// An access token is valid now.
        case authenticated
        /// The access token has expired but a refresh token is held: the next `token` refreshes.
        case expiredRefreshable = "expired-refreshable"
        /// No session is stored for this profile's issuer and client.
        case signedOut = "signed-out"
        /// The Secret Service could not be read.
        case storeUnavailable = "store-unavailable"
    }

    public var profile: ProfileName
    public var issuer: String
    public var clientID: String
    public var state: State
    public var subject: String?
    public var scope: String?
    /// Seconds of access-token validity left (negative once expired).
    public var accessTokenTimeLeft: Double?
    public var hasRefreshToken: Bool
    public var obtainedAt: Double?
    public var lastRefreshAt: Double?
    /// The store problem, when `state` is `storeUnavailable`.
    public var storeProblem: String?
    /// Which cache serves `token` hits: `kernel-keyring`, or `none` (the Secret Service every time).
    public var cache: String = "none"

    public var exitStatus: ExitStatus {
        switch state {
        case .authenticated, .expiredRefreshable: .success
        case .signedOut: .loginRequired
        case .storeUnavailable: .unavailable
        }
    }
}
