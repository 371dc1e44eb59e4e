import Foundation
import Testing
import TokenctlTestSupport

/// The network a company puts between tokenctl and its identity provider, for the proxy and
/// private-CA tests: Scripts/lib/squid.sh started in a services directory of this test's own
/// (squid on 127.0.0.1 with an open, a password, a TLS-inspecting and an https:// port, and a
/// closed one; the test authorization server behind nginx at https://idp.tokenctl.test:PORT,
/// its certificate from a private CA). Stopped by PID when dropped.
///
/// idp.tokenctl.test resolves only in squid's hosts_file and in `direct`'s mount namespace
/// (tk_idp_run: /etc/hosts bind-mounted), so a request that reached the idp without the
/// proxy went direct on purpose. Needs root (squid's user namespace, the mount).
final class CompanyNetwork: @unchecked Sendable {
    let environment: TestEnvironment
    let directory: String
    /// The exports of tk_idp_start and tk_squid_start (TK_IDP_ISSUER, TK_SQUID_URL, ...).
    let values: [String: String]
    private let shell = ShellServices(variable: "TOKENCTL_SQUID_SH", file: "squid.sh")
    private let lock = NSLock()
    private var stopped = false

    init() throws {
        environment = try TestEnvironment.require()
        guard getuid() == 0 else { throw HarnessError("CompanyNetwork needs root (squid, unshare -m)") }
        directory = NSTemporaryDirectory() + "tokenctl-net-" + String(UUID().uuidString.prefix(8))
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let started = try shell.start(
            in: directory + "/services",
            """
            tk_idp_start
            tk_squid_start
            env | grep -E '^TK_(IDP|SQUID)_' || true
            """)
        let values = ShellServices.values(of: started.stdout)
        self.values = values
        guard started.status == 0, values["TK_IDP_ISSUER"] != nil, values["TK_SQUID_URL"] != nil else {
            stop()
            // Its standard error only: standard output holds the proxy's password.
            throw HarnessError(
                "starting squid and the idp (Scripts/lib/squid.sh) failed (\(started.status)): \(started.stderr)")
        }
    }

    deinit { stop() }

    func stop() {
        lock.lock()
        let already = stopped
        stopped = true
        lock.unlock()
        guard !already else { return }
        shell.stop(in: directory + "/services")
        try? FileManager.default.removeItem(atPath: directory)
    }

    subscript(name: String) -> String { values[name] ?? "" }

    var issuer: String { self["TK_IDP_ISSUER"] }

    /// A refresh token from the idp's test server (its control endpoint, not through nginx).
    func issue(clientID: String = "cli", subject: String = "alice") throws -> String {
        let result = try runProgram(
            "/usr/bin/curl",
            [
                "-sS", "-X", "POST", self["TK_IDP_CONTROL_URL"] + "/_test/issue", "-H",
                "Content-Type: application/json", "--data-binary", "@-",
            ],
            stdin: "{\"client_id\": \"\(clientID)\", \"sub\": \"\(subject)\", \"scope\": \"openid offline_access\"}")
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
            let token = object["refresh_token"] as? String
        else { throw HarnessError("no refresh token from the idp: \(result)") }
        return token
    }

    /// POST `json` to the idp test server's /_test/config (a device_script, say).
    func configure(_ json: String) throws {
        let result = try runProgram(
            "/usr/bin/curl",
            [
                "-sS", "-f", "-X", "POST", self["TK_IDP_CONTROL_URL"] + "/_test/config", "-H",
                "Content-Type: application/json", "--data-binary", "@-",
            ], stdin: json)
        guard result.status == 0 else { throw HarnessError("configuring the idp failed: \(result)") }
    }

    /// The lines of an access log (TK_SQUID_LOG, TK_IDP_ACCESS_LOG...).
    func lines(_ log: String) -> [String] {
        ((try? String(contentsOfFile: self[log], encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// squid writes a CONNECT tunnel's line when the tunnel closes, a few ms after the client
    /// exits: wait (up to 10 s) until `log` has at least `count` lines.
    func waitForLines(_ log: String, _ count: Int) -> [String] {
        for _ in 0..<400 {
            let lines = lines(log)
            if lines.count >= count { return lines }
            usleep(25_000)
        }
        return lines(log)
    }

    /// `tokenctl ARGUMENTS` in the sandbox, in tk_idp_run's mount namespace (idp.tokenctl.test
    /// resolves to 127.0.0.1), with no proxy or CA variable but `variables`.
    func tokenctl(
        _ sandbox: Sandbox, _ arguments: [String], variables: [String: String] = [:], stdin: String? = nil
    ) throws -> RunResult {
        try RunningCommand(
            executable: "/usr/bin/unshare",
            arguments: [
                "-m", "--propagation", "private", "--", "/bin/sh", "-c",
                "mount --bind \"$0\" /etc/hosts && exec \"$@\"",
                self["TK_IDP_HOSTS"], environment.binary,
            ] + arguments,
            environment: sandbox.variables.merging(variables) { $1 }, stdin: stdin, directory: sandbox.root
        ).wait()
    }
}
