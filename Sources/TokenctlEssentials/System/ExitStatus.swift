/// Process exit statuses, named after sysexits.h so cron jobs and scripts can branch on them.
public enum ExitStatus: Int32, Sendable, CaseIterable {
    /// Success.
    case success = 0
    /// An unexpected failure: a bug or an unclassified error.
    case failure = 1
    /// EX_USAGE: a bad command line.
    case usage = 64
    /// EX_UNAVAILABLE: the Secret Service cannot be used.
    case unavailable = 69
    /// EX_TEMPFAIL: a transient failure talking to the server; the session is kept.
    case temporaryFailure = 75
    /// EX_PROTOCOL: the server did not do its part of the protocol. `logout`: the session was
    /// removed here, but the server did not revoke its token (it refused, or could not be
    /// reached): the token may stay valid at the server. A refresh: the server's answer held an
    /// access token or a refresh token that cannot be used; the session is kept.
    case protocolError = 76
    /// EX_NOPERM: login required (no session, or the server ended it).
    case loginRequired = 77
    /// EX_CONFIG: the configuration is missing or invalid.
    case configuration = 78
    /// `exec`: the program was found but cannot be run (as a shell says).
    case commandNotRunnable = 126
    /// `exec`: the program was not found (as a shell says).
    case commandNotFound = 127

    /// The status a forwarded client exits with for the serving side's (a forward error answer):
    /// the statuses a token request documents pass through, any other is a failure (1).
    public static func passedOn(_ status: Int32) -> ExitStatus {
        switch ExitStatus(rawValue: status) {
        case let known?
        where [.usage, .configuration, .loginRequired, .unavailable, .temporaryFailure, .protocolError]
            .contains(known):
            known
        default: .failure
        }
    }

    /// The sysexits.h name, for documentation and diagnostics.
    public var name: String {
        switch self {
        case .success: "OK"
        case .failure: "FAILURE"
        case .usage: "EX_USAGE"
        case .unavailable: "EX_UNAVAILABLE"
        case .temporaryFailure: "EX_TEMPFAIL"
        case .protocolError: "EX_PROTOCOL"
        case .loginRequired: "EX_NOPERM"
        case .configuration: "EX_CONFIG"
        case .commandNotRunnable: "NOT_RUNNABLE"
        case .commandNotFound: "NOT_FOUND"
        }
    }
}
