#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The front's side of the forward: which socket a process gets its tokens from (decided on
// every call, so it stays a getenv and, without the variable, one lstat), and a `token` miss
// served over the socket by the front itself.
extension HotPath {
    /// `token`'s default `--timeout` (tokenctl-token(1)): the connect, the request and the answer
    /// all end by then, as in the engine.
    static let defaultTimeout: Double = 30

    /// `ForwardClient.socketPath`'s answer as a C string: `$TOKENCTL_FORWARD_SOCKET` when set
    /// (empty: none), else the well-known remote path when a socket of this user is there (a copy that lives
    /// as long as the process), else nil.
    public static func forwardSocket(environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>?)
        -> UnsafePointer<CChar>?
    {
        if let value = environment(ForwardClient.cString(ForwardProtocol.socketVariable)) {
            return value[0] == 0 ? nil : value
        }
        let capacity = pathCapacity
        guard let buffer = malloc(capacity)?.assumingMemoryBound(to: UInt8.self) else { return nil }
        var writer = Writer(buffer, capacity: capacity - 1)
        if let runtime = environment(cString("XDG_RUNTIME_DIR")), runtime[0] == CChar(UInt8(ascii: "/")) {
            writer.append(cString: runtime)
        } else {
            writer.append("/run/user/")
            writer.append(decimal: Int64(getuid()))
        }
        writer.append("/tokenctl-forward.sock")
        var info = stat()
        guard !writer.overflowed else {
            free(buffer)
            return nil
        }
        buffer[writer.count] = 0
        let found = buffer.withMemoryRebound(to: CChar.self, capacity: writer.count + 1) { path in
            lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK && info.st_uid == getuid()
        }
        guard found else {
            free(buffer)
            return nil
        }
        return UnsafeRawPointer(buffer).assumingMemoryBound(to: CChar.self)
    }

    /// `token` over the forward socket, asked by the front itself: the request it recognizes
    /// (raw, header or json; a target; --min-ttl) sent with the one client
    /// (`ForwardClient.exchange`), the answer kept in this machine's hot cache as the engine
    /// keeps it (`HotCacheEntry.storeInKernelKeyring`, under the socket as it is bound now) and
    /// rendered as a hit would be. Starting the engine for a miss would cost more than the whole
    /// exchange. The exit status, or nil when this is not such an invocation: then the engine
    /// serves it. With an engine installed, the engine also takes `--verbose` (its narration),
    /// and a well-known socket nothing serves (an ended `ssh -R`: the engine falls back to the
    /// local session); a container given only the front reports those itself.
    public static func serveForwarded(
        argc: Int32, argv: UnsafePointer<UnsafeMutablePointer<CChar>?>, now: Instant,
        environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>?, socket: UnsafePointer<CChar>,
        engineInstalled: Bool = false
    ) -> Int32? {
        guard let request = recognize(argc: argc, argv: argv), !(engineInstalled && request.verbose),
            let profileBytes = profileName(request, environment: environment),
            let profile = ProfileName(rawValue: String(decoding: profileBytes, as: UTF8.self)),
            let target = try? TokenTarget(
                scope: request.scope.map { String(cString: $0) },
                audience: request.audience.map { String(cString: $0) },
                resource: request.resource.map { String(cString: $0) })
        else { return nil }
        let socketPath = String(cString: socket)
        let explicit = environment(ForwardClient.cString(ForwardProtocol.socketVariable)) != nil
        // The binding asked (nil: the file went meanwhile; then nothing is kept).
        let binding = ForwardClient.socketFileIdentity(of: socketPath)
        var forward = ForwardRequest(profile: profile.rawValue)
        forward.scope = target.scopeField
        forward.audience = target.audience
        forward.resource = target.resourceField
        forward.minimumTimeToLive = Int(request.minimumTimeToLive)
        forward.command = "token"
        let token: ForwardedToken
        switch ForwardClient.exchange(forward, socketPath: socketPath, timeout: defaultTimeout) {
        case .failure(let failure):
            if engineInstalled, !explicit, failure.notServed || failure.foreign { return nil }
            return report(ExitStatus.passedOn(failure.status.rawValue), failure.message, failure.hint)
        case .success(.failure(let failure)):
            let host = failure.servedBy ?? "the serving side"
            return report(
                ExitStatus.passedOn(failure.status), host + " (forwarded): " + failure.message,
                failure.hint.map { "(on \(host)) " + $0 })
        case .success(.token(let answered)):
            token = answered
        }
        let issuer = ForwardClient.cacheIssuer(socketPath: socketPath, identity: binding ?? "-")
        // A DPoP token is useless without a proof, which only the serving side signs: not kept.
        if binding != nil, token.dpopProof == nil, token.tokenType != "DPoP",
            environment(cString(disableVariable)).map({ !isEqual(cString: $0, "1") }) ?? true
        {
            _ = cacheEntry(token, profile: profile, issuer: issuer, target: target).storeInKernelKeyring(
                now: Double(now.seconds) + Double(now.nanoseconds) / 1e9)
        }
        // The target was checked by the serving side: the entry is only read back for rendering.
        return printToken(
            cacheEntry(token, profile: profile, issuer: issuer, target: .session), profile: profileBytes,
            request: request, now: now)
    }

    /// The hot-cache entry of a forwarded token under the socket's identity.
    static func cacheEntry(_ token: ForwardedToken, profile: ProfileName, issuer: String, target: TokenTarget)
        -> HotCacheEntry
    {
        HotCacheEntry(
            profile: profile, issuer: issuer, clientID: ForwardClient.cacheClientID, accessToken: token.accessToken,
            tokenType: token.tokenType, obtainedAt: token.obtainedAt, expiresAt: token.expiresAt,
            issuedLifetime: token.issuedLifetime, target: target, statesNoExpiry: token.statesNoExpiry)
    }

    /// Print `entry`'s token as a hit would (its payload read back by the hit's reader and
    /// rendered in the format asked): the exit status.
    static func printToken(_ entry: HotCacheEntry, profile: Bytes, request: Request, now: Instant) -> Int32 {
        guard var payload = try? entry.encoded() else {
            return report(.protocolError, "the serving side's token cannot be shown")
        }
        var output = [UInt8](repeating: 0, count: outputCapacity)
        defer {
            // The token was in these bytes.
            payload.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) }
            output.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) }
        }
        var issuer = entry.issuer
        var clientID = entry.clientID
        let rendered = payload.withUnsafeBufferPointer { payloadBytes in
            issuer.withUTF8 { issuerBytes in
                clientID.withUTF8 { clientBytes in
                    cachedToken(payloadBytes, profile: profile, issuer: issuerBytes, clientID: clientBytes)
                        .flatMap { cached in
                            output.withUnsafeMutableBufferPointer {
                                render(cached, profile: profile, request: request, now: now, into: $0)
                            }
                        }
                }
            }
        }
        guard let rendered else {
            return report(.temporaryFailure, "the forwarded token is valid for less than --min-ttl asks")
        }
        signal(SIGPIPE, SIG_IGN)
        output.withUnsafeMutableBufferPointer { bytes in
            writeAll(2, bytes.baseAddress!, rendered.logCount)
            writeAll(1, bytes.baseAddress! + rendered.logCount, rendered.outputCount)
        }
        return ExitStatus.success.rawValue
    }

    /// An error as the engine prints it (`Error: ` and the message, the hint on its own line):
    /// the exit status.
    static func report(_ status: ExitStatus, _ message: String, _ hint: String? = nil) -> Int32 {
        Descriptor.writeAll(
            2,
            "Error: " + TerminalText.printable(TerminalText.shortened(message)) + "\n"
                + (hint.map { TerminalText.printable(TerminalText.shortened($0)) + "\n" } ?? ""))
        return status.rawValue
    }
}
