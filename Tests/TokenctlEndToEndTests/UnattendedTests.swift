import Foundation
import Testing
import TokenctlTestSupport

/// `refresh --all`, `schedule`, orphaned sessions and `doctor`: what cron and systemd rely on.
@Suite("End to end: unattended use")
struct UnattendedTests {
    @Test("refresh --all: one healthy, one terminal, one transient profile → one line each, exit 77 (the worst)")
    func refreshAllMixedOutcomes() throws {
        let sandbox = try Sandbox()
        let healthy = try AuthServer()
        let terminal = try AuthServer()
        let transient = try AuthServer()
        try sandbox.login(healthy, profile: "healthy")
        try sandbox.login(terminal, profile: "ended")
        try sandbox.login(transient, profile: "flaky")
        try terminal.configure([
            "faults": [["status": 400, "body": "{\"error\":\"invalid_grant\"}", "content_type": "application/json"]]
        ])
        try transient.configure(["faults": [["status": 503, "count": 100]]])
        let result = try sandbox.tokenctl("refresh", "--all", "--timeout", "2")
        #expect(result.status == 77, "\(result)")
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("healthy: refreshed") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("ended: login required") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("flaky: transient failure") }, "\(lines)")
        #expect(try sandbox.storedTokenSet(profile: "healthy", issuer: healthy.url) != nil)
        #expect(try sandbox.storedTokenSet(profile: "ended", issuer: terminal.url) == nil)
        #expect(
            try sandbox.storedTokenSet(profile: "flaky", issuer: transient.url) != nil,
            "a transient failure keeps the session")

        // Without the ended profile the worst outcome is transient: 75.
        try transient.configure(["faults": [["status": 503, "count": 100]]])
        #expect(try sandbox.tokenctl("--profile", "ended", "logout", "--no-revoke").status == 0)
        try FileManager.default.removeItem(atPath: sandbox.profileFile("ended"))
        #expect(try sandbox.tokenctl("refresh", "--all", "--timeout", "2").status == 75)
    }

    @Test(
        "refresh --all over 12 profiles at one issuer: one request each, over kept-alive connections (at most 8, the run's width), no reuse of a rotated token"
    )
    func refreshAllReusesConnections() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0])
        let profiles = (1...12).map { "keepalive-\($0)" }
        for profile in profiles { try sandbox.login(server, profile: profile) }
        let before = try server.tokenRequests().count
        let result = try sandbox.tokenctl("refresh", "--all")
        #expect(result.status == 0, "\(result)")
        let requests = Array(try server.tokenRequests().dropFirst(before))
        #expect(requests.count == 12, "one request per profile: \(requests.count)")
        let ports = Set(requests.compactMap { $0["client_port"] as? Int })
        #expect(ports.count <= 8, "connections: \(ports.count) for \(requests.count) requests")
        #expect(try server.stats()["reuse_detected"] == 0)
        for profile in profiles { #expect(try sandbox.storedTokenSet(profile: profile, issuer: server.url) != nil) }
    }

    @Test("refresh --all --if-expiring-within leaves fresh profiles alone and refreshes the expiring one")
    func refreshAllWindow() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server, profile: "long", clientID: "long")
        try server.configure(["access_ttl": 100])
        try sandbox.login(server, profile: "short", clientID: "short")
        let before = try server.tokenRequests().count
        let result = try sandbox.tokenctl("refresh", "--all", "--if-expiring-within", "600")
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("long: fresh"))
        #expect(result.stderr.contains("short: refreshed"))
        #expect(try server.tokenRequests().count == before + 1)
    }

    @Test(
        "fake crontab: schedule install --cron is idempotent, keeps other entries, and remove takes away exactly its block"
    )
    func cronSchedule() throws {
        let sandbox = try Sandbox()
        let crontabFile = try sandbox.useFakeCrontab()
        try "MAILTO=me\n0 3 * * * backup\n".write(toFile: crontabFile, atomically: true, encoding: .utf8)

        #expect(try sandbox.tokenctl("schedule", "install", "--cron", "--every", "30m").status == 0)
        #expect(try sandbox.tokenctl("schedule", "install", "--cron").status == 0)
        let text = try String(contentsOfFile: crontabFile, encoding: .utf8)
        #expect(text.hasPrefix("MAILTO=me\n0 3 * * * backup\n"), "\(text)")
        #expect(text.components(separatedBy: "# BEGIN tokenctl schedule").count == 2, "installed once: \(text)")
        #expect(text.contains("*/15 * * * * "))
        #expect(text.contains("refresh --all --if-expiring-within 1860"))
        #expect(text.contains("XDG_RUNTIME_DIR="), "cron gets the runtime directory so the bus is found")
        #expect(
            text.contains("/tokenctl refresh --all") && !text.contains("tokenctl-engine"),
            "the entry runs the front: \(text)")
        let status = try sandbox.tokenctl("schedule", "status")
        #expect(status.status == 0 && status.stdout.contains("cron: */15"), "\(status)")

        #expect(
            try sandbox.tokenctl("schedule", "install", "--cron", "--every", "7m").status == 64,
            "cron cannot run every 7 min")
        #expect(try sandbox.tokenctl("schedule", "remove").status == 0)
        #expect(try String(contentsOfFile: crontabFile, encoding: .utf8) == "MAILTO=me\n0 3 * * * backup\n")
        #expect(try sandbox.tokenctl("schedule", "status").status == 1)
    }

    @Test("fake systemctl: schedule install --systemd writes units that systemd-analyze accepts; remove deletes them")
    func systemdSchedule() throws {
        let sandbox = try Sandbox()
        let bin = sandbox.root + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        let calls = sandbox.root + "/systemctl-calls"
        // A stand-in user manager: records what tokenctl asks of it.
        try writeExecutable(bin + "/systemctl", "#!/bin/sh\necho \"$*\" >> \"\(calls)\"\nexit 0\n")
        sandbox.variables["PATH"] = bin + ":" + sandbox.variables["PATH"]!

        let install = try sandbox.tokenctl("schedule", "install", "--systemd", "--every", "1h")
        #expect(install.status == 0, "\(install)")
        let unitDirectory = sandbox.root + "/config/systemd/user"
        let timer = try String(contentsOfFile: unitDirectory + "/tokenctl-refresh.timer", encoding: .utf8)
        let service = try String(contentsOfFile: unitDirectory + "/tokenctl-refresh.service", encoding: .utf8)
        #expect(timer.contains("OnUnitActiveSec=3600s"))
        #expect(service.contains("refresh --all --if-expiring-within 7260"))
        #expect(service.contains("ExecStart=/"))
        #expect(
            service.contains("/tokenctl refresh --all"), "the schedule runs the front, not tokenctl-engine: \(service)")
        #expect(
            try String(contentsOfFile: calls, encoding: .utf8).contains("--user enable --now tokenctl-refresh.timer"))
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") {
            let verify = try runProgram(
                "/usr/bin/systemd-analyze",
                [
                    "verify", "--man=no", unitDirectory + "/tokenctl-refresh.service",
                    unitDirectory + "/tokenctl-refresh.timer",
                ], environment: sandbox.variables)
            #expect(verify.status == 0, "systemd-analyze verify: \(verify)")
        }
        #expect(try sandbox.tokenctl("schedule", "install", "--systemd", "--every", "1h").status == 0, "idempotent")
        let remove = try sandbox.tokenctl("schedule", "remove", "--systemd")
        #expect(remove.status == 0, "\(remove)")
        #expect(!FileManager.default.fileExists(atPath: unitDirectory + "/tokenctl-refresh.timer"))
        #expect(!FileManager.default.fileExists(atPath: unitDirectory + "/tokenctl-refresh.service"))
    }

    @Test("schedule install --systemd without a user manager installs nothing and says so (69)")
    func systemdUnavailable() throws {
        let sandbox = try Sandbox()
        let bin = sandbox.root + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try writeExecutable(
            bin + "/systemctl", "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n")
        sandbox.variables["PATH"] = bin + ":" + sandbox.variables["PATH"]!
        let result = try sandbox.tokenctl("schedule", "install", "--systemd")
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains("Nothing was installed"))
        #expect(!FileManager.default.fileExists(atPath: sandbox.root + "/config/systemd/user/tokenctl-refresh.timer"))
    }
}

/// Orphaned sessions need a keyring of their own: they are every tokenctl item no profile uses.
@Suite("End to end: keyring residue")
struct ResidueTests {
    @Test("items of deleted or re-pointed profiles are never used, listed by status --all, removed by logout --orphans")
    func orphans() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer()
        try sandbox.login(server, profile: "kept")
        try sandbox.login(server, profile: "deleted", clientID: "gone")
        try sandbox.login(server, profile: "repointed", clientID: "old-client")
        try FileManager.default.removeItem(atPath: sandbox.profileFile("deleted"))
        let path = sandbox.profileFile("repointed")
        try (try String(contentsOfFile: path, encoding: .utf8)).replacingOccurrences(
            of: "client_id = old-client", with: "client_id = new-client"
        )
        .write(toFile: path, atomically: true, encoding: .utf8)

        // A re-created / re-pointed profile starts signed out.
        #expect(try sandbox.tokenctl("--profile", "repointed", "token").status == 77)

        let status = try sandbox.tokenctl("status", "--all")
        #expect(status.stdout.contains("Orphaned sessions"), "\(status)")
        #expect(status.stdout.contains("profile deleted"))
        #expect(status.stdout.contains("client id old-client"))
        let json = try sandbox.tokenctl("status", "--all", "--json")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(array.filter { $0["state"] as? String == "orphaned" }.count == 2)
        #expect(try sandbox.tokenctl("doctor").stdout.contains("orphaned"))

        let removal = try sandbox.tokenctl("logout", "--orphans")
        #expect(removal.status == 0, "\(removal)")
        #expect(try sandbox.storedTokenSet(profile: "deleted", issuer: server.url, clientID: "gone") == nil)
        #expect(try sandbox.storedTokenSet(profile: "repointed", issuer: server.url, clientID: "old-client") == nil)
        #expect(try sandbox.storedTokenSet(profile: "kept", issuer: server.url) != nil, "sessions in use are kept")
        #expect(!(try sandbox.tokenctl("status", "--all").stdout.contains("Orphaned")))
    }

    @Test("doctor's helpers (crontab) get no socket of tokenctl's, though the issuer checks ran before them")
    func doctorHelpersInheritNoConnection() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server)
        let probe = try DescriptorProbe(sandbox.root + "/fake-crontab", then: "echo 'no crontab for test' >&2; exit 1")
        sandbox.variables["TOKENCTL_CRONTAB"] = probe.program
        /// The sockets (by inode) among the descriptors.
        func sockets(_ entries: [String]) -> Set<String> {
            Set(entries.compactMap { entry in entry.range(of: " -> socket:").map { String(entry[$0.upperBound...]) } })
        }
        let given = sockets(try probe.baseline(environment: sandbox.variables))
        let before = try server.log().count
        let doctor = try sandbox.tokenctl("doctor")
        #expect(doctor.stdout.contains("issuer \(server.url)"), "\(doctor)")
        #expect(try server.log().count > before, "the issuer was asked over HTTP first")
        #expect(probe.ran, "doctor ran crontab -l: \(doctor)")
        #expect(
            sockets(probe.seen).subtracting(given).isEmpty,
            "crontab got sockets tokenctl was not given: \(sockets(probe.seen).subtracting(given))")
    }

    @Test(
        "doctor: no schedule is a warning (exit 0); all checks pass with one; --json has levels; a locked keyring fails its line"
    )
    func doctor() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer()
        try sandbox.login(server)
        try sandbox.useFakeCrontab()

        let missingSchedule = try sandbox.tokenctl("doctor")
        #expect(
            missingSchedule.status == 0, "token works without a schedule: a warning, not a failure: \(missingSchedule)")
        #expect(
            missingSchedule.stdout.contains("[warn] refresh schedule"),
            "ASCII marks when stdout is not a terminal: \(missingSchedule)")
        #expect(
            missingSchedule.stdout.contains("    Run 'tokenctl schedule install'"),
            "a warning carries its advice: \(missingSchedule)")
        let warnings = try sandbox.tokenctl("doctor", "--json")
        #expect(warnings.stdout.contains(#""name":"refresh schedule","ok":true,"level":"warn""#), "\(warnings)")

        #expect(try sandbox.tokenctl("schedule", "install", "--cron").status == 0)
        let healthy = try sandbox.tokenctl("doctor")
        #expect(healthy.status == 0, "\(healthy)")
        #expect(healthy.stdout.contains("[ok]   hot cache: kernel user keyring"), "\(healthy.stdout)")
        for name in [
            "configuration", "session bus", "secret service", "keyring", "hot cache", "session 'default'", "clock",
            "lock directory", "refresh schedule",
        ] {
            #expect(healthy.stdout.contains("[ok]   \(name)"), "\(name): \(healthy.stdout)")
        }
        let json = try sandbox.tokenctl("doctor", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["ok"] as? Bool == true)

        try keyring.lock()
        let locked = try sandbox.tokenctl("doctor")
        #expect(locked.status == 1)
        #expect(locked.stdout.contains("[FAIL] keyring: the keyring is locked"), "\(locked)")
    }
}

extension Sandbox {
    /// A stand-in for crontab(1) keeping the table in a file of the sandbox, so that tests never
    /// edit the machine's real crontab. Returns the file.
    @discardableResult
    func useFakeCrontab() throws -> String {
        let table = root + "/home/crontab.txt"
        let program = root + "/fake-crontab"
        try writeExecutable(
            program,
            "#!/bin/sh\nf=\"\(table)\"\ncase \"$1\" in -l) [ -f \"$f\" ] && exec cat \"$f\"; echo \"no crontab for test\" >&2; exit 1;; -) cat > \"$f\";; esac\n"
        )
        variables["TOKENCTL_CRONTAB"] = program
        return table
    }
}
