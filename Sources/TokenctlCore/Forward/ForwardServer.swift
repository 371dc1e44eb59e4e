import TokenctlEssentials

/// The serving side of one forward connection (`tokenctl forward serve`, one per connection
/// under the socket unit's Accept=yes or `forward listen`): check the peer, read one bounded
/// request, decide with `ForwardPolicy`, get the token through the normal single-flight path
/// (`TokenctlService.token`: a remote fan-in is one refresh at most), sign a DPoP proof when
/// asked, log the hand-out, answer. The refresh token never leaves this process.
public struct ForwardServer: Sendable {
    public let service: TokenctlService
    public let host: String
    /// How long a peer may take to send its request (a slow or silent one is cut off).
    public var requestTimeout: Double = 5
    /// How long a peer may take to read the answer.
    public var answerTimeout: Double = 5

    public init(service: TokenctlService, host: String = UnixSocket.hostName()) {
        self.service = service
        self.host = host
    }

    /// How a connection ended, for `forward serve`'s exit status and the tests.
    public enum Outcome: Equatable, Sendable {
        case handedOut(profile: String)
        case refused(status: ExitStatus, reason: String)
        /// stdin is not a socket: `forward serve` was run by hand.
        case notASocket
    }

    public func serve(connection: Int32, output: Int32) async -> Outcome {
        let peer: UnixSocket.Peer
        switch UnixSocket.peer(of: connection) {
        case .notASocket: return .notASocket
        case .failed(let reason):
            return refuse(
                nil, output, status: .unavailable, message: "cannot identify the connecting process: \(reason)",
                reason: "no peer credentials", profile: "-")
        case .peer(let found): peer = found
        }
        // sshd forwards as the user who logged in: the same uid, whatever process it is.
        guard peer.uid == UnixSocket.userID else {
            return refuse(
                peer, output, status: .loginRequired,
                message:
                    "the connecting process runs as uid \(peer.uid); this socket serves uid \(UnixSocket.userID) only",
                reason: "another user (uid \(peer.uid))", profile: "-")
        }
        let bytes: [UInt8]
        switch UnixSocket.receive(connection, limit: ForwardProtocol.maximumRequestSize, within: requestTimeout) {
        case .message(let message) where message.isEmpty:
            // Connected and closed without a word: a liveness probe ('forward status', a
            // listener checking for another), not a request. Nothing to answer or log.
            return .refused(status: .usage, reason: "no request")
        case .message(let message): bytes = message
        case .tooLarge:
            return refuse(
                peer, output, status: .usage,
                message: "the request is larger than \(ForwardProtocol.maximumRequestSize) bytes",
                reason: "oversized request", profile: "-")
        case .timedOut:
            return refuse(
                peer, output, status: .temporaryFailure,
                message: "no complete request within \(Int(requestTimeout)) s", reason: "slow request", profile: "-")
        case .failed(let reason):
            return refuse(
                peer, output, status: .temporaryFailure, message: "cannot read the request: \(reason)",
                reason: "read failed", profile: "-")
        }
        let request: ForwardRequest
        do { request = try ForwardRequest.decode(bytes) } catch {
            let versionMismatch = error.description.contains("speaks v1 only")
            return refuse(
                peer, output, status: versionMismatch ? .unavailable : .protocolError, message: error.description,
                reason: versionMismatch ? "protocol version" : "malformed request", profile: "-")
        }
        guard let name = ProfileName(rawValue: request.profile) else {
            return refuse(
                peer, output, status: .usage,
                message: "invalid profile name '\(ForwardProtocol.sanitized(request.profile, limit: 64))'",
                reason: "invalid profile name", profile: "-")
        }
        let configuration: ProfileConfiguration?
        do { configuration = try service.profiles.load(name) } catch {
            return refuse(
                peer, output, status: .configuration, message: error.message, reason: "profile unreadable",
                profile: name.rawValue)
        }
        let target: TokenTarget
        switch ForwardPolicy.target(for: request, profile: name, configuration: configuration, host: host) {
        case .success(let found): target = found
        case .failure(let refusal):
            return refuse(
                peer, output, status: refusal.status, message: refusal.message, hint: refusal.hint,
                reason: refusal.reason, profile: name.rawValue)
        }
        if let url = request.proofURL {
            guard let method = request.proofMethod, !method.isEmpty, method.utf8.count <= 32,
                method.utf8.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }),
                DPoPProof.htu(url) != nil, request.proofNonce.map({ DPoPHTTPClient.usableNonce($0) != nil }) ?? true
            else {
                return refuse(
                    peer, output, status: .usage, message: "the DPoP request (method, URL or nonce) is not valid",
                    reason: "invalid DPoP request", profile: name.rawValue)
            }
        }
        let minimumTimeToLive =
            request.minimumTimeToLive.map(Double.init) ?? AccessTokenLifetime.defaultMinimumTimeToLive
        let served: TokenctlService.ServedToken
        do {
            served = try await service.token(
                name, target: target, minimumTimeToLive: minimumTimeToLive, force: request.force,
                consultHotCache: request.proofURL == nil && !request.force)
        } catch {
            return refuse(
                peer, output, status: error.exitStatus, message: error.message, hint: error.hint,
                reason: "token failed (\(error.exitStatus.rawValue))", profile: name.rawValue)
        }
        let tokenSet = served.tokenSet
        var proof: String?
        if let url = request.proofURL, let method = request.proofMethod {
            do {
                guard let key = try tokenSet.dpopSigningKey(of: name, checked: false) else {
                    return refuse(
                        peer, output, status: .configuration,
                        message:
                            "profile '\(name)' is not bound to a DPoP key on \(host): its tokens are Bearer tokens",
                        hint: "Ask for the token without --format dpop.", reason: "DPoP proof for a Bearer session",
                        profile: name.rawValue)
                }
                let now = service.clock.now()
                proof = try DPoPProof.make(
                    key: key, method: method.uppercased(), url: url,
                    issuedAt: Int(saturating: (now + (tokenSet.serverClockOffset ?? 0)).rounded(.down)),
                    accessToken: tokenSet.accessToken, nonce: request.proofNonce)
            } catch let error as TokenctlError {
                return refuse(
                    peer, output, status: error.exitStatus, message: error.message, reason: "DPoP key unusable",
                    profile: name.rawValue)
            } catch {
                return refuse(
                    peer, output, status: .failure, message: "cannot sign a DPoP proof: \(error)",
                    reason: "DPoP signing failed", profile: name.rawValue)
            }
        }
        var token = ForwardedToken(
            profile: name.rawValue, accessToken: tokenSet.accessToken, tokenType: tokenSet.tokenType,
            obtainedAt: tokenSet.obtainedAt)
        if tokenSet.statesNoExpiry {
            token.statesNoExpiry = true
        } else {
            token.expiresAt = tokenSet.expiresAt ?? tokenSet.obtainedAt + TokenSet.assumedLifetime
        }
        token.issuedLifetime = tokenSet.issuedLifetime
        token.scope = target.scopes.isEmpty ? nil : target.scopes.joined(separator: " ")
        token.dpopProof = proof
        token.servedBy = host
        token.servingSession = ForwardedToken.sessionIdentity(
            host: host, issuer: served.configuration.issuer.string, clientID: served.configuration.clientID,
            profile: name.rawValue)
        token.gitUsername = served.configuration.gitUsername.flatMap { ForwardProtocol.isValue($0) ? $0 : nil }
        var answer = ForwardAnswer.token(token).encoded()
        defer { answer.withUnsafeMutableBytes { $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        let delivered = UnixSocket.send(output, answer, within: answerTimeout)
        UnixSocket.finishSending(output)
        var details = ["to " + Self.describe(peer)]
        if !target.isSession { details.append("target " + ForwardProtocol.sanitized(target.description, limit: 200)) }
        if let command = request.command { details.append("for " + ForwardProtocol.sanitized(command, limit: 32)) }
        if proof != nil { details.append("with a DPoP proof") }
        if !delivered { details.append("the peer left before the answer was read") }
        log(
            .tokenForwarded, profile: name.rawValue, issuer: configuration?.issuer.string,
            reason: details.joined(separator: "; "))
        return .handedOut(profile: name.rawValue)
    }

    static func describe(_ peer: UnixSocket.Peer) -> String {
        "pid \(peer.pid)" + (peer.command.map { " (\($0))" } ?? "") + " uid \(peer.uid)"
    }

    private func refuse(
        _ peer: UnixSocket.Peer?, _ output: Int32, status: ExitStatus, message: String, hint: String? = nil,
        reason: String, profile: String
    ) -> Outcome {
        let answer = ForwardAnswer.failure(
            ForwardFailure(status: status.rawValue, message: message, hint: hint, servedBy: host))
        UnixSocket.send(output, answer.encoded(), within: answerTimeout)
        UnixSocket.finishSending(output)
        log(
            .forwardRefused, profile: profile, issuer: nil,
            reason: reason + (peer.map { "; from " + Self.describe($0) } ?? ""))
        return .refused(status: status, reason: reason)
    }

    private func log(_ event: SessionEvent, profile: String, issuer: String?, reason: String) {
        _ = service.events?.append(
            EventRecord(time: service.clock.now(), event: event, profile: profile, issuer: issuer, reason: reason))
    }
}
