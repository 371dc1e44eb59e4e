import Foundation
import Testing
import TokenctlTestSupport

/// Single flight across processes against a server that rotates with no grace period and
/// revokes the whole token family on reuse: one duplicate refresh would end the session.
@Suite("End to end: concurrent processes")
struct ConcurrencyTests {
    @Test("64 concurrent `token` processes on an expired token: one refresh, one token, all exit 0")
    func fanIn64() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.loginWithExpiredAccessToken(server)
        // Widen the race window: every refresh takes 300 ms at the server.
        try server.configure(["delay_seconds": 0.3])
        let requestsBefore = try server.tokenRequests().count

        let results = try sandbox.concurrently(64, ["token"])

        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        let access = try #require(stored["access_token"] as? String)
        for result in results {
            #expect(result.status == 0, "\(result)")
            #expect(result.stdout == access + "\n")
        }
        #expect(try server.tokenRequests().count - requestsBefore == 1, "exactly one refresh reached the server")
        #expect(try server.stats()["reuse_detected"] == 0)
        #expect(try server.stats()["invalid_grant"] == 0)
        #expect((try server.tokenStatus(stored["refresh_token"] as! String)["active"] as? Bool) == true)
    }

    @Test("`token` and `refresh` racing: `refresh` forces one rotation, `token` callers reuse it")
    func tokenAndRefreshRace() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.loginWithExpiredAccessToken(server)
        try server.configure(["delay_seconds": 0.2])
        let commands = try (0..<16).map { index in try sandbox.start(index % 8 == 0 ? ["refresh"] : ["token"]) }
        let results = commands.map { $0.wait() }
        for result in results { #expect(result.status == 0, "\(result)") }
        #expect(try server.stats()["reuse_detected"] == 0)
        #expect(try server.stats()["invalid_grant"] == 0)
        // Every `refresh` is a forced rotation, but each rotation uses the token its predecessor stored.
        #expect(try sandbox.tokenctl("token").status == 0)
    }

    @Test("soak: 30 s of waves of `token` and `refresh` across two profiles with 3-second tokens")
    func soak() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0, "access_ttl": 3])
        try sandbox.login(server, profile: "a", clientID: "cli-a", subject: "alice")
        try sandbox.login(server, profile: "b", clientID: "cli-b", subject: "bob")
        try server.configure(["delay_seconds": 0.05])
        let start = now()
        var waves = 0
        var failures: [RunResult] = []
        while now() - start < 30 {
            let waveStart = now()
            var commands: [RunningCommand] = []
            for profile in ["a", "b"] {
                for _ in 0..<3 { commands.append(try sandbox.start(["--profile", profile, "token"])) }
                commands.append(try sandbox.start(["--profile", profile, "refresh", "--if-expiring-within", "1"]))
            }
            failures += commands.map { $0.wait() }.filter { $0.status != 0 }
            waves += 1
            let elapsed = now() - waveStart
            if elapsed < 0.5 { sleep(seconds: 0.5 - elapsed) }
        }
        let duration = now() - start
        #expect(failures.isEmpty, "failed processes: \(failures.prefix(3))")
        let stats = try server.stats()
        #expect(stats["invalid_grant"] == 0)
        #expect(stats["reuse_detected"] == 0)
        for (profile, client) in [("a", "cli-a"), ("b", "cli-b")] {
            #expect(try sandbox.tokenctl("--profile", profile, "status").status == 0, "session \(profile) survived")
            // Refreshes happen only when a token is within its margin (1.5 s of a 3 s token):
            // consecutive refreshes of one profile are at least ~1.5 s apart, so the count is
            // bounded by the number of expiry windows, plus one per wave boundary.
            let times = try server.refreshGrants().filter {
                ($0["client_id"] as? String) == client && ($0["status"] as? Int) == 200
            }
            .compactMap { $0["time"] as? Double }.sorted()
            let windows = duration / 1.5
            #expect(Double(times.count) <= windows + 2, "\(profile): \(times.count) refreshes in \(Int(duration)) s")
            #expect(
                Double(times.count) >= duration / 2.6 - 1,
                "\(profile) was refreshed once per window (1.5-2.5 s): \(times.count)")
            let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
            #expect(gaps.filter { $0 < 1.0 }.isEmpty, "\(profile): duplicate refreshes \(gaps.filter { $0 < 1.0 })")
        }
        print(
            "soak: \(waves) waves of 8 processes in \(Int(duration)) s; refreshes a=\(try server.refreshGrants().filter { ($0["client_id"] as? String) == "cli-a" }.count) b=\(try server.refreshGrants().filter { ($0["client_id"] as? String) == "cli-b" }.count); invalid_grant=\(stats["invalid_grant"] ?? -1)"
        )
    }
}
