import Foundation
import Testing
import TokenctlCommands
import TokenctlEssentials
import TokenctlTestSupport

/// Every command's output with a session, run in-process through `Engine.run`: what it prints on
/// stdout and stderr and how it ends, in each format it offers, against the test authorization
/// server as a private user (Session.swift), whose environment each command gets in its
/// `EngineEnvironment`: the tests run in parallel.
@Suite("TokenctlCommands: commands with a session, in-process")
struct SessionCommandTests {
    // MARK: login

    @Test(
        "login --refresh-token-stdin: one summary on stderr, nothing on stdout, a 0600 profile file; a second profile needs --issuer"
    )
    func login() async throws {
        try await withSession { user, server in
            let profile = uniqueProfile("login")
            let result = try await user.login(server, profile: profile)
            #expect(result.stdout.isEmpty, "\(result)")
            let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(lines.count == 3 && lines[2].isEmpty, "\(result)")
            #expect(
                lines[0].hasPrefix("Logged in profile '\(profile)' at \(server.url) as alice; access token valid for ")
                    && lines[0].hasSuffix("."), "\(result)")
            // The import sends no nonce; the test server publishes its JWKS, so the signature is checked.
            #expect(lines[1] == "ID token checked: issuer, audience, expiry and signature.", "\(result)")
            var info = stat()
            #expect(
                stat(user.profileFile(profile), &info) == 0 && info.st_mode & 0o777 == 0o600,
                "profile file mode \(String(info.st_mode & 0o777, radix: 8))")
            let configuration = try String(contentsOfFile: user.profileFile(profile), encoding: .utf8)
            #expect(configuration.contains(server.url) && configuration.contains("cli"), "\(configuration)")

            // Usage errors: a profile with nothing saved names what is missing.
            let missing = try await user.tokenctl(
                "--profile", uniqueProfile("blank"), "login", "--refresh-token-stdin", stdin: "x")
            #expect(missing.status == .usage && missing.stdout.isEmpty, "\(missing)")
            #expect(
                missing.stderr.hasPrefix("Error: Missing '--issuer <url>'")
                    && missing.stderr.contains("See 'tokenctl login --help'"), "\(missing)")
            let both = try await user.tokenctl("--profile", profile, "login", "--device", "--refresh-token-stdin")
            #expect(
                both.status == .usage
                    && both.stderr.contains("Choose one of --device, --browser, --refresh-token-stdin and --grant"),
                "\(both)")
        }
    }

    @Test(
        "login --device: the code and where to enter it on stderr (no terminal: no QR code), signed in once the server approves"
    )
    func deviceLogin() async throws {
        try await withSession { user, server in
            let profile = uniqueProfile("device")
            user.willLogIn(server, profile: profile)
            let running = try user.background([
                "--profile", profile, "login", "--timeout", "3600", "--device", "--issuer", server.url, "--client-id",
                "cli",
            ])
            let shown = try await running.waitForStandardError(containing: "Waiting for approval")
            let code = try #require(shown.firstMatch(of: /and enter the code: ([A-Z0-9-]+)\n/)?.1, "\(shown)")
            #expect(shown.hasPrefix("To sign in, open \(server.url)"), "\(shown)")
            #expect(
                !shown.contains("\u{1B}") && !shown.contains("Or scan it"), "not a terminal: plain lines only: \(shown)"
            )
            try server.request("POST", "/_test/device/approve", json: ["user_code": String(code), "sub": "bob"])
            let result = try await running.wait()
            #expect(result.status == .success && result.stdout.isEmpty, "\(result)")
            #expect(
                result.stderr.contains(
                    "Logged in profile '\(profile)' at \(server.url) as bob; access token valid for "), "\(result)")
            let status = try jsonObject(try await user.tokenctl("--profile", profile, "status", "--json").stdout)
            #expect(status["state"] as? String == "authenticated" && status["subject"] as? String == "bob", "\(status)")
        }
    }

    // MARK: token

    @Test("token: raw, header, json and exec-credential print exactly their shape on stdout, nothing on stderr")
    func tokenFormats() async throws {
        try await withSession { user, server in
            let profile = uniqueProfile("token")
            try await user.login(server, profile: profile)
            let raw = try await user.tokenctl("--profile", profile, "token")
            #expect(raw.status == .success && raw.stderr.isEmpty, "\(raw)")
            let token = String(raw.stdout.dropLast())
            #expect(
                raw.stdout == token + "\n" && !token.isEmpty && !token.contains("\n") && !token.contains(" "), "\(raw)")

            let header = try await user.tokenctl("--profile", profile, "token", "--format", "header")
            #expect(header.status == .success && header.stderr.isEmpty, "\(header)")
            #expect(header.stdout == "Authorization: Bearer \(token)\n", "\(header)")

            let json = try await user.tokenctl("--profile", profile, "token", "--format", "json")
            #expect(json.status == .success && json.stderr.isEmpty && json.stdout.hasSuffix("}\n"), "\(json)")
            let object = try jsonObject(json.stdout)
            #expect(Set(object.keys) == ["access_token", "token_type", "expires_at", "expires_in"], "\(object)")
            #expect(
                object["access_token"] as? String == token && object["token_type"] as? String == "Bearer", "\(object)")
            let expiresIn = try #require(object["expires_in"] as? Int)
            #expect(expiresIn > 60, "\(object)")
            let expiresAt = try #require(object["expires_at"] as? String)
            #expect(expiresAt.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/) != nil, "\(expiresAt)")

            let credential = try await user.tokenctl("--profile", profile, "token", "--format", "exec-credential")
            #expect(credential.status == .success && credential.stderr.isEmpty, "\(credential)")
            let execCredential = try jsonObject(credential.stdout)
            #expect(Set(execCredential.keys) == ["apiVersion", "kind", "status"], "\(execCredential)")
            #expect(
                execCredential["apiVersion"] as? String == "client.authentication.k8s.io/v1"
                    && execCredential["kind"] as? String == "ExecCredential")
            let credentialStatus = try #require(execCredential["status"] as? [String: Any])
            #expect(credentialStatus["token"] as? String == token, "\(credentialStatus)")
            // It expires when tokenctl would refresh: before the token does.
            let expiration = try #require(credentialStatus["expirationTimestamp"] as? String)
            #expect(expiration < expiresAt, "\(expiration) before \(expiresAt)")
            // kubectl's KUBERNETES_EXEC_INFO may ask for v1beta1.
            let execInfo =
                #"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":false}}"#
            let beta = try jsonObject(
                try await user.tokenctl(
                    "--profile", profile, "token", "--format", "exec-credential",
                    variables: ["KUBERNETES_EXEC_INFO": execInfo]
                ).stdout)
            #expect(beta["apiVersion"] as? String == "client.authentication.k8s.io/v1beta1", "\(beta)")

            // --force refreshes: a new token, same shape.
            let forced = try await user.tokenctl("--profile", profile, "token", "--force")
            #expect(
                forced.status == .success && forced.stdout != raw.stdout && forced.stdout.hasSuffix("\n"), "\(forced)")
        }
    }

    @Test(
        "token: a Bearer session has no DPoP proof (78); a profile never logged in is 78 with a hint; bad options are 64"
    )
    func tokenRefusals() async throws {
        try await withSession { user, server in
            let profile = uniqueProfile("tokenno")
            try await user.login(server, profile: profile)
            let proof = try await user.tokenctl(
                "--profile", profile, "token", "--format", "dpop", "--method", "GET", "--url", "https://api.test/")
            #expect(proof.status == .configuration && proof.stdout.isEmpty, "\(proof)")
            #expect(
                proof.stderr.hasPrefix(
                    "Error: profile '\(profile)' is not bound to a DPoP key: its tokens are Bearer tokens\n"),
                "\(proof)")
            #expect(proof.stderr.contains("login --dpop"), "\(proof)")

            let unknown = uniqueProfile("nobody")
            let none = try await user.tokenctl("--profile", unknown, "token")
            #expect(none.status == .configuration && none.stdout.isEmpty, "\(none)")
            #expect(
                none.stderr.hasPrefix("Error: ") && none.stderr.contains(unknown) && none.stderr.contains("login"),
                "\(none)")

            let usage = try await user.tokenctl("--profile", profile, "token", "--format", "dpop", "--method", "GET")
            #expect(
                usage.status == .usage && usage.stdout.isEmpty
                    && usage.stderr.contains("needs both '--method <method>' and '--url <url>'"), "\(usage)")
            #expect(usage.stderr.contains("USAGE: tokenctl [--profile <name>] token"), "\(usage)")
        }
    }

    @Test("token --format dpop: the two header lines; json carries the proof; a plain token notes DPoP once a session")
    func tokenDPoP() async throws {
        try await withSession { user, server in
            let profile = uniqueProfile("dpop")
            let login = try await user.login(server, profile: profile, extra: ["--dpop"])
            let jkt = try #require(
                login.stderr.firstMatch(of: /bound to a new DPoP key \(jkt ([A-Za-z0-9_-]+)\)/)?.1, "\(login)")

            let result = try await user.tokenctl(
                "--profile", profile, "token", "--format", "dpop", "--method", "post", "--url",
                "https://api.test/items?x=1")
            #expect(result.status == .success && result.stderr.isEmpty, "\(result)")
            let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(
                lines.count == 3 && lines[2].isEmpty && lines[0].hasPrefix("Authorization: DPoP ")
                    && lines[1].hasPrefix("DPoP: "), "\(result)")
            let token = String(lines[0].dropFirst("Authorization: DPoP ".count))
            let proof = String(lines[1].dropFirst("DPoP: ".count))
            #expect(proof.split(separator: ".").count == 3, "a compact JWS: \(proof)")
            let claims = try jsonObject(
                String(decoding: try #require(base64URLDecoded(String(proof.split(separator: ".")[1]))), as: UTF8.self))
            #expect(
                claims["htm"] as? String == "POST" && claims["htu"] as? String == "https://api.test/items", "\(claims)")
            #expect(claims["ath"] is String && claims["jti"] is String, "\(claims)")
            let header = try jsonObject(
                String(decoding: try #require(base64URLDecoded(String(proof.split(separator: ".")[0]))), as: UTF8.self))
            #expect(header["typ"] as? String == "dpop+jwt" && header["alg"] as? String == "ES256", "\(header)")
            #expect(
                try server.tokenStatus(token)["jkt"] as? String == String(jkt),
                "the server bound the token to the key the login named")

            let json = try jsonObject(
                try await user.tokenctl(
                    "--profile", profile, "token", "--format", "json", "--method", "GET", "--url", "https://api.test/"
                ).stdout)
            #expect(
                Set(json.keys) == ["access_token", "token_type", "expires_at", "expires_in", "dpop_proof"]
                    && json["token_type"] as? String == "DPoP", "\(json)")

            let first = try await user.tokenctl("--profile", profile, "token")
            #expect(first.status == .success && first.stdout == token + "\n", "\(first)")
            #expect(
                first.stderr.hasPrefix("tokenctl: note: profile '\(profile)' has a DPoP-bound token")
                    && first.stderr.hasSuffix("(Shown once a session.)\n"), "\(first)")
            let second = try await user.tokenctl("--profile", profile, "token")
            #expect(second.status == .success && second.stderr.isEmpty, "once a session: \(second)")
        }
    }

    // MARK: git-credential

    @Test(
        "git-credential get: username/password (or authtype) lines with the token; erase makes the next get refresh; store says nothing"
    )
    func gitCredential() async throws {
        try await withSession { user, server in
            let profile = uniqueProfile("git")
            try await user.login(server, profile: profile)
            let token = String(try await user.tokenctl("--profile", profile, "token").stdout.dropLast())
            let request = "protocol=https\nhost=git.example.com\npath=team/repo.git\n\n"
            let get = try await user.tokenctl("--profile", profile, "git-credential", "get", stdin: request)
            #expect(get.status == .success && get.stderr.isEmpty, "\(get)")
            let plain = try #require(
                get.stdout.wholeMatch(of: /username=oauth2\npassword=([^\n]+)\npassword_expiry_utc=(\d+)\n/), "\(get)")
            #expect(String(plain.1) == token)
            #expect(Double(String(plain.2))! > Date().timeIntervalSince1970, "\(get)")

            let authtype = try await user.tokenctl(
                "--profile", profile, "git-credential", "get", stdin: "capability[]=authtype\n" + request)
            #expect(
                authtype.stdout.wholeMatch(
                    of:
                        /capability\[\]=authtype\nauthtype=Bearer\ncredential=([^\n]+)\nephemeral=1\npassword_expiry_utc=\d+\n/
                )?.1 == Substring(token), "\(authtype)")

            let store = try await user.tokenctl("--profile", profile, "git-credential", "store", stdin: request)
            #expect(store.status == .success && store.stdout.isEmpty && store.stderr.isEmpty, "\(store)")
            let erase = try await user.tokenctl(
                "--profile", profile, "git-credential", "erase",
                stdin: "protocol=https\nhost=git.example.com\npassword=\(token)\n\n")
            #expect(erase.status == .success && erase.stdout.isEmpty && erase.stderr.isEmpty, "\(erase)")
            let after = try await user.tokenctl("--profile", profile, "git-credential", "get", stdin: request)
            let renewed = try #require(after.stdout.firstMatch(of: /password=([^\n]+)\n/)?.1, "\(after)")
            #expect(String(renewed) != token, "git rejected the token: the next get refreshed it")

            // Signed out: nothing on stdout (git asks the next helper), a reason on stderr, exit 0.
            let nobody = uniqueProfile("gitnobody")
            let none = try await user.tokenctl("--profile", nobody, "git-credential", "get", stdin: request)
            #expect(
                none.status == .success && none.stdout.isEmpty && none.stderr.hasPrefix("tokenctl: no token for git: "),
                "\(none)")
            let usage = try await user.tokenctl(
                "--profile", profile, "git-credential", "get", "--min-ttl", "soon", stdin: request)
            #expect(usage.status == .usage && usage.stdout.isEmpty && usage.stderr.contains("--min-ttl"), "\(usage)")
        }
    }

    // MARK: exec

    @Test(
        "exec: 127 for a program not found, 126 for one not runnable, the token gone from this process; usage errors are 64"
    )
    func exec() async throws {
        // In-process, a program found would replace the test runner (exec has no child): only
        // the paths where execvp fails run here; the child's environment is tested end to end.
        try await withSession { user, server in
            let profile = uniqueProfile("exec")
            try await user.login(server, profile: profile)
            // exec sets the variables in this process, whose image execvp would replace; the
            // token's is removed when execvp fails, CMDTEST_TOKEN_EXPIRES_AT (no secret) stays.
            let missing = user.root + "/no-such-program"
            let notFound = try await user.tokenctl(
                "--profile", profile, "exec", "--env", "CMDTEST_TOKEN", "--", missing, "--flag")
            #expect(notFound.status == .commandNotFound && notFound.stdout.isEmpty, "\(notFound)")
            #expect(notFound.stderr == "Error: cannot run '\(missing)': No such file or directory.\n", "\(notFound)")
            #expect(
                getenv("CMDTEST_TOKEN") == nil,
                "the token does not stay in the environment of a process that failed to exec")
            let expiresAt = try #require(getenv("CMDTEST_TOKEN_EXPIRES_AT").map { String(cString: $0) })
            #expect(expiresAt.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/) != nil, "\(expiresAt)")

            let plainFile = user.root + "/not-executable"
            FileManager.default.createFile(
                atPath: plainFile, contents: Data("#!/bin/sh\n".utf8), attributes: [.posixPermissions: 0o600])
            let notRunnable = try await user.tokenctl(
                "--profile", profile, "exec", "--env", "CMDTEST_TOKEN", "--", plainFile)
            #expect(notRunnable.status == .commandNotRunnable, "\(notRunnable)")
            #expect(notRunnable.stderr == "Error: cannot run '\(plainFile)': Permission denied.\n", "\(notRunnable)")

            // Not logged in: the error, and no program run.
            let nobody = try await user.tokenctl("--profile", uniqueProfile("execnobody"), "exec", "--", missing)
            #expect(
                nobody.status == .configuration && nobody.stderr.hasPrefix("Error: ")
                    && !nobody.stderr.contains("cannot run"), "\(nobody)")
            let usage = try await user.tokenctl("--profile", profile, "exec", "--env", "9LIVES", "--", missing)
            #expect(
                usage.status == .usage && usage.stderr.contains("shell variable name")
                    && usage.stderr.contains("tokenctl exec --help"), "\(usage)")
        }
    }
}

/// base64url without padding, decoded.
func base64URLDecoded(_ text: String) -> Data? {
    var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    return Data(base64Encoded: base64)
}
