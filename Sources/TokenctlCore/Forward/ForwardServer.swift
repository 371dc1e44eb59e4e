import TokenctlEssentials

/// The serving side of forward connections: check the peer, read one bounded request, decide
/// with `ForwardPolicy`, get the token through the normal single-flight path
/// (`TokenctlService.token`: a remote fan-in is one refresh at most), sign a DPoP proof when
/// asked, log the hand-out, answer. The refresh token never leaves this process.
///
/// `ForwardListener` runs many connections through one server in one process (`forward serve`
/// under the socket unit, `forward listen`); `serve(connection:output:)` answers a single
/// connection on its standard input (a unit with Accept=yes written by an earlier version).
public struct ForwardServer: Sendable {
    public let service: TokenctlService
    public let host: String
    /// How long a peer may take to send its request (a slow or silent one is cut off).
    public var requestTimeout: Double = 5
    /// How long a peer may take to read the answer.
    public var answerTimeout: Double = 5
    /// Refusals, summed up per peer and minute in their own log.
    public let audit: ForwardAudit
    /// Remote forced refreshes, one per profile per interval.
    public let forcedRefreshes: ForcedRefreshLimit
    /// A hint as the client prints it (the command layer's renderer: the protocol carries text).
    public let hintText: @Sendable (Suggestion) -> String

    public init(
        service: TokenctlService, host: String = UnixSocket.hostName(), audit: ForwardAudit? = nil,
        forcedRefreshes: ForcedRefreshLimit = ForcedRefreshLimit(), hintText: @escaping @Sendable (Suggestion) -> String
    ) {
        self.hintText = hintText
        self.service = service
        self.host = host
        self.audit = audit ?? ForwardAudit(log: service.events?.refusals)
        self.forcedRefreshes = forcedRefreshes
    }

    /// How a connection ended, for `forward serve`'s exit status and the tests.
    public enum Outcome: Equatable, Sendable {
        case handedOut(profile: String)
        case refused(status: ExitStatus, reason: String)
        /// stdin is not a socket: `forward serve` was run by hand.
        case notASocket
    }

    /// The answer to one request, and what to log once it is delivered (or not).
    public struct Reply: Sendable {
        public var answer: [UInt8]
        var handOut: HandOut?
        var refusal: (status: ExitStatus, reason: String, profile: String)?

        struct HandOut: Sendable {
            var profile: String
            var issuer: String?
            var details: [String]
        }

        /// The outcome, for `forward serve` and the tests.
        public var outcome: Outcome {
            if let handOut { return .handedOut(profile: handOut.profile) }
            if let refusal { return .refused(status: refusal.status, reason: refusal.reason) }
            return .refused(status: .usage, reason: "no request")
        }
    }

    /// Whether `peer` may be served at all: sshd forwards as the user who logged in, the same
    /// uid whatever process it is. The refusal's reply when not.
    public func admit(_ peer: UnixSocket.Peer) -> Reply? {
        guard peer.uid != UnixSocket.userID else { return nil }
        return refusal(
            status: .loginRequired,
            message: "the connecting process runs as uid \(peer.uid); this socket serves uid \(UnixSocket.userID) only",
            reason: "another user", profile: "-")
    }

    /// The reply to a peer whose credentials cannot be read.
    public func unidentified(_ reason: String) -> Reply {
        refusal(
            status: .unavailable, message: "cannot identify the connecting process: \(reason)",
            reason: "no peer credentials", profile: "-")
    }

    /// The reply to a connection that sent no complete request in time, too much, or broke.
    public func unread(_ received: UnixSocket.Received) -> Reply? {
        switch received {
        case .message(let message) where message.isEmpty:
            // Connected and closed without a word: a liveness probe ('forward status', a
            // listener checking for another), not a request. Nothing to answer or log.
            return nil
        case .message: return nil
        case .tooLarge:
            return refusal(
                status: .usage, message: "the request is larger than \(ForwardProtocol.maximumRequestSize) bytes",
                reason: "oversized request", profile: "-")
        case .timedOut:
            return refusal(
                status: .temporaryFailure, message: "no complete request within \(Int(requestTimeout)) s",
                reason: "slow request", profile: "-")
        case .failed(let reason):
            return refusal(
                status: .temporaryFailure, message: "cannot read the request: \(reason)", reason: "read failed",
                profile: "-")
        }
    }

    /// Log what a reply did once its answer was sent (`delivered`: the peer took all of it).
    public func record(_ reply: Reply, peer: UnixSocket.Peer?, delivered: Bool) {
        if let handOut = reply.handOut {
            var details = handOut.details
            details.insert("to " + Self.describe(peer), at: 0)
            if !delivered { details.append("the peer left before the answer was read") }
            _ = service.events?.append(
                EventRecord(
                    time: service.clock.now(), event: .tokenForwarded, profile: handOut.profile,
                    issuer: handOut.issuer, reason: details.joined(separator: "; ")))
        } else if let refusal = reply.refusal {
            audit.refused(peer: peer, reason: refusal.reason, profile: refusal.profile, at: service.clock.now())
        }
    }

    /// One connection on `connection` (read) and `output` (write), blocking: for a unit with
    /// Accept=yes that an earlier version wrote (each connection its own `forward serve`).
    public func serve(connection: Int32, output: Int32) async -> Outcome {
        let peer: UnixSocket.Peer
        switch UnixSocket.peer(of: connection) {
        case .notASocket: return .notASocket
        case .failed(let reason):
            return finish(unidentified(reason), peer: nil, output: output)
        case .peer(let found): peer = found
        }
        if let refused = admit(peer) { return finish(refused, peer: peer, output: output) }
        let received = UnixSocket.receive(connection, limit: ForwardProtocol.maximumRequestSize, within: requestTimeout)
        guard case .message(let bytes) = received, !bytes.isEmpty else {
            guard let refused = unread(received) else { return .refused(status: .usage, reason: "no request") }
            return finish(refused, peer: peer, output: output)
        }
        return finish(await reply(to: bytes, from: peer), peer: peer, output: output)
    }

    private func finish(_ reply: Reply, peer: UnixSocket.Peer?, output: Int32) -> Outcome {
        var answer = reply.answer
        defer { answer.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        let delivered = UnixSocket.send(output, answer, within: answerTimeout)
        UnixSocket.finishSending(output)
        record(reply, peer: peer, delivered: delivered)
        audit.flush(at: service.clock.now(), all: true)
        return reply.outcome
    }

    /// The reply to one complete request from `peer` (already admitted): the request checked,
    /// the token, its DPoP proof when asked, the answer; or the refusal of the first step that
    /// refused.
    public func reply(to bytes: [UInt8], from peer: UnixSocket.Peer) async -> Reply {
        do throws(Refused) {
            let asked = try checkedRequest(bytes)
            let served: TokenctlService.ServedToken
            do {
                served = try await token(asked.name, request: asked.request, target: asked.target)
            } catch {
                throw Refused(
                    refusal(
                        status: error.exitStatus, message: error.message, hint: error.hint,
                        reason: "token failed (\(error.exitStatus.rawValue))", profile: asked.name.rawValue))
            }
            let proof = try proof(for: asked, tokenSet: served.tokenSet)
            var details: [String] = []
            if !asked.target.isSession { details.append("target " + Self.quoted(asked.target.description, limit: 200)) }
            if let command = asked.request.command { details.append("for " + Self.quoted(command, limit: 32)) }
            if proof != nil { details.append("with a DPoP proof") }
            return Reply(
                answer: ForwardAnswer.token(answer(served, for: asked, proof: proof)).encoded(),
                handOut: Reply.HandOut(
                    profile: asked.name.rawValue, issuer: asked.configuration?.issuer.string, details: details))
        } catch {
            return error.reply
        }
    }

    /// A step's refusal: the reply that ends the request.
    struct Refused: Error {
        var reply: Reply
        init(_ reply: Reply) { self.reply = reply }
    }

    /// A request that passed the checks: decoded, its profile loaded and shared, its target
    /// allowed, its DPoP request (if any) well-formed.
    struct CheckedRequest {
        var request: ForwardRequest
        var name: ProfileName
        var configuration: ProfileConfiguration?
        var target: TokenTarget
    }

    func checkedRequest(_ bytes: [UInt8]) throws(Refused) -> CheckedRequest {
        let request: ForwardRequest
        do { request = try ForwardRequest.decode(bytes) } catch {
            let versionMismatch = error.description.contains("speaks v1 only")
            throw Refused(
                refusal(
                    status: versionMismatch ? .unavailable : .protocolError, message: error.description,
                    reason: versionMismatch ? "protocol version" : "malformed request", profile: "-"))
        }
        guard let name = ProfileName(rawValue: request.profile) else {
            throw Refused(
                refusal(
                    status: .usage,
                    message: "invalid profile name '\(ForwardProtocol.sanitized(request.profile, limit: 64))'",
                    reason: "invalid profile name", profile: "-"))
        }
        let configuration: ProfileConfiguration?
        do { configuration = try service.profiles.load(name) } catch {
            throw Refused(
                refusal(
                    status: .configuration, message: error.message, reason: "profile unreadable",
                    profile: name.rawValue))
        }
        let target: TokenTarget
        switch ForwardPolicy.target(for: request, profile: name, configuration: configuration, host: host) {
        case .success(let found): target = found
        case .failure(let refused):
            throw Refused(
                refusal(
                    status: refused.status, message: refused.message, hint: refused.hint, reason: refused.reason,
                    profile: name.rawValue))
        }
        if let url = request.proofURL {
            guard let method = request.proofMethod, !method.isEmpty, method.utf8.count <= 32,
                method.utf8.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }),
                DPoPProof.htu(url) != nil, request.proofNonce.map({ DPoPHTTPClient.usableNonce($0) != nil }) ?? true
            else {
                throw Refused(
                    refusal(
                        status: .usage, message: "the DPoP request (method, URL or nonce) is not valid",
                        reason: "invalid DPoP request", profile: name.rawValue))
            }
        }
        return CheckedRequest(request: request, name: name, configuration: configuration, target: target)
    }

    /// The DPoP proof the request asks for (RFC 9449 section 4), signed with the session's key;
    /// nil when none is asked for.
    func proof(for asked: CheckedRequest, tokenSet: TokenSet) throws(Refused) -> String? {
        guard let url = asked.request.proofURL, let method = asked.request.proofMethod else { return nil }
        let name = asked.name
        do {
            guard let key = try tokenSet.dpopSigningKey(of: name, checked: false) else {
                throw Refused(
                    refusal(
                        status: .configuration,
                        message:
                            "profile '\(name)' is not bound to a DPoP key on \(host): its tokens are Bearer tokens",
                        hint: "Ask for the token without \(options: .token([.format(.dpop)])).",
                        reason: "DPoP proof for a Bearer session",
                        profile: name.rawValue))
            }
            let now = service.clock.now()
            return try DPoPProof.make(
                key: key, method: method.uppercased(), url: url,
                issuedAt: Int(saturating: (now + (tokenSet.serverClockOffset ?? 0)).rounded(.down)),
                accessToken: tokenSet.accessToken, nonce: asked.request.proofNonce)
        } catch let refused as Refused {
            throw refused
        } catch let error as TokenctlError {
            throw Refused(
                refusal(
                    status: error.exitStatus, message: error.message, reason: "DPoP key unusable",
                    profile: name.rawValue))
        } catch {
            throw Refused(
                refusal(
                    status: .failure, message: "cannot sign a DPoP proof: \(error)",
                    reason: "DPoP signing failed", profile: name.rawValue))
        }
    }

    /// The token answer: the token, its lifetime, the target's scope, the proof, who served it.
    func answer(_ served: TokenctlService.ServedToken, for asked: CheckedRequest, proof: String?) -> ForwardedToken {
        let tokenSet = served.tokenSet
        var token = ForwardedToken(
            profile: asked.name.rawValue, accessToken: tokenSet.accessToken, tokenType: tokenSet.tokenType,
            obtainedAt: tokenSet.obtainedAt)
        if tokenSet.statesNoExpiry {
            token.statesNoExpiry = true
        } else {
            token.expiresAt = tokenSet.expiresAt ?? tokenSet.obtainedAt + TokenSet.assumedLifetime
        }
        token.issuedLifetime = tokenSet.issuedLifetime
        token.scope = asked.target.scopes.isEmpty ? nil : asked.target.scopes.joined(separator: " ")
        token.dpopProof = proof
        token.servedBy = host
        token.servingSession = ForwardedToken.sessionIdentity(
            host: host, issuer: served.configuration.issuer.string, clientID: served.configuration.clientID,
            profile: asked.name.rawValue)
        token.gitUsername = served.configuration.gitUsername.flatMap { ForwardProtocol.isValue($0) ? $0 : nil }
        return token
    }

    /// The token for a request: a remote `force` refreshes only when the token the client
    /// says was rejected (`token_fingerprint`) is still the current one, and only once per
    /// `forcedRefreshes.interval` per profile across all clients; otherwise the client gets the
    /// current token, which the last refresh obtained. A provider's rate limit (429, RFC 6585
    /// section 4) is the serving user's everywhere: a remote loop must not spend it.
    func token(_ name: ProfileName, request: ForwardRequest, target: TokenTarget) async throws(TokenctlError)
        -> TokenctlService.ServedToken
    {
        let minimumTimeToLive =
            request.minimumTimeToLive.map(Double.init) ?? AccessTokenLifetime.defaultMinimumTimeToLive
        let current = try await service.token(
            name, target: target, minimumTimeToLive: minimumTimeToLive, force: false,
            consultHotCache: request.proofURL == nil)
        guard request.force else { return current }
        if let rejected = request.tokenFingerprint, let now = Self.fingerprint(current.tokenSet.accessToken),
            rejected != now
        {
            return current // refreshed since the client got its token: the new one is the answer
        }
        guard let claim = forcedRefreshes.claim(name.rawValue, at: service.clock.now()) else { return current }
        do {
            return try await service.token(
                name, target: target, minimumTimeToLive: minimumTimeToLive, force: true, consultHotCache: false)
        } catch {
            // Nothing reached the server (no refresh token, no session): the next force may try.
            if error.kind == .loginRequired { forcedRefreshes.release(claim) }
            throw error
        }
    }

    /// The `token_fingerprint` of `accessToken`, or nil without libcrypto (then every force counts
    /// against the limit alone).
    static func fingerprint(_ accessToken: String) -> String? {
        guard OpenSSL.unavailableReason == nil else { return nil }
        return ForwardProtocol.fingerprint(of: OpenSSL.sha256(Array(accessToken.utf8)))
    }

    /// Client-supplied text in an event's reason: in double quotes, `"` and `\\` escaped, so it
    /// cannot read as the reason's own fields (`; to pid 1 (sshd) uid 0`).
    static func quoted(_ text: String, limit: Int) -> String {
        var result = "\""
        for character in ForwardProtocol.sanitized(text, limit: limit) {
            if character == "\"" || character == "\\" { result.append("\\") }
            result.append(character)
        }
        return result + "\""
    }

    /// The peer as the event log names it; its command name (which a process sets itself,
    /// prctl(2) PR_SET_NAME) keeps letters, digits, `.`, `_` and `-` only.
    static func describe(_ peer: UnixSocket.Peer?) -> String {
        guard let peer else { return "an unidentified peer" }
        return "pid \(peer.pid)" + (peer.command.map { " (\(commandName($0)))" } ?? "") + " uid \(peer.uid)"
    }

    static func commandName(_ command: String) -> String {
        String(
            command.prefix(32).map { character in
                character.isASCII && (character.isLetter || character.isNumber || "._-".contains(character))
                    ? character : "?"
            })
    }

    func refusal(status: ExitStatus, message: String, hint: Suggestion? = nil, reason: String, profile: String) -> Reply
    {
        let answer = ForwardAnswer.failure(
            ForwardFailure(status: status.rawValue, message: message, hint: hint.map(hintText), servedBy: host))
        return Reply(answer: answer.encoded(), refusal: (status, reason, profile))
    }
}
