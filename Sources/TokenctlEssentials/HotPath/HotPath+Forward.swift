#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The front's side of the forward: which socket a process gets its tokens from (decided on
// every call, so it stays a getenv and, without the variable, one lstat), and `token` served
// over the socket where no engine is installed (a container with nothing but `tokenctl`).
extension HotPath {
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

    /// `token` over the forward socket with no engine to hand it to: the request the front
    /// recognizes (raw, header or json; a target; --min-ttl) sent with the one client
    /// (`ForwardClient.exchange`), the answer rendered as a hit would be (written as a hot-cache
    /// payload and read back by the hit's reader). Not cached (a container rarely has a usable
    /// kernel keyring). The exit status, or nil when this is not such an invocation.
    public static func serveForwarded(
        argc: Int32, argv: UnsafePointer<UnsafeMutablePointer<CChar>?>, now: Instant,
        environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>?, socket: UnsafePointer<CChar>
    ) -> Int32? {
        guard let request = recognize(argc: argc, argv: argv),
            let profileBytes = profileName(request, environment: environment),
            let profile = ProfileName(rawValue: String(decoding: profileBytes, as: UTF8.self))
        else { return nil }
        let socketPath = String(cString: socket)
        var forward = ForwardRequest(profile: profile.rawValue)
        forward.scope = request.scope.map { String(cString: $0) }
        forward.audience = request.audience.map { String(cString: $0) }
        forward.resource = request.resource.map { String(cString: $0) }
        forward.minimumTimeToLive = Int(request.minimumTimeToLive)
        forward.command = "token"
        func fail(_ status: Int32, _ message: String, _ hint: String? = nil) -> Int32 {
            Descriptor.writeAll(
                2,
                "Error: " + TerminalText.printable(message) + "\n"
                    + (hint.map { TerminalText.printable($0) + "\n" } ?? ""))
            return status
        }
        let token: ForwardedToken
        switch ForwardClient.exchange(forward, socketPath: socketPath, timeout: 35) {
        case .failure(let failure):
            return fail(failure.status.rawValue, failure.message, failure.hint)
        case .success(.failure(let failure)):
            let host = failure.servedBy ?? "the serving side"
            return fail(
                failure.status, host + " (forwarded): " + failure.message, failure.hint.map { "(on \(host)) " + $0 })
        case .success(.token(let answered)):
            token = answered
        }
        // The target was checked by the serving side: the payload is only read back for rendering.
        let entry = HotCacheEntry(
            profile: profile, issuer: ForwardClient.cacheIssuer(socketPath: socketPath, identity: "-"),
            clientID: ForwardClient.cacheClientID, accessToken: token.accessToken, tokenType: token.tokenType,
            obtainedAt: token.obtainedAt, expiresAt: token.expiresAt, issuedLifetime: token.issuedLifetime,
            statesNoExpiry: token.statesNoExpiry)
        guard var payload = try? entry.encoded() else {
            return fail(ExitStatus.protocolError.rawValue, "the serving side's token cannot be shown")
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
                    cachedToken(payloadBytes, profile: profileBytes, issuer: issuerBytes, clientID: clientBytes)
                        .flatMap { cached in
                            output.withUnsafeMutableBufferPointer {
                                render(cached, profile: profileBytes, request: request, now: now, into: $0)
                            }
                        }
                }
            }
        }
        guard let rendered else {
            return fail(
                ExitStatus.temporaryFailure.rawValue, "the forwarded token is valid for less than --min-ttl asks")
        }
        signal(SIGPIPE, SIG_IGN)
        output.withUnsafeMutableBufferPointer { bytes in
            writeAll(2, bytes.baseAddress!, rendered.logCount)
            writeAll(1, bytes.baseAddress! + rendered.logCount, rendered.outputCount)
        }
        return ExitStatus.success.rawValue
    }
}
