import Foundation
import Testing

/// What happens when a refreshing process is interrupted.
@Suite("End to end: interrupted refreshes")
struct InterruptionTests {
    @Test("SIGTERM during a refresh is held off until the rotated set is stored, then delivered")
    func sigtermIsDeferred() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.loginWithExpiredAccessToken(server)
        try server.configure(["delay_seconds": 1.0])
        let command = try sandbox.start(["token"])
        // Wait until the request is at the server (counted on arrival; answered 1 s later), then interrupt.
        try server.waitForTokenRequests(2)
        sleep(seconds: 0.2)
        command.signal(SIGTERM)
        let result = command.wait()
        #expect(result.status == 128 + SIGTERM, "the signal is delivered after the write: \(result)")
        #expect(result.stdout.isEmpty, "nothing printed after the interruption")

        // The rotated token reached the keyring: the next run needs no refresh and nothing was reused.
        try server.configure(["delay_seconds": 0])
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        #expect((try server.tokenStatus(stored["refresh_token"] as! String)["active"] as? Bool) == true)
        let requests = try server.tokenRequests().count
        let next = try sandbox.tokenctl("token")
        #expect(next.status == 0, "\(next)")
        #expect(next.stdout == (stored["access_token"] as! String) + "\n")
        #expect(try server.tokenRequests().count == requests)
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test("SIGKILL at random moments of 20 refreshes, server with a grace period: the session is never lost")
    func sigkillWithGracePeriod() throws {
        // A keyring of its own: gnome-keyring 42 may abort when a client dies mid-call, and that
        // must not take the shared one down with it. If it does, it is restarted (its data is on
        // disk) and the session must still survive.
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        var keyringCrashes = 0
        let server = try AuthServer(["grace_seconds": 30])
        try sandbox.login(server)
        try server.configure(["delay_seconds": 0.15])
        var killedMidRequest = 0
        for _ in 0..<20 {
            let requestsBefore = try server.tokenRequests().count
            let command = try sandbox.start(["token", "--force"])
            sleep(seconds: Double.random(in: 0.05...0.35))
            command.signal(SIGKILL)
            let result = command.wait()
            let reachedServer = try server.tokenRequests().count > requestsBefore
            if result.status == 128 + SIGKILL && reachedServer { killedMidRequest += 1 }
            if try keyring.restartIfDead() { keyringCrashes += 1 }
            // The next run recovers: replaying the stored token inside the grace period if needed.
            let recovery = try sandbox.tokenctl("token", "--force")
            #expect(recovery.status == 0, "session lost after a SIGKILL: \(recovery)")
        }
        #expect(try sandbox.tokenctl("status").status == 0)
        #expect(try server.stats()["reuse_detected"] == 0)
        print(
            "sigkill with grace: 20 kills, \(killedMidRequest) after the request reached the server, \(keyringCrashes) keyring daemon crashes, 0 sessions lost"
        )
    }

    @Test(
        "SIGKILL without a grace period: a session can only be lost inside the request/write window, and then cleanly (77)"
    )
    func sigkillWithoutGracePeriod() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        var keyringCrashes = 0
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        try server.configure(["delay_seconds": 0.15])
        var lost = 0
        for _ in 0..<20 {
            let command = try sandbox.start(["token", "--force"])
            sleep(seconds: Double.random(in: 0.05...0.35))
            command.signal(SIGKILL)
            _ = command.wait()
            if try keyring.restartIfDead() { keyringCrashes += 1 }
            let recovery = try sandbox.tokenctl("token", "--force")
            #expect([0, 77].contains(recovery.status), "only success or a clean 'login required': \(recovery)")
            if recovery.status == 77 {
                lost += 1
                #expect(try sandbox.storedTokenSet(issuer: server.url) == nil, "an ended session is cleared")
                try sandbox.login(server)
            }
        }
        print(
            "sigkill without grace: 20 kills, \(lost) sessions lost (server rotated, process died before the answer came), \(keyringCrashes) keyring daemon crashes"
        )
    }

    @Test(
        "SIGKILL while the refresh request is held at a no-grace server: the next refresh succeeds, the killed one's request is answered after it as a reuse, and the session ends: the one loss a kill may cost"
    )
    func sigkillWithRequestHeldAtServer() throws {
        // The trace of issue 24 point 9 (a kill, the refresh right after it succeeds, the next
        // wave all 77 with the reuse of an older refresh token): not something the killed
        // process left in the journal, the hot cache or the keyring, but its own request, sent
        // before the kill and handled by the server after the next refresh had spent the same
        // token. What the chaos harness (Scripts/chaos) counts as the refresh in flight at a kill.
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        let before = try server.stats()["token_requests"] ?? 0
        try server.configure(["faults": [["delay": 2.0]]])
        let killed = try sandbox.start(["refresh"])
        try server.waitForTokenRequests(before + 1)
        killed.signal(SIGKILL)
        #expect(killed.wait().status == 128 + SIGKILL)

        let next = try sandbox.tokenctl("refresh")
        #expect(next.status == 0, "the same refresh token, answered first: \(next)")
        let deadline = now() + 10
        while try (server.stats()["reuse_detected"] ?? 0) == 0 && now() < deadline { sleep(seconds: 0.05) }
        // Logged when answered: the next refresh's grant first, then the killed one's.
        let grants = Array(try server.tokenRequests().dropFirst(before))
        #expect(grants.count == 2, "\(grants)")
        let first = try #require(grants.first { ($0["outcome"] as? String) == "issued" })
        let reuse = try #require(
            grants.first { ($0["outcome"] as? String) == "reuse_detected" }, "the killed request, answered last")
        #expect(reuse["refresh_token"] as? String == first["refresh_token"] as? String)
        #expect(
            (reuse["received"] as? Double ?? 0) < (first["received"] as? Double ?? 0),
            "it arrived first, before the kill")
        let after = try sandbox.tokenctl("token", "--force")
        #expect(after.status == 77, "the server revoked the family: \(after)")
    }
}
