import Foundation
import Testing
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// What commands print, run in-process through `Engine.run` with a `TestEngine`: an in-memory
/// store, a scripted authorization server and a clock of their own, so no session bus, keyring
/// or server is needed and the tests run in parallel. The session suites and the end-to-end
/// tests show the same against the real Secret Service and servers.
@Suite("TokenctlCommands: command output with test doubles")
struct CommandOutputTests {
    /// The issuer of `TestEngine.signIn`.
    static let issuer = "https://issuer.test"

    /// A token endpoint that rotates every refresh token it is sent, except `dead`, which it
    /// refuses (invalid_grant); a revocation endpoint that accepts everything.
    static let server: FakeHTTPClient.Handler = { request, _ in
        if request.url.hasSuffix("/revoke") { return .success(.text(200, "")) }
        guard request.url.hasSuffix("/token") else { return .failure(HTTPTransportError(.other, "no such endpoint")) }
        if formFields(request)["refresh_token"] == "dead" { return .success(.invalidGrant) }
        return .success(.tokens(access: "access-2", refresh: "refresh-2", expiresIn: 3600))
    }

    // MARK: login

    @Test("login --refresh-token-stdin: discovery, the import, one summary line on stderr, the session stored")
    func login() async throws {
        let discovery =
            #"{"issuer":"https://issuer.test","token_endpoint":"https://issuer.test/token","revocation_endpoint":"https://issuer.test/revoke"}"#
        let engine = try TestEngine { request, index in
            if request.url == "\(Self.issuer)/.well-known/openid-configuration" {
                return .success(.json(200, discovery))
            }
            return await Self.server(request, index)
        }
        let result = try await engine.run(
            "--profile", "work", "login", "--issuer", Self.issuer, "--client-id", "cli", "--refresh-token-stdin",
            stdin: "imported")
        #expect(result.status == .success && result.stdout.isEmpty, "\(result)")
        #expect(
            result.stderr == "Logged in profile 'work' at \(Self.issuer); access token valid for 60 min.\n", "\(result)"
        )
        #expect(formFields(try #require(engine.http.requests.last))["refresh_token"] == "imported")
        #expect(engine.programsLaunched.isEmpty, "no browser for an import")
        let token = try await engine.run("--profile", "work", "token")
        #expect(token.stdout == "access-2\n", "\(token)")
    }

    // MARK: token

    @Test("token: raw, header and json on stdout, nothing on stderr")
    func tokenFormats() async throws {
        let engine = try TestEngine(http: Self.server)
        let tokenSet = engine.tokenSet(expiresIn: 3600)
        try engine.signIn("work", tokenSet: tokenSet)

        let raw = try await engine.run("--profile", "work", "token")
        #expect(raw.status == .success && raw.stdout == "access-1\n" && raw.stderr.isEmpty, "\(raw)")
        let header = try await engine.run("--profile", "work", "token", "--format", "header")
        #expect(header.stdout == "Authorization: Bearer access-1\n" && header.stderr.isEmpty, "\(header)")
        let json = try await engine.run("--profile", "work", "token", "--format", "json")
        let expiresAt = Timestamp.iso8601(try #require(tokenSet.expiresAt))
        #expect(
            json.stdout
                == "{\"access_token\":\"access-1\",\"token_type\":\"Bearer\",\"expires_at\":\"\(expiresAt)\",\"expires_in\":3600}\n",
            "\(json)")
        #expect(json.status == .success && json.stderr.isEmpty, "\(json)")
        #expect(engine.http.requestCount == 0, "a fresh token needs no server")
    }

    @Test("token --format exec-credential: v1, or the v1beta1 KUBERNETES_EXEC_INFO asks for; expires before the token")
    func execCredential() async throws {
        let execInfo =
            #"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":false}}"#
        for (variables, apiVersion) in [
            ([:], "client.authentication.k8s.io/v1"),
            (["KUBERNETES_EXEC_INFO": execInfo], "client.authentication.k8s.io/v1beta1"),
        ] {
            let engine = try TestEngine(variables: variables, http: Self.server)
            let tokenSet = engine.tokenSet(expiresIn: 3600)
            try engine.signIn("kube", tokenSet: tokenSet)
            let result = try await engine.run("--profile", "kube", "token", "--format", "exec-credential")
            #expect(result.status == .success && result.stderr.isEmpty && result.stdout.hasSuffix("}\n"), "\(result)")
            let object = try jsonObject(result.stdout)
            #expect(Set(object.keys) == ["apiVersion", "kind", "status"], "\(object)")
            #expect(object["apiVersion"] as? String == apiVersion && object["kind"] as? String == "ExecCredential")
            let status = try #require(object["status"] as? [String: Any])
            #expect(status["token"] as? String == "access-1", "\(status)")
            let expiration = try #require(status["expirationTimestamp"] as? String)
            #expect(expiration < Timestamp.iso8601(try #require(tokenSet.expiresAt)), "\(expiration)")
        }
    }

    @Test("token: an expired access token is refreshed at the token endpoint and the new one printed")
    func tokenRefreshes() async throws {
        let engine = try TestEngine(http: Self.server)
        try engine.signIn("work", tokenSet: engine.tokenSet(expiresIn: -10))
        let result = try await engine.run("--profile", "work", "token")
        #expect(result.status == .success && result.stdout == "access-2\n" && result.stderr.isEmpty, "\(result)")
        #expect(engine.http.requests.map(\.url) == ["\(Self.issuer)/token"], "\(engine.http.requests)")
    }

    @Test("token: a profile that does not exist is 78, an ended session 77, with Error: lines on stderr")
    func tokenFailures() async throws {
        let engine = try TestEngine(http: Self.server)
        let missing = try await engine.run("--profile", "nowhere", "token")
        #expect(missing.status == .configuration && missing.stdout.isEmpty, "\(missing)")
        #expect(missing.stderr.hasPrefix("Error: "), "\(missing)")
        try engine.signIn("ended", tokenSet: engine.tokenSet(refreshToken: "dead", expiresIn: -10))
        let ended = try await engine.run("--profile", "ended", "token")
        #expect(ended.status == .loginRequired && ended.stdout.isEmpty && ended.stderr.hasPrefix("Error: "), "\(ended)")
    }

    // MARK: status

    @Test("status: the human block and the JSON keys, never the token")
    func status() async throws {
        let engine = try TestEngine(http: Self.server)
        try engine.signIn("work", tokenSet: engine.tokenSet(expiresIn: 3600))
        let human = try await engine.run("--profile", "work", "status")
        #expect(human.status == .success && human.stderr.isEmpty, "\(human)")
        #expect(
            human.stdout.hasPrefix(
                "Profile work: authenticated\n  issuer:        \(Self.issuer)\n  client id:     cli\n"), "\(human)")
        #expect(
            human.stdout.contains("\n  refresh token: present\n")
                && human.stdout.contains("\n  access token:  valid for 60 min"), "\(human)")
        #expect(
            !human.stdout.contains("access-1") && !human.stdout.contains("refresh-1"), "status never prints a token")

        let json = try await engine.run("--profile", "work", "status", "--json")
        #expect(json.status == .success && json.stderr.isEmpty && json.stdout.hasSuffix("}\n"), "\(json)")
        let object = try jsonObject(json.stdout)
        #expect(Set(object.keys) == SessionCommandTests.State.statusKeys, "keys: \(object.keys.sorted())")
        #expect(
            object["profile"] as? String == "work" && object["state"] as? String == "authenticated"
                && object["issuer"] as? String == Self.issuer && object["client_id"] as? String == "cli", "\(object)")
        #expect(!json.stdout.contains("access-1"), "status never prints a token")
        #expect(engine.http.requestCount == 0, "status asks no server about a fresh session")
    }

    // MARK: refresh

    @Test("refresh: one line on stderr, refreshed or not needed")
    func refresh() async throws {
        let engine = try TestEngine(http: Self.server)
        try engine.signIn("work", tokenSet: engine.tokenSet(expiresIn: 3600))
        let skipped = try await engine.run("--profile", "work", "refresh", "--if-expiring-within", "60")
        #expect(
            skipped.status == .success && skipped.stdout.isEmpty
                && skipped.stderr == "Profile 'work' not refreshed: the access token is valid for 60 min.\n",
            "\(skipped)")
        #expect(engine.http.requestCount == 0)
        let refreshed = try await engine.run("--profile", "work", "refresh")
        #expect(
            refreshed.status == .success && refreshed.stdout.isEmpty
                && refreshed.stderr == "Refreshed profile 'work'; access token valid for 60 min.\n", "\(refreshed)")
        #expect(String(try await engine.run("--profile", "work", "token").stdout) == "access-2\n")
    }

    @Test("refresh --all: a line per profile, the worst exit status (77 for an ended session)")
    func refreshAll() async throws {
        let engine = try TestEngine(http: Self.server)
        try engine.signIn("alive", tokenSet: engine.tokenSet(expiresIn: 3600))
        try engine.signIn("ended", tokenSet: engine.tokenSet(refreshToken: "dead", expiresIn: 3600))
        let result = try await engine.run("refresh", "--all")
        #expect(result.status == .loginRequired && result.stdout.isEmpty, "\(result)")
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(result)")
        #expect(lines.contains { $0.hasPrefix("alive: refreshed, expires ") }, "\(result)")
        #expect(lines.contains { $0.hasPrefix("ended: login required: ") }, "\(result)")

        let empty = try await TestEngine().run("refresh", "--all")
        #expect(empty.status == .success && empty.stderr == "No profiles configured.\n", "\(empty)")
    }

    // MARK: logout

    @Test("logout: revoked at the server, not revoked, not logged in, forgotten: one line each")
    func logout() async throws {
        let engine = try TestEngine(http: Self.server)
        try engine.signIn("work", tokenSet: engine.tokenSet())
        let revoked = try await engine.run("--profile", "work", "logout")
        #expect(
            revoked.status == .success && revoked.stdout.isEmpty
                && revoked.stderr == "Logged out profile 'work'; the server revoked its refresh token.\n", "\(revoked)")
        #expect(engine.http.requests.map(\.url) == ["\(Self.issuer)/revoke"], "\(engine.http.requests)")
        let again = try await engine.run("--profile", "work", "logout")
        #expect(again.status == .success && again.stderr == "Profile 'work' was not logged in.\n", "\(again)")

        try engine.signIn("local", tokenSet: engine.tokenSet())
        let local = try await engine.run("--profile", "local", "logout", "--no-revoke", "--forget")
        #expect(
            local.status == .success
                && local.stderr
                    == "Logged out profile 'local' (not revoked at the server).\nRemoved profile 'local': its configuration and caches are gone.\n",
            "\(local)")
        #expect(engine.http.requestCount == 1, "--no-revoke asks no server")
    }

    // MARK: exec

    @Test("exec: the token and its expiry in the named variables of the program run; 127 when it cannot be found")
    func exec() async throws {
        let engine = try TestEngine(http: Self.server)
        let tokenSet = engine.tokenSet()
        try engine.signIn("work", tokenSet: tokenSet)
        let result = try await engine.run("--profile", "work", "exec", "--env", "API_TOKEN", "--", "/nowhere", "-x")
        #expect(result.status == .commandNotFound && result.stdout.isEmpty, "\(result)")
        #expect(result.stderr == "Error: cannot run '/nowhere': No such file or directory.\n", "\(result)")
        let run = try #require(engine.programsRun.first)
        #expect(run.arguments == ["/nowhere", "-x"])
        #expect(
            run.variables == [
                "API_TOKEN": "access-1", "API_TOKEN_EXPIRES_AT": Timestamp.iso8601(try #require(tokenSet.expiresAt)),
            ], "\(run.variables)")
    }

    // MARK: git-credential, events, doctor

    @Test("git-credential get: username and password lines with the token, nothing on stderr")
    func gitCredential() async throws {
        let engine = try TestEngine(http: Self.server)
        try engine.signIn("git", tokenSet: engine.tokenSet())
        let request = "protocol=https\nhost=git.example.com\npath=team/repo.git\n\n"
        let get = try await engine.run("--profile", "git", "git-credential", "get", stdin: request)
        #expect(get.status == .success && get.stderr.isEmpty, "\(get)")
        #expect(
            get.stdout.wholeMatch(of: /username=oauth2\npassword=access-1\npassword_expiry_utc=\d+\n/) != nil, "\(get)")
    }

    @Test("events: a refresh's event on stdout, one line each; --json one object a line")
    func events() async throws {
        let engine = try TestEngine(http: Self.server)
        try engine.signIn("work", tokenSet: engine.tokenSet())
        #expect(try await engine.run("--profile", "work", "refresh").status == .success)
        let human = try await engine.run("events")
        #expect(human.status == .success && human.stderr.isEmpty, "\(human)")
        #expect(
            human.stdout.split(separator: "\n").contains { $0.contains("tokenRefreshed") && $0.contains("work") },
            "\(human)"
        )
        let json = try await engine.run("events", "--json")
        let lines = json.stdout.split(separator: "\n").map(String.init)
        #expect(json.status == .success && !lines.isEmpty, "\(json)")
        for line in lines { #expect(try jsonObject(line)["profile"] as? String == "work", "\(line)") }
    }

    @Test("doctor --json: one object on stdout, the engine's check first; the exit status says whether all passed")
    func doctor() async throws {
        let engine = try TestEngine(http: Self.server)
        try engine.signIn("work", tokenSet: engine.tokenSet())
        let result = try await engine.run("doctor", "--json")
        let object = try jsonObject(result.stdout)
        let checks = try #require(object["checks"] as? [[String: Any]], "\(result)")
        #expect(checks.first?["name"] as? String == "engine", "\(result)")
        #expect(
            checks.first?["detail"] as? String == "tokenctl \(TokenctlVersion.string) at unknown", "\(result)")
        let allPassed = try #require(object["ok"] as? Bool)
        #expect(result.status == (allPassed ? .success : .failure), "\(result)")
    }
}
