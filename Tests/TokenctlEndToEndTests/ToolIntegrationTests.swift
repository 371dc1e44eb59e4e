import Foundation
import Testing
import TokenctlTestSupport

/// One of Scripts/testserver/resourceserver.py's servers (git smart HTTP that checks tokens with
/// the test authorization server, or a stand-in Kubernetes API server) for one test, on
/// 127.0.0.1; stopped by PID when the test drops it.
final class ResourceServer: @unchecked Sendable {
    let url: String
    let directory: String
    private let server: RunningCommand

    /// With `tls`, HTTPS with a self-signed certificate for 127.0.0.1 (`certificate`: its PEM file).
    init(_ mode: String, authServer: AuthServer? = nil, repositories: String? = nil, tls: Bool = false) throws {
        let environment = try TestEnvironment.require()
        let script = URL(fileURLWithPath: environment.authServerScript).deletingLastPathComponent()
            .appendingPathComponent("resourceserver.py").path
        directory = NSTemporaryDirectory() + "tokenctl-resource-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var arguments = [script, mode, "--port-file", directory + "/port", "--exit-with-parent"]
        if let authServer { arguments += ["--authserver", authServer.url] }
        if let repositories { arguments += ["--repos", repositories] }
        if tls {
            let made = try runProgram(
                "/usr/bin/openssl",
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                    "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1",
                ])
            guard made.status == 0 else { throw HarnessError("openssl req failed: \(made)") }
            arguments += ["--tls-cert", directory + "/cert.pem", "--tls-key", directory + "/key.pem"]
        }
        server = try RunningCommand(
            executable: environment.python, arguments: arguments, environment: ProcessInfo.processInfo.environment,
            stdin: nil, directory: directory)
        var port: String?
        for _ in 0..<400 {
            if let text = try? String(contentsOfFile: directory + "/port", encoding: .utf8), !text.isEmpty {
                port = text
                break
            }
            usleep(25_000)
        }
        guard let port else {
            server.signal(SIGKILL)
            throw HarnessError("the resource server did not start: \(server.wait())")
        }
        url = (tls ? "https" : "http") + "://127.0.0.1:\(port)"
    }

    var certificate: String { directory + "/cert.pem" }

    deinit {
        server.signal(SIGTERM)
        _ = server.wait()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The Authorization header of every request, in order.
    func authorizations() throws -> [String?] {
        let result = try runProgram(
            "/usr/bin/curl", ["-sS"] + (url.hasPrefix("https") ? ["--cacert", certificate] : []) + [url + "/_test/log"])
        let entries = (try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]]) ?? []
        return entries.map { $0["authorization"] as? String }
    }
}

/// tokenctl plugged into the tools people use: git (credential helper, and a clone over smart
/// HTTP that requires the token), kubectl (exec credential plugin) and `tokenctl exec`.
/// Through the real binary and the real tools, against the local test server.
@Suite("End to end: git, kubectl and exec")
struct ToolIntegrationTests {
    /// git with no system or global configuration of the machine: only the sandbox's.
    func git(_ sandbox: Sandbox, _ arguments: [String], stdin: String? = nil, directory: String? = nil) throws
        -> RunResult
    {
        var environment = sandbox.variables
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["GIT_TERMINAL_PROMPT"] = "0"
        environment["GIT_ASKPASS"] = "/bin/false"
        let command = try RunningCommand(
            executable: "/usr/bin/git", arguments: arguments, environment: environment, stdin: stdin,
            directory: directory ?? sandbox.root)
        return command.wait()
    }

    func helper(_ sandbox: Sandbox, profile: String) -> String {
        "!\(sandbox.environment.binary) --profile \(profile) git-credential"
    }

    @Test(
        "git credential fill gets a valid token from the helper configured for the URL; reject makes the next fill refresh"
    )
    func gitCredentialFillAndReject() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "tools-git"
        try sandbox.login(server, profile: profile)
        let configure = try git(
            sandbox,
            ["config", "--global", "credential.https://git.example.test.helper", helper(sandbox, profile: profile)])
        #expect(configure.status == 0, "\(configure)")
        let request = "protocol=https\nhost=git.example.test\npath=team/repo.git\n\n"
        let fill = try git(sandbox, ["credential", "fill"], stdin: request)
        #expect(fill.status == 0, "\(fill)")
        let token = try sandbox.tokenctl("--profile", profile, "token").stdout.trimmingCharacters(in: .newlines)
        #expect(fill.stdout.contains("username=oauth2\n"), "\(fill)")
        #expect(fill.stdout.contains("password=\(token)\n"), "\(fill)")
        #expect(try server.tokenStatus(token)["active"] as? Bool == true)

        let before = try server.tokenRequests().count
        let reject = try git(
            sandbox, ["credential", "reject"],
            stdin: "protocol=https\nhost=git.example.test\nusername=oauth2\npassword=\(token)\n\n")
        #expect(reject.status == 0, "\(reject)")
        let again = try git(sandbox, ["credential", "fill"], stdin: request)
        #expect(again.status == 0, "\(again)")
        #expect(!again.stdout.contains("password=\(token)\n"), "a fresh token after the rejection: \(again)")
        #expect(try server.tokenRequests().count == before + 1, "one refresh")
        #expect(try sandbox.storedTokenSet(profile: profile, issuer: server.url) != nil, "erase never logs out")

        // Another host has no helper configured: git does not ask tokenctl.
        let other = try git(sandbox, ["credential", "fill"], stdin: "protocol=https\nhost=elsewhere.test\n\n")
        #expect(!other.stdout.contains(token))
    }

    @Test(
        "the helper: Bearer with capability[]=authtype, nothing for plain http to another host, nothing (exit 0) when signed out, store does nothing"
    )
    func gitCredentialProtocol() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "tools-git-protocol"
        try sandbox.login(server, profile: profile)
        let bearer = try sandbox.tokenctl(
            "--profile", profile, "git-credential", "get",
            stdin: "capability[]=authtype\nprotocol=https\nhost=h.test\n\n")
        #expect(bearer.status == 0, "\(bearer)")
        let token = try sandbox.tokenctl("--profile", profile, "token").stdout.trimmingCharacters(in: .newlines)
        #expect(
            bearer.stdout.contains("capability[]=authtype\nauthtype=Bearer\ncredential=\(token)\nephemeral=1\n"),
            "\(bearer)")
        #expect(!bearer.stdout.contains("password="))

        let plain = try sandbox.tokenctl(
            "--profile", profile, "git-credential", "get", stdin: "protocol=http\nhost=example.com\n\n")
        #expect(plain.status == 0 && plain.stdout.isEmpty, "\(plain)")
        #expect(plain.stderr.contains("plain http"), "\(plain)")
        let loopback = try sandbox.tokenctl(
            "--profile", profile, "git-credential", "get", stdin: "protocol=http\nhost=127.0.0.1:8080\n\n")
        #expect(loopback.stdout.contains("password=\(token)\npassword_expiry_utc="), "\(loopback)")
        #expect(loopback.stdout.hasPrefix("username=oauth2\n"), "the default user name: \(loopback)")
        // The profile's git_username, for hosts that want a particular one.
        let file = sandbox.profileFile(profile)
        try (String(contentsOfFile: file, encoding: .utf8) + "git_username = x-access-token\n").write(
            toFile: file, atomically: false, encoding: .utf8)
        let named = try sandbox.tokenctl(
            "--profile", profile, "git-credential", "get", stdin: "protocol=https\nhost=h.test\n\n")
        #expect(named.stdout.hasPrefix("username=x-access-token\npassword=\(token)\n"), "\(named)")

        let store = try sandbox.tokenctl(
            "--profile", profile, "git-credential", "store",
            stdin: "protocol=https\nhost=h.test\nusername=u\npassword=p\n\n")
        #expect(store.status == 0 && store.stdout.isEmpty, "\(store)")
        let unknown = try sandbox.tokenctl(
            "--profile", profile, "git-credential", "get",
            stdin: "protocol=https\nhost=h.test\nwwwauth[]=Basic realm=x\nfuture_key=1\n\n")
        #expect(unknown.stdout.contains("password=\(token)"), "unknown attributes are ignored: \(unknown)")

        #expect(try sandbox.tokenctl("--profile", profile, "logout").status == 0)
        let signedOut = try sandbox.tokenctl(
            "--profile", profile, "git-credential", "get", stdin: "protocol=https\nhost=h.test\n\n")
        #expect(signedOut.status == 0 && signedOut.stdout.isEmpty, "git falls through to the next helper: \(signedOut)")
        #expect(signedOut.stderr.contains("not logged in"), "\(signedOut)")
        #expect(try sandbox.tokenctl("--profile", profile, "git-credential", "fetch", stdin: "").status == 64)
    }

    @Test(
        "the helper never answers plain http to hosts that only look like the loopback; the real loopback forms are answered",
        arguments: [
            "127.0.0.1.evil.example", "127.0.0.1.evil.example:8080", "127.9.9.9.attacker.example", "127.evil.example",
            "[::1].evil.example", "[::1].evil.example:8080", "localhost.evil.example", "127.0.0.1:80:80", "[::1]evil",
        ])
    func gitCredentialLookAlikeLoopback(host: String) throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "tools-git-lookalike"
        try sandbox.login(server, profile: profile)
        let token = try sandbox.tokenctl("--profile", profile, "token").stdout.trimmingCharacters(in: .newlines)
        let refused = try sandbox.tokenctl(
            "--profile", profile, "git-credential", "get", stdin: "protocol=http\nhost=\(host)\n\n")
        #expect(refused.status == 0 && refused.stdout.isEmpty, "\(refused)")
        #expect(refused.stderr.contains("plain http"), "\(refused)")
        #expect(!refused.stderr.contains(token) && !refused.stdout.contains(token))
        for loopback in [
            "127.0.0.1", "127.0.0.1:8080", "127.9.9.9:1", "localhost", "LOCALHOST:8080", "[::1]", "[::1]:8080",
        ] {
            let answered = try sandbox.tokenctl(
                "--profile", profile, "git-credential", "get", stdin: "protocol=http\nhost=\(loopback)\n\n")
            #expect(answered.stdout.contains("password=\(token)\n"), "\(loopback): \(answered)")
        }
    }

    @Test("the helper answers nothing (exit 0, a reason on stderr) to requests git never sends for an http(s) remote")
    func gitCredentialMalformedRequests() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "tools-git-malformed"
        try sandbox.login(server, profile: profile)
        let requests: [(String, String)] = [
            ("host=h.test\n\n", "no protocol"),
            ("protocol=https\n\n", "no host"),
            ("protocol=https\nhost=\n\n", "no host"),
            ("protocol=ftp\nhost=h.test\n\n", "'ftp'"),
            ("protocol=cert\npath=/home/u/cert.p12\n\n", "'cert'"),
            ("protocol=https\nhost=h.test\u{0}evil\n\n", "control character"),
            ("protocol=https\nhost=h.test\u{1B}[2J\n\n", "control character"),
            ("protocol=https\u{7F}\nhost=h.test\n\n", "control character"),
            ("protocol=https\nhost=h.test\tx\n\n", "control character"),
            ("protocol=https\nhost=h.test\nusername=a\u{7}b\n\n", "control character"),
        ]
        for (request, reason) in requests {
            let result = try sandbox.tokenctl("--profile", profile, "git-credential", "get", stdin: request)
            #expect(result.status == 0 && result.stdout.isEmpty, "\(request.debugDescription): \(result)")
            #expect(result.stderr.contains(reason), "\(request.debugDescription): \(result)")
            #expect(
                !result.stderr.contains("\u{1B}"),
                "the terminal never gets the request's escape: \(result.stderr.debugDescription)")
        }
        // The well-formed request still gets the token, also with a server's WWW-Authenticate
        // header (which may hold a tab) passed on by git.
        #expect(
            try sandbox.tokenctl(
                "--profile", profile, "git-credential", "get", stdin: "protocol=https\nhost=h.test\n\n"
            ).stdout.contains("password="))
        let withHeader = try sandbox.tokenctl(
            "--profile", profile, "git-credential", "get",
            stdin: "protocol=https\nhost=h.test\nwwwauth[]=Bearer\trealm=\"x\"\n\n")
        #expect(withHeader.stdout.contains("password="), "\(withHeader)")
    }

    @Test(
        "git itself: the helper configured for every URL gives no token to a look-alike host resolved to a local server over plain http"
    )
    func gitLookAlikeHostGetsNoToken() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "tools-git-lookalike-git"
        try sandbox.login(server, profile: profile)
        let repositories = sandbox.root + "/repos"
        try FileManager.default.createDirectory(
            atPath: repositories + "/project.git", withIntermediateDirectories: true)
        #expect(try git(sandbox, ["init", "-q", "--bare", repositories + "/project.git"]).status == 0)
        let resource = try ResourceServer("git", authServer: server, repositories: repositories)
        let port = resource.url.split(separator: ":").last.map(String.init) ?? ""
        #expect(
            try git(sandbox, ["config", "--global", "credential.helper", helper(sandbox, profile: profile)]).status == 0
        )
        // git resolves the look-alike name to the local server (curl's --resolve), gets a 401,
        // and asks the helper for protocol=http host=127.0.0.1.evil.example:PORT.
        let lookAlike = "127.0.0.1.evil.example:\(port)"
        let listed = try git(
            sandbox,
            ["-c", "http.curloptResolve=\(lookAlike):127.0.0.1", "ls-remote", "http://\(lookAlike)/project.git"])
        #expect(listed.status != 0, "no credential, no listing: \(listed)")
        let token = try sandbox.tokenctl("--profile", profile, "token").stdout.trimmingCharacters(in: .newlines)
        let sent = try resource.authorizations().compactMap { $0 }
        #expect(
            !sent.contains { $0.contains(token) || $0.hasPrefix("Basic") || $0.hasPrefix("Bearer") },
            "nothing sent: \(sent.count) headers")
        #expect(try resource.authorizations().count >= 1, "git reached the server under the look-alike name")
        // The same server under its loopback address gets the token (the check is the host, not the server).
        let direct = try git(sandbox, ["ls-remote", resource.url + "/project.git"])
        #expect(direct.status == 0, "\(direct)")
        #expect(try resource.authorizations().compactMap { $0 }.contains { $0.hasPrefix("Basic") })
    }

    @Test("git clone and fetch over smart HTTP from a server that requires the token, through the helper")
    func gitCloneOverHTTP() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "tools-git-clone"
        try sandbox.login(server, profile: profile)
        // A bare repository with one commit, served by git http-backend behind a token check.
        let repositories = sandbox.root + "/repos"
        try FileManager.default.createDirectory(atPath: repositories, withIntermediateDirectories: true)
        let work = sandbox.root + "/work"
        #expect(try git(sandbox, ["init", "-q", "-b", "main", work]).status == 0)
        try "hello\n".write(toFile: work + "/README", atomically: true, encoding: .utf8)
        #expect(try git(sandbox, ["-C", work, "add", "README"]).status == 0)
        #expect(
            try git(sandbox, ["-C", work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"]).status
                == 0)
        #expect(try git(sandbox, ["clone", "-q", "--bare", work, repositories + "/project.git"]).status == 0)
        let resource = try ResourceServer("git", authServer: server, repositories: repositories)

        let denied = try git(sandbox, ["clone", "-q", resource.url + "/project.git", sandbox.root + "/denied"])
        #expect(denied.status != 0, "no helper, no clone: \(denied)")
        #expect(
            try git(
                sandbox, ["config", "--global", "credential.\(resource.url).helper", helper(sandbox, profile: profile)]
            ).status == 0)
        let clone = try git(sandbox, ["clone", "-q", resource.url + "/project.git", sandbox.root + "/clone"])
        #expect(clone.status == 0, "\(clone)")
        #expect((try? String(contentsOfFile: sandbox.root + "/clone/README", encoding: .utf8)) == "hello\n")
        #expect(try git(sandbox, ["-C", sandbox.root + "/clone", "fetch", "-q"]).status == 0)
        let token = try sandbox.tokenctl("--profile", profile, "token").stdout.trimmingCharacters(in: .newlines)
        let expected = "Basic " + Data("oauth2:\(token)".utf8).base64EncodedString()
        #expect(try resource.authorizations().contains(expected), "git sent the helper's token")
    }

    func kubeconfig(_ sandbox: Sandbox, server: ResourceServer, profile: String) throws -> String {
        let path = sandbox.root + "/kubeconfig"
        try """
        apiVersion: v1
        kind: Config
        clusters:
        - name: test
          cluster:
            server: \(server.url)
            certificate-authority: \(server.certificate)
        users:
        - name: tokenctl
          user:
            exec:
              apiVersion: client.authentication.k8s.io/v1beta1
              command: \(sandbox.environment.binary)
              args: ["--profile", "\(profile)", "token", "--format", "exec-credential"]
        contexts:
        - name: test
          context:
            cluster: test
            user: tokenctl
        current-context: test
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("kubectl with the exec plugin sends the token; an expired token is refreshed between two kubectl calls")
    func kubectlExecCredential() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "tools-kube"
        try sandbox.loginWithExpiredAccessToken(server, profile: profile, nextLifetime: 3)
        let api = try ResourceServer("kube", tls: true)
        let config = try kubeconfig(sandbox, server: api, profile: profile)
        func kubectl() throws -> RunResult {
            try RunningCommand(
                executable: "/usr/bin/kubectl",
                arguments: ["--kubeconfig", config, "get", "--raw", "/api/v1/namespaces/default/pods"],
                environment: sandbox.variables, stdin: nil, directory: sandbox.root
            ).wait()
        }
        let first = try kubectl()
        #expect(first.status == 0, "\(first)")
        let firstToken = try sandbox.tokenctl("--profile", profile, "token", "--min-ttl", "0").stdout
            .trimmingCharacters(in: .newlines)
        sleep(seconds: 3.2)
        let second = try kubectl()
        #expect(second.status == 0, "\(second)")
        let secondToken = try sandbox.tokenctl("--profile", profile, "token", "--min-ttl", "0").stdout
            .trimmingCharacters(in: .newlines)
        #expect(firstToken != secondToken, "refreshed between the calls")
        let sent = try api.authorizations().compactMap { $0 }
        #expect(sent.contains("Bearer \(firstToken)") && sent.contains("Bearer \(secondToken)"), "\(sent)")

        // The credential itself: v1 by default, v1beta1 when KUBERNETES_EXEC_INFO asks for it.
        let credential = try sandbox.tokenctl("--profile", profile, "token", "--format", "exec-credential")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(credential.stdout.utf8)) as? [String: Any])
        #expect(
            object["apiVersion"] as? String == "client.authentication.k8s.io/v1"
                && object["kind"] as? String == "ExecCredential")
        let status = try #require(object["status"] as? [String: Any])
        #expect(status["token"] as? String == secondToken)
        #expect((status["expirationTimestamp"] as? String)?.hasSuffix("Z") == true)
        let beta = try sandbox.tokenctl(
            "--profile", profile, "token", "--format", "exec-credential",
            extraEnvironment: [
                "KUBERNETES_EXEC_INFO":
                    #"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":false}}"#
            ])
        #expect(beta.stdout.contains(#""apiVersion":"client.authentication.k8s.io/v1beta1""#), "\(beta)")

        #expect(try sandbox.tokenctl("--profile", profile, "logout").status == 0)
        let signedOut = try kubectl()
        #expect(signedOut.status != 0)
        #expect(signedOut.stderr.contains("not logged in"), "kubectl shows tokenctl's message: \(signedOut)")
    }

    @Test(
        "exec after a refresh: the program gets exactly the descriptors tokenctl was given, not the refresh's kept-alive connection"
    )
    func execInheritsNoConnection() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.loginWithExpiredAccessToken(server, profile: "tools-exec-fds")
        /// The program's descriptors past stderr, "N -> target", as `ls -l /proc/self/fd` shows
        /// them (ls's own directory descriptor left out). A shell hands the command fd 7.
        func descriptors(_ command: String) throws -> [String] {
            let result = try runProgram(
                "/bin/sh",
                ["-c", "exec 7</dev/null; exec " + command + " /bin/ls -l /proc/self/fd", sandbox.environment.binary],
                environment: sandbox.variables)
            #expect(result.status == 0, "\(result)")
            return descriptorEntries(result.stdout).filter { !$0.contains(" -> /proc/") }
        }
        let given = try descriptors("")
        #expect(given.contains("7 -> /dev/null"), "\(given)")
        let before = try server.tokenRequests().count
        let seen = try descriptors("\"$0\" --profile tools-exec-fds exec --")
        #expect(try server.tokenRequests().count == before + 1, "the token was refreshed in that process")
        #expect(seen == given, "only what the caller gave: \(Set(seen).subtracting(given))")
    }

    @Test("exec: the token and its expiry in the environment, not in argv; no wrapper left; the program's exit status")
    func execProgram() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let profile = "tools-exec"
        try sandbox.login(server, profile: profile)
        let token = try sandbox.tokenctl("--profile", profile, "token").stdout.trimmingCharacters(in: .newlines)
        let script =
            #"echo "$TOKENCTL_ACCESS_TOKEN"; echo "$TOKENCTL_ACCESS_TOKEN_EXPIRES_AT"; echo $$; tr '\0' ' ' < /proc/$$/cmdline; echo; exit 7"#
        let command = try sandbox.start(["--profile", profile, "exec", "--", "sh", "-c", script])
        let result = command.wait()
        #expect(result.status == 7, "the program's exit status: \(result)")
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        try #require(lines.count >= 4, "\(result)")
        #expect(lines[0] == token)
        #expect(lines[1].hasSuffix("Z") && lines[1].count == 20, "an ISO 8601 expiry: \(lines[1])")
        #expect(lines[2] == String(command.pid), "tokenctl replaced itself with the program (same PID)")
        #expect(!lines[3].contains(token), "no token in the program's argv: \(lines[3])")

        let named = try sandbox.tokenctl(
            "--profile", profile, "exec", "--env", "API_TOKEN", "--", "sh", "-c",
            #"test -n "$API_TOKEN" && test -n "$API_TOKEN_EXPIRES_AT" && test -z "$TOKENCTL_ACCESS_TOKEN""#)
        #expect(named.status == 0, "\(named)")
        // Options after the program are the program's.
        let passthrough = try sandbox.tokenctl("--profile", profile, "exec", "echo", "--env", "-v")
        #expect(passthrough.stdout == "--env -v\n", "\(passthrough)")
        for bad in ["1X", "A-B", "", "A B"] {
            #expect(
                try sandbox.tokenctl("--profile", profile, "exec", "--env", bad, "--", "true").status == 64,
                "--env '\(bad)'")
        }
        #expect(try sandbox.tokenctl("--profile", profile, "exec").status == 64, "no program")
        #expect(try sandbox.tokenctl("--profile", profile, "exec", "--", "/nonexistent/program").status == 127)
        #expect(try sandbox.tokenctl("--profile", profile, "logout").status == 0)
        let signedOut = try sandbox.tokenctl("--profile", profile, "exec", "--", "true")
        #expect(signedOut.status == 77, "the program does not run without a token: \(signedOut)")
    }
}
