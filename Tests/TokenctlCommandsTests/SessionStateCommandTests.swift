import Foundation
import Testing
import TokenctlCommands
import TokenctlEssentials
import TokenctlTestSupport

/// status, refresh, logout, events, doctor and schedule with a session, in-process: each test as a
/// private user of its own (Session.swift), in parallel.
extension SessionCommandTests {
    @Suite("TokenctlCommands: session state, schedules and diagnosis, in-process")
    struct State {
        /// STATUS JSON in tokenctl(1): every key in every state.
        static let statusKeys: Set<String> = [
            "profile", "state", "issuer", "client_id", "subject", "claims", "claims_source", "access_token_format",
            "signature",
            "access_token_expires_in", "refresh_token_present", "scope", "dpop", "dpop_jkt", "targeted_tokens",
            "obtained_at",
            "last_refresh_at", "ended_reason", "store", "cache", "store_problem", "store_hint", "problem", "hint",
            "pending_write", "grant", "client_auth", "client_keys", "platform_files",
        ]

        // MARK: status

        @Test(
            "status: the human block and the JSON schema (never a token); --all lists the profile; signed out is 77, not configured 78"
        )
        func status() async throws {
            try await withSession { user, server in
                let profile = uniqueProfile("status")
                try await user.login(server, profile: profile)
                let token = String(try await user.tokenctl("--profile", profile, "token").stdout.dropLast())

                let human = try await user.tokenctl("--profile", profile, "status")
                #expect(human.status == .success && human.stderr.isEmpty, "\(human)")
                #expect(
                    human.stdout.hasPrefix(
                        "Profile \(profile): authenticated\n  issuer:        \(server.url)\n  client id:     cli\n  subject:       alice\n"
                    ), "\(human)")
                #expect(
                    human.stdout.contains("\n  refresh token: present\n")
                        && human.stdout.contains("\n  access token:  valid for "), "\(human)")
                #expect(
                    human.stdout.contains("\n  scope:         openid offline_access\n") && human.stdout.hasSuffix("\n"),
                    "\(human)")
                #expect(!human.stdout.contains(token), "status never prints a token")

                let json = try await user.tokenctl("--profile", profile, "status", "--json")
                #expect(
                    json.status == .success && json.stderr.isEmpty && json.stdout.hasSuffix("}\n")
                        && !json.stdout.contains(token), "\(json)")
                let object = try jsonObject(json.stdout)
                #expect(Set(object.keys) == Self.statusKeys, "keys: \(object.keys.sorted())")
                #expect(
                    object["profile"] as? String == profile && object["state"] as? String == "authenticated",
                    "\(object)")
                #expect(
                    object["issuer"] as? String == server.url && object["client_id"] as? String == "cli"
                        && object["subject"] as? String == "alice")
                #expect(
                    object["refresh_token_present"] as? Bool == true && object["problem"] is NSNull
                        && object["hint"] is NSNull, "\(object)")
                #expect((object["access_token_expires_in"] as? Int ?? 0) > 60, "\(object)")

                // --all: an array; this user's one profile, and at most orphans of the shared keyring.
                let all = try await user.tokenctl("status", "--all", "--json")
                #expect(all.status == .success && all.stdout.hasPrefix("[") && all.stdout.hasSuffix("]\n"), "\(all)")
                let array = try #require(
                    try JSONSerialization.jsonObject(with: Data(all.stdout.utf8)) as? [[String: Any]])
                #expect(
                    array.filter { $0["state"] as? String != "orphaned" }.map { $0["profile"] as? String } == [profile],
                    "\(all)")
                let allHuman = try await user.tokenctl("status", "--all")
                #expect(
                    allHuman.status == .success && allHuman.stdout.hasPrefix("Profile \(profile): authenticated\n"),
                    "\(allHuman)")

                // Signed out (configuration kept): 77 and the command that signs in again.
                _ = try await user.tokenctl("--profile", profile, "logout", "--no-revoke")
                let out = try await user.tokenctl("--profile", profile, "status")
                #expect(out.status == .loginRequired, "\(out)")
                #expect(
                    out.stdout
                        == "Profile \(profile): signed-out\n  issuer:        \(server.url)\n  client id:     cli\n  Run 'tokenctl --profile \(profile) login' to sign in.\n",
                    "\(out)")
                let outJSON = try jsonObject(try await user.tokenctl("--profile", profile, "status", "--json").stdout)
                #expect(
                    outJSON["state"] as? String == "signed-out"
                        && outJSON["problem"] as? String == "profile '\(profile)' is not logged in", "\(outJSON)")
                #expect(Set(outJSON.keys) == Self.statusKeys, "every key in every state")

                let unknown = try await user.tokenctl("--profile", uniqueProfile("nostatus"), "status")
                #expect(
                    unknown.status == .configuration && unknown.stdout.isEmpty && unknown.stderr.hasPrefix("Error: "),
                    "\(unknown)")
                let usage = try await user.tokenctl("status", "--watch", "--all")
                #expect(
                    usage.status == .usage && usage.stdout.isEmpty
                        && usage.stderr.contains("'--watch' follows one profile"), "\(usage)")
            }
        }

        // MARK: refresh

        @Test(
            "refresh: one line on stderr (refreshed, or not within the window); --all one line per profile; 77 when the session ended"
        )
        func refresh() async throws {
            try await withSession { user, server in
                let profile = uniqueProfile("refresh")
                try await user.login(server, profile: profile)
                let before = try await user.tokenctl("--profile", profile, "token")

                let result = try await user.tokenctl("--profile", profile, "refresh")
                #expect(result.status == .success && result.stdout.isEmpty, "\(result)")
                #expect(
                    result.stderr.wholeMatch(
                        of: /Refreshed profile '[^']+'; access token valid for \d+ (s|min|h \d+ min)\.\n/) != nil
                        && result.stderr.contains(profile), "\(result)")
                #expect(
                    try await user.tokenctl("--profile", profile, "token").stdout != before.stdout, "a new access token"
                )

                let skipped = try await user.tokenctl("--profile", profile, "refresh", "--if-expiring-within", "60")
                #expect(
                    skipped.status == .success
                        && skipped.stderr.hasPrefix(
                            "Profile '\(profile)' not refreshed: the access token is valid for "),
                    "\(skipped)")

                let second = uniqueProfile("refresh2")
                try await user.login(server, profile: second, subject: "carol")
                let all = try await user.tokenctl("refresh", "--all", "--if-expiring-within", "60")
                #expect(all.status == .success && all.stdout.isEmpty, "\(all)")
                let lines = all.stderr.split(separator: "\n").map(String.init).sorted()
                #expect(lines.count == 2, "\(all)")
                for line in lines {
                    #expect(
                        line.wholeMatch(of: /[a-z0-9-]+: fresh, expires \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/) != nil,
                        "\(all)")
                }
                #expect(Set(lines.map { String($0.prefix { $0 != ":" }) }) == [profile, second], "\(all)")

                // The server ends every session (invalid_grant): 77, and a line for each.
                try server.request(
                    "POST", "/_test/config",
                    json: [
                        "faults": [
                            [
                                "status": 400, "body": ["error": "invalid_grant"], "content_type": "application/json",
                                "count": 10,
                            ]
                        ]
                    ])
                let ended = try await user.tokenctl("refresh", "--all")
                #expect(ended.status == .loginRequired, "\(ended)")
                #expect(
                    ended.stderr.contains("\(profile): login required: ")
                        && ended.stderr.contains("\(second): login required: "), "\(ended)")

                let usage = try await user.tokenctl("--profile", profile, "refresh", "--if-expiring-within", "soon")
                #expect(
                    usage.status == .usage && usage.stderr.contains("--if-expiring-within")
                        && usage.stderr.contains("tokenctl refresh --help"), "\(usage)")
            }
        }

        @Test("refresh --all with no profiles says so and succeeds")
        func refreshNothing() async throws {
            try await withSession { user, _ in
                let result = try await user.tokenctl("refresh", "--all")
                #expect(
                    result.status == .success && result.stdout.isEmpty && result.stderr == "No profiles configured.\n",
                    "\(result)")
            }
        }

        // MARK: logout

        @Test(
            "logout: revoked at the server, or not asked (--no-revoke); again: not logged in; --forget removes the profile; a refused revocation is 76"
        )
        func logout() async throws {
            try await withSession { user, server in
                let profile = uniqueProfile("logout")
                let refreshToken = try server.issue()
                user.willLogIn(server, profile: profile)
                let login = try await user.tokenctl(
                    "--profile", profile, "login", "--timeout", "3600", "--issuer", server.url, "--client-id", "cli",
                    "--refresh-token-stdin", stdin: refreshToken)
                #expect(login.status == .success, "\(login)")
                // The login's first refresh rotated the imported token; revocation reaches the family.
                let result = try await user.tokenctl("--profile", profile, "logout")
                #expect(result.status == .success && result.stdout.isEmpty, "\(result)")
                #expect(
                    result.stderr == "Logged out profile '\(profile)'; the server revoked its refresh token.\n",
                    "\(result)")
                #expect(try server.tokenStatus(refreshToken)["active"] as? Bool == false, "revoked at the server")
                let again = try await user.tokenctl("--profile", profile, "logout")
                #expect(
                    again.status == .success && again.stderr == "Profile '\(profile)' was not logged in.\n", "\(again)")

                try await user.login(server, profile: profile)
                let local = try await user.tokenctl("--profile", profile, "logout", "--no-revoke")
                #expect(
                    local.status == .success
                        && local.stderr == "Logged out profile '\(profile)' (not revoked at the server).\n", "\(local)")

                try await user.login(server, profile: profile)
                try server.request("POST", "/_test/config", json: ["revoke_fault_status": 503])
                let refused = try await user.tokenctl("--profile", profile, "logout", "--forget")
                #expect(refused.status == .protocolError, "\(refused)")
                #expect(
                    refused.stderr.hasPrefix(
                        "Logged out profile '\(profile)' here, but the server did not revoke its "), "\(refused)")
                #expect(
                    refused.stderr.hasSuffix("Removed profile '\(profile)': its configuration and caches are gone.\n"),
                    "\(refused)")
                #expect(
                    !FileManager.default.fileExists(atPath: user.profileFile(profile)),
                    "--forget removed the profile file")

                let usage = try await user.tokenctl("logout", "--orphans", "--forget")
                #expect(
                    usage.status == .usage && usage.stdout.isEmpty
                        && usage.stderr.contains("'--orphans' and '--forget' exclude each other"), "\(usage)")
            }
        }

        // MARK: events

        @Test(
            "events: one aligned line per event, the log's JSON lines with --json, filtered by profile, significance and time"
        )
        func events() async throws {
            try await withSession { user, server in
                let profile = uniqueProfile("events")
                try await user.login(server, profile: profile)
                _ = try await user.tokenctl("--profile", profile, "refresh")
                _ = try await user.tokenctl("--profile", profile, "logout", "--no-revoke")
                let other = uniqueProfile("events2")
                try await user.login(server, profile: other, subject: "dave")

                let mine = try await user.tokenctl("--profile", profile, "events")
                #expect(mine.status == .success && mine.stderr.isEmpty, "\(mine)")
                let lines = mine.stdout.split(separator: "\n").map(String.init)
                #expect(
                    lines.map { $0.split(separator: " ", omittingEmptySubsequences: true)[2] } == [
                        "signedIn", "tokenRefreshed", "signedOut",
                    ], "\(mine)")
                let signedIn = try #require(lines.first)
                #expect(
                    signedIn.prefixMatch(of: #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  high    signedIn         /#) != nil,
                    "aligned columns: \(signedIn)")
                #expect(signedIn.contains(" \(profile) alice") && signedIn.hasSuffix("  \(server.url)"), "\(signedIn)")

                let all = try await user.tokenctl("events")
                #expect(
                    all.stdout.contains(" \(other) dave") && all.stdout.contains(" \(profile) alice"),
                    "every profile without --profile: \(all)")

                let json = try await user.tokenctl(
                    "--profile", profile, "events", "--json", "--min-significance", "high")
                let records = try json.stdout.split(separator: "\n").map { try jsonObject(String($0)) }
                #expect(records.map { $0["event"] as? String } == ["signedIn", "signedOut"], "\(json)")
                for record in records {
                    #expect(
                        Set(record.keys) == [
                            "time", "unix_time", "event", "significance", "profile", "issuer", "subject", "reason",
                        ], "\(record)")
                    #expect(
                        record["profile"] as? String == profile && record["significance"] as? String == "high",
                        "\(record)")
                }
                let future = try await user.tokenctl("--profile", profile, "events", "--since", "2999-01-01T00:00:00Z")
                #expect(future.status == .success && future.stdout.isEmpty, "\(future)")

                let usage = try await user.tokenctl("events", "--since", "yesterday")
                #expect(
                    usage.status == .usage && usage.stdout.isEmpty && usage.stderr.contains("for '--since'"), "\(usage)"
                )
            }
        }

        // MARK: doctor

        @Test(
            "doctor: one marked line per check (engine first), the same checks as JSON, exit 1 exactly when one fails")
        func doctor() async throws {
            try await withSession { user, server in
                let profile = uniqueProfile("doctor")
                try await user.login(server, profile: profile)
                let json = try await user.tokenctl("doctor", "--json")
                #expect(json.stdout.hasPrefix("{\"ok\":") && json.stdout.hasSuffix("]}\n"), "\(json)")
                let object = try jsonObject(json.stdout)
                let checks = try #require(object["checks"] as? [[String: Any]])
                let ok = try #require(object["ok"] as? Bool)
                #expect(json.status == (ok ? .success : .failure), "\(json)")
                #expect(ok == checks.allSatisfy { $0["ok"] as? Bool == true }, "\(json)")
                for check in checks {
                    #expect(Set(check.keys) == ["name", "ok", "level", "detail", "hint"], "\(check)")
                    #expect(["ok", "warn", "fail"].contains(check["level"] as? String ?? ""), "\(check)")
                    #expect(
                        (check["level"] as? String == "fail") == (check["ok"] as? Bool == false),
                        "only a failure is not ok: \(check)")
                }
                let engine = try #require(checks.first)
                #expect(
                    engine["name"] as? String == "engine"
                        && (engine["detail"] as? String ?? "").hasPrefix("tokenctl \(TokenctlVersion.string) at "),
                    "\(engine)")
                #expect(
                    checks.contains { ($0["detail"] as? String ?? "").contains(profile) },
                    "the profile's session is checked: \(json)")

                let human = try await user.tokenctl("doctor")
                #expect(human.status == json.status && human.stderr.isEmpty, "\(human)")
                let lines = human.stdout.split(separator: "\n").map(String.init)
                let marked = lines.filter { !$0.hasPrefix("    ") }
                // The same checks in the same order, by name. "keyring residue" counts the
                // orphaned sessions of the whole keyring, which the tests running beside this
                // one add and remove between the two commands: it may come and go.
                let shared = "keyring residue"
                let humanChecks = marked.map { $0.dropFirst(7) }.filter { !$0.hasPrefix("\(shared): ") }
                let jsonNames = checks.compactMap { $0["name"] as? String }.filter { $0 != shared }
                #expect(humanChecks.count == jsonNames.count, "\(human)\n\(json)")
                for (line, name) in zip(humanChecks, jsonNames) {
                    #expect(line.hasPrefix("\(name): "), "\(line) is not the check \(name)")
                }
                #expect(
                    marked.first?.hasPrefix("[ok]   engine: tokenctl \(TokenctlVersion.string) at ") == true,
                    "not a terminal: ASCII marks: \(human)")
                for line in marked {
                    #expect(
                        line.hasPrefix("[ok]   ") || line.hasPrefix("[warn] ") || line.hasPrefix("[FAIL] "), "\(line)")
                }

                let usage = try await user.tokenctl("doctor", "--jsn")
                #expect(
                    usage.status == .usage && usage.stdout.isEmpty && usage.stderr.contains("Did you mean '--json'"),
                    "\(usage)")
            }
        }

        // MARK: schedule

        @Test(
            "schedule --cron in a private crontab: install says what it installed, status prints it, remove takes it away; 7m is refused"
        )
        func schedule() async throws {
            try await withSession { user, _ in
                try "MAILTO=me\n".write(toFile: user.crontabFile, atomically: true, encoding: .utf8)
                let install = try await user.tokenctl("schedule", "install", "--cron", "--every", "30m")
                #expect(install.status == .success && install.stdout.isEmpty, "\(install)")
                #expect(
                    install.stderr.hasPrefix("Installed crontab entry (every 30 min): */30 * * * * ")
                        && install.stderr.contains(
                            " refresh --all --if-expiring-within 3660 2>&1 | logger -t tokenctl.\n"),
                    "\(install)")
                // Then, on this machine (no linger, no unattended keyring), the reboot warning.
                #expect(
                    install.stderr.hasSuffix("'tokenctl doctor' says what to run.\n")
                        || !install.stderr.contains("tokenctl: warning:"), "\(install)")
                let table = try String(contentsOfFile: user.crontabFile, encoding: .utf8)
                #expect(
                    table.hasPrefix("MAILTO=me\n# BEGIN tokenctl schedule") && table.contains("XDG_CONFIG_HOME="),
                    "\(table)")

                let status = try await user.tokenctl("schedule", "status", "--cron")
                #expect(status.status == .success && status.stderr.isEmpty, "\(status)")
                #expect(
                    status.stdout.hasPrefix("cron: */30 * * * *") && status.stdout.hasSuffix("\n")
                        && status.stdout.split(separator: "\n").count == 1, "\(status)")

                let refused = try await user.tokenctl("schedule", "install", "--cron", "--every", "7m")
                #expect(
                    refused.status == .usage
                        && refused.stderr.hasPrefix("Error: cron can run every N minutes where N divides 60"),
                    "\(refused)")

                let remove = try await user.tokenctl("schedule", "remove", "--cron")
                #expect(
                    remove.status == .success && remove.stderr.hasPrefix("Removed ")
                        && remove.stderr.contains("crontab"), "\(remove)")
                #expect(
                    try String(contentsOfFile: user.crontabFile, encoding: .utf8) == "MAILTO=me\n",
                    "remove took away exactly its block")
                let nothing = try await user.tokenctl("schedule", "remove", "--cron")
                #expect(
                    nothing.status == .success && nothing.stderr == "No tokenctl schedule was installed.\n",
                    "\(nothing)")
                let none = try await user.tokenctl("schedule", "status", "--cron")
                #expect(none.status == .failure && none.stdout.hasPrefix("cron: "), "\(none)")

                let usage = try await user.tokenctl("schedule", "install", "--cron", "--systemd")
                #expect(
                    usage.status == .usage && usage.stderr.contains("'--systemd' and '--cron' exclude each other"),
                    "\(usage)")
            }
        }
    }
}

/// The commands that need no session: completion and help (with their usage errors).
@Suite("TokenctlCommands: completion and help output, in-process")
struct CompletionAndHelpTests {
    @Test("completion: each shell's script on stdout names every command; an unknown shell is 64")
    func completion() async throws {
        let expectations = [("bash", "complete -F"), ("zsh", "#compdef tokenctl"), ("fish", "complete -c tokenctl")]
        for (shell, marker) in expectations {
            let result = try await tokenctl("completion", shell)
            #expect(
                result.status == .success && result.stderr.isEmpty && result.stdout.contains(marker),
                "\(shell): \(result)")
            for name in CommandTableTests.names { #expect(result.stdout.contains(name), "\(shell) completes \(name)") }
        }
        let usage = try await tokenctl("completion", "powershell")
        #expect(
            usage.status == .usage && usage.stdout.isEmpty && usage.stderr.hasPrefix("Error: ")
                && usage.stderr.contains("powershell"), "\(usage)")
    }

    @Test(
        "help: the top level lists every command; help <command> and <command> --help agree; an unknown command is 64")
    func help() async throws {
        let top = try await tokenctl("help")
        #expect(top.status == .success && top.stderr.isEmpty, "\(top)")
        for name in CommandTableTests.names {
            #expect(top.stdout.contains("  \(name)"), "top-level help lists \(name)")
        }
        for name in CommandTableTests.names {
            let help = try await tokenctl("help", name)
            let flag = try await tokenctl(name, "--help")
            #expect(
                help.status == .success && help.stdout == flag.stdout
                    && help.stdout.contains("USAGE: tokenctl [--profile <name>] \(name)"), "\(name): \(help)")
        }
        let unknown = try await tokenctl("help", "tokens")
        #expect(unknown.status == .usage && unknown.stdout.isEmpty && unknown.stderr.contains("token"), "\(unknown)")
        let bare = try await tokenctl("tokens")
        #expect(bare.status == .usage && bare.stderr.contains("Did you mean 'token'"), "\(bare)")
    }
}
