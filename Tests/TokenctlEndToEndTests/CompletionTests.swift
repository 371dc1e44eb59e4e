import Foundation
import Testing
import TokenctlTestSupport

/// `tokenctl completion bash|zsh|fish`: scripts generated from the command specifications.
/// bash and fish are exercised by completing real command lines; zsh is syntax-checked.
@Suite("End to end: shell completions")
struct CompletionTests {
    func script(_ sandbox: Sandbox, _ shell: String) throws -> String {
        let path = sandbox.root + "/completion." + shell
        let result = try sandbox.tokenctl("completion", shell)
        #expect(result.status == 0, "\(result)")
        try result.stdout.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// What bash offers for the words of a command line (the last is the one being completed).
    func bashCompletions(_ sandbox: Sandbox, _ script: String, _ words: [String]) throws -> [String] {
        let array = words.map { "'" + $0 + "'" }.joined(separator: " ")
        let program =
            "source '\(script)'; COMP_WORDS=(\(array)); COMP_CWORD=\(words.count - 1); _tokenctl; printf '%s\\n' \"${COMPREPLY[@]}\""
        let result = try runProgram("/bin/bash", ["--norc", "-c", program], environment: sandbox.variables)
        #expect(result.status == 0, "\(result)")
        return result.stdout.split(separator: "\n").map(String.init)
    }

    @Test(
        "bash: commands, options, fixed values, arguments, profile names from the configuration directory, programs after exec"
    )
    func bash() throws {
        let sandbox = try Sandbox()
        let path = try script(sandbox, "bash")
        #expect(try runProgram("/bin/bash", ["-n", path]).status == 0)
        #expect(try bashCompletions(sandbox, path, ["tokenctl", "lo"]) == ["login", "logout"])
        #expect(
            try bashCompletions(sandbox, path, ["tokenctl", "token", "--format", ""]) == [
                "raw", "header", "json", "exec-credential", "dpop",
            ])
        #expect(try bashCompletions(sandbox, path, ["tokenctl", "token", "--f"]) == ["--force", "--format"])
        #expect(try bashCompletions(sandbox, path, ["tokenctl", "events", "--min-significance", "m"]) == ["medium"])
        #expect(try bashCompletions(sandbox, path, ["tokenctl", "schedule", ""]) == ["install", "remove", "status"])
        #expect(try bashCompletions(sandbox, path, ["tokenctl", "git-credential", "e"]) == ["erase"])
        #expect(try bashCompletions(sandbox, path, ["tokenctl", "completion", "f"]) == ["fish"])
        #expect(
            try bashCompletions(sandbox, path, ["tokenctl", "forward", ""]) == [
                "enable", "disable", "status", "serve", "listen",
            ])
        #expect(try bashCompletions(sandbox, path, ["tokenctl", "forward", "enable", "--no"]) == ["--no-unit"])
        #expect(
            try bashCompletions(sandbox, path, ["tokenctl", "exec", "--", "bas"]).contains("bash"),
            "programs after exec")
        // Profile names come from the configuration directory, when completing.
        let profiles = sandbox.root + "/config/tokenctl/profiles"
        try FileManager.default.createDirectory(atPath: profiles, withIntermediateDirectories: true)
        for name in ["work", "staging"] {
            try "".write(toFile: profiles + "/\(name).conf", atomically: true, encoding: .utf8)
        }
        #expect(try bashCompletions(sandbox, path, ["tokenctl", "--profile", ""]).sorted() == ["staging", "work"])
        #expect(try bashCompletions(sandbox, path, ["tokenctl", "--profile", "w"]) == ["work"])
        // Every command of the parser is offered.
        let help = try sandbox.tokenctl("--help").stdout
        for command in try bashCompletions(sandbox, path, ["tokenctl", ""]).filter({
            !$0.hasPrefix("-") && $0 != "help"
        }) {
            #expect(help.contains("  \(command) "), "\(command) is a real command")
        }
    }

    @Test("zsh and fish scripts pass their shells' syntax checks; fish completes real command lines")
    func zshAndFish() throws {
        let sandbox = try Sandbox()
        let zsh = try script(sandbox, "zsh")
        let zshCheck = try runProgram("/usr/bin/zsh", ["-n", zsh])
        #expect(zshCheck.status == 0, "\(zshCheck)")
        #expect(try String(contentsOfFile: zsh, encoding: .utf8).hasPrefix("#compdef tokenctl\n"))
        let fish = try script(sandbox, "fish")
        let fishCheck = try runProgram("/usr/bin/fish", ["-n", fish])
        #expect(fishCheck.status == 0, "\(fishCheck)")
        func fishComplete(_ line: String) throws -> [String] {
            let result = try runProgram(
                "/usr/bin/fish", ["--no-config", "-c", "source '\(fish)'; complete -C '\(line)'"],
                environment: sandbox.variables)
            #expect(result.status == 0, "\(result)")
            return result.stdout.split(separator: "\n").map { String($0.split(separator: "\t").first ?? "") }
        }
        #expect(
            try fishComplete("tokenctl token --format ").sorted() == [
                "dpop", "exec-credential", "header", "json", "raw",
            ])
        #expect(try fishComplete("tokenctl sched") == ["schedule"])
        #expect(try fishComplete("tokenctl logout --for") == ["--forget"])
        #expect(try fishComplete("tokenctl forw") == ["forward"])
        #expect(
            try fishComplete("tokenctl forward ").sorted() == ["disable", "enable", "listen", "serve", "status"])
    }

    @Test("an unknown or missing shell is a usage error")
    func badShell() throws {
        let sandbox = try Sandbox()
        #expect(try sandbox.tokenctl("completion").status == 64)
        #expect(try sandbox.tokenctl("completion", "tcsh").status == 64)
    }
}
