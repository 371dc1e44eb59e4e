import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Starting another program, the three ways tokenctl does: `run` a helper and collect its
/// output (systemctl, crontab, systemd-analyze), `launch` one and leave it running (the
/// browser), `exec` one in tokenctl's place (`tokenctl exec`). Every way starts from
/// `prepareChild()`, so no program gets a connection of ours. Never used to pass a secret in
/// argv: arguments and input here are schedule text, a URL or the user's own command line.
public struct Subprocess: Sendable {
    public struct Result: Sendable, Equatable {
        public var status: Int32
        /// stdout and stderr together.
        public var output: String
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
        guard system_pipe(&inputPipe) == 0, system_pipe(&outputPipe) == 0 else {
            return Result(status: 126, output: "pipe: \(system_strerror(system_errno))")
        }
        prepareChild()
        var actions = posix_spawn_file_actions_t()
        system_posix_spawn_file_actions_init(&actions)
        defer { system_posix_spawn_file_actions_destroy(&actions) }
        system_posix_spawn_file_actions_adddup2(&actions, inputPipe[0], 0)
        system_posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
        system_posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 2)
        for descriptor in inputPipe + outputPipe { system_posix_spawn_file_actions_addclose(&actions, descriptor) }
        var pid: pid_t = 0
        let spawned = withArgv(arguments) { system_posix_spawn(&pid, path, &actions, nil, $0, system_environ) }
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
        guard let program = arguments.first else { return false }
        prepareChild()
        var actions = posix_spawn_file_actions_t()
        system_posix_spawn_file_actions_init(&actions)
        defer { system_posix_spawn_file_actions_destroy(&actions) }
        system_posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        system_posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        system_posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var pid: pid_t = 0
        return withArgv(arguments) { system_posix_spawnp(&pid, program, &actions, nil, $0, system_environ) } == 0
    }

    /// Why `exec` could not run a program.
    public struct ExecFailure: Error, Sendable, Equatable {
        public var code: Int32
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
