import Synchronization
import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Starting another program, the four ways tokenctl does: `run` a helper and collect its
/// output (systemctl, crontab, systemd-analyze), `launch` one and leave it running (the
/// browser), `detach` one that must outlive this process and talk to it over pipes (the refresh
/// exchange, `DetachedRefresh`), `exec` one in tokenctl's place (`tokenctl exec`). Every way starts from
/// `prepareChild()`, so no program gets a connection of ours. Never used to pass a secret in
/// argv: arguments and input here are schedule text, a URL or the user's own command line.
public struct Subprocess: Sendable {
    public struct Result: Sendable, Equatable {
        public var status: Int32
        /// stdout and stderr together.
        public var output: String

        public init(status: Int32, output: String) {
            self.status = status
            self.output = output
        }
    }

    /// Held while a program is started, and by code that makes a descriptor and marks it
    /// close-on-exec in two steps (`withoutStarting`): no child inherits one in between.
    private static let starting = Mutex(())

    /// `body` while no program is being started by this process.
    public static func withoutStarting<Result>(_ body: () -> Result) -> Result {
        starting.withLock { _ in body() }
    }

    /// What every program started gets of ours: nothing kept open. libcurl's sockets are not
    /// close-on-exec, and a program may outlive tokenctl (a browser) or run instead of it.
    private static func prepareChild() {
        CurlHTTPClient.closeKeptConnections()
    }

    /// Run `arguments[0]` (searched in PATH when it has no slash) with `input` on stdin.
    public static func run(_ arguments: [String], input: String? = nil) -> Result {
        guard let program = arguments.first, let path = locate(program) else {
            return Result(status: 127, output: "\(arguments.first ?? "?"): not found")
        }
        var inputPipe: [Int32] = [-1, -1]
        var outputPipe: [Int32] = [-1, -1]
        // Close-on-exec before any other thread starts a program (a detached refresh): only
        // this child gets them, as its standard input, output and error (dup2 clears the flag).
        let piped = withoutStarting {
            system_pipe(&inputPipe) == 0 && system_pipe(&outputPipe) == 0
                && (inputPipe + outputPipe).allSatisfy { system_fcntl($0, F_SETFD, FD_CLOEXEC) == 0 }
        }
        guard piped else {
            (inputPipe + outputPipe).filter { $0 >= 0 }.forEach { system_close($0) }
            return Result(status: 126, output: "pipe: \(system_strerror(system_errno))")
        }
        let (spawned, pid) = spawn(
            arguments, at: path,
            streams: [.descriptor(inputPipe[0]), .descriptor(outputPipe[1]), .descriptor(outputPipe[1])],
            closing: inputPipe + outputPipe)
        system_close(inputPipe[0])
        system_close(outputPipe[1])
        guard spawned == 0 else {
            system_close(inputPipe[1])
            system_close(outputPipe[0])
            return Result(status: 126, output: "\(program): \(system_strerror(spawned))")
        }
        if let input { Descriptor.writeAll(inputPipe[1], input) }
        system_close(inputPipe[1])
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = Descriptor.retryingInterrupted {
                buffer.withUnsafeMutableBytes { system_read(outputPipe[0], $0.baseAddress, $0.count) }
            }
            if count <= 0 { break }
            output += buffer[0..<count]
        }
        system_close(outputPipe[0])
        var status: Int32 = 0
        _ = Descriptor.retryingInterrupted { system_waitpid(pid, &status, 0) }
        let signal = status & 0x7F
        return Result(
            status: signal == 0 ? (status >> 8) & 0xFF : 128 + signal, output: String(decoding: output, as: UTF8.self))
    }

    /// Start `arguments[0]` (searched in PATH) without waiting for it, its standard input,
    /// output and error on /dev/null. Whether it started.
    public static func launch(_ arguments: [String]) -> Bool {
        guard !arguments.isEmpty else { return false }
        return spawn(arguments, at: nil, streams: [.null, .null, .null]).status == 0
    }

    /// A program started by `detach`, and our end of the socket that is its standard input
    /// and output.
    public struct DetachedChild: Sendable {
        public var pid: pid_t
        /// Our end of the child's standard input and output (close-on-exec here).
        public var socket: Int32

        /// Say that nothing more comes on the child's standard input (it reads end of file).
        public func finishSending() { system_shutdown(socket, Int32(SHUT_WR)) }
        public func close() { system_close(socket) }

        /// Whether the socket has something to read (or is closed) within `timeout` seconds.
        public func waitReadable(timeout: Double) -> Bool {
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(clamping: Int((min(max(timeout, 0), 3600) * 1000).rounded(.up)))
            return Descriptor.retryingInterrupted { system_poll(&descriptor, 1, milliseconds) } > 0
        }

        /// Collect the child's exit status if it has ended (never waits).
        public func reap() {
            var status: Int32 = 0
            _ = Descriptor.retryingInterrupted { system_waitpid(pid, &status, WNOHANG) }
        }
    }

    /// Start `arguments[0]` (an absolute path) in a session of its own (setsid), so that no
    /// signal meant for this process, its process group or its terminal reaches it; its standard
    /// input and output are one end of a socket pair whose other end is returned, its standard
    /// error /dev/null, its signal mask empty. Nil when it could not be started.
    public static func detach(_ arguments: [String]) -> DetachedChild? {
        guard let program = arguments.first else { return nil }
        var pair: [Int32] = [-1, -1]
        // Close-on-exec from the start: a program another thread starts meanwhile must not
        // inherit an end (the child would never read end of file).
        guard system_socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0
        else { return nil }
        let (spawned, pid) = system_with_posix_spawnattr { attributes in
            var empty = sigset_t()
            system_sigemptyset(&empty)
            system_posix_spawnattr_setsigmask(attributes, &empty)
            system_posix_spawnattr_setflags(attributes, Int16(system_POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK))
            // The copies of pair[1] lose close-on-exec (dup2); the originals close at exec.
            return spawn(
                arguments, at: program, streams: [.descriptor(pair[1]), .descriptor(pair[1]), .null],
                attributes: attributes)
        }
        system_close(pair[1])
        guard spawned == 0 else {
            system_close(pair[0])
            return nil
        }
        return DetachedChild(pid: pid, socket: pair[0])
    }

    /// Why `exec` could not run a program.
    public struct ExecFailure: Error, Sendable, Equatable {
        public var code: Int32

        /// The failure of errno `code`.
        public init(code: Int32) { self.code = code }
        /// Not found (a shell's 127), rather than found but not runnable (126).
        public var notFound: Bool { code == ENOENT || code == ENOTDIR }
        /// strerror(3) of `code`.
        public var reason: String { system_strerror(code) }
    }

    /// Replace this process with `arguments[0]` (searched in PATH), SIGPIPE back to its default
    /// for it (tokenctl ignores SIGPIPE). Returns only on failure, with SIGPIPE as it was.
    public static func exec(_ arguments: [String]) -> ExecFailure {
        guard let program = arguments.first else { return ExecFailure(code: ENOENT) }
        prepareChild()
        let previous = system_signal(SIGPIPE, SIG_DFL)
        // The copies are not freed: on success this process image is gone.
        let argv = arguments.map { system_strdup($0) } + [nil]
        system_execvp(program, argv)
        let failure = ExecFailure(code: system_errno)
        argv.forEach { system_free($0) }
        system_signal(SIGPIPE, previous)
        return failure
    }

    /// Where a started program's standard input, output or error comes from: a descriptor of
    /// ours (dup2, which clears close-on-exec on the copy), or /dev/null.
    private enum ChildStream {
        case descriptor(Int32)
        case null
    }

    /// Start `arguments`: the program at `path` (posix_spawn), or `arguments[0]` searched in PATH
    /// when `path` is nil (posix_spawnp); its standard input, output and error from `streams`,
    /// `closing` closed in it, and `attributes`; `prepareChild()` first, and the spawn while no
    /// other program is being started. posix_spawn's status (0 when started) and the pid.
    private static func spawn(
        _ arguments: [String], at path: String?, streams: [ChildStream], closing: [Int32] = [],
        attributes: UnsafePointer<posix_spawnattr_t>? = nil
    ) -> (status: Int32, pid: pid_t) {
        prepareChild()
        return system_with_posix_spawn_file_actions { actions in
            for (target, stream) in zip(Int32(0)..., streams) {
                switch stream {
                case .descriptor(let descriptor): system_posix_spawn_file_actions_adddup2(actions, descriptor, target)
                case .null:
                    system_posix_spawn_file_actions_addopen(
                        actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
                }
            }
            for descriptor in closing { system_posix_spawn_file_actions_addclose(actions, descriptor) }
            var pid: pid_t = 0
            let status = withoutStarting {
                withArgv(arguments) { argv in
                    system_posix_spawn(
                        &pid, path ?? arguments[0], searchingPath: path == nil, actions, attributes, argv,
                        system_environ)
                }
            }
            return (status, pid)
        }
    }

    /// `body` with `arguments` as a C argv (NULL-terminated copies, freed after).
    private static func withArgv<R>(_ arguments: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
        let argv = arguments.map { system_strdup($0) } + [nil]
        defer { argv.forEach { system_free($0) } }
        return body(argv)
    }

    /// The absolute path of `program` in PATH, or nil.
    public static func locate(_ program: String) -> String? {
        if program.contains("/") { return system_access(program, X_OK) == 0 ? program : nil }
        let path = system_getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") where !directory.isEmpty {
            let candidate = "\(directory)/\(program)"
            if system_access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }
}
