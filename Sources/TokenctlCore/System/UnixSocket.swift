import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The forward's serving side at the level of system calls: the listening socket (its own, or
/// the one systemd hands over), the peer's credentials, bounded and non-blocking reads and
/// writes of connections, and the wait over all of them.
/// One concern's libc calls, in one file of the system layer (SyscallConfinementTests).
public enum UnixSocket {
    /// Who is at the other end of a connected socket (SO_PEERCRED: the process that connected,
    /// as the kernel saw it then).
    public struct Peer: Sendable, Equatable {
        public var pid: Int32
        public var uid: UInt32
        public var gid: UInt32
        /// `/proc/PID/comm`, for the event log ("sshd", "docker-proxy", "tokenctl"), if readable.
        public var command: String?
    }

    public enum PeerCheck: Sendable, Equatable {
        case peer(Peer)
        /// The descriptor is not a socket (run by hand, from a terminal or a pipe).
        case notASocket
        case failed(String)
    }

    /// The peer of `descriptor`.
    public static func peer(of descriptor: Int32) -> PeerCheck {
        // struct ucred (pid, uid, gid), which Glibc's module leaves out without _GNU_SOURCE.
        var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else {
            return errno == ENOTSOCK ? .notASocket : .failed(Errno.current.description)
        }
        let command = (try? FileIO.readFile("/proc/\(credentials.pid)/comm", limit: 64))
            .map { ForwardProtocol.sanitized(String($0.prefix { $0 != "\n" }), limit: 32) }
        return .peer(Peer(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, command: command))
    }

    public static var userID: UInt32 { getuid() }

    /// The host's name, for "forwarded from …".
    public static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return ForwardProtocol.sanitized(name, limit: 255)
    }

    /// How a bounded read of one message ended.
    public enum Received: Equatable {
        /// The message, up to and including its empty line (or all there was before EOF).
        case message([UInt8])
        case tooLarge
        case timedOut
        case failed(String)
    }

    /// Read from `descriptor` until a message's closing empty line, EOF, `limit` bytes or the
    /// deadline (seconds from now), whichever comes first: a slow or silent peer holds a
    /// connection no longer than that.
    public static func receive(_ descriptor: Int32, limit: Int, within seconds: Double) -> Received {
        let deadline = MonotonicClock.now() + seconds
        var message: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !(message.count >= 2 && message[message.count - 1] == 0x0A && message[message.count - 2] == 0x0A) {
            let left = deadline - MonotonicClock.now()
            guard left > 0 else { return .timedOut }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = Descriptor.retryingInterrupted { poll(&poller, 1, Int32(left * 1000) + 1) }
            if ready == 0 { continue }
            if ready < 0 { return .failed(Errno.current.description) }
            let got = buffer.withUnsafeMutableBytes { raw in
                Descriptor.retryingInterrupted { read(descriptor, raw.baseAddress, raw.count) }
            }
            if got < 0 {
                if errno == EAGAIN { continue }
                return .failed(Errno.current.description)
            }
            if got == 0 { break }
            message.append(contentsOf: buffer[0..<got])
            if message.count > limit { return .tooLarge }
        }
        return .message(message)
    }

    /// Write all of `bytes`, within `seconds` (a peer that reads nothing cannot hold the server).
    @discardableResult
    public static func send(_ descriptor: Int32, _ bytes: [UInt8], within seconds: Double) -> Bool {
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        signal(SIGPIPE, SIG_IGN)
        return Descriptor.writeAll(descriptor, bytes) == 0
    }

    /// No more writes on this connection: the client reads the end of the answer.
    public static func finishSending(_ descriptor: Int32) { shutdown(descriptor, Int32(SHUT_WR)) }

    /// Whether something accepts connections at `path` now (a live server, not a stale file).
    public static func isServed(_ path: String) -> Bool {
        guard case .success(let descriptor) = ForwardClient.connectOnly(path) else { return false }
        _ = Glibc.close(descriptor)
        return true
    }

    /// Whether `path` is a socket file.
    public static func isSocketFile(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
    }

    /// A listening socket at `path`, this user's only (0600 from its creation). A socket file
    /// nothing serves (a server that was killed) is replaced; a served one, or anything that is
    /// not a socket, is not.
    ///
    /// The backlog is what waits while the serving loop has `maximumConnections` open: the
    /// kernel caps it at net.core.somaxconn; a client beyond it waits in connect(2), never reset.
    ///
    /// - Parameter makingPrivateDirectory: create the directory (0700, ours) when it is
    ///   tokenctl's own (the runtime directory's `tokenctl/`); a directory the user named is
    ///   left as it is (it must exist), never re-moded (`/tmp`, a container's volume).
    public static func listen(at path: String, makingPrivateDirectory: Bool, backlog: Int32 = 4096)
        throws(TokenctlError) -> Int32
    {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else {
            throw TokenctlError(.configuration, "the socket path is longer than \(capacity - 1) bytes: \(path)")
        }
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if makingPrivateDirectory, !directory.isEmpty {
            do { try FileIO.ensurePrivateDirectory(directory) } catch {
                throw TokenctlError(.configuration, "cannot make the socket's directory \(directory): \(error)")
            }
        }
        var info = stat()
        if lstat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFSOCK else {
                throw TokenctlError(.configuration, "\(path) exists and is not a socket; not replacing it")
            }
            if isServed(path) {
                throw TokenctlError(
                    .serviceUnavailable,
                    "something already serves \(path) (another 'tokenctl forward listen', or the socket unit)",
                    hint: "See '\(tokenctl: .default, .forward(.status, []))'.")
            }
            unlink(path)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
            raw[path.utf8.count] = 0
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            throw TokenctlError(.serviceUnavailable, "cannot make a socket: \(Errno.current.description)")
        }
        // Private from its first moment: no other user may connect between bind and chmod.
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        let bindError = errno
        umask(previous)
        guard bound == 0, Glibc.listen(descriptor, backlog) == 0 else {
            close(descriptor)
            throw TokenctlError(
                .serviceUnavailable,
                "cannot listen at \(path): \(Errno(bound == 0 ? errno : bindError).description)")
        }
        chmod(path, 0o600)
        return descriptor
    }

    /// The identity of the socket file at `path` (device, inode), to remove only our own.
    public static func fileIdentity(_ path: String) -> (UInt64, UInt64)? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    public static func remove(_ path: String) { unlink(path) }

    public static func close(_ descriptor: Int32) { _ = Glibc.close(descriptor) }

    // MARK: One serving process: sockets handed over by systemd, and non-blocking connections

    /// The listening sockets systemd passed to this process (socket activation with Accept=no),
    /// as sd_listen_fds(3) finds them: `LISTEN_PID` is this process, `LISTEN_FDS` counts the
    /// descriptors from 3 (SD_LISTEN_FDS_START). The variables are removed (as with
    /// `unset_environment` true) and the descriptors made close-on-exec, so that no child (the
    /// detached refresh engine) inherits them or believes they are its own.
    public static func socketsFromServiceManager() -> [Int32] {
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pidText = getenv("LISTEN_PID").map({ String(cString: $0) }), let pid = Int32(pidText),
            pid == getpid(), let countText = getenv("LISTEN_FDS").map({ String(cString: $0) }),
            let count = Int32(countText), count > 0, count <= 64
        else { return [] }
        return (0..<count).map { 3 + $0 }.filter { descriptor in
            guard fcntl(descriptor, F_SETFD, FD_CLOEXEC) == 0 else { return false }
            return isListening(descriptor)
        }
    }

    /// Whether `descriptor` is a listening stream socket (SO_ACCEPTCONN, socket(7)).
    public static func isListening(_ descriptor: Int32) -> Bool {
        var accepting: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(descriptor, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0 && accepting != 0
    }

    /// Make `descriptor` non-blocking (and close-on-exec): the serving loop never waits on one peer.
    @discardableResult
    public static func makeNonBlocking(_ descriptor: Int32) -> Bool {
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0, fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0 else { return false }
        return fcntl(descriptor, F_SETFD, FD_CLOEXEC) == 0
    }

    /// Why an accept gave no connection.
    public enum AcceptResult: Equatable {
        case connection(Int32)
        /// Nothing waiting (EAGAIN), or a connection that was gone before it was taken.
        case nothing
        /// Out of descriptors (EMFILE, ENFILE) or memory: stop accepting for a moment; the
        /// connections wait in the kernel's queue meanwhile.
        case exhausted
    }

    /// The next waiting connection on a non-blocking listening socket, itself non-blocking.
    public static func acceptWaiting(_ listening: Int32) -> AcceptResult {
        // accept4(2) with SOCK_CLOEXEC is a GNU extension Swift's Glibc module does not import:
        // accept and mark close-on-exec while no program is being started (`Subprocess`), so
        // that no child (a detached refresh) inherits a peer's connection.
        Subprocess.withoutStarting { () -> AcceptResult in
            let connection = Descriptor.retryingInterrupted { Glibc.accept(listening, nil, nil) }
            guard connection >= 0 else {
                switch errno {
                case EMFILE, ENFILE, ENOBUFS, ENOMEM: return .exhausted
                default: return .nothing
                }
            }
            guard makeNonBlocking(connection) else {
                _ = Glibc.close(connection)
                return .nothing
            }
            return .connection(connection)
        }
    }

    /// One descriptor to wait on, and what happened to it.
    public struct Waiting: Sendable {
        public var descriptor: Int32
        public var reading: Bool
        public var writing: Bool
        /// After `wait`: readable (or closed), writable, or in error.
        public var readable = false
        public var writable = false
        public var failed = false

        public init(_ descriptor: Int32, reading: Bool = true, writing: Bool = false) {
            self.descriptor = descriptor
            self.reading = reading
            self.writing = writing
        }
    }

    /// Wait (poll(2)) until one of `entries` is ready or `seconds` pass; marks each entry.
    public static func wait(_ entries: inout [Waiting], within seconds: Double) {
        var pollers = entries.map { entry in
            pollfd(
                fd: entry.descriptor,
                events: Int16((entry.reading ? POLLIN : 0) | (entry.writing ? POLLOUT : 0)), revents: 0)
        }
        let milliseconds = Int32(max(0, min(seconds, 3600)) * 1000)
        let ready = pollers.withUnsafeMutableBufferPointer { buffer in
            poll(buffer.baseAddress, nfds_t(buffer.count), milliseconds)
        }
        guard ready > 0 else { return }
        for index in entries.indices {
            let events = Int32(pollers[index].revents)
            entries[index].readable = events & Int32(POLLIN | POLLHUP) != 0
            entries[index].writable = events & Int32(POLLOUT) != 0
            entries[index].failed = events & Int32(POLLERR | POLLNVAL) != 0
        }
    }

    /// What a non-blocking read gave.
    public enum ReadSome: Equatable {
        case bytes(Int)
        case wouldBlock
        case endOfFile
        case failed(String)
    }

    /// Read what is there (at most `limit` bytes) onto the end of `message`.
    public static func readSome(_ descriptor: Int32, into message: inout [UInt8], limit: Int) -> ReadSome {
        var buffer = [UInt8](repeating: 0, count: max(1, min(limit, 4096)))
        let got = buffer.withUnsafeMutableBytes { raw in
            Descriptor.retryingInterrupted { read(descriptor, raw.baseAddress, raw.count) }
        }
        if got < 0 {
            let error = Errno.current
            return error.wouldBlock ? .wouldBlock : .failed(error.description)
        }
        if got == 0 { return .endOfFile }
        message.append(contentsOf: buffer[0..<got])
        return .bytes(got)
    }

    /// Write what the socket takes now of `bytes[offset...]`: the new offset, or nil when the
    /// peer is gone (EPIPE, ECONNRESET: MSG_NOSIGNAL, no SIGPIPE).
    public static func writeSome(_ descriptor: Int32, _ bytes: [UInt8], from offset: Int) -> Int? {
        guard offset < bytes.count else { return offset }
        let sent = bytes.withUnsafeBytes { raw in
            Descriptor.retryingInterrupted {
                Glibc.send(descriptor, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
        }
        if sent < 0 { return errno == EAGAIN || errno == EWOULDBLOCK ? offset : nil }
        return offset + sent
    }

    /// A pipe to wake a `wait` from another thread: (read end, write end), both non-blocking.
    public static func wakePipe() -> (Int32, Int32)? {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return nil }
        makeNonBlocking(ends[0])
        makeNonBlocking(ends[1])
        return (ends[0], ends[1])
    }

    /// Wake the waiter of `pipe`'s read end (a full pipe is awake already).
    public static func wake(_ writeEnd: Int32) {
        var byte: UInt8 = 1
        _ = Glibc.write(writeEnd, &byte, 1)
    }

    /// Empty the read end of a wake pipe.
    public static func drain(_ readEnd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 256)
        while buffer.withUnsafeMutableBytes({ Glibc.read(readEnd, $0.baseAddress, $0.count) }) > 0 {}
    }

    /// Resident memory of this process in kilobytes (VmRSS, proc(5)), for `forward serve`'s log.
    public static func residentKilobytes() -> Int? {
        guard let text = (try? FileIO.readFile("/proc/self/status", limit: 8192)) ?? nil,
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return nil }
        return Int(line.dropFirst(6).filter { $0 >= "0" && $0 <= "9" })
    }
}
