import Foundation
import Testing
import TokenctlTestSupport

/// What a refresh asks of the Secret Service. gnome-keyring serves one call at a time and
/// rewrites its keyring file on every write, so its calls per profile set how `refresh --all`
/// scales: a refresh reads its item by the path a search finds and writes the rotated set to
/// that same path (no second search, no item proxy with its property load). Each test has a
/// private bus and keyring, so the monitor sees tokenctl's calls only.
@Suite("End to end: a refresh's round trips to the Secret Service", .serialized)
struct KeyringRoundTripTests {
    private static func secretCalls(_ calls: [BusMonitor.Call]) -> [String] {
        calls.filter {
            $0.interface.hasPrefix("org.freedesktop.Secret.") || $0.interface == "org.freedesktop.DBus.Properties"
        }.map(\.name)
    }

    /// `tokenctl refresh` while the server holds its answer for 1.5 s: `meanwhile` runs once the
    /// request has arrived (after the read, before the write); the server answers at once again
    /// afterwards.
    private static func refresh(_ sandbox: Sandbox, _ server: AuthServer, meanwhile: () throws -> Void) throws
        -> RunResult
    {
        try server.configure(["delay_seconds": 1.5])
        let command = try sandbox.start(["refresh"])
        try server.waitForTokenRequests(2)
        try meanwhile()
        let result = command.wait()
        try server.configure(["delay_seconds": 0])
        return result
    }

    @Test(
        "a forced refresh: one search, one read, one SetSecret on the path the search found; no item properties, no CreateItem"
    )
    func forcedRefresh() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        let before = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)

        let monitor = try BusMonitor(busAddress: keyring.busAddress)
        let result = try sandbox.tokenctl("refresh")
        let calls = monitor.stop()
        #expect(result.status == 0, "\(result)")

        let names = Self.secretCalls(calls)
        #expect(names.filter { $0 == "Service.SearchItems" }.count == 1, "\(names)")
        #expect(names.filter { $0 == "Service.GetSecrets" }.count == 1, "\(names)")
        #expect(names.filter { $0 == "Item.SetSecret" }.count == 1, "\(names)")
        #expect(!names.contains("Properties.GetAll"), "no item proxy: \(names)")
        #expect(!names.contains("Service.CreateItem"), "\(names)")
        // The write went to the item the session is in, and it holds the rotated token.
        let write = try #require(calls.first { $0.member == "SetSecret" })
        #expect(write.path.hasPrefix("/org/freedesktop/secrets/collection/"), "\(write)")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        #expect(stored["refresh_token"] as? String != before)
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test("refresh --all over 3 profiles: three searches and three SetSecret calls, no item properties")
    func refreshAll() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        for profile in ["one", "two", "three"] { try sandbox.login(server, profile: profile) }
        let grantsBefore = try server.refreshGrants().count

        let monitor = try BusMonitor(busAddress: keyring.busAddress)
        let result = try sandbox.tokenctl("refresh", "--all")
        let calls = monitor.stop()
        #expect(result.status == 0, "\(result)")

        let names = Self.secretCalls(calls)
        #expect(names.filter { $0 == "Service.SearchItems" }.count == 3, "\(names)")
        #expect(names.filter { $0 == "Item.SetSecret" }.count == 3, "\(names)")
        #expect(Set(calls.filter { $0.member == "SetSecret" }.map(\.path)).count == 3, "one item each")
        #expect(!names.contains("Properties.GetAll"), "\(names)")
        #expect(try server.refreshGrants().count == grantsBefore + 3)
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test(
        "the item deleted by another program while the refresh waits for the server: the rotated set goes into a new item"
    )
    func itemDeletedDuringRefresh() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        let before = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        let result = try Self.refresh(sandbox, server) {
            let cleared = try runProgram(
                "/usr/bin/secret-tool", ["clear", "application", "tokenctl", "profile", "default", "kind", "session"],
                environment: sandbox.variables)
            #expect(cleared.status == 0, "\(cleared)")
            #expect(try sandbox.storedTokenSet(issuer: server.url) == nil, "deleted before the answer came")
        }
        #expect(result.status == 0, "\(result)")

        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url)?["refresh_token"] as? String)
        #expect(stored != before)
        // With no grace period, a stale token would be reuse and end the family.
        #expect(try sandbox.tokenctl("refresh").status == 0, "the next refresh uses the rotated token")
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test(
        "the keyring daemon restarted while the refresh waits for the server: nothing written to a path of the old daemon; the session survives"
    )
    func daemonRestartedDuringRefresh() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        let result = try Self.refresh(sandbox, server) {
            try keyring.kill()
            try keyring.start()
        }
        // Written to the new daemon, or held in the rotation journal until the next command.
        #expect(result.status == 0, "\(result)")

        #expect(try sandbox.tokenctl("refresh").status == 0)
        #expect(try server.stats()["reuse_detected"] == 0, "the next refresh used the rotated token")
        #expect(!(try sandbox.tokenctl("status").stdout.contains("pending write:")))
        let items = try runProgram(
            "/usr/bin/secret-tool", ["search", "--all", "application", "tokenctl", "kind", "session"],
            environment: sandbox.variables)
        // secret-tool prints each item's path as "[/N]" (and its secret: never shown here).
        let paths = items.stdout.split(separator: "\n").filter { $0.hasPrefix("[/") }
        #expect(paths.count == 1, "one item: \(paths)")
    }
}
