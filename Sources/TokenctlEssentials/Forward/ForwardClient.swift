#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The client side of the forward: which socket (if any) this process gets its tokens from, and
/// one request over it. Used by the static front (a container with nothing but `tokenctl`) and
/// by the engine (`token`, `exec`, `git-credential`, `status`).
public enum ForwardClient {
    /// Why no answer came; each with the exit status a client returns.
    public struct Failure: Error, Equatable, Sendable {
        public var status: ExitStatus
        public var message: String
        public var hint: String?
        /// Nothing serves the path (no socket there, or a socket nothing accepts on: the file
        /// an ended `ssh -R` leaves behind).
        public var notServed = false
    }

    /// Where a process's forward socket came from.
    public struct Source: Equatable, Sendable {
        public var path: String
        /// Named by TOKENCTL_FORWARD_SOCKET (a failure to reach it is an error), rather than
        /// found at the well-known path (a stale one there means: use the local session).
        public var explicit: Bool
    }

    /// The socket this process forwards to: `$TOKENCTL_FORWARD_SOCKET` when set (empty: never
    /// forward), else the well-known remote path when a socket of this user is there; nil otherwise.
    public static func socketPath(
        environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>? = { UnsafePointer(getenv($0)) }
    ) -> String? {
        socketSource(environment: environment)?.path
    }

    /// `socketPath`, and whether the variable named it.
    public static func socketSource(
        environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>? = { UnsafePointer(getenv($0)) }
    ) -> Source? {
        if let value = environment(cString(ForwardProtocol.socketVariable)) {
            return value[0] == 0 ? nil : Source(path: String(cString: value), explicit: true)
        }
        let runtime: String
        if let value = environment(cString("XDG_RUNTIME_DIR")), value[0] == CChar(UInt8(ascii: "/")) {
            runtime = String(cString: value)
        } else {
            runtime = "/run/user/\(getuid())"
        }
        let path = runtime + "/" + ForwardProtocol.wellKnownName
        var info = stat()
        // This user's socket only: a runtime directory others can write must not feed us tokens.
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK, info.st_uid == getuid() else { return nil }
        return Source(path: path, explicit: false)
    }

    @inline(__always)
    static func cString(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    /// Send `request` to the socket at `path` and read the answer, all within `timeout` seconds.
    public static func exchange(_ request: ForwardRequest, socketPath path: String, timeout: Double)
        -> Result<ForwardAnswer, Failure>
    {
        let deadline = monotonicNow() + max(1, min(timeout, 3600))
        let shown = ForwardProtocol.sanitized(path, limit: 200)
        guard path.hasPrefix("/") else {
            return .failure(
                Failure(
                    status: .configuration,
                    message: "TOKENCTL_FORWARD_SOCKET must be an absolute path, not '\(shown)'",
                    hint: "Set it to the socket's path, e.g. TOKENCTL_FORWARD_SOCKET=/run/tokenctl.sock."))
        }
        let descriptor: Int32
        switch connectOnly(path) {
        case .success(let connected): descriptor = connected
        case .failure(let failure): return .failure(failure)
        }
        defer { close(descriptor) }
        // Scripts read our output through pipes that may close early; a closed socket likewise.
        signal(SIGPIPE, SIG_IGN)
        let sent = Descriptor.writeAll(descriptor, request.encoded())
        guard sent == 0 || sent == EPIPE || sent == ECONNRESET else {
            return .failure(Failure(status: .unavailable, message: "cannot send to \(shown): \(reason(sent))"))
        }
        shutdown(descriptor, Int32(SHUT_WR))
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        defer {
            // The token was in these bytes.
            answer.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
            buffer.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
        }
        while !(answer.count >= 2 && answer[answer.count - 1] == 0x0A && answer[answer.count - 2] == 0x0A) {
            let left = deadline - monotonicNow()
            guard left > 0 else {
                return .failure(
                    Failure(
                        status: .temporaryFailure,
                        message: "the serving side did not answer within \(Int(timeout)) s (over \(shown))"))
            }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = Descriptor.retryingInterrupted { poll(&poller, 1, Int32(min(left * 1000, 60_000)) + 1) }
            if ready <= 0 { continue }
            let got = buffer.withUnsafeMutableBytes { raw in
                Descriptor.retryingInterrupted { read(descriptor, raw.baseAddress, raw.count) }
            }
            if got < 0 {
                if errno == EAGAIN { continue }
                return .failure(
                    Failure(status: .temporaryFailure, message: "the connection over \(shown) failed: \(reason(errno))")
                )
            }
            if got == 0 { break }
            answer.append(contentsOf: buffer[0..<got])
            guard answer.count <= ForwardProtocol.maximumAnswerSize else {
                return .failure(
                    Failure(
                        status: .protocolError,
                        message: "the serving side's answer is larger than a forward answer may be"))
            }
        }
        guard !answer.isEmpty else {
            return .failure(
                Failure(
                    status: .temporaryFailure,
                    message: "the serving side closed the connection without answering (over \(shown))"))
        }
        do {
            return .success(try ForwardAnswer.decode(answer))
        } catch {
            return .failure(Failure(status: .protocolError, message: error.description))
        }
    }

    /// A connected socket to `path`, or why not (a missing socket, nothing serving it, …).
    public static func connectOnly(_ path: String) -> Result<Int32, Failure> {
        let shown = ForwardProtocol.sanitized(path, limit: 200)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else {
            return .failure(
                Failure(
                    status: .configuration,
                    message:
                        "the forward socket's path is longer than a socket address holds (\(capacity - 1) bytes): \(shown)"
                ))
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
            raw[path.utf8.count] = 0
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            return .failure(Failure(status: .unavailable, message: "cannot make a socket: \(reason(errno))"))
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                Descriptor.retryingInterrupted {
                    connect(descriptor, pointer, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        }
        guard connected == 0 else {
            let error = errno
            let detail: String
            switch error {
            case ENOENT:
                detail = "there is no socket at \(shown)"
            case ECONNREFUSED:
                detail =
                    "nothing serves the socket at \(shown) (the ssh connection or 'tokenctl forward listen' ended?)"
            case EACCES, EPERM:
                detail = "the socket at \(shown) is not this user's to open"
            default:
                detail = "cannot connect to \(shown): \(reason(error))"
            }
            close(descriptor)
            return .failure(
                Failure(
                    status: .unavailable, message: "no forwarded session: \(detail)",
                    hint:
                        "On the machine that holds the session run 'tokenctl forward status'; reconnect with the forward (see 'tokenctl help forward'), or unset TOKENCTL_FORWARD_SOCKET to use a local session.",
                    notServed: error == ENOENT || error == ECONNREFUSED))
        }
        return .success(descriptor)
    }

    /// Seconds on the monotonic clock (deadlines of the forward's reads, both sides).
    public static func monotonicNow() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    static func reason(_ error: Int32) -> String { String(cString: strerror(error)) }
}

extension ForwardClient {
    /// The issuer field of the client's hot-cache entries for tokens from the socket at `path`:
    /// no real issuer looks like it, so local sessions and each socket have keys of their own.
    public static func cacheIssuer(socketPath path: String) -> String { "forward:" + path }
    /// The client ID field of those entries.
    public static let cacheClientID = "tokenctl-forward"
}
