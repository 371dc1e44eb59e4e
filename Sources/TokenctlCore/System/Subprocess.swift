#if canImport(Glibc)
import Glibc
#endif

/// Running a helper program (systemctl, crontab, systemd-analyze) and collecting its output.
/// Never used to pass a secret: arguments and input here are schedule text only.
public struct Subprocess: Sendable {
    public struct Result: Sendable, Equatable {
        public var status: Int32
        /// stdout and stderr together.
        public var output: String
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
        // The helper gets no connection of ours (`doctor` checks issuers first; libcurl's sockets
        // are not close-on-exec).
        CurlHTTPClient.closeKeptConnections()
        var actions = posix_spawn_file_actions_t()
        system_posix_spawn_file_actions_init(&actions)
        defer { system_posix_spawn_file_actions_destroy(&actions) }
        system_posix_spawn_file_actions_adddup2(&actions, inputPipe[0], 0)
        system_posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
        system_posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 2)
        for descriptor in inputPipe + outputPipe { system_posix_spawn_file_actions_addclose(&actions, descriptor) }
        let argv = arguments.map { system_strdup($0) } + [nil]
        defer { argv.forEach { system_free($0) } }
        var pid: pid_t = 0
        let spawned = system_posix_spawn(&pid, path, &actions, nil, argv, system_environ)
        system_close(inputPipe[0])
        system_close(outputPipe[1])
        guard spawned == 0 else {
            system_close(inputPipe[1])
            system_close(outputPipe[0])
            return Result(status: 126, output: "\(program): \(system_strerror(spawned))")
        }
        if let input {
            var bytes = Array(input.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { system_write(inputPipe[1], $0.baseAddress, $0.count) }
                if written <= 0 { break }
                bytes = bytes.dropFirst(written)
            }
        }
        system_close(inputPipe[1])
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { system_read(outputPipe[0], $0.baseAddress, $0.count) }
            if count < 0 && system_errno == EINTR { continue }
            if count <= 0 { break }
            output += buffer[0..<count]
        }
        system_close(outputPipe[0])
        var status: Int32 = 0
        while system_waitpid(pid, &status, 0) < 0 && system_errno == EINTR {}
        let signal = status & 0x7F
        return Result(status: signal == 0 ? (status >> 8) & 0xFF : 128 + signal, output: String(decoding: output, as: UTF8.self))
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

    /// The running executable (what schedules should run), from /proc/self/exe.
    public static func currentExecutable() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = system_readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
