import Foundation
import Testing
import TokenctlTestSupport

/// What happens when a refreshing process is interrupted.
@Suite("End to end: interrupted refreshes")
struct InterruptionTests {
    @Test(
        "SIGTERM during a refresh ends the caller at once; the detached exchange stores the rotated set, which the next run serves"
    )
    func sigtermLeavesTheExchangeToFinish() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.loginWithExpiredAccessToken(server)
        try server.configure(["delay_seconds": 1.0])
        let grantsBefore = try server.refreshGrants().count
        let command = try sandbox.start(["token"])
        // Wait until the request is at the server (counted on arrival; answered 1 s later), then interrupt.
        try server.waitForTokenRequests(2)
        sleep(seconds: 0.2)
        command.signal(SIGTERM)
        let result = command.wait()
        #expect(result.status == 128 + SIGTERM, "the caller ends at once: \(result)")
        #expect(result.stdout.isEmpty, "nothing printed after the interruption")

        // The exchange went on without it: the next run waits for its lock, then serves the
        // rotated token it stored, with no request of its own and nothing reused.
        let next = try sandbox.tokenctl("token")
        #expect(next.status == 0, "\(next)")
        try server.configure(["delay_seconds": 0])
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        #expect((try server.tokenStatus(stored["refresh_token"] as! String)["active"] as? Bool) == true)
        #expect(next.stdout == (stored["access_token"] as! String) + "\n")
        #expect(try server.refreshGrants().count == grantsBefore + 1, "one refresh, the interrupted caller's")
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
        "SIGKILL of the caller or of its process group at random moments, no grace period: no session lost, no refresh token reused"
    )
    func sigkillWithoutGracePeriod() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        var keyringCrashes = 0
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        try server.configure(["delay_seconds": 0.15])
        var killedAfterSending = 0
        for round in 0..<20 {
            let requestsBefore = try server.tokenRequests().count
            let command = try sandbox.start(["token", "--force"])
            sleep(seconds: Double.random(in: 0.05...0.35))
            if round.isMultiple(of: 2) { command.signal(SIGKILL) } else { command.signalGroup(SIGKILL) }
            _ = command.wait()
            if try server.tokenRequests().count > requestsBefore { killedAfterSending += 1 }
            if try keyring.restartIfDead() { keyringCrashes += 1 }
            let recovery = try sandbox.tokenctl("token", "--force")
            #expect(recovery.status == 0, "session lost after a SIGKILL (round \(round)): \(recovery)")
        }
        #expect(try server.stats()["reuse_detected"] == 0)
        print(
            "sigkill without grace: 20 kills (half of the process group), \(killedAfterSending) after the request reached the server, \(keyringCrashes) keyring daemon crashes, 0 sessions lost"
        )
    }

    @Test(
        "SIGKILL of the caller's process group while a no-grace server holds the refresh answer for 2 s: the exchange finishes, and the next process uses the rotated token"
    )
    func sigkillWithRequestHeldAtServer() throws {
        // The refresh in flight at a kill: sent before it, answered after it. The exchange runs
        // in a detached process of its own session, which the kill does not reach: it stores the
        // answer, and the next process refreshes with the rotated token, not the spent one.
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        let before = try server.stats()["token_requests"] ?? 0
        try server.configure(["faults": [["delay": 2.0]]])
        let killed = try sandbox.start(["refresh"])
        try server.waitForTokenRequests(before + 1)
        killed.signalGroup(SIGKILL)
        #expect(killed.wait().status == 128 + SIGKILL)

        let next = try sandbox.tokenctl("refresh")
        #expect(next.status == 0, "the next refresh, after the held one was stored: \(next)")
        let grants = Array(try server.tokenRequests().dropFirst(before))
        #expect(grants.count == 2, "\(grants)")
        #expect(grants.allSatisfy { ($0["outcome"] as? String) == "issued" }, "\(grants)")
        if grants.count == 2 {
            #expect(
                grants[1]["refresh_token"] as? String == grants[0]["issued_refresh_token"] as? String,
                "the next refresh sent the token the killed caller's exchange rotated to")
        }
        #expect(try server.stats()["reuse_detected"] == 0)
        let after = try sandbox.tokenctl("token", "--force")
        #expect(after.status == 0, "the session lives on: \(after)")
    }
}
