import Foundation
import Testing
import TokenctlTestSupport

/// The Secret Service failing the ways it fails in the field: each case gets its own message
/// and exit 69, the session is never reported as signed out, and it survives.
/// These exercise the Secret Service path, so the kernel-keyring hot cache is switched off
/// (`useSecretServicePathOnly`); what the cache does with a locked keyring is tested too.
@Suite("End to end: Secret Service diagnosis", .serialized)
struct SecretServiceDiagnosisTests {
    @Test("a locked keyring: `token` and `status` exit 69 saying locked; the session is intact after unlocking")
    func lockedKeyring() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer()
        try sandbox.login(server)
        let access = try #require(try sandbox.storedTokenSet(issuer: server.url)?["access_token"] as? String)
        try keyring.lock()

        // The kernel-keyring hot cache still serves the valid access token it holds (it needs
        // no keyring); anything that must reach the Secret Service reports the lock.
        let cached = try sandbox.tokenctl("token")
        #expect(cached.status == 0 && cached.stdout == access + "\n", "\(cached)")
        let forced = try sandbox.tokenctl("token", "--force")
        #expect(forced.status == 69 && forced.stderr.contains("locked"), "\(forced)")

        sandbox.useSecretServicePathOnly()
        let token = try sandbox.tokenctl("token")
        #expect(token.status == 69, "\(token)")
        #expect(token.stderr.contains("locked"))
        #expect(!token.stderr.contains("not logged in"))
        #expect(token.stdout.isEmpty)
        let status = try sandbox.tokenctl("status")
        #expect(status.status == 69, "\(status)")
        #expect(status.stdout.contains("store-unavailable"))
        #expect(status.stdout.contains("locked"))
        // A profile with no item in a locked keyring is not "signed out" either.
        let other = try sandbox.tokenctl("--profile", "nobody", "token")
        #expect(other.status == 78 || other.status == 69, "\(other)")

        try keyring.unlock()
        let after = try sandbox.tokenctl("token")
        #expect(after.status == 0, "\(after)")
        #expect(after.stdout == access + "\n")
    }

    @Test("no session bus at all: 69 with advice, never an X11 autolaunch attempt")
    func noBus() throws {
        let sandbox = try Sandbox()
        sandbox.useSecretServicePathOnly()
        let server = try AuthServer()
        try sandbox.login(server)
        sandbox.variables["DBUS_SESSION_BUS_ADDRESS"] = nil
        sandbox.variables["XDG_RUNTIME_DIR"] = sandbox.root + "/runtime" // has no bus socket
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains("session bus"))
        #expect(result.stderr.contains("DBUS_SESSION_BUS_ADDRESS"))
        #expect(!result.stderr.contains("X11"))
    }

    @Test(
        "a bus with no Secret Service (daemon killed between two commands): 69 'no Secret Service', the session survives a restart"
    )
    func daemonKilledBetweenCommands() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.useSecretServicePathOnly()
        sandbox.use(keyring)
        let server = try AuthServer()
        try sandbox.login(server)
        let refreshToken = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        try keyring.kill()
        let result = try sandbox.tokenctl("token")
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains("no Secret Service"))
        try keyring.start()
        #expect(try sandbox.tokenctl("token").status == 0)
        #expect(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String == refreshToken)
    }

    @Test(
        "the daemon killed during a refresh: the rotated token is served from the rotation journal, and written once the daemon is back (no grace period)"
    )
    func daemonKilledDuringRefresh() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.loginWithExpiredAccessToken(server)
        // The answer waits 5 s (token's deadline is 30 s): room to kill the daemon meanwhile.
        try server.configure(["delay_seconds": 5])
        let command = try sandbox.start(["token"])
        try server.waitForTokenRequests(2)
        try keyring.kill()
        let result = command.wait()
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.hasPrefix("at_"), "the journal holds the rotation: it is served")
        try server.configure(["delay_seconds": 0])
        let pending = try sandbox.tokenctl("status")
        #expect(pending.stdout.contains("pending write:"), "\(pending)")
        try keyring.start()
        #expect(try sandbox.tokenctl("token", "--force").status == 0)
        #expect(try server.stats()["reuse_detected"] == 0, "the next refresh used the rotated token")
        #expect(!(try sandbox.tokenctl("status").stdout.contains("pending write:")))
    }

    @Test(
        "without a kernel keyring (no journal), the daemon killed during a refresh: 69 saying the refreshed session could not be saved"
    )
    func daemonKilledDuringRefreshWithoutJournal() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.useSecretServicePathOnly()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 60])
        try sandbox.loginWithExpiredAccessToken(server)
        try server.configure(["delay_seconds": 5])
        let command = try sandbox.start(["token"])
        try server.waitForTokenRequests(2)
        try keyring.kill()
        let result = command.wait()
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains("could not be saved"))
        #expect(result.stdout.isEmpty, "an unsaved rotation is never printed")
        // With a grace period, the old token still works once the keyring is back.
        try keyring.start()
        try server.configure(["delay_seconds": 0])
        #expect(try sandbox.tokenctl("token").status == 0)
    }

    @Test("a hung keyring daemon (SIGSTOP): every store call times out; 69 within the timeout")
    func hungDaemon() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.useSecretServicePathOnly()
        sandbox.use(keyring)
        let server = try AuthServer()
        try sandbox.login(server)
        try keyring.pause(true)
        defer { try? keyring.pause(false) }
        let started = now()
        let result = try sandbox.tokenctl("token", "--timeout", "2")
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains("did not answer in time"))
        #expect(now() - started < 20, "bounded by the timeout, not D-Bus's 25 s default")
    }

    @Test("cron's empty environment: no DBUS_SESSION_BUS_ADDRESS, the bus is found at $XDG_RUNTIME_DIR/bus")
    func cronEnvironment() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.useSecretServicePathOnly()
        sandbox.use(keyring)
        let server = try AuthServer()
        try sandbox.login(server)
        // What cron gives: HOME, PATH, a runtime directory (with lingering), and nothing else.
        sandbox.variables = [
            "HOME": sandbox.variables["HOME"]!, "PATH": "/usr/bin:/bin",
            "TOKENCTL_TEST_DISABLE_KERNEL_KEYRING": "1",
            "XDG_RUNTIME_DIR": keyring.runtimeDirectory,
            "XDG_CONFIG_HOME": sandbox.variables["XDG_CONFIG_HOME"]!,
        ]
        let token = try sandbox.tokenctl("--verbose", "token")
        #expect(token.status == 0, "\(token)")
        // Named once, with where it was found (it printed the path twice: "at DIR/bus ($XDG_RUNTIME_DIR/bus)").
        #expect(
            token.stderr.contains(
                "tokenctl: DBUS_SESSION_BUS_ADDRESS was unset; using the session bus at \(keyring.runtimeDirectory)/bus (found in $XDG_RUNTIME_DIR)\n"
            ), "\(token)")
        #expect(token.stderr.components(separatedBy: "/bus").count == 2, "the bus path once: \(token)")
        let doctor = try sandbox.tokenctl("doctor")
        #expect(
            doctor.stdout.contains("session bus: unix:path=\(keyring.runtimeDirectory)/bus (from $XDG_RUNTIME_DIR)\n"),
            "\(doctor)")
        let refresh = try sandbox.tokenctl("refresh")
        #expect(refresh.status == 0, "\(refresh)")
    }
}

@Suite("End to end: oversized token sets")
struct OversizedItemTests {
    @Test("fake server: a token set too large for the keyring item: 69 'too large', nothing stored")
    func itemTooLarge() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        let big = String(repeating: "a", count: 60_000)
        let body = #"{"access_token":"\#(big)","refresh_token":"rt_\#(big)","token_type":"Bearer","expires_in":3600}"#
        try server.configure(["faults": [["status": 200, "body": body, "content_type": "application/json"]]])
        let refreshToken = try server.issue()
        let result = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", stdin: refreshToken)
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains("too large"))
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
        #expect(!FileManager.default.fileExists(atPath: sandbox.profileFile()))
    }
}
