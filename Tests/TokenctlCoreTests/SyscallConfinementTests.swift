import Foundation
import Testing

/// TokenctlCore calls the C library from one file, `System/Syscalls.swift` (one file of C calls
/// per library, as swift-system does, so that the rest of Core reads as Swift): this
/// reads every other Core source and fails on a call to a libc function it knows, or a use of
/// `errno` or `environ`. Swift methods that share a libc name are listed, file by file.
@Suite("Core calls libc only from System/Syscalls.swift")
struct SyscallConfinementTests {
    static let libcFunctions = """
        open close flock fstat stat lstat rename read write access readlink pipe fcntl socket bind listen accept \
        getsockname poll recv send kill usleep sleep sigaction sigemptyset signal getenv setenv unsetenv waitpid \
        posix_spawn posix_spawnp clock_gettime timegm gmtime_r localtime_r strdup free malloc strerror getuid getpid \
        mkdir unlink fsync ftruncate dup2 execv execvp isatty
        """.split(separator: " ").map(String.init)

    /// Swift methods named like a libc function, called unqualified in these files.
    static let swiftMethods: [String: Set<String>] = [
        "SessionStore.swift": ["write"], "TokenBroker.swift": ["read"], "HTTP.swift": ["send"], "CurlHTTPClient.swift": ["send"],
    ]

    @Test("no other Core file calls libc")
    func confined() throws {
        let core = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources/TokenctlCore").standardized
        let files = try #require(FileManager.default.enumerator(atPath: core.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        #expect(files.count > 30)
        let call = try NSRegularExpression(pattern: "(?<![.\\w])(?<!func )(" + Self.libcFunctions.joined(separator: "|") + ")\\((?!\\))")
        // Empty parentheses are a type's initializer (`stat()`), except for these.
        let withoutArguments = try NSRegularExpression(pattern: "(?<![.\\w])(getuid|getpid|geteuid|getppid)\\(\\)")
        let global = try NSRegularExpression(pattern: "(?<![.\\w])(errno|environ)\\b")
        let literal = try NSRegularExpression(pattern: "\"[^\"]*\"")
        var found: [String] = []
        for file in files where !file.hasSuffix("Syscalls.swift") {
            let name = URL(fileURLWithPath: file).lastPathComponent
            let text = try String(contentsOf: core.appendingPathComponent(file), encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                // Code only: no comment, no string literal.
                let withoutComment = String(line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
                let code = literal.stringByReplacingMatches(
                    in: withoutComment, range: NSRange(withoutComment.startIndex..., in: withoutComment), withTemplate: "\"\"")
                let range = NSRange(code.startIndex..., in: code)
                for match in call.matches(in: code, range: range) + withoutArguments.matches(in: code, range: range) {
                    let function = (code as NSString).substring(with: match.range(at: 1))
                    if Self.swiftMethods[name]?.contains(function) == true { continue }
                    found.append("\(file):\(number + 1): \(function)")
                }
                if global.firstMatch(in: code, range: range) != nil { found.append("\(file):\(number + 1): errno/environ") }
            }
        }
        #expect(found.isEmpty, "libc called outside System/Syscalls.swift:\n\(found.joined(separator: "\n"))")
    }
}
