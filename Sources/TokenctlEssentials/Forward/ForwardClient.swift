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
        /// Another user's process answered (`SO_PEERCRED`): a well-known socket then counts as
        /// absent, as another user's socket file does.
        public var foreign = false
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
        let deadline = MonotonicClock.now() + max(0.1, min(timeout, 3600))
        let seconds = Int(max(1, timeout).rounded(.up))
        let shown = ForwardProtocol.sanitized(path, limit: 200)
        guard path.hasPrefix("/") else {
            return .failure(
                Failure(
                    status: .configuration,
                    message: "TOKENCTL_FORWARD_SOCKET must be an absolute path, not '\(shown)'",
                    hint: "Set it to the socket's path, e.g. TOKENCTL_FORWARD_SOCKET=/run/tokenctl.sock."))
        }
        let descriptor: Int32
        switch connectOnly(path, within: deadline - MonotonicClock.now()) {
        case .success(let connected): descriptor = connected
        case .failure(var failure):
            if failure.status == .temporaryFailure {
                failure.message = "the serving side did not accept the connection within \(seconds) s (over \(shown))"
            }
            return .failure(failure)
        }
        defer { close(descriptor) }
        if let refused = foreignServer(descriptor, shown: shown) { return .failure(refused) }
        if let failed = send(request, over: descriptor, deadline: deadline, seconds: seconds, shown: shown) {
            return .failure(failed)
        }
        var answer: [UInt8] = []
        defer {
            // The token was in these bytes.
            answer.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
        }
        if let failed = readAnswer(into: &answer, from: descriptor, deadline: deadline, seconds: seconds, shown: shown)
        {
            return .failure(failed)
        }
        do {
            return .success(try ForwardAnswer.decode(answer))
        } catch {
            return .failure(Failure(status: .protocolError, message: error.description))
        }
    }

    /// Who answers: the socket file's owner was checked before, but a runtime directory others
    /// can write lets them swap the file between that check and the connect. The process
    /// serving the socket (sshd for `ssh -R`, forward listen, the socket unit) runs as this
    /// user; SO_PEERCRED names the process that listened (socket(7), unix(7)). Nil: this user's.
    static func foreignServer(_ descriptor: Int32, shown: String) -> Failure? {
        guard let uid = peerUserID(descriptor), uid != getuid() else { return nil }
        return Failure(
            status: .unavailable,
            message:
                "no forwarded session: the socket at \(shown) is served by uid \(uid), not by this user (uid \(getuid()))",
            hint:
                "Remove the socket or point TOKENCTL_FORWARD_SOCKET at your own; a runtime directory others can write lets them replace it.",
            foreign: true)
    }

    /// Send the request and close our sending half; nil when sent (or the peer went: its answer,
    /// if any, is still read).
    static func send(_ request: ForwardRequest, over descriptor: Int32, deadline: Double, seconds: Int, shown: String)
        -> Failure?
    {
        // Scripts read our output through pipes that may close early; a closed socket likewise.
        signal(SIGPIPE, SIG_IGN)
        // The request is small, but a peer that never reads must not hold us past the deadline.
        setSendTimeout(descriptor, seconds: deadline - MonotonicClock.now())
        let sent = Descriptor.writeAll(descriptor, request.encoded())
        guard sent != EAGAIN && sent != EWOULDBLOCK else {
            return Failure(
                status: .temporaryFailure,
                message: "the serving side did not take the request within \(seconds) s (over \(shown))")
        }
        guard sent == 0 || sent == EPIPE || sent == ECONNRESET else {
            return Failure(status: .unavailable, message: "cannot send to \(shown): \(reason(sent))")
        }
        shutdown(descriptor, Int32(SHUT_WR))
        return nil
    }

    /// Read the answer (up to its closing empty line, or the end) into `answer` by the deadline;
    /// nil when something was read within the size limit.
    static func readAnswer(
        into answer: inout [UInt8], from descriptor: Int32, deadline: Double, seconds: Int, shown: String
    ) -> Failure? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        defer { buffer.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } } }
        while !(answer.count >= 2 && answer[answer.count - 1] == 0x0A && answer[answer.count - 2] == 0x0A) {
            let left = deadline - MonotonicClock.now()
            guard left > 0 else {
                return Failure(
                    status: .temporaryFailure,
                    message: "the serving side did not answer within \(seconds) s (over \(shown))")
            }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = Descriptor.retryingInterrupted { poll(&poller, 1, Int32(min(left * 1000, 60_000)) + 1) }
            if ready <= 0 { continue }
            let got = buffer.withUnsafeMutableBytes { raw in
                Descriptor.retryingInterrupted { read(descriptor, raw.baseAddress, raw.count) }
            }
            if got < 0 {
                if errno == EAGAIN { continue }
                return Failure(
                    status: .temporaryFailure, message: "the connection over \(shown) failed: \(reason(errno))")
            }
            if got == 0 { break }
            answer.append(contentsOf: buffer[0..<got])
            guard answer.count <= ForwardProtocol.maximumAnswerSize else {
                return Failure(
                    status: .protocolError, message: "the serving side's answer is larger than a forward answer may be")
            }
        }
        guard !answer.isEmpty else {
            return Failure(
                status: .temporaryFailure,
                message: "the serving side closed the connection without answering (over \(shown))")
        }
        return nil
    }

    /// A connected socket to `path`, or why not (a missing socket, nothing serving it, a
    /// listener whose queue stays full past `within` seconds: exit 75).
    public static func connectOnly(_ path: String, within seconds: Double = 5) -> Result<Int32, Failure> {
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
        // A unix stream connect waits, while the listener's queue is full, for as long as the
        // send timeout says (unix(7); net/unix/af_unix.c waits sock_sndtimeo), then fails with
        // EAGAIN: the deadline bounds the connect too.
        setSendTimeout(descriptor, seconds: seconds)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                Descriptor.retryingInterrupted {
                    connect(descriptor, pointer, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        }
        guard connected == 0 else {
            let error = errno
            if error == EAGAIN || error == EWOULDBLOCK || error == EINPROGRESS {
                close(descriptor)
                return .failure(
                    Failure(
                        status: .temporaryFailure,
                        message: "the serving side did not accept the connection in time (over \(shown))"))
            }
            close(descriptor)
            return .failure(notConnected(error, shown: shown))
        }
        return .success(descriptor)
    }

    /// Why a connect(2) to the forward socket failed, for the user.
    static func notConnected(_ error: Int32, shown: String) -> Failure {
        let detail: String
        switch error {
        case ENOENT:
            detail = "there is no socket at \(shown)"
        case ECONNREFUSED:
            detail = "nothing serves the socket at \(shown) (the ssh connection or 'tokenctl forward listen' ended?)"
        case EACCES, EPERM:
            detail = "the socket at \(shown) is not this user's to open"
        default:
            detail = "cannot connect to \(shown): \(reason(error))"
        }
        return Failure(
            status: .unavailable, message: "no forwarded session: \(detail)",
            hint:
                "On the machine that holds the session run 'tokenctl forward status'; reconnect with the forward (see 'tokenctl help forward'), or unset TOKENCTL_FORWARD_SOCKET to use a local session.",
            notServed: error == ENOENT || error == ECONNREFUSED)
    }

    /// SO_SNDTIMEO (socket(7)): bounds a blocking connect(2) of a unix socket and its writes.
    static func setSendTimeout(_ descriptor: Int32, seconds: Double) {
        let bounded = max(0.001, min(seconds, 3600))
        var value = timeval(
            tv_sec: Int(bounded.rounded(.down)), tv_usec: Int((bounded - bounded.rounded(.down)) * 1_000_000))
        _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The uid of the process that serves the other end of a connected unix socket
    /// (SO_PEERCRED, unix(7): the credentials of the process that called listen(2)); nil when
    /// the kernel does not say.
    static func peerUserID(_ descriptor: Int32) -> UInt32? {
        // struct ucred (pid, uid, gid), which Glibc's module leaves out without _GNU_SOURCE.
        var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
        return credentials.uid
    }

    /// Whether a socket file is served, found without connecting to whatever serves it (a
    /// connection would wake the serving side: sshd opens a channel, a socket unit starts a
    /// process). A datagram connect(2) to a path finds the socket bound there first: none
    /// (the file an ended `ssh -R` or a killed listener leaves) is ECONNREFUSED; a live stream
    /// socket is EPROTOTYPE, since the types differ (unix(7); net/unix/af_unix.c, unix_find_bsd).
    public enum Liveness: Equatable, Sendable {
        case served
        /// A socket file nothing serves: stale.
        case notServed
        /// No file at the path.
        case missing
        /// Anything else (not a socket, not ours to open): let a real connect say what.
        case unknown
    }

    /// The liveness of the socket file at `path` (a C string, so the front's hit can ask).
    public static func liveness(_ path: UnsafePointer<CChar>) -> Liveness {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let length = strlen(path)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard length > 0, length < capacity else { return .unknown }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.baseAddress!.copyMemory(from: path, byteCount: length)
            raw[length] = 0
        }
        let probe = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return .unknown }
        defer { close(probe) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                Descriptor.retryingInterrupted { connect(probe, pointer, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
        }
        guard connected != 0 else { return .unknown } // a datagram socket is bound there: not a forward
        switch errno {
        case EPROTOTYPE: return .served
        case ECONNREFUSED: return .notServed
        case ENOENT: return .missing
        default: return .unknown
        }
    }

    /// `liveness` of a path as a Swift string.
    public static func liveness(of path: String) -> Liveness { path.withCString { liveness($0) } }

    /// Which socket file is at `path` (stat(2): device, inode, change time): a socket bound
    /// anew, as each `ssh -R` and each listener binds its own, is another file even at the same
    /// path. Written as decimal digits with `.` between them into `writer`; false when there is
    /// no such file.
    static func socketFileIdentity(_ path: UnsafePointer<CChar>, into writer: inout HotPath.Writer) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK else { return false }
        writer.append(decimal: Int64(truncatingIfNeeded: info.st_dev))
        writer.append(".")
        writer.append(decimal: Int64(truncatingIfNeeded: info.st_ino))
        writer.append(".")
        writer.append(decimal: Int64(info.st_ctim.tv_sec))
        writer.append(".")
        writer.append(decimal: Int64(info.st_ctim.tv_nsec))
        return true
    }

    /// `socketFileIdentity` as a String; nil when there is no socket file at `path`.
    public static func socketFileIdentity(of path: String) -> String? {
        let capacity = 96
        return path.withCString { cPath in
            let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            defer { buffer.deallocate() }
            var writer = HotPath.Writer(buffer, capacity: capacity)
            guard socketFileIdentity(cPath, into: &writer), !writer.overflowed else { return nil }
            return String(decoding: UnsafeBufferPointer(start: buffer, count: writer.count), as: UTF8.self)
        }
    }

    static func reason(_ error: Int32) -> String { Errno(error).description }
}

extension ForwardClient {
    /// The issuer field of the client's hot-cache entries for tokens from the socket at `path`,
    /// bound as `identity` (`socketFileIdentity`): no real issuer looks like it, so local
    /// sessions, each socket and each binding of it (each `ssh -R`, each listener, so each
    /// serving host) have keys of their own.
    public static func cacheIssuer(socketPath path: String, identity: String) -> String {
        "forward:" + path + "#" + identity
    }
    /// The client ID field of those entries.
    public static let cacheClientID = "tokenctl-forward"
}
