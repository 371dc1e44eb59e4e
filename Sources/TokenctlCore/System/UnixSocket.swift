import Synchronization
import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The forward's serving side at the level of system calls: the listening socket, the peer's
/// credentials, bounded reads and writes of one connection, and the child that serves it.
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
            return errno == ENOTSOCK ? .notASocket : .failed(String(cString: strerror(errno)))
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
        let deadline = ForwardClient.monotonicNow() + seconds
        var message: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !(message.count >= 2 && message[message.count - 1] == 0x0A && message[message.count - 2] == 0x0A) {
            let left = deadline - ForwardClient.monotonicNow()
            guard left > 0 else { return .timedOut }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = Descriptor.retryingInterrupted { poll(&poller, 1, Int32(left * 1000) + 1) }
            if ready == 0 { continue }
            if ready < 0 { return .failed(String(cString: strerror(errno))) }
            let got = buffer.withUnsafeMutableBytes { raw in
                Descriptor.retryingInterrupted { read(descriptor, raw.baseAddress, raw.count) }
            }
            if got < 0 {
                if errno == EAGAIN { continue }
                return .failed(String(cString: strerror(errno)))
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
    /// - Parameter makingPrivateDirectory: create the directory (0700, ours) when it is
    ///   tokenctl's own (the runtime directory's `tokenctl/`); a directory the user named is
    ///   left as it is (it must exist), never re-moded (`/tmp`, a container's volume).
    public static func listen(at path: String, makingPrivateDirectory: Bool, backlog: Int32 = 128)
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
                    hint: "See 'tokenctl forward status'.")
            }
            unlink(path)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
            raw[path.utf8.count] = 0
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            throw TokenctlError(.serviceUnavailable, "cannot make a socket: \(String(cString: strerror(errno)))")
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
                "cannot listen at \(path): \(String(cString: strerror(bound == 0 ? errno : bindError)))")
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

    /// The next connection, or nil after `seconds` without one (or on a signal).
    public static func accept(_ descriptor: Int32, within seconds: Double) -> Int32? {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(seconds * 1000)) > 0 else { return nil }
        let connection = Glibc.accept(descriptor, nil, nil)
        guard connection >= 0 else { return nil }
        // Not inherited by the serving children of other connections (dup2 clears it on 0 and 1).
        _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
        return connection
    }

    /// Start `arguments` (an absolute path first) with `connection` as its standard input and
    /// output (as systemd's Accept=yes does), standard error inherited; its pid, or nil.
    public static func spawnServing(_ arguments: [String], connection: Int32) -> Int32? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, connection, 0)
        posix_spawn_file_actions_adddup2(&actions, connection, 1)
        var pid: pid_t = 0
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let result = posix_spawn(&pid, arguments[0], &actions, nil, argv, environ)
        return result == 0 ? pid : nil
    }

    /// Reap finished children without waiting; how many were reaped.
    public static func reapChildren() -> Int {
        var count = 0
        var status: Int32 = 0
        while waitpid(-1, &status, WNOHANG) > 0 { count += 1 }
        return count
    }

    /// Wait for one child to finish (at most `seconds`, polling).
    public static func waitForAChild(within seconds: Double) -> Bool {
        let deadline = ForwardClient.monotonicNow() + seconds
        var status: Int32 = 0
        while ForwardClient.monotonicNow() < deadline {
            if waitpid(-1, &status, WNOHANG) > 0 { return true }
            usleep(10_000)
        }
        return false
    }

    /// SIGINT, SIGTERM and SIGHUP set `stopRequested` instead of ending the process.
    public static func catchStopSignals() {
        for signalNumber in [SIGINT, SIGTERM, SIGHUP] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = recordStop
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0 // no SA_RESTART: poll returns at once
            sigaction(signalNumber, &action, nil)
        }
        signal(SIGPIPE, SIG_IGN)
    }

    public static var stopRequested: Bool { stopSignal.load(ordering: .sequentiallyConsistent) != 0 }
}

private let stopSignal = Atomic<Int32>(0)

private let recordStop: @convention(c) (Int32) -> Void = { signal in
    stopSignal.store(signal, ordering: .sequentiallyConsistent)
}
