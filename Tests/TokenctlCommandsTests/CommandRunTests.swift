import Testing
import TokenctlCommands
import TokenctlEssentials
import TokenctlTestSupport

/// Commands run in-process through `Engine.run` with injected streams: help, version, usage
/// errors, and what a command decides before it touches a keyring or a server.
@Suite("TokenctlCommands: commands run in-process")
struct CommandRunTests {
    @Test("help goes to stdout, exit 0; --version names the version")
    func help() async throws {
        let help = try await tokenctl("help", "token")
        #expect(help.status == .success, "\(help)")
        #expect(help.stdout.contains("USAGE: tokenctl [--profile <name>] token") && help.stderr.isEmpty, "\(help)")
        let top = try await tokenctl("--help")
        #expect(top.stdout.contains("git-credential") && top.status == .success, "\(top)")
        let version = try await tokenctl("--version")
        #expect(version.stdout.hasPrefix("tokenctl \(TokenctlVersion.string) "), "\(version)")
    }

    @Test(
        "usage errors: 64, Error/usage/See lines on stderr, nothing on stdout",
        arguments: [
            (["token", "--formt", "json"], "Did you mean '--format'"),
            (["token", "--min-ttl", "-5"], "--min-ttl"),
            (["token", "--format", "yaml"], "--format"),
            (["git-credential"], "Missing the action"),
            (["git-credential", "fetch"], "Unknown action 'fetch'"),
            (["login", "--port", "0", "--issuer", "https://issuer.test", "--client-id", "c"], "--port"),
            (["--profile", "-bad", "token"], "profile"),
            (["token", "--timeout", "0.5"], "--timeout"),
        ])
    func usageErrors(arguments: [String], expected: String) async throws {
        let result = try await tokenctlArguments(arguments)
        #expect(result.status == .usage, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.hasPrefix("Error: ") && result.stderr.contains(expected), "\(result)")
        #expect(result.stderr.contains("See 'tokenctl"), "\(result)")
    }

    @Test("git-credential answers nothing to a request git never sends, before it looks for a session")
    func gitCredentialRefusal() async throws {
        let result = try await tokenctl(
            "--profile", "nowhere", "git-credential", "get", stdin: "protocol=http\nhost=127.0.0.1.evil.example\n\n")
        #expect(result.status == .success && result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.contains("plain http"), "\(result)")
        let noHost = try await tokenctl("--profile", "nowhere", "git-credential", "get", stdin: "protocol=https\n\n")
        #expect(noHost.status == .success && noHost.stdout.isEmpty && noHost.stderr.contains("no host"), "\(noHost)")
    }

    @Test("completion scripts go to stdout", arguments: ["bash", "zsh", "fish"])
    func completion(shell: String) async throws {
        let result = try await tokenctl("completion", shell)
        #expect(result.status == .success && result.stdout.contains("tokenctl") && result.stderr.isEmpty, "\(result)")
    }
}
