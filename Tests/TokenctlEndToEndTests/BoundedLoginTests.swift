import Foundation
import Testing
import TokenctlTestSupport

/// A login proves that everything it writes can be written before it sends
/// anything to the token endpoint (a one-use refresh token is spent there, a device grant is
/// approved by a person first), and keeps what the server issued when a write still fails.
@Suite("End to end: a login spends nothing it cannot keep")
struct LoginKeepsWhatItSpendsTests {
    /// A regular file where the profiles directory belongs (root ignores modes). Returns its path.
    func blockProfilesDirectory(_ sandbox: Sandbox) throws -> String {
        let directory = sandbox.root + "/config/tokenctl"
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let profiles = directory + "/profiles"
        #expect(FileManager.default.createFile(atPath: profiles, contents: Data("not a directory\n".utf8)))
        return profiles
    }

    /// A new server may get an old one's port (and so its issuer URL): no item of an earlier test may answer.
    func forgetIssuer(_ sandbox: Sandbox, _ server: AuthServer) throws {
        _ = try runProgram(
            "/usr/bin/secret-tool", ["clear", "application", "tokenctl", "issuer", server.url, "kind", "session"],
            environment: sandbox.variables)
    }

    @Test(
        "an import login with the profile directory unwritable (a file in its place): 78 naming it, nothing sent, the one-use refresh token unspent"
    )
    func importWithUnwritableProfileDirectory() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0])
        try forgetIssuer(sandbox, server)
        let profiles = try blockProfilesDirectory(sandbox)
        let refreshToken = try server.issue()
        let result = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", stdin: refreshToken)
        #expect(result.status == 78, "\(result)")
        #expect(result.stderr.contains("cannot write the profile") && result.stderr.contains(profiles), "\(result)")
        #expect(result.stderr.contains("Nothing was sent to the server."), "\(result)")
        #expect(try server.tokenRequests().isEmpty, "nothing reached the token endpoint")
        #expect(try server.tokenStatus(refreshToken)["active"] as? Bool == true, "the refresh token is unspent")
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
        #expect(
            !sandbox.allFiles().contains {
                (try? String(contentsOfFile: $0, encoding: .utf8))?.contains(refreshToken) ?? false
            })
        // Once the directory can be made, the same token signs in.
        try FileManager.default.removeItem(atPath: profiles)
        let again = try sandbox.tokenctl(
            "login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin", stdin: refreshToken)
        #expect(again.status == 0, "\(again)")
        #expect(try sandbox.tokenctl("token").status == 0)
    }

    @Test(
        "a device login approved while another process holds the profile lock past --timeout: the issued session is still stored, not thrown away"
    )
    func deviceLoginStoredWhileLockHeld() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer([
            "grace_seconds": 0, "device_script": ["authorization_pending", "authorization_pending", "approve"],
            "device_interval": 1,
        ])
        try forgetIssuer(sandbox, server)
        let login = try sandbox.start([
            "login", "--device", "--issuer", server.url, "--client-id", "cli", "--timeout", "2",
        ])
        // Once the login has asked for a device code (its checks, and their lock, are behind it),
        // another process takes the profile lock and keeps it past the login's lock wait.
        for _ in 0..<400 {
            if try server.log().contains(where: { $0["path"] as? String == "/device_authorization" }) { break }
            usleep(25_000)
        }
        let holder = try ProfileLockHolder(sandbox, seconds: 20)
        let result = login.wait()
        #expect(holder.isHolding, "the lock was held during the login")
        #expect(result.status == 0, "\(result)")
        let stored = try sandbox.storedTokenSet(issuer: server.url)
        #expect(stored != nil, "the issued session is kept")
        holder.release()
        let token = try sandbox.tokenctl("token")
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token)")
    }

    @Test(
        "a device login with the profile directory unwritable: 78 naming it before any code is shown; neither the device nor the token endpoint is asked"
    )
    func deviceWithUnwritableProfileDirectory() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["grace_seconds": 0, "device_script": ["approve"], "device_interval": 1])
        try forgetIssuer(sandbox, server)
        let profiles = try blockProfilesDirectory(sandbox)
        let result = try sandbox.start(["login", "--device", "--issuer", server.url, "--client-id", "cli"]).wait()
        #expect(result.status == 78, "\(result)")
        #expect(result.stderr.contains("cannot write the profile") && result.stderr.contains(profiles), "\(result)")
        #expect(!result.stderr.contains("enter the code"), "the person was not asked to approve anything")
        let sent = try server.log().filter {
            ["/token", "/device_authorization"].contains($0["path"] as? String ?? "")
        }
        #expect(sent.isEmpty, "\(sent)")
        #expect(try sandbox.storedTokenSet(issuer: server.url) == nil)
    }

    @Test(
        "the keyring locked after the check, while the one-use server answers an import: the set waits in the rotation journal, the message says so and what to run, and that command completes the write"
    )
    func keyringFailsAfterTheCheck() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        // The answer waits 5 s (login's deadline is 30 s): room to lock the keyring meanwhile.
        let server = try AuthServer(["grace_seconds": 0, "delay_seconds": 5])
        let refreshToken = try server.issue()
        let login = try sandbox.start(
            ["login", "--issuer", server.url, "--client-id", "cli", "--refresh-token-stdin"], stdin: refreshToken)
        try server.waitForTokenRequests(1)
        try keyring.lock()
        let result = login.wait()
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains("signed in, but the Secret Service could not save the session"), "\(result)")
        #expect(result.stderr.contains("rotation journal"), "\(result)")
        #expect(result.stderr.contains("Then run 'tokenctl status'"), "\(result)")
        #expect(FileManager.default.fileExists(atPath: sandbox.profileFile()), "the profile is saved")
        #expect(try server.tokenStatus(refreshToken)["spent"] as? Bool == true, "the server rotated")
        let waiting = try sandbox.tokenctl("status")
        #expect(waiting.stdout.contains("pending write:"), "\(waiting)")
        try keyring.unlock()
        // The command the message names, as printed.
        let completed = try sandbox.tokenctl("status")
        #expect(completed.status == 0, "\(completed)")
        #expect(!completed.stdout.contains("pending write:"), "\(completed)")
        let stored = try #require(try sandbox.storedTokenSet(issuer: server.url))
        let rotated = try #require(stored["refresh_token"] as? String)
        let rotatedActive = try server.tokenStatus(rotated)["active"] as? Bool
        #expect(rotated != refreshToken && rotatedActive == true, "the rotated token is stored")
        try server.configure(["delay_seconds": 0])
        #expect(try sandbox.tokenctl("refresh").status == 0)
        #expect(try server.stats()["reuse_detected"] == 0)
    }
}

/// Every command's wait on the Secret Service ends within its bound
/// (`--timeout`, 30 s by default; doctor's whole run 10 s by default), and login finds a
/// service that would hang its writes before it sends anything. Against a fake Secret
/// Service (a stand-in: gnome-keyring cannot be made to answer the session set-up and then
/// hang on a search) in place of gnome-keyring on a private bus.
@Suite("End to end: bounded waits against a hung fake Secret Service")
struct HungSecretServiceTests {
    /// A profile signed in through gnome-keyring, then the fake in its place.
    func signedInThenHung(_ mode: PrivateKeyring.HungMode) throws -> (PrivateKeyring, Sandbox, AuthServer) {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer(["grace_seconds": 0])
        try sandbox.login(server)
        try keyring.replaceWithHungService(mode)
        return (keyring, sandbox, server)
    }

    /// Run and time one command.
    func timed(
        _ sandbox: Sandbox, _ arguments: [String], stdin: String? = nil, extraEnvironment: [String: String] = [:]
    ) throws -> (result: RunResult, seconds: Double) {
        let started = now()
        let result = try sandbox.start(arguments, stdin: stdin, extraEnvironment: extraEnvironment).wait()
        return (result, now() - started)
    }

    /// login, then token, refresh, status, logout and doctor, each within `bound` + 5 s
    /// (`timeout`: the --timeout given, or nil). Login must send nothing to the token endpoint.
    func expectBounded(
        _ mode: PrivateKeyring.HungMode, timeout: String?, loginBound: Double, commandBound: Double, doctorBound: Double
    ) throws {
        let (keyring, sandbox, server) = try signedInThenHung(mode)
        let extra = timeout.map { ["--timeout", $0] } ?? []
        let requestsBefore = try server.tokenRequests().count

        let login = try timed(sandbox, ["login", "--refresh-token-stdin"] + extra, stdin: try server.issue())
        #expect(login.result.status == 69, "\(login.result)")
        #expect(login.result.stderr.contains("Nothing was sent to the server."), "\(login.result)")
        #expect(
            login.result.stderr.contains("did not answer in time (search the Secret Service)"),
            "the check is the search a write makes: \(login.result)")
        #expect(login.seconds < loginBound + 5, "login took \(login.seconds) s")
        #expect(try server.tokenRequests().count == requestsBefore, "login sent nothing to the token endpoint")

        // Without the kernel-keyring hot cache, so that every command must ask the Secret Service.
        let noHotCache = ["TOKENCTL_TEST_DISABLE_KERNEL_KEYRING": "1"]
        for command in [["token"], ["refresh"], ["status"], ["logout"]] {
            let run = try timed(sandbox, command + extra, extraEnvironment: noHotCache)
            #expect(run.result.status != 0, "\(command): \(run.result)")
            #expect(run.seconds < commandBound + 5, "\(command) took \(run.seconds) s: \(run.result)")
        }
        #expect(
            try server.refreshGrants().count == requestsBefore,
            "no refresh was sent for a session that could not be read")

        let doctor = try timed(sandbox, ["doctor"] + extra)
        #expect(doctor.result.status == 1, "\(doctor.result)")
        #expect(doctor.seconds < doctorBound + 5, "doctor took \(doctor.seconds) s: \(doctor.result)")
        for line in [
            "engine:", "configuration:", "secret service:", "hot cache:", "rotation journal:", "issuer \(server.url):",
            "lock directory:", "refresh schedule:",
        ] {
            #expect(doctor.result.stdout.contains(line), "doctor printed no '\(line)' line: \(doctor.result)")
        }
        if mode == .openSessionOnly {
            #expect(doctor.result.stdout.contains("session 'default':"), "\(doctor.result)")
        }
        #expect(
            keyring.hungServiceCalls().contains { $0.hasPrefix("held ") },
            "the fake held calls: \(keyring.hungServiceCalls())")
    }

    @Test(
        "a service that answers the session set-up and never a search, --timeout 3: login (sending nothing), token, refresh, status, logout and doctor each end within 3 + 5 s"
    )
    func searchHangsWithTimeout() throws {
        try expectBounded(.openSessionOnly, timeout: "3", loginBound: 3, commandBound: 3, doctorBound: 3)
    }

    @Test(
        "a service that answers the session set-up and never a search, default bounds: login (sending nothing) and the other commands within 30 + 5 s, doctor within 10 + 5 s"
    )
    func searchHangsDefaultBounds() throws {
        try expectBounded(.openSessionOnly, timeout: nil, loginBound: 30, commandBound: 30, doctorBound: 10)
    }

    @Test("a service that answers nothing, --timeout 3: login (sending nothing) and doctor within 3 + 5 s")
    func silentWithTimeout() throws {
        let (keyring, sandbox, server) = try signedInThenHung(.silent)
        defer { withExtendedLifetime(keyring) {} }
        let login = try timed(sandbox, ["login", "--refresh-token-stdin", "--timeout", "3"], stdin: try server.issue())
        #expect(login.result.status == 69, "\(login.result)")
        #expect(login.seconds < 8, "login took \(login.seconds) s")
        #expect(try server.refreshGrants().count == 1, "only the first login's exchange reached the server")
        let doctor = try timed(sandbox, ["doctor", "--timeout", "3"])
        #expect(doctor.result.status == 1, "\(doctor.result)")
        #expect(doctor.seconds < 8, "doctor took \(doctor.seconds) s: \(doctor.result)")
        #expect(
            doctor.result.stdout.contains("secret service:") && doctor.result.stdout.contains("did not answer in time"),
            "\(doctor.result)")
        #expect(
            doctor.result.stdout.contains("issuer \(server.url): reachable"),
            "the issuer is asked meanwhile: \(doctor.result)")
        #expect(
            keyring.hungServiceCalls().contains { $0.hasPrefix("held org.freedesktop.DBus.Properties.Get") },
            "\(keyring.hungServiceCalls())")
    }

    @Test(
        "a service that answers nothing, default bounds: login within 30 + 5 s sending nothing, doctor within 10 + 5 s with every line"
    )
    func silentDefaultBounds() throws {
        let (keyring, sandbox, server) = try signedInThenHung(.silent)
        defer { withExtendedLifetime(keyring) {} }
        let login = try timed(sandbox, ["login", "--refresh-token-stdin"], stdin: try server.issue())
        #expect(login.result.status == 69, "\(login.result)")
        #expect(login.seconds < 35, "login took \(login.seconds) s")
        #expect(try server.refreshGrants().count == 1, "only the first login's exchange reached the server")
        let doctor = try timed(sandbox, ["doctor"])
        #expect(doctor.result.status == 1, "\(doctor.result)")
        #expect(doctor.seconds < 15, "doctor took \(doctor.seconds) s: \(doctor.result)")
        for line in [
            "secret service: the Secret Service did not answer in time", "rotation journal:", "session 'default':",
            "issuer \(server.url): reachable", "lock directory:", "refresh schedule:",
        ] {
            #expect(doctor.result.stdout.contains(line), "doctor printed no '\(line)' line: \(doctor.result)")
        }
        #expect(
            keyring.hungServiceCalls().contains { $0.hasPrefix("held org.freedesktop.DBus.Properties.Get") },
            "\(keyring.hungServiceCalls())")
    }
}
