import TokenctlEssentials

/// The client side of the forward in the engine: a profile's access token from the socket
/// (`TOKENCTL_FORWARD_SOCKET`, or the well-known remote path) instead of a local session, kept
/// in this machine's hot cache under an identity of the socket's (so the front's next `token`
/// is a hit, and two sockets never share an entry).
public struct ForwardedSession: Sendable {
    public let socketPath: String
    public let hotCache: HotCache?
    public let clock: Clock

    public init(socketPath: String, hotCache: HotCache? = HotCache(), clock: Clock = .system) {
        self.socketPath = socketPath
        self.hotCache = hotCache
        self.clock = clock
    }

    /// The hot-cache identity of tokens from this socket as it is bound now (the front builds
    /// the same): nil when no socket file is there. A socket bound anew (another `ssh -R`,
    /// another listener: maybe another serving host) has another, so it never serves what the
    /// previous one handed out.
    public var issuer: String? {
        ForwardClient.socketFileIdentity(of: socketPath).map {
            ForwardClient.cacheIssuer(socketPath: socketPath, identity: $0)
        }
    }
    public static let clientID = ForwardClient.cacheClientID

    /// A token from the serving side (or the hot cache), and what the serving side said.
    public struct Served: Sendable {
        public var tokenSet: TokenSet
        public var fromHotCache: Bool
        /// The serving host's name, when this call asked it.
        public var servedBy: String?
        /// The serving session's identity (`ForwardedToken.sessionIdentity`), when it said.
        public var servingSession: String?
        public var dpopProof: String?
        /// The serving profile's `git_username`, when this call asked the serving side.
        public var gitUsername: String?
    }

    /// A DPoP proof to ask the serving side for.
    public struct ProofRequest: Sendable {
        public var method: String
        public var url: String
        public var nonce: String?
        public init(method: String, url: String, nonce: String?) {
            self.method = method
            self.url = url
            self.nonce = nonce
        }
    }

    public func token(
        _ profile: ProfileName, target: TokenTarget, minimumTimeToLive: Double, force: Bool,
        proof: ProofRequest? = nil, command: String, timeout: Double, consultHotCache: Bool = true
    ) throws(TokenctlError) -> Served {
        guard
            let served = try token(
                profile, target: target, minimumTimeToLive: minimumTimeToLive, force: force, proof: proof,
                command: command, timeout: timeout, consultHotCache: consultHotCache, fallBackWhenNotServed: false)
        else { throw TokenctlError(.unexpected, "no answer from the forward socket") }
        return served
    }

    /// `token(…)`, or nil when `fallBackWhenNotServed` and nothing serves the socket (a
    /// well-known path left behind by an ended `ssh -R`): then the caller uses the local session.
    public func token(
        _ profile: ProfileName, target: TokenTarget, minimumTimeToLive: Double, force: Bool,
        proof: ProofRequest? = nil, command: String, timeout: Double, consultHotCache: Bool = true,
        fallBackWhenNotServed: Bool
    ) throws(TokenctlError) -> Served? {
        let now = clock.now()
        // The socket as it is bound now, and only while something serves it: a cached token is
        // never served from a socket file nothing serves (an ended `ssh -R`, a stopped listener),
        // which the exchange below then reports or passes over.
        let issuer = self.issuer
        if !force, proof == nil, consultHotCache, let hotCache, let issuer,
            ForwardClient.liveness(of: socketPath) == .served,
            let entry = hotCache.lookup(profile: profile, issuer: issuer, clientID: Self.clientID, target: target),
            entry.isFresh(at: now, minimumTimeToLive: minimumTimeToLive)
        {
            return Served(tokenSet: TokenSet(cached: entry), fromHotCache: true)
        }
        var request = ForwardRequest(profile: profile.rawValue)
        if !target.scopes.isEmpty { request.scope = target.scopes.joined(separator: " ") }
        request.audience = target.audience
        if !target.resources.isEmpty { request.resource = target.resources.joined(separator: " ") }
        request.minimumTimeToLive = Int(saturating: minimumTimeToLive.rounded(.up))
        request.force = force
        if force, let hotCache, let issuer,
            let handedOut = hotCache.lookup(profile: profile, issuer: issuer, clientID: Self.clientID, target: target)
        {
            // The token this client holds, which its server rejected: the serving side refreshes
            // only if it is still the current one (else it answers with the newer token).
            request.tokenFingerprint = ForwardServer.fingerprint(handedOut.accessToken)
        }
        request.proofMethod = proof?.method
        request.proofURL = proof?.url
        request.proofNonce = proof?.nonce
        request.command = command
        switch ForwardClient.exchange(request, socketPath: socketPath, timeout: timeout) {
        case .failure(let failure):
            if failure.notServed || failure.foreign, fallBackWhenNotServed { return nil }
            throw TokenctlError(
                Self.kind(failure.status.rawValue), failure.message, hint: failure.hint.map { Suggestion($0) })
        case .success(.failure(let failure)):
            let host = failure.servedBy ?? "the serving side"
            throw TokenctlError(
                Self.kind(failure.status), "\(host) (forwarded): \(failure.message)",
                hint: failure.hint.map { "(on \(host)) \($0)" })
        case .success(.token(let token)):
            // Kept under the binding asked (nil: the file went meanwhile; then not kept at all).
            let entry = HotCacheEntry(
                profile: profile, issuer: issuer ?? "forward:", clientID: Self.clientID,
                accessToken: token.accessToken,
                tokenType: token.tokenType, obtainedAt: token.obtainedAt, expiresAt: token.expiresAt,
                issuedLifetime: token.issuedLifetime, target: target, statesNoExpiry: token.statesNoExpiry)
            // A DPoP token is useless without a proof, which only the serving side signs.
            if token.dpopProof == nil, token.tokenType != "DPoP", issuer != nil { hotCache?.store(entry, now: now) }
            var tokenSet = TokenSet(cached: entry)
            if token.statesNoExpiry { tokenSet.expiresAt = nil }
            return Served(
                tokenSet: tokenSet, fromHotCache: false, servedBy: token.servedBy, servingSession: token.servingSession,
                dpopProof: token.dpopProof, gitUsername: token.gitUsername)
        }
    }

    /// The error kind whose exit status is the one the client passes on for the serving side's
    /// `status` (`ExitStatus.passedOn`, which the front uses too).
    static func kind(_ status: Int32) -> TokenctlError.Kind {
        switch ExitStatus.passedOn(status) {
        case .usage: .invalidInput
        case .configuration: .configuration
        case .loginRequired: .loginRequired
        case .unavailable: .serviceUnavailable
        case .temporaryFailure: .transient
        case .protocolError: .protocolError
        default: .unexpected
        }
    }
}
