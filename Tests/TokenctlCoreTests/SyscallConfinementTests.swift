import Foundation
import Testing

/// The C library is called from the system layer only (one file of C calls per library, as swift-system does, so that the rest reads as Swift): in TokenctlCore from
/// `System/Syscalls.swift` (and the files, environment and kernel keyring files listed below); in
/// TokenctlEssentials from its system files (descriptors, the running executable) and the front's Foundation-free
/// hit path, which keeps its own minimal calls, listed here, as do the two executables' mains;
/// in TokenctlCommands not at all.
/// This reads every other source of the three and fails on a call to a libc function it knows,
/// or a use of `errno` or `environ`. Swift methods that share a libc name are listed, file by file.
@Suite("libc is called only from the system layer")
struct SyscallConfinementTests {
    static let libcFunctions = """
        open close flock fstat stat lstat rename read write access readlink pipe fcntl socket bind listen accept \
        getsockname poll recv send kill usleep sleep sigaction sigemptyset signal getenv setenv unsetenv waitpid \
        posix_spawn posix_spawnp posix_spawn_file_actions_init posix_spawn_file_actions_addopen clock_gettime timegm \
        gmtime_r localtime_r strdup free malloc strerror getuid getpid mkdir unlink fsync ftruncate dup2 execv execvp \
        execve fork isatty tcgetattr tcsetattr getcwd mkstemp mkdtemp chmod fchmod opendir readdir closedir exit \
        socketpair shutdown posix_spawnattr_init posix_spawnattr_setflags posix_spawnattr_setsigmask connect \
        getsockopt setsockopt
        """.split(separator: " ").map(String.init)

    /// Swift methods named like a libc function, called unqualified in these files.
    static let swiftMethods: [String: Set<String>] = [
        "SessionStore.swift": ["write"], "TokenBroker.swift": ["read"], "HTTP.swift": ["send"],
        "CurlHTTPClient.swift": ["send"],
        "KernelKeyring.swift": ["read"], "ForwardCommand.swift": ["listen"],
        "SecretServiceStore.swift": ["connect"], "SecretServiceStore+Secrets.swift": ["connect"],
    ]

    /// Where each library may call libc, and what.
    struct Layer {
        var sources: String
        /// Files that may call any libc function: the system layer.
        var system: Set<String>
        /// Other files that may call these functions only.
        var listed: [String: Set<String>] = [:]
        var minimumFiles: Int
    }

    static let layers = [
        Layer(
            sources: "TokenctlCore",
            // Syscalls.swift, and the files and environment the engine reads (System/FileIO.swift,
            // System/Environment.swift): each one library's or one concern's calls, nothing else in them.
            // And the forward's serving socket (System/UnixSocket.swift: bind, accept, SO_PEERCRED,
            // the per-connection child).
            system: ["Syscalls.swift", "FileIO.swift", "Environment.swift", "UnixSocket.swift"],
            minimumFiles: 30),
        Layer(
            sources: "TokenctlEssentials",
            // And the forward's client socket (Forward/ForwardClient.swift), which the front uses,
            // and the kernel keyring's one file (System/KernelKeyring.swift, over CKernelKeyring),
            // which the engine's hot cache and the front's forwarded miss write through, and the
            // one monotonic clock (System/MonotonicClock.swift), and the typed errno (System/Errno.swift).
            system: [
                "Descriptor.swift", "CurrentExecutable.swift", "ForwardClient.swift", "KernelKeyring.swift",
                "MonotonicClock.swift", "Errno.swift",
            ],
            listed: [
                // The front's hit path: Foundation-free and as short as a process start, its
                // minimal calls its own (writes and the EINTR retry go through Descriptor).
                "HotPath.swift": ["clock_gettime", "malloc", "free", "signal"],
                "HotPath+Profile.swift": ["open", "close", "fstat", "read"],
                // Which forward socket, if any: a getenv the caller makes, one lstat. A forwarded
                // hit adds ForwardClient's stat of the socket file and its datagram probe (socket,
                // connect, close), which connects to nothing.
                "HotPath+Forward.swift": ["malloc", "free", "lstat", "getuid", "signal"],
                // C strings of Swift strings for the argv reader the engine's parser shares.
                "ArgumentSyntax.swift": ["strdup", "free"],
            ],
            minimumFiles: 15),
        Layer(sources: "TokenctlCommands", system: [], minimumFiles: 15),
        // The front's own start: the miss path that replaces it with the engine.
        Layer(
            sources: "tokenctl", system: [],
            listed: ["main.swift": ["access", "execv", "strerror", "errno", "exit", "getenv"]], minimumFiles: 1),
        Layer(sources: "tokenctl-engine", system: [], listed: ["main.swift": ["signal", "exit"]], minimumFiles: 1),
    ]

    @Test("no file outside the system layer calls libc", arguments: SyscallConfinementTests.layers.map(\.sources))
    func confined(_ sources: String) throws {
        let layer = try #require(Self.layers.first { $0.sources == sources })
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../Sources/\(sources)"
        ).standardized
        let files = try #require(FileManager.default.enumerator(atPath: root.path)).compactMap { $0 as? String }.filter
        { $0.hasSuffix(".swift") }
        #expect(files.count >= layer.minimumFiles)
        let call = try NSRegularExpression(
            pattern: "(?<![.\\w])(?<!func )(" + Self.libcFunctions.joined(separator: "|") + ")\\((?!\\))")
        // Empty parentheses are a type's initializer (`stat()`), except for these.
        let withoutArguments = try NSRegularExpression(pattern: "(?<![.\\w])(getuid|getpid|geteuid|getppid|fork)\\(\\)")
        let global = try NSRegularExpression(pattern: "(?<![.\\w])(errno|environ)\\b")
        let literal = try NSRegularExpression(pattern: "\"[^\"]*\"")
        var found: [String] = []
        for file in files {
            let name = URL(fileURLWithPath: file).lastPathComponent
            if layer.system.contains(name) { continue }
            let allowed = layer.listed[name] ?? []
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                // Code only: no comment, no string literal.
                let withoutComment = String(
                    line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
                let code = literal.stringByReplacingMatches(
                    in: withoutComment, range: NSRange(withoutComment.startIndex..., in: withoutComment),
                    withTemplate: "\"\"")
                let range = NSRange(code.startIndex..., in: code)
                for match in call.matches(in: code, range: range) + withoutArguments.matches(in: code, range: range) {
                    let function = (code as NSString).substring(with: match.range(at: 1))
                    if Self.swiftMethods[name]?.contains(function) == true || allowed.contains(function) { continue }
                    found.append("\(file):\(number + 1): \(function)")
                }
                if global.firstMatch(in: code, range: range) != nil && !allowed.contains("errno") {
                    found.append("\(file):\(number + 1): errno/environ")
                }
            }
        }
        #expect(found.isEmpty, "libc called outside the system layer of \(sources):\n\(found.joined(separator: "\n"))")
    }
}
