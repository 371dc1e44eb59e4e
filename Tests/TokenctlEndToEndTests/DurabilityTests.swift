import Foundation
import Testing
import TokenctlEssentials
import TokenctlTestSupport

/// Sessions survive the field: the rotation journal across a hung and a killed keyring write,
/// one lock for every environment of a user, bounded keyring calls, signals inherited as
/// ignored, and logins that never spend a grant on a store that cannot take it. All through the
/// real binary, against the test authorization server with no grace period (one-use refresh
/// tokens, the family revoked on reuse): one lost rotation or one duplicate refresh ends the
/// session there.
@Suite("Durability")
struct DurabilityTests {
    @Test(
        "one lock for every environment: processes with and without XDG_RUNTIME_DIR refresh together for 20 rounds, no session lost"
    )
    func oneLockAcrossEnvironments() throws {
        let server = try AuthServer(["grace_seconds": 0, "delay_seconds": 0.1])
        let sandbox = try Sandbox()
        // The uid-derived lock directory, as every process of a user really gets it: a profile
        // name of this test's own keeps it apart from other tests.
        sandbox.variables["TOKENCTL_RUNTIME_DIR"] = nil
        let profile = "onelock-" + String(UUID().uuidString.prefix(8)).lowercased()
        try sandbox.login(server, profile: profile)
        var withoutRuntime = sandbox.variables
        withoutRuntime["XDG_RUNTIME_DIR"] = nil
        var otherRuntime = sandbox.variables
        otherRuntime["XDG_RUNTIME_DIR"] = sandbox.root + "/another-runtime"
        for round in 0..<20 {
            let commands = [
                try sandbox.start(["--profile", profile, "refresh"]),
                try RunningCommand(
                    executable: sandbox.environment.binary, arguments: ["--profile", profile, "refresh"],
                    environment: withoutRuntime, stdin: nil, directory: sandbox.root),
                try RunningCommand(
                    executable: sandbox.environment.binary, arguments: ["--profile", profile, "refresh"],
                    environment: otherRuntime, stdin: nil, directory: sandbox.root),
            ]
            for result in commands.map({ $0.wait() }) {
                #expect(result.status == 0, "round \(round): \(result)")
            }
        }
        let stats = try server.stats()
        #expect(stats["reuse_detected"] == 0, "\(stats)")
        #expect(stats["invalid_grant"] == 0, "\(stats)")
        #expect(try sandbox.tokenctl("--profile", profile, "token", "--force").status == 0)
    }

    @Test(
        "a keyring stopped during the write, the process then SIGKILLed: the next run completes the rotation from the journal"
    )
    func killedDuringHungWrite() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        // The answer waits 5 s: room to stop the keyring meanwhile; then 4 s for the answer to be
        // journaled and the write to hang (a Secret Service call gives up after 10 s).
        try server.configure(["faults": [["delay": 5]]])
        let requestsBefore = try server.stats()["token_requests"] ?? 0
        let command = try sandbox.start(["token", "--force"])
        try server.waitForTokenRequests(requestsBefore + 1)
        // The request is at the server: stop the keyring before the answer comes back.
        try keyring.pause(true)
        sleep(seconds: 9)
        command.signal(SIGKILL)
        let killed = command.wait()
        #expect(killed.status == 128 + SIGKILL, "\(killed)")
        #expect(killed.stdout.isEmpty)
        try keyring.pause(false)

        // The server has rotated; only the journal knows the new refresh token.
        let started = now()
        let status = try sandbox.tokenctl("status", "--json")
        let completedIn = now() - started
        #expect(status.status == 0, "\(status)")
        #expect(status.stdout.contains("\"pending_write\":null"), "status completed the pending write: \(status)")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        let storedRefresh = try #require(stored["refresh_token"] as? String)
        #expect(
            (try server.tokenStatus(storedRefresh))["active"] as? Bool == true, "the keyring holds the rotated token")
        Swift.print("journal: a pending write completed by the next run in \(String(format: "%.3f", completedIn)) s")

        let forced = try sandbox.tokenctl("token", "--force")
        #expect(forced.status == 0, "\(forced)")
        let stats = try server.stats()
        #expect(stats["reuse_detected"] == 0, "\(stats)")
        #expect(stats["invalid_grant"] == 0, "\(stats)")
    }

    @Test(
        "a keyring hung during the write: the rotated token is served from the journal within --timeout; status shows the pending write until the keyring is back"
    )
    func hungWriteServedFromJournal() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        // The answer waits 5 s, within the 8 s deadline: room to stop the keyring meanwhile.
        try server.configure(["faults": [["delay": 5]]])
        let requestsBefore = try server.stats()["token_requests"] ?? 0
        let started = now()
        let command = try sandbox.start(["token", "--force", "--timeout", "8"])
        try server.waitForTokenRequests(requestsBefore + 1)
        try keyring.pause(true)
        let result = command.wait()
        let elapsed = now() - started
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.hasPrefix("at_"), "the rotated access token is served: \(result)")
        #expect(
            elapsed < 8 + SecretServiceBounds.minimumWriteTime + 2,
            "bounded by --timeout (and the write's floor): \(elapsed) s")

        // Keyring still stopped: status serves the journal's set and says the write is pending.
        let pending = try sandbox.tokenctl("status", "--timeout", "2")
        #expect(pending.stdout.contains("pending write:"), "\(pending)")

        try keyring.pause(false)
        let done = try sandbox.tokenctl("status")
        #expect(done.status == 0, "\(done)")
        #expect(!done.stdout.contains("pending write:"), "\(done)")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        #expect((try server.tokenStatus(stored["refresh_token"] as? String ?? ""))["active"] as? Bool == true)
        #expect(try sandbox.tokenctl("token", "--force").status == 0)
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test("--timeout holds with a hung keyring: 69 within the bound, for token, refresh and status")
    func timeoutWithHungKeyring() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer()
        try sandbox.login(server)
        let requestsBefore = try server.stats()["token_requests"] ?? 0
        try keyring.pause(true)
        defer { try? keyring.pause(false) }
        for arguments in [
            ["token", "--force", "--timeout", "2"], ["refresh", "--timeout", "2"], ["status", "--timeout", "2"],
        ] {
            let started = now()
            let result = try sandbox.start(arguments).wait()
            let elapsed = now() - started
            #expect(result.status == 69, "\(arguments): \(result)")
            #expect(elapsed < 2 + 2.5, "\(arguments) took \(elapsed) s")
        }
        #expect(
            try server.stats()["token_requests"] == requestsBefore, "nothing is sent while the keyring cannot be read")
    }

    @Test("--timeout holds with a hung server: 75 soon after the bound, saying the session may have been rotated away")
    func timeoutWithHungServer() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        try server.configure(["faults": [["hang": 30]]])
        let started = now()
        let result = try sandbox.tokenctl("token", "--force", "--timeout", "2")
        let elapsed = now() - started
        #expect(result.status == 75, "\(result)")
        #expect(result.stderr.contains("was sent but no answer came back"), "\(result)")
        #expect(!result.stderr.contains("The session is kept"), "\(result)")
        // A sent refresh gets at least 5 s to be answered (documented), then the command ends.
        #expect(elapsed >= 4.5 && elapsed < 9, "\(elapsed) s")
    }

    @Test("a deadline under a second is refused: 64, nothing sent")
    func tooShortTimeout() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let requestsBefore = try server.stats()["token_requests"] ?? 0
        for value in ["0.001", "0.5", "0"] {
            let result = try sandbox.tokenctl("token", "--force", "--timeout", value)
            #expect(result.status == 64, "\(value): \(result)")
            #expect(result.stderr.contains("between 1 and 3600"))
        }
        #expect(try server.stats()["token_requests"] == requestsBefore)
    }

    @Test("signals inherited as ignored stay ignored: nohup's SIGHUP and a shell's ignored SIGINT during a refresh")
    func inheritedIgnoredSignals() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        let binary = sandbox.environment.binary
        for (wrapper, signal) in [
            (["/usr/bin/nohup", binary], SIGHUP),
            (["/bin/sh", "-c", "trap '' INT; exec \"$0\" \"$@\"", binary], SIGINT),
        ] {
            try server.configure(["faults": [["delay": 1.0]]])
            let before = try server.stats()["token_requests"] ?? 0
            let command = try RunningCommand(
                executable: wrapper[0], arguments: Array(wrapper.dropFirst()) + ["token", "--force"],
                environment: sandbox.variables, stdin: nil, directory: sandbox.root)
            try server.waitForTokenRequests(before + 1)
            command.signal(signal)
            let result = command.wait()
            #expect(result.status == 0, "signal \(signal) was ignored before tokenctl started: \(result)")
            #expect(result.stdout.hasPrefix("at_"), "\(result)")
        }
        #expect(try sandbox.tokenctl("token", "--force").status == 0)
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test(
        "SIGTERM during a refresh is deferred until the rotation is safe, then ends the process; the session survives")
    func sigtermDeferredThenDelivered() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        try server.configure(["faults": [["delay": 1.0]]])
        let before = try server.stats()["token_requests"] ?? 0
        let command = try sandbox.start(["token", "--force"])
        try server.waitForTokenRequests(before + 1)
        command.signal(SIGTERM)
        let result = command.wait()
        #expect(result.status == 128 + SIGTERM, "\(result)")
        #expect(try sandbox.tokenctl("token", "--force").status == 0, "the rotation was kept")
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test("a locked keyring: login --refresh-token-stdin sends nothing and the imported token stays unspent")
    func loginChecksStoreFirst() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        let refreshToken = try server.issue()
        try keyring.lock()
        let result = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", stdin: refreshToken)
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains("Nothing was sent to the server"), "\(result)")
        #expect(!result.stderr.contains("The session is kept"), "\(result)")
        #expect(try server.stats()["token_requests"] == 0)
        #expect((try server.tokenStatus(refreshToken))["active"] as? Bool == true)
        try keyring.unlock()
        let retried = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", stdin: refreshToken)
        #expect(retried.status == 0, "the same token logs in once the keyring is open: \(retried)")
    }

    @Test("408 Request Timeout is transient: retried, the session kept")
    func requestTimeoutIsTransient() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        try server.configure([
            "faults": [["status": 408, "body": "<html>Request Timeout</html>", "content_type": "text/html"]]
        ])
        let result = try sandbox.tokenctl("token", "--force")
        #expect(result.status == 0, "\(result)")
        #expect(try server.refreshGrants().count >= 1)
    }

}

/// The write floor of the Secret Service store (SecretServiceStore.minimumWriteTime).
enum SecretServiceBounds {
    static let minimumWriteTime = 2.0
}
