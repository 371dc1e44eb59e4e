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
    /// (empty: none), else the well-known remote path when a socket is there (a copy that lives
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
            lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
        }
        guard found else {
            free(buffer)
            return nil
        }
        return UnsafeRawPointer(buffer).assumingMemoryBound(to: CChar.self)
    }

    /// `token` over the forward socket with no engine to hand it to: the request the front
    /// recognizes (raw, header or json; a target; --min-ttl) sent as is (ForwardRequest's wire
    /// form), the answer (ForwardAnswer's) rendered as a hit would be. Not cached (a container
    /// rarely has a usable kernel keyring). Bytes and system calls only, as the hit. The exit
    /// status, or nil when this is not such an invocation.
    public static func serveForwarded(
        argc: Int32, argv: UnsafePointer<UnsafeMutablePointer<CChar>?>, now: Instant,
        environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>?, socket: UnsafePointer<CChar>
    ) -> Int32? {
        guard let request = recognize(argc: argc, argv: argv),
            let profile = profileName(request, environment: environment)
        else { return nil }
        let requestCapacity = ForwardProtocol.maximumRequestSize
        let answerCapacity = ForwardProtocol.maximumAnswerSize
        let total = requestCapacity + answerCapacity + payloadCapacity + outputCapacity
        guard let block = malloc(total)?.assumingMemoryBound(to: UInt8.self) else { return nil }
        defer {
            explicit_bzero(block, total) // the token was in the answer, payload and output
            free(block)
        }
        let socketBytes = Bytes(
            start: UnsafeRawPointer(socket).assumingMemoryBound(to: UInt8.self), count: strlen(socket))
        func fail(_ status: ExitStatus, _ message: StaticString, _ detail: Bytes? = nil, hint: Bool = false) -> Int32 {
            var writer = Writer(block + requestCapacity, capacity: answerCapacity)
            writer.append("Error: ")
            writer.append(message)
            if let detail { appendPrintable(&writer, detail) }
            writer.append(byte: 0x0A)
            if hint {
                writer.append(
                    "On the machine that holds the session run 'tokenctl forward status'; reconnect with the forward (see 'tokenctl help forward'), or unset TOKENCTL_FORWARD_SOCKET to use a local session.\n"
                )
            }
            writeAll(2, block + requestCapacity, writer.count)
            return status.rawValue
        }

        // The request.
        var out = Writer(block, capacity: requestCapacity)
        out.append("tokenctl-forward-v1 request\nprofile=")
        out.append(profile)
        if let scope = request.scope {
            out.append("\nscope=")
            out.append(cString: scope)
        }
        if let audience = request.audience {
            out.append("\naudience=")
            out.append(cString: audience)
        }
        if let resource = request.resource {
            out.append("\nresource=")
            out.append(cString: resource)
        }
        out.append("\nmin_ttl=")
        out.append(decimal: request.minimumTimeToLive)
        out.append("\ncommand=token\n\n")
        guard !out.overflowed else { return fail(.usage, "the request is too large for the forward protocol") }

        // The exchange.
        guard socket[0] == CChar(UInt8(ascii: "/")) else {
            return fail(.configuration, "TOKENCTL_FORWARD_SOCKET must be an absolute path, not ", socketBytes)
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard socketBytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            return fail(
                .configuration, "the forward socket's path is longer than a socket address holds: ", socketBytes)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for index in 0..<socketBytes.count { raw[index] = socketBytes[index] }
            raw[socketBytes.count] = 0
        }
        let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return fail(.unavailable, "cannot make a socket") }
        defer { close(descriptor) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                Descriptor.retryingInterrupted {
                    connect(descriptor, pointer, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        }
        guard connected == 0 else {
            let error = errno
            if error == ENOENT {
                return fail(.unavailable, "no forwarded session: there is no socket at ", socketBytes, hint: true)
            }
            if error == ECONNREFUSED {
                return fail(
                    .unavailable, "no forwarded session: nothing serves the socket at ", socketBytes, hint: true)
            }
            return fail(.unavailable, "no forwarded session: cannot connect to ", socketBytes, hint: true)
        }
        signal(SIGPIPE, SIG_IGN)
        _ = Descriptor.writeAll(descriptor, block, out.count)
        shutdown(descriptor, Int32(SHUT_WR))
        let answer = block + requestCapacity
        var answerCount = 0
        var waited: Int32 = 0
        while !(answerCount >= 2 && answer[answerCount - 1] == 0x0A && answer[answerCount - 2] == 0x0A) {
            guard answerCount < answerCapacity else {
                return fail(.protocolError, "the serving side's answer is larger than a forward answer may be")
            }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = Descriptor.retryingInterrupted { poll(&poller, 1, 1000) }
            if ready == 0 {
                waited += 1
                guard waited < 35 else { return fail(.temporaryFailure, "the serving side did not answer within 35 s") }
                continue
            }
            let got = Descriptor.retryingInterrupted {
                read(descriptor, answer + answerCount, answerCapacity - answerCount)
            }
            if got < 0 { return fail(.temporaryFailure, "the connection to the forward socket failed") }
            if got == 0 { break }
            answerCount += got
        }
        guard answerCount >= 2, answer[answerCount - 1] == 0x0A, answer[answerCount - 2] == 0x0A else {
            return fail(.temporaryFailure, "the serving side closed the connection without answering")
        }

        // The answer: its first line, then key=value lines up to the empty one.
        let bytes = Bytes(start: answer, count: answerCount - 1)
        var lineEnd = 0
        while bytes[lineEnd] != 0x0A { lineEnd += 1 }
        let first = slice(bytes, 0, lineEnd)
        // token_type, access_token, obtained_at, expires_at, issued_lifetime, served_by
        var fields: (Bytes?, Bytes?, Bytes?, Bytes?, Bytes?, Bytes?)
        var failure: (Bytes?, Bytes?, Bytes?) // status, message, hint
        var position = lineEnd + 1
        while position < bytes.count {
            var end = position
            while bytes[end] != 0x0A { end += 1 }
            var equals = position
            while equals < end && bytes[equals] != UInt8(ascii: "=") { equals += 1 }
            guard equals < end else { return fail(.protocolError, "the answer is not a tokenctl forward answer") }
            let key = slice(bytes, position, equals)
            let value = slice(bytes, equals + 1, end)
            for byte in value where byte < 0x20 || byte >= 0x7F {
                return fail(.protocolError, "the answer is not a tokenctl forward answer")
            }
            if isEqual(key, "token_type") {
                fields.0 = value
            } else if isEqual(key, "access_token") {
                fields.1 = value
            } else if isEqual(key, "obtained_at") {
                fields.2 = value
            } else if isEqual(key, "expires_at") {
                fields.3 = value
            } else if isEqual(key, "issued_lifetime") {
                fields.4 = value
            } else if isEqual(key, "served_by") {
                fields.5 = value
            } else if isEqual(key, "status") {
                failure.0 = value
            } else if isEqual(key, "message") {
                failure.1 = value
            } else if isEqual(key, "hint") {
                failure.2 = value
            }
            position = end + 1
        }
        if isEqual(first, "tokenctl-forward-v1 error") {
            guard let statusText = failure.0, let status = decimalStatus(statusText), let message = failure.1 else {
                return fail(.protocolError, "the answer's error is incomplete or malformed")
            }
            var writer = Writer(block, capacity: requestCapacity)
            writer.append("Error: ")
            if let host = fields.5 { appendPrintable(&writer, host) } else { writer.append("the serving side") }
            writer.append(" (forwarded): ")
            appendPrintable(&writer, message)
            writer.append(byte: 0x0A)
            if let hint = failure.2 {
                writer.append("(on ")
                if let host = fields.5 { appendPrintable(&writer, host) } else { writer.append("the serving side") }
                writer.append(") ")
                appendPrintable(&writer, hint)
                writer.append(byte: 0x0A)
            }
            writeAll(2, block, writer.count)
            return status
        }
        guard isEqual(first, "tokenctl-forward-v1 token") else {
            return fail(.protocolError, "the serving side speaks another forward protocol, or none: ", first)
        }
        guard let tokenType = fields.0, tokenType.count > 0, let accessToken = fields.1, accessToken.count > 0,
            let obtainedAt = fields.2
        else { return fail(.protocolError, "the answer's token is incomplete or malformed") }

        // Rendered as a hit: the answer written as a hot-cache payload, read back by the hit's reader.
        let payload = answer + answerCount
        var entry = Writer(payload, capacity: payloadCapacity)
        entry.append("tokenctl-hotcache-v1\nprofile=")
        entry.append(profile)
        entry.append("\nissuer=forward:")
        let issuerStart = entry.count - "forward:".utf8.count
        entry.append(socketBytes)
        let issuerEnd = entry.count
        entry.append("\nclient_id=")
        let clientStart = entry.count
        entry.append("tokenctl-forward")
        let clientEnd = entry.count
        entry.append("\ntoken_type=")
        entry.append(tokenType)
        entry.append("\nobtained_at=")
        entry.append(obtainedAt)
        if let expiresAt = fields.3 {
            entry.append("\nexpires_at=")
            entry.append(expiresAt)
        }
        if let lifetime = fields.4 {
            entry.append("\nissued_lifetime=")
            entry.append(lifetime)
        }
        entry.append("\naccess_token=")
        entry.append(accessToken)
        entry.append(byte: 0x0A)
        guard !entry.overflowed,
            let token = cachedToken(
                Bytes(start: payload, count: entry.count), profile: profile,
                issuer: Bytes(start: payload + issuerStart, count: issuerEnd - issuerStart),
                clientID: Bytes(start: payload + clientStart, count: clientEnd - clientStart))
        else { return fail(.protocolError, "the answer's token is incomplete or malformed") }
        let output = payload + entry.count
        guard
            let rendered = render(
                token, profile: profile, request: request, now: now,
                into: UnsafeMutableBufferPointer(start: output, count: outputCapacity))
        else {
            return fail(.temporaryFailure, "the forwarded token is valid for less than --min-ttl asks")
        }
        writeAll(2, output, rendered.logCount)
        writeAll(1, output + rendered.logCount, rendered.outputCount)
        return ExitStatus.success.rawValue
    }

    /// An exit status of 1 to 125 in decimal (at most 3 digits).
    static func decimalStatus(_ text: Bytes) -> Int32? {
        guard text.count >= 1, text.count <= 3, let value = decimal(text), value >= 1, value <= 125 else { return nil }
        return Int32(value)
    }

    /// Printable ASCII as is, anything else as `?` (text from the serving side, for a terminal).
    static func appendPrintable(_ writer: inout Writer, _ bytes: Bytes) {
        for byte in bytes { writer.append(byte: byte >= 0x20 && byte < 0x7F ? byte : UInt8(ascii: "?")) }
    }
}
