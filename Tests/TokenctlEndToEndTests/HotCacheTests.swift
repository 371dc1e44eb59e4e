import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// The kernel keyring hot cache, through the built front (`tokenctl`) and engine
/// (`tokenctl-engine`), the real keyrings and a real server.
@Suite("End to end: kernel keyring hot cache")
struct HotCacheTests {
    let probe = KernelKeyringProbe()
    /// A session bus address where nothing listens: any D-Bus use fails (exit 69).
    static let noBus = ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/tokenctl-test-bus"]
    static let fallback = [HotCache.disableVariable: "1"]

    @Test("a hit needs no D-Bus and no network; --force and the fallback do")
    func hitWithoutSecretService() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let access = try #require(try sandbox.storedTokenSet(issuer: server.url)?["access_token"] as? String)
        let requests = try server.tokenRequests().count
        #expect(try probe.key(issuer: server.url) != nil, "login cached the token")

        let hit = try sandbox.tokenctl("token", extraEnvironment: Self.noBus)
        #expect(hit.status == 0, "\(hit)")
        #expect(hit.stdout == access + "\n")
        #expect(hit.stderr.isEmpty)
        #expect(
            try sandbox.tokenctl("token", "--format", "header", extraEnvironment: Self.noBus).stdout
                == "Authorization: Bearer \(access)\n")
        #expect(try server.tokenRequests().count == requests, "no request to the server")

        // The hit's JSON is the engine's JSON.
        let hitJSON = try sandbox.tokenctl("token", "--format=json", extraEnvironment: Self.noBus)
        let engineJSON = try sandbox.tokenctl("token", "--format=json", extraEnvironment: Self.fallback)
        #expect(hitJSON.status == 0 && engineJSON.status == 0, "\(hitJSON) \(engineJSON)")
        let hitObject = try #require(
            try JSONSerialization.jsonObject(with: Data(hitJSON.stdout.utf8)) as? [String: Any])
        let engineObject = try #require(
            try JSONSerialization.jsonObject(with: Data(engineJSON.stdout.utf8)) as? [String: Any])
        #expect(Set(hitObject.keys) == Set(engineObject.keys))
        for key in ["access_token", "token_type", "expires_at"] {
            #expect(hitObject[key] as? String == engineObject[key] as? String, "\(key)")
        }
        #expect(abs((hitObject["expires_in"] as? Int ?? 0) - (engineObject["expires_in"] as? Int ?? -9)) <= 1)

        // Verbose hits say where the token came from.
        let verbose = try sandbox.tokenctl("-v", "token", extraEnvironment: Self.noBus)
        #expect(verbose.stdout == access + "\n")
        #expect(verbose.stderr.contains("kernel keyring"))

        // Everything that must not be a hit reaches the engine and the (unreachable) Secret Service.
        for arguments in [["token", "--force"], ["status"]] {
            let result = try sandbox.start(arguments, extraEnvironment: Self.noBus).wait()
            #expect(result.status == 69, "\(arguments): \(result)")
        }
        let forcedFallback = try sandbox.tokenctl("token", extraEnvironment: Self.noBus.merging(Self.fallback) { $1 })
        #expect(forcedFallback.status == 69, "the test switch goes to the Secret Service: \(forcedFallback)")
    }

    @Test("rotation replaces the cached key: after token --force the next hit prints the new token")
    func rotationReplacesKey() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let first = try sandbox.tokenctl("token")
        let forced = try sandbox.tokenctl("token", "--force")
        #expect(forced.status == 0, "\(forced)")
        #expect(forced.stdout != first.stdout)
        let hit = try sandbox.tokenctl("token", extraEnvironment: Self.noBus)
        #expect(hit.status == 0, "\(hit)")
        #expect(hit.stdout == forced.stdout)

        // `refresh` rotates too.
        #expect(try sandbox.tokenctl("refresh").status == 0)
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        let afterRefresh = try sandbox.tokenctl("token", extraEnvironment: Self.noBus)
        #expect(afterRefresh.stdout == (stored["access_token"] as! String) + "\n")

        // The key holds the access token and nothing more secret.
        let key = try #require(try probe.key(issuer: server.url))
        let payload = try probe.payload(key)
        #expect(payload.contains(stored["access_token"] as! String))
        #expect(!payload.contains(stored["refresh_token"] as! String))
        #expect(payload.hasPrefix("tokenctl-hotcache-v1\n"))
    }

    @Test("logout leaves nothing in the kernel keyring; logout --all neither")
    func logoutRemovesKey() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        try sandbox.login(server, profile: "second", clientID: "cli2")
        #expect(try sandbox.tokenctl("token").status == 0)
        #expect(try sandbox.tokenctl("--profile", "second", "token").status == 0)
        let first = KernelKeyringProbe.description(issuer: server.url)
        let second = KernelKeyringProbe.description(profile: "second", issuer: server.url, clientID: "cli2")
        #expect(try probe.userKeyringDescriptions().contains(first))

        #expect(try sandbox.tokenctl("logout").status == 0)
        #expect(try probe.key(issuer: server.url) == nil)
        #expect(!(try probe.userKeyringDescriptions().contains(first)))
        #expect(try probe.userKeyringDescriptions().contains(second), "only the logged-out profile's key goes")
        let afterLogout = try sandbox.tokenctl("token")
        #expect(afterLogout.status == 77, "no stale hit after logout: \(afterLogout)")

        #expect(try sandbox.tokenctl("logout", "--all", "--no-revoke").status == 0)
        #expect(!(try probe.userKeyringDescriptions().contains(second)))
    }

    @Test("a terminal refresh failure invalidates the key")
    func terminalFailureInvalidates() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        #expect(try sandbox.tokenctl("token").status == 0)
        #expect(try probe.key(issuer: server.url) != nil)
        try server.configure([
            "faults": [["status": 400, "body": "{\"error\":\"invalid_grant\"}", "content_type": "application/json"]]
        ])
        let ended = try sandbox.tokenctl("token", "--force")
        #expect(ended.status == 77, "\(ended)")
        #expect(try probe.key(issuer: server.url) == nil)
        let next = try sandbox.tokenctl("token", extraEnvironment: Self.noBus)
        #expect(next.status == 69, "no hit: the engine looks in the (unreachable) Secret Service: \(next)")
        #expect(try sandbox.tokenctl("token").status == 77)
    }

    @Test("the key is user-only, expires in the kernel before the token does, and status --json names the cache")
    func permissionsAndTimeout() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let key = try #require(try probe.key(issuer: server.url))
        let fields = try probe.rawDescription(key)
        #expect(fields.count == 5)
        #expect(fields[0] == "user")
        #expect(fields[1] == String(getuid()))
        let permissions = try #require(UInt32(fields[3], radix: 16))
        #expect(permissions == 0x3f3f_0000, "possessor and user only: \(fields[3])")
        #expect(permissions & 0x0000_ffff == 0, "nothing for group or others")
        #expect(fields[4] == KernelKeyringProbe.description(issuer: server.url))
        let line = try #require(try probe.procKeysLine(key))
        let timeout = line.split(separator: " ", omittingEmptySubsequences: true)[3]
        #expect(timeout != "perm", "a kernel timeout is set: \(line)")
        #expect(
            timeout.hasSuffix("m") || timeout.hasSuffix("s"), "under an hour (token lifetime minus the margin): \(line)"
        )

        let status = try sandbox.tokenctl("status", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        #expect(object["cache"] as? String == "kernel-keyring")
        let fallbackStatus = try sandbox.tokenctl("status", "--json", extraEnvironment: Self.fallback)
        let fallbackObject = try #require(
            try JSONSerialization.jsonObject(with: Data(fallbackStatus.stdout.utf8)) as? [String: Any])
        #expect(fallbackObject["cache"] as? String == "none")
    }

    @Test("forced fallback: the whole lifecycle behaves the same and never touches the kernel keyring")
    func forcedFallbackLifecycle() throws {
        let sandbox = try Sandbox()
        // Long-lived access tokens until the step that needs one to expire: `first` and `again`
        // are served from the store however long the login took.
        let server = try AuthServer()
        let refreshToken = try server.issue()
        let login = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", stdin: refreshToken,
            extraEnvironment: Self.fallback)
        #expect(login.status == 0, "\(login)")
        defer { HotCache(environment: .fixed([:])).invalidate(profile: .default, issuer: server.url, clientID: "cli") }
        func token(_ arguments: String...) throws -> RunResult {
            let result = try sandbox.start(["token"] + arguments, extraEnvironment: Self.fallback).wait()
            #expect(try probe.key(issuer: server.url) == nil, "no key in @u under the test switch")
            return result
        }
        let first = try token()
        #expect(first.status == 0, "\(first)")
        #expect(
            first.stdout
                == (try sandbox.storedTokenSet(issuer: server.url)?["access_token"] as? String).map { $0 + "\n" })
        let again = try token()
        #expect(again.stdout == first.stdout, "served from the Secret Service without a refresh")
        try server.configure(["access_ttl": 2])
        let forced = try token("--force")
        #expect(forced.status == 0 && forced.stdout != first.stdout)
        try server.configure(["access_ttl": 3600])
        sleep(seconds: 2.2)
        let afterExpiry = try token()
        #expect(afterExpiry.status == 0 && afterExpiry.stdout != forced.stdout, "refreshed after expiry")
        #expect(try server.tokenRequests().count == 3)
        let logout = try sandbox.start(["logout"], extraEnvironment: Self.fallback).wait()
        #expect(logout.status == 0, "\(logout)")
        #expect(try token().status == 77)
    }

    @Test(
        "a planted key is ignored unless it names exactly this profile, issuer and client; --min-ttl beyond it misses")
    func plantedKeys() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let access = try #require(try sandbox.storedTokenSet(issuer: server.url)?["access_token"] as? String)
        let now = Date().timeIntervalSince1970
        func payload(
            issuer: String, clientID: String = "cli", profile: String = "default", token: String,
            expiresIn: Double = 3600
        ) throws -> String {
            let entry = HotCacheEntry(
                profile: ProfileName(rawValue: profile)!, issuer: issuer, clientID: clientID, accessToken: token,
                tokenType: "Bearer",
                obtainedAt: now, expiresAt: now + expiresIn, issuedLifetime: 3600)
            return String(decoding: try entry.encoded(), as: UTF8.self)
        }
        let hostile = [
            try payload(issuer: "https://evil.example.com", token: "at_planted_issuer"),
            try payload(issuer: server.url, clientID: "cli2", token: "at_planted_client"),
            try payload(issuer: server.url, profile: "other", token: "at_planted_profile"),
            "tokenctl-hotcache-v1\naccess_token=at_planted_garbage\n",
            "at_planted_raw",
            try payload(issuer: server.url, token: "at_planted_stale", expiresIn: -10),
        ]
        for planted in hostile {
            try probe.plant(planted, issuer: server.url)
            let result = try sandbox.tokenctl("token")
            #expect(result.status == 0, "\(result)")
            #expect(result.stdout == access + "\n", "planted payload ignored: \(planted)")
            let key = try #require(try probe.key(issuer: server.url))
            #expect(!(try probe.payload(key)).contains("at_planted"), "the engine replaced the planted key")
        }
        // A well-formed key for exactly this identity is what a hit serves (no D-Bus needed).
        // It has 100 s left of an hour: a hit for the default --min-ttl (60 s), a miss for 200 s,
        // which goes to the engine and the (unreachable) Secret Service.
        try probe.plant(try payload(issuer: server.url, token: "at_planted_valid", expiresIn: 100), issuer: server.url)
        #expect(try sandbox.tokenctl("token", extraEnvironment: Self.noBus).stdout == "at_planted_valid\n")
        #expect(
            try sandbox.tokenctl("token", "--min-ttl", "90", extraEnvironment: Self.noBus).stdout
                == "at_planted_valid\n")
        let longer = try sandbox.tokenctl("token", "--min-ttl", "200", extraEnvironment: Self.noBus)
        #expect(longer.status == 69, "--min-ttl beyond what is left bypasses the cache: \(longer)")
    }

    @Test(
        "a miss while another process refreshes waits for it and serves the token it cached, without the Secret Service"
    )
    func waitsForAnotherProcessRefresh() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let now = Date().timeIntervalSince1970
        func plant(_ token: String, expiresIn: Double) throws {
            let entry = HotCacheEntry(
                profile: ProfileName(rawValue: "default")!, issuer: server.url, clientID: "cli", accessToken: token,
                tokenType: "Bearer",
                obtainedAt: now, expiresAt: now + expiresIn, issuedLifetime: 3600)
            try probe.plant(String(decoding: try entry.encoded(), as: UTF8.self), issuer: server.url)
        }
        // "Another process" is this test, holding the profile's refresh lock as a refresher does.
        let lockPath = sandbox.variables["TOKENCTL_RUNTIME_DIR"]! + "/tokenctl/default.lock"
        func holdLock() throws -> Int32 {
            let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0, flock(descriptor, LOCK_EX) == 0 else {
                throw HarnessError("cannot lock \(lockPath)")
            }
            return descriptor
        }
        /// Whether the process has the lock file open, i.e. is watching the lock (polled for up
        /// to 20 s, however slow the machine).
        func watchesLock(_ command: RunningCommand) -> Bool {
            for _ in 0..<400 {
                let directory = "/proc/\(command.pid)/fd"
                for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
                    if (try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + name)) == lockPath
                    {
                        return true
                    }
                }
                Thread.sleep(forTimeInterval: 0.05)
            }
            return false
        }

        // The front misses (the cached token is stale), the engine finds the lock held and waits,
        // with no session bus at all; the "refresher" then caches a new token and lets go.
        try plant("at_stale", expiresIn: -10)
        var lock = try holdLock()
        let waiting = try sandbox.start(["-v", "token"], extraEnvironment: Self.noBus)
        #expect(watchesLock(waiting), "the engine waits for the lock instead of reading the Secret Service")
        try plant("at_after_refresh", expiresIn: 3600)
        close(lock)
        let served = waiting.wait()
        #expect(served.status == 0, "\(served)")
        #expect(served.stdout == "at_after_refresh\n")
        #expect(served.stderr.contains("waited for another process's refresh of 'default'"), "\(served.stderr)")

        // A refresh that leaves nothing fresh behind (it failed): the waiter carries on through
        // the Secret Service as before, here unreachable (69).
        try plant("at_stale", expiresIn: -10)
        lock = try holdLock()
        let failedRefresh = try sandbox.start(["token"], extraEnvironment: Self.noBus)
        #expect(watchesLock(failedRefresh))
        close(lock)
        #expect(failedRefresh.wait().status == 69)

        // The wait is bounded by --timeout: a refresher that never lets go is reported (75).
        lock = try holdLock()
        defer { close(lock) }
        let started = Date()
        let timedOut = try sandbox.tokenctl("token", "--timeout", "1", extraEnvironment: Self.noBus)
        #expect(timedOut.status == 75, "\(timedOut)")
        #expect(timedOut.stderr.contains("refreshing this profile for too long"), "\(timedOut.stderr)")
        #expect(Date().timeIntervalSince(started) < 10)

        // --force never waits for a cached token. Its refresh waits for the lock like any
        // refresh (75 at --timeout while another process holds it), then reads the Secret
        // Service under it (unreachable: 69).
        let forcedWhileHeld = try sandbox.tokenctl("token", "--force", "--timeout", "1", extraEnvironment: Self.noBus)
        #expect(forcedWhileHeld.status == 75, "\(forcedWhileHeld)")
        close(lock)
        #expect(try sandbox.tokenctl("token", "--force", extraEnvironment: Self.noBus).status == 69)
        lock = try holdLock()

        // Without a usable hot cache (the test switch) a refresher leaves nothing to take: the
        // Secret Service is read at once and its still-valid token served, lock or no lock.
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url)?["access_token"] as? String)
        let noCache = try sandbox.tokenctl("token", "--timeout", "5", extraEnvironment: Self.fallback)
        #expect(noCache.status == 0, "\(noCache)")
        #expect(noCache.stdout == stored + "\n")
    }

    @Test("a front without its engine says which file is missing (exit 69)")
    func missingEngine() throws {
        let sandbox = try Sandbox()
        let lonely = sandbox.root + "/bin/tokenctl"
        try FileManager.default.createDirectory(atPath: sandbox.root + "/bin", withIntermediateDirectories: true)
        // Copied by cp(1), not in this process: a descriptor this process opened to write the copy
        // would be inherited by the programs other tests start meanwhile (some run for the whole
        // test), and executing the copy would fail with ETXTBSY while any of them holds it.
        let copy = try runProgram("/bin/cp", [sandbox.environment.binary, lonely])
        #expect(copy.status == 0, "\(copy)")
        let result = try runProgram(lonely, ["status"], environment: sandbox.variables)
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains(sandbox.root + "/bin/tokenctl-engine"))
        #expect(result.stdout.isEmpty)
    }
}
