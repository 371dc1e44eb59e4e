import TokenctlEssentials

/// An error the core reports to the user: the exit status it maps to, a message that
/// never contains a secret, and what to do about it.
public struct TokenctlError: Error, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// A bad value supplied by the user (stdin, option values): EX_USAGE.
        case invalidInput
        /// Configuration missing or invalid: EX_CONFIG.
        case configuration
        /// Login required: no session, or the server ended it: EX_NOPERM.
        case loginRequired
        /// The Secret Service cannot be used: EX_UNAVAILABLE.
        case storeUnavailable
        /// Another system service tokenctl needs (systemd, cron) cannot be used: EX_UNAVAILABLE.
        case serviceUnavailable
        /// A transient failure talking to the server; the session is kept: EX_TEMPFAIL.
        case transient
        /// The server answered against the protocol (a refresh answer with an unusable access
        /// or refresh token); what could be kept of the session was kept: EX_PROTOCOL.
        case protocolError
        /// Anything else: exit 1.
        case unexpected
    }

    public var kind: Kind
    public var message: String
    public var hint: Suggestion?

    public init(_ kind: Kind, _ message: String, hint: Suggestion? = nil) {
        self.kind = kind
        self.message = message
        self.hint = hint
    }

    public var exitStatus: ExitStatus {
        switch kind {
        case .invalidInput: .usage
        case .configuration: .configuration
        case .loginRequired: .loginRequired
        case .storeUnavailable, .serviceUnavailable: .unavailable
        case .transient: .temporaryFailure
        case .protocolError: .protocolError
        case .unexpected: .failure
        }
    }

    public var description: String { message }
}

extension TokenctlError {
    init(_ error: StoreError) {
        // Running out of --timeout is this command's transient failure, not the store's.
        self.init(error.reason == .deadline ? .transient : .storeUnavailable, error.message, hint: error.hint)
    }

    init(_ error: ConfigurationError) {
        self.init(.configuration, error.description)
    }
}
