import Foundation
import Testing
import TokenctlTestSupport

/// The same sessions against every keyring program (Secret Service implementation) tokenctl
/// users meet: gnome-keyring, KeePassXC 2.7.4 and KWallet (kwalletd5, KDE Frameworks 5.103),
/// each headless on a private bus, with the test authorization server rotating with no grace
/// period (a lost rotation or a duplicate refresh ends the session there).
@Suite("End to end: keyring programs", .serialized)
struct KeyringProgramTests {
    @Test(
        "lifecycle: login, token, status, refreshes from new processes (each replacing the item another process wrote), logout",
        arguments: PrivateKeyringProgram.Kind.allCases)
    func lifecycle(kind: PrivateKeyringProgram.Kind) throws {
        let keyring = try PrivateKeyringProgram(kind)
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)

        let token = try sandbox.tokenctl("token")
        #expect(token.status == 0, "\(kind): \(token)")
        #expect(token.stdout.hasPrefix("at_"))
        let status = try sandbox.tokenctl("status")
        #expect(status.status == 0 && status.stdout.contains(": authenticated"), "\(kind): \(status)")

        // KeePassXC before 2.7.6 opens a dialog when a client replaces an item another client
        // created (CreateItem with replace); tokenctl updates it with Item.SetSecret instead.
        for round in 0..<5 {
            let started = now()
            let refreshed = try sandbox.start(
                round % 2 == 0 ? ["refresh", "--timeout", "10"] : ["token", "--force", "--timeout", "10"]
            ).wait()
            #expect(refreshed.status == 0, "\(kind) round \(round): \(refreshed)")
            #expect(now() - started < 8, "\(kind) round \(round): no prompt, no hang")
        }
        let stats = try server.stats()
        #expect(stats["reuse_detected"] == 0 && stats["invalid_grant"] == 0, "\(kind): \(stats)")
        #expect(!(try sandbox.tokenctl("status").stdout.contains("pending write:")), "every rotation reached \(kind)")

        let logout = try sandbox.tokenctl("logout")
        #expect(logout.status == 0, "\(kind): \(logout)")
        let after = try sandbox.tokenctl("status")
        #expect(after.status == 77, "\(kind): \(after)")
    }

    @Test(
        "an item keeps its D-Bus path, and a deleted item's path is never given to a new one (tokenctl writes a rotated set to the path its read found); a refresh makes one search and one SetSecret",
        arguments: PrivateKeyringProgram.Kind.allCases)
    func itemPaths(kind: PrivateKeyringProgram.Kind) throws {
        let keyring = try PrivateKeyringProgram(kind)
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        func itemPath(_ profile: String) throws -> String? {
            let reply = try runProgram(
                "/usr/bin/dbus-send",
                [
                    "--session", "--print-reply", "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets",
                    "org.freedesktop.Secret.Service.SearchItems",
                    "dict:string:string:application,tokenctl,profile,\(profile),kind,session",
                ],
                environment: sandbox.variables)
            guard reply.status == 0 else { throw HarnessError("SearchItems failed: \(reply)") }
            let paths = reply.stdout.split(separator: "\n").compactMap { line -> String? in
                guard let start = line.range(of: "object path \"") else { return nil }
                return String(line[start.upperBound...].prefix { $0 != "\"" })
            }
            return paths.first
        }

        var seen: [String] = []
        for round in 0..<3 {
            let profile = "paths-\(round)"
            try sandbox.login(server, profile: profile)
            let path = try #require(try itemPath(profile), "\(kind): no item for \(profile)")
            #expect(!seen.contains(path), "\(kind): \(path) was a deleted item's path")
            seen.append(path)
            let monitor = try BusMonitor(busAddress: keyring.busAddress)
            let refreshed = try sandbox.tokenctl("--profile", profile, "refresh")
            let calls = monitor.stop()
            #expect(refreshed.status == 0, "\(kind): \(refreshed)")
            #expect(try itemPath(profile) == path, "\(kind): the rotated set is in the same item")
            #expect(calls.filter { $0.member == "SetSecret" }.map(\.path) == [path], "\(kind): \(calls.map(\.name))")
            #expect(calls.filter { $0.member == "SearchItems" }.count == 1, "\(kind): \(calls.map(\.name))")
            #expect(try sandbox.tokenctl("--profile", profile, "logout", "--no-revoke").status == 0)
            #expect(try itemPath(profile) == nil, "\(kind): deleted")
        }
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test(
        "a DPoP session: the key kept in the keyring program's item with the tokens, proofs accepted by the test server, refreshes and logout signed with it",
        arguments: PrivateKeyringProgram.Kind.allCases)
    func dpopSession(kind: PrivateKeyringProgram.Kind) throws {
        let keyring = try PrivateKeyringProgram(kind)
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        let login = try sandbox.tokenctl(
            "login", "--dpop", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin",
            stdin: try server.issue())
        #expect(login.status == 0, "\(kind): \(login)")
        let resource = server.url + "/resource"
        for round in 0..<3 {
            let headers = try sandbox.tokenctl("token", "--format", "dpop", "--method", "GET", "--url", resource)
            #expect(headers.status == 0, "\(kind) round \(round): \(headers)")
            let answer = try runProgram(
                "/bin/sh", ["-c", "curl -sS -H @- \"$1\"", "sh", resource], stdin: headers.stdout)
            #expect(answer.stdout.contains("\"token_type\": \"DPoP\""), "\(kind) round \(round): \(answer)")
            let refreshed = try sandbox.tokenctl("refresh", "--timeout", "10")
            #expect(refreshed.status == 0, "\(kind) round \(round): \(refreshed)")
        }
        let stats = try server.stats()
        #expect(
            stats["reuse_detected"] == 0 && stats["invalid_grant"] == 0 && stats["dpop_proofs_invalid"] == 0,
            "\(kind): \(stats)")
        #expect(try sandbox.tokenctl("logout").status == 0)
        let revoke = try #require(try server.log().last { ($0["path"] as? String) == "/revoke" })
        #expect(
            (revoke["dpop"] as? [String: Any])?["valid"] as? Bool == true && revoke["outcome"] as? String == "revoked",
            "\(kind): \(revoke)")
    }

    @Test(
        "locked and unlocked mid-run: 69 with advice for this keyring program, nothing sent, the session intact after unlocking",
        arguments: PrivateKeyringProgram.Kind.allCases)
    func lockAndUnlock(kind: PrivateKeyringProgram.Kind) throws {
        let keyring = try PrivateKeyringProgram(kind)
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        sandbox.useSecretServicePathOnly()
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        #expect(try sandbox.tokenctl("token", "--force").status == 0)

        try keyring.lock()
        let requestsBefore = try server.stats()["token_requests"] ?? 0
        let locked = try sandbox.tokenctl("token", "--force", "--timeout", "10")
        #expect(locked.status == 69, "\(kind): \(locked)")
        #expect(locked.stderr.contains("the keyring is locked (\(kind))"), "\(kind): \(locked)")
        let advice: [PrivateKeyringProgram.Kind: String] = [
            .gnomeKeyring: "gnome-keyring-daemon --replace --unlock", .keePassXC: "Unlock the database in KeePassXC",
            .kWallet: "Open the wallet",
        ]
        #expect(locked.stderr.contains(advice[kind]!), "\(kind): \(locked)")
        if kind != .gnomeKeyring {
            #expect(!locked.stderr.contains("gnome-keyring"), "no gnome-keyring advice to a \(kind) user: \(locked)")
        }
        #expect(try server.stats()["token_requests"] == requestsBefore, "nothing is sent while the keyring is locked")

        let status = try sandbox.tokenctl("status")
        #expect(status.status == 69, "\(kind): \(status)")
        #expect(
            status.stdout.contains("  problem:       the keyring is locked (\(kind)).\n  hint:          "),
            "message and hint apart: \(status)")
        let doctor = try sandbox.tokenctl("doctor")
        #expect(doctor.stdout.contains("provider: \(kind)"), "\(kind): \(doctor)")
        #expect(doctor.stdout.contains("[FAIL] keyring: the keyring is locked"), "\(kind): \(doctor)")

        try keyring.unlock()
        let unlocked = try sandbox.tokenctl("token", "--force")
        #expect(unlocked.status == 0, "\(kind): \(unlocked)")
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test(
        "16 processes at once on an expired token: one refresh, every process served",
        arguments: [PrivateKeyringProgram.Kind.gnomeKeyring, .keePassXC])
    func fanIn(kind: PrivateKeyringProgram.Kind) throws {
        let keyring = try PrivateKeyringProgram(kind)
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.loginWithExpiredAccessToken(server)
        try server.configure(["delay_seconds": 0.2])
        let requestsBefore = try server.tokenRequests().count
        let results = try sandbox.concurrently(16, ["token"])
        for result in results { #expect(result.status == 0, "\(kind): \(result)") }
        #expect(Set(results.map(\.stdout)).count == 1, "one token for all")
        #expect(try server.tokenRequests().count - requestsBefore == 1)
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test(
        "SIGTERM during a refresh: held until the rotated set is written, then delivered; the session survives",
        arguments: [PrivateKeyringProgram.Kind.gnomeKeyring, .keePassXC])
    func interruption(kind: PrivateKeyringProgram.Kind) throws {
        let keyring = try PrivateKeyringProgram(kind)
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        try server.configure(["faults": [["delay": 1.0]]])
        let before = try server.stats()["token_requests"] ?? 0
        let command = try sandbox.start(["token", "--force"])
        try server.waitForTokenRequests(before + 1)
        command.signal(SIGTERM)
        #expect(command.wait().status == 128 + SIGTERM)
        let status = try sandbox.tokenctl("status")
        #expect(!status.stdout.contains("pending write:"), "written before the signal took effect: \(status)")
        #expect(try sandbox.tokenctl("token", "--force").status == 0)
        #expect(try server.stats()["reuse_detected"] == 0)
    }
}

/// KeePassXC with "Confirm when passwords are retrieved by clients" (ConfirmAccessItem, its
/// default): items are locked per client until the user allows access.
@Suite("End to end: KeePassXC per-item access confirmation", .serialized)
struct KeePassXCConfirmationTests {
    @Test(
        "without a terminal: 69 naming the per-item lock and what to run; in a terminal: tokenctl asks, the user allows, the session is served"
    )
    func perItemConfirmation() throws {
        let keyring = try PrivateKeyringProgram(.keePassXC, confirmsAccess: true)
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        sandbox.useSecretServicePathOnly()
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)

        let unattended = try sandbox.tokenctl("token", "--timeout", "10")
        #expect(unattended.status == 69, "\(unattended)")
        #expect(unattended.stderr.contains("KeePassXC keeps tokenctl's item locked"), "\(unattended)")
        #expect(unattended.stderr.contains("Run 'tokenctl status --all' in a terminal"), "\(unattended)")
        let doctor = try sandbox.tokenctl("doctor")
        #expect(doctor.stdout.contains("[ok]   keyring: default collection unlocked"), "\(doctor)")
        #expect(
            doctor.stdout.contains("KeePassXC keeps tokenctl's item locked"),
            "doctor tells a per-item lock from a locked collection: \(doctor)")

        // The hint, run as printed in a terminal (script(1) gives it one): tokenctl asks
        // KeePassXC, says on stderr what to approve, and waits; the user allows.
        let interactive = try RunningCommand(
            executable: "/usr/bin/script",
            arguments: ["-qec", "\(sandbox.environment.binary) status --all", "/dev/null"],
            environment: sandbox.variables, stdin: nil, directory: sandbox.root)
        // The request cannot complete before it is approved: after a second of waiting,
        // tokenctl says what to approve.
        sleep(seconds: 1.5)
        try keyring.approvePendingRequest(timeout: 15)
        let answered = interactive.wait()
        #expect(answered.status == 0, "\(answered)")
        #expect(
            answered.stdout.contains("allow it in the KeePassXC window"), "tokenctl said what to approve: \(answered)")
        #expect(answered.stdout.contains(": authenticated"), "\(answered)")
    }
}
