import Foundation
import Testing
import TokenctlTestSupport

/// Proxies and private CAs with real parts (CompanyNetwork: squid, nginx with a private CA,
/// the test server), each request checked at squid's access log or nginx's.
@Suite("End to end: proxies and private certificate authorities", .serialized)
struct CompanyNetworkTests {
    /// A profile signed in at the idp with its CA (`login --cacert`), directly.
    private func signedIn(_ network: CompanyNetwork, _ sandbox: Sandbox, profile: String = "default") throws {
        let login = try network.tokenctl(
            sandbox,
            [
                "--profile", profile, "login", "--issuer", network.issuer, "--client-id", "cli",
                "--refresh-token-stdin", "--cacert", network["TK_IDP_CA_FILE"],
            ], stdin: try network.issue())
        try #require(login.status == 0, "\(login)")
    }

    @Test("through the open proxy (squid's log), a 407 is 78, an unreachable proxy 75 keeping the session")
    func proxies() throws {
        let network = try CompanyNetwork()
        defer { network.stop() }
        let sandbox = try Sandbox()
        try signedIn(network, sandbox)
        let nginxBefore = network.lines("TK_IDP_ACCESS_LOG").count

        // The open proxy from https_proxy: squid logs the tunnel to the idp, nginx the refresh.
        let open = try network.tokenctl(
            sandbox, ["-v", "refresh"], variables: ["https_proxy": network["TK_SQUID_URL"]])
        #expect(open.status == 0, "\(open)")
        let tunnels = network.waitForLines("TK_SQUID_LOG", 1)
        #expect(tunnels.contains { $0.contains("CONNECT idp.tokenctl.test:\(network["TK_IDP_PORT"])") }, "\(tunnels)")
        #expect(network.waitForLines("TK_IDP_ACCESS_LOG", nginxBefore + 1).count > nginxBefore)
        // -v names the proxy, where it came from and the CA file.
        #expect(open.stderr.contains("proxy \(network["TK_SQUID_URL"]) (https_proxy)"), "\(open.stderr)")
        #expect(open.stderr.contains("CA file \(network["TK_IDP_CA_FILE"]) (profile key 'cacert')"), "\(open.stderr)")

        // doctor names the route and asks the issuer through it.
        let doctor = try network.tokenctl(sandbox, ["doctor"], variables: ["https_proxy": network["TK_SQUID_URL"]])
        #expect(doctor.stdout.contains("network \(network.issuer)"), "\(doctor)")
        #expect(doctor.stdout.contains("proxy \(network["TK_SQUID_URL"]) (https_proxy)"), "\(doctor)")
        #expect(doctor.stdout.contains("reachable (discovery: HTTP 200)"), "\(doctor)")

        // The password proxy: credentials from the URL work and show nowhere.
        let password = network["TK_SQUID_PASSWORD"]
        let withPassword =
            network["TK_SQUID_AUTH_URL"].replacingOccurrences(
                of: "http://", with: "http://\(network["TK_SQUID_USER"]):\(password)@")
        let authorized = try network.tokenctl(sandbox, ["-v", "refresh"], variables: ["https_proxy": withPassword])
        #expect(authorized.status == 0, "\(authorized)")
        #expect(!authorized.stderr.contains(password) && !authorized.stdout.contains(password))
        let authLog = network.waitForLines("TK_SQUID_AUTH_LOG", 1)
        #expect(
            authLog.contains { $0.contains("TCP_TUNNEL/200") && $0.contains(network["TK_SQUID_USER"]) }, "\(authLog)")

        // Without credentials or with a wrong password: 78 naming the proxy and the variable,
        // nothing reaches the server, the password nowhere.
        let nginxBeforeRefusals = network.lines("TK_IDP_ACCESS_LOG").count
        let wrong = network["TK_SQUID_AUTH_URL"].replacingOccurrences(
            of: "http://", with: "http://\(network["TK_SQUID_USER"]):wrong-Pa55@")
        for proxy in [network["TK_SQUID_AUTH_URL"], wrong] {
            let refused = try network.tokenctl(sandbox, ["-v", "refresh"], variables: ["HTTPS_PROXY": proxy])
            #expect(refused.status == 78, "\(refused)")
            #expect(refused.stderr.contains("407"), "\(refused)")
            #expect(refused.stderr.contains("\(network["TK_SQUID_AUTH_URL"]) (from HTTPS_PROXY)"), "\(refused)")
            #expect(!refused.stderr.contains("wrong-Pa55"), "\(refused)")
        }
        #expect(network.lines("TK_IDP_ACCESS_LOG").count == nginxBeforeRefusals)

        // Unreachable: 75, naming the proxy and its source; the session is kept (the next
        // refresh, direct, works).
        let closed = try network.tokenctl(
            sandbox, ["refresh"], variables: ["all_proxy": network["TK_SQUID_CLOSED_URL"]])
        #expect(closed.status == 75, "\(closed)")
        #expect(closed.stderr.contains("proxy \(network["TK_SQUID_CLOSED_URL"]) (from all_proxy)"), "\(closed)")
        #expect(try network.tokenctl(sandbox, ["refresh"]).status == 0)

        // NO_PROXY with the name or a suffix: direct (nothing new at squid).
        let squidLines = network.waitForLines("TK_SQUID_LOG", 1).count
        for entry in ["idp.tokenctl.test", ".tokenctl.test"] {
            let skipped = try network.tokenctl(
                sandbox, ["refresh"], variables: ["https_proxy": network["TK_SQUID_URL"], "NO_PROXY": entry])
            #expect(skipped.status == 0, "\(skipped)")
        }
        // The profile's proxy key wins over the environment.
        let file = sandbox.profileFile()
        try (String(contentsOfFile: file, encoding: .utf8) + "proxy = \(network["TK_SQUID_URL"])\n").write(
            toFile: file, atomically: true, encoding: .utf8)
        let keyed = try network.tokenctl(
            sandbox, ["refresh"], variables: ["https_proxy": network["TK_SQUID_CLOSED_URL"]])
        #expect(keyed.status == 0, "\(keyed)")
        #expect(network.waitForLines("TK_SQUID_LOG", squidLines + 1).count == squidLines + 1)
    }

    @Test("a proxy password from the Secret Service: proxy_user, proxy-password set/remove, 407 is 78, nowhere else")
    func storedProxyPassword() throws {
        let network = try CompanyNetwork()
        defer { network.stop() }
        let sandbox = try Sandbox()
        try signedIn(network, sandbox)
        let user = network["TK_SQUID_USER"]
        let password = network["TK_SQUID_PASSWORD"]
        let proxy = network["TK_SQUID_AUTH_URL"]
        let authority = String(proxy.dropFirst("http://".count))
        let file = sandbox.profileFile()
        let signedInText = try String(contentsOfFile: file, encoding: .utf8)
        try (signedInText + "proxy = \(proxy)\nproxy_user = \(user)\n").write(
            toFile: file, atomically: true, encoding: .utf8)
        var outputs: [RunResult] = []
        func run(_ arguments: [String], stdin: String? = nil) throws -> RunResult {
            let result = try network.tokenctl(sandbox, arguments, stdin: stdin)
            outputs.append(result)
            return result
        }
        let nginxBefore = network.lines("TK_IDP_ACCESS_LOG").count

        // No password stored yet: 78 before anything is sent, naming the command that stores one.
        let none = try run(["refresh"])
        #expect(none.status == 78, "\(none)")
        #expect(none.stderr.contains("no password is stored for the proxy user \(user) at \(authority)"), "\(none)")
        #expect(none.stderr.contains("tokenctl proxy-password set --password-stdin"), "\(none)")
        #expect(network.lines("TK_SQUID_AUTH_LOG").isEmpty)
        let doctor = try run(["doctor"])
        #expect(doctor.stdout.contains("no password is stored for the proxy user \(user) at \(authority)"), "\(doctor)")
        // Never from an argument.
        #expect(try run(["proxy-password", "set"]).status == 64)

        // A wrong password stored: squid refuses it (407 with the user), nothing reaches nginx.
        let stored = try run(["proxy-password", "set", "--password-stdin"], stdin: "wrong-Pa55\n")
        #expect(stored.status == 0, "\(stored)")
        #expect(stored.stderr.contains("user \(user) at \(authority)"), "\(stored)")
        let refused = try run(["-v", "refresh"])
        #expect(refused.status == 78, "\(refused)")
        #expect(refused.stderr.contains("the proxy \(proxy) (from profile key 'proxy') refused"), "\(refused)")
        #expect(refused.stderr.contains("the password stored in the Secret Service"), "\(refused)")
        #expect(refused.stderr.contains("proxy-password set --password-stdin"), "\(refused)")
        let denied = network.waitForLines("TK_SQUID_AUTH_LOG", 1)
        #expect(denied.contains { $0.contains("TCP_DENIED/407") && $0.contains(user) }, "\(denied)")
        #expect(network.lines("TK_IDP_ACCESS_LOG").count == nginxBefore)

        // The right one replaces it: the refresh goes through the proxy as that user.
        #expect(try run(["proxy-password", "set", "--password-stdin"], stdin: password + "\n").status == 0)
        let lookup = try runProgram(
            "/usr/bin/secret-tool",
            ["lookup", "application", "tokenctl", "kind", "proxy-password", "proxy", authority, "user", user],
            environment: sandbox.variables)
        #expect(lookup.stdout == password, "one item, found by application, kind, proxy and user")
        let authorized = try run(["-v", "refresh"])
        #expect(authorized.status == 0, "\(authorized)")
        #expect(
            authorized.stderr.contains("proxy user \(user) (its password from the Secret Service)"), "\(authorized)")
        let tunnels = network.waitForLines("TK_SQUID_AUTH_LOG", denied.count + 1)
        #expect(
            tunnels.contains { $0.contains("TCP_TUNNEL/200") && $0.contains(" \(user) ") && $0.contains("CONNECT") },
            "\(tunnels)")
        #expect(network.waitForLines("TK_IDP_ACCESS_LOG", nginxBefore + 1).count > nginxBefore)

        // A token hit asks neither the proxy nor the Secret Service for the password.
        #expect(try run(["proxy-password", "remove"]).status == 0)
        let authLines = network.lines("TK_SQUID_AUTH_LOG").count
        let hit = try run(["token"])
        #expect(hit.status == 0, "\(hit)")
        usleep(200_000)
        #expect(network.lines("TK_SQUID_AUTH_LOG").count == authLines)
        let lookupGone = try runProgram(
            "/usr/bin/secret-tool",
            ["lookup", "application", "tokenctl", "kind", "proxy-password", "proxy", authority, "user", user],
            environment: sandbox.variables)
        #expect(lookupGone.stdout.isEmpty)
        #expect(try run(["proxy-password", "remove"]).stderr.contains("No password is stored"))
        _ = try run(["events"])

        // Credentials in the profile's proxy URL stay refused.
        try (signedInText + "proxy = http://\(user):\(password)@\(authority)\n").write(
            toFile: file, atomically: true, encoding: .utf8)
        let inFile = try network.tokenctl(sandbox, ["refresh"])
        #expect(inFile.status == 78, "\(inFile)")
        #expect(inFile.stderr.contains("proxy_user"), "\(inFile)")
        try signedInText.write(toFile: file, atomically: true, encoding: .utf8)

        // The password in no output, no file of tokenctl's (events, state, config), no log of
        // squid's or nginx's (htpasswd holds its hash).
        for output in outputs {
            #expect(!output.stdout.contains(password) && !output.stderr.contains(password), "\(output)")
        }
        let files = sandbox.allFiles() + Self.files(under: network.directory)
        #expect(files.count > 5, "\(files)")
        for path in files {
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            #expect(!String(decoding: data, as: UTF8.self).contains(password), "the password in \(path)")
        }
    }

    static func files(under root: String) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [] }
        return enumerator.compactMap { $0 as? String }.map { root + "/" + $0 }.filter {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
    }

    @Test("a browser login through squid: discovery and the code exchange at the proxy, the loopback redirect never")
    func browserLoginThroughProxy() throws {
        let network = try CompanyNetwork()
        defer { network.stop() }
        let sandbox = try Sandbox()
        // The browser: a stand-in for xdg-open that follows the authorization URL as a browser
        // would (the idp auto-approves) to the loopback redirect, trusting the idp's CA and
        // going direct; it runs in tokenctl's mount namespace, where the idp's name resolves.
        let bin = sandbox.root + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        let browser = bin + "/xdg-open"
        try """
        #!/bin/sh
        exec /usr/bin/curl -sS -L --max-time 10 --noproxy '*' --cacert '\(network["TK_IDP_CA_FILE"])' "$1" \
            >'\(sandbox.root)/browser.out' 2>&1
        """.write(toFile: browser, atomically: true, encoding: .utf8)
        chmod(browser, 0o700)
        sandbox.variables["PATH"] = bin + ":" + (sandbox.variables["PATH"] ?? "/usr/bin:/bin")
        let squid = network["TK_SQUID_URL"]
        let login = try network.tokenctl(
            sandbox,
            [
                "-v", "login", "--browser", "--issuer", network.issuer, "--client-id", "cli", "--cacert",
                network["TK_IDP_CA_FILE"], "--timeout", "30",
            ], variables: ["https_proxy": squid, "http_proxy": squid, "all_proxy": squid])
        #expect(login.status == 0, "\(login)")
        #expect(login.stderr.contains("Opened your browser"), "\(login)")
        let page = (try? String(contentsOfFile: sandbox.root + "/browser.out", encoding: .utf8)) ?? ""
        #expect(page.contains("return to the terminal"), "the browser reached the loopback redirect: \(page)")
        #expect(try sandbox.storedTokenSet(issuer: network.issuer)?["refresh_token"] is String)
        // tokenctl's requests (discovery, the code exchange) went through squid (-v names it),
        // the browser's went direct, and squid saw nothing for a loopback address.
        #expect(login.stderr.contains("POST \(network.issuer)/token: proxy \(squid) (https_proxy)"), "\(login)")
        let tunnels = network.waitForLines("TK_SQUID_LOG", 1)
        #expect(tunnels.contains { $0.contains("CONNECT idp.tokenctl.test:\(network["TK_IDP_PORT"])") }, "\(tunnels)")
        let requested = tunnels.map { $0.split(separator: " ").dropFirst(5).first.map(String.init) ?? "" }
        #expect(
            !requested.contains { $0.contains("127.0.0.1") || $0.contains("localhost") || $0.contains("[::1]") },
            "\(tunnels)")
        // nginx logs a request after it has answered it: wait for the code exchange's line.
        _ = awaiting(1) { network.lines("TK_IDP_ACCESS_LOG").filter { $0.contains("POST /token") } }
        let served = network.lines("TK_IDP_ACCESS_LOG")
        #expect(served.contains { $0.contains("GET /authorize") }, "\(served)")
        #expect(served.contains { $0.contains("POST /token") }, "\(served)")
    }

    @Test("loopback requests never go through the environment's proxy")
    func loopbackNotProxied() throws {
        let network = try CompanyNetwork()
        defer { network.stop() }
        let server = try AuthServer()
        let sandbox = try Sandbox()
        sandbox.variables["http_proxy"] = network["TK_SQUID_URL"]
        sandbox.variables["all_proxy"] = network["TK_SQUID_URL"]
        try sandbox.login(server)
        #expect(try sandbox.tokenctl("refresh").status == 0)
        usleep(200_000)
        #expect(network.lines("TK_SQUID_LOG").isEmpty, "\(network.lines("TK_SQUID_LOG"))")
    }

    @Test("a private CA: refused without it (78, subject, issuer, --cacert), accepted with it, SSL_CERT_FILE")
    func privateCA() throws {
        let network = try CompanyNetwork()
        defer { network.stop() }
        let sandbox = try Sandbox()
        let login = ["login", "--issuer", network.issuer, "--client-id", "cli", "--refresh-token-stdin"]
        // Without the CA: directly and through the proxy.
        for variables in [[:], ["https_proxy": network["TK_SQUID_URL"]]] {
            let refused = try network.tokenctl(sandbox, login, variables: variables, stdin: try network.issue())
            #expect(refused.status == 78, "\(refused)")
            #expect(refused.stderr.contains("issuer O = tokenctl-test, CN = tokenctl idp CA"), "\(refused)")
            #expect(refused.stderr.contains("subject O = tokenctl-test, CN = idp.tokenctl.test"), "\(refused)")
            #expect(refused.stderr.contains("--cacert"), "\(refused)")
            #expect(refused.stderr.contains("unable to get local issuer certificate"), "\(refused)")
        }
        // SSL_CERT_FILE, as the curl tool honours it.
        let byVariable = try network.tokenctl(
            sandbox, ["-v"] + login, variables: ["SSL_CERT_FILE": network["TK_IDP_CA_FILE"]], stdin: try network.issue()
        )
        #expect(byVariable.status == 0, "\(byVariable)")
        #expect(byVariable.stderr.contains("(SSL_CERT_FILE)"), "\(byVariable)")
        // --cacert: saved in the profile, used directly and through the proxy.
        try signedIn(network, sandbox, profile: "ca")
        #expect(try network.tokenctl(sandbox, ["--profile", "ca", "refresh"]).status == 0)
        let proxied = try network.tokenctl(
            sandbox, ["--profile", "ca", "refresh"], variables: ["https_proxy": network["TK_SQUID_URL"]])
        #expect(proxied.status == 0, "\(proxied)")

        // A device login and a logout (revocation) through the proxy, with the CA: each request
        // at nginx, the tunnels at squid.
        try network.configure("{\"device_interval\": 1, \"device_script\": [\"approve\"]}")
        let squidBefore = network.waitForLines("TK_SQUID_LOG", 1).count
        let device = try network.tokenctl(
            sandbox,
            [
                "--profile", "dev", "login", "--device", "--issuer", network.issuer, "--client-id", "cli", "--cacert",
                network["TK_IDP_CA_FILE"],
            ], variables: ["https_proxy": network["TK_SQUID_URL"]])
        #expect(device.status == 0, "\(device)")
        let logout = try network.tokenctl(
            sandbox, ["--profile", "dev", "logout"], variables: ["https_proxy": network["TK_SQUID_URL"]])
        #expect(logout.status == 0, "\(logout)")
        // nginx logs a request after it has answered it: wait for the revocation's line.
        let revocations = awaiting(1) { network.lines("TK_IDP_ACCESS_LOG").filter { $0.contains("revoke") } }
        let served = network.lines("TK_IDP_ACCESS_LOG")
        #expect(served.contains { $0.contains("device") }, "\(served)")
        #expect(!revocations.isEmpty, "\(served)")
        #expect(network.waitForLines("TK_SQUID_LOG", squidBefore + 2).count >= squidBefore + 2)
    }

    @Test("a TLS-inspecting proxy is refused (78, its CA named) until its CA is in the profile's bundle")
    func inspectingProxy() throws {
        let network = try CompanyNetwork()
        defer { network.stop() }
        let sandbox = try Sandbox()
        try signedIn(network, sandbox)
        let bump = ["https_proxy": network["TK_SQUID_BUMP_URL"]]
        let refused = try network.tokenctl(sandbox, ["refresh"], variables: bump)
        #expect(refused.status == 78, "\(refused)")
        #expect(refused.stderr.contains("issuer O = tokenctl-test, CN = tokenctl inspecting proxy CA"), "\(refused)")
        #expect(refused.stderr.contains(network["TK_IDP_CA_FILE"]), "the CA file in use: \(refused)")
        // Both CAs in one bundle, named by the profile's cacert.
        let bundle = sandbox.root + "/bundle.pem"
        try
            (String(contentsOfFile: network["TK_IDP_CA_FILE"], encoding: .utf8)
            + String(contentsOfFile: network["TK_SQUID_BUMP_CA"], encoding: .utf8)).write(
                toFile: bundle, atomically: true, encoding: .utf8)
        let file = sandbox.profileFile()
        let text = try String(contentsOfFile: file, encoding: .utf8)
        try text.replacingOccurrences(of: "cacert = \(network["TK_IDP_CA_FILE"])", with: "cacert = \(bundle)").write(
            toFile: file, atomically: true, encoding: .utf8)
        let accepted = try network.tokenctl(sandbox, ["refresh"], variables: bump)
        #expect(accepted.status == 0, "\(accepted)")
        let log = network.waitForLines("TK_SQUID_BUMP_LOG", 2)
        #expect(
            log.contains {
                $0.contains("GET https://idp.tokenctl.test") || $0.contains("POST https://idp.tokenctl.test")
            }, "\(log)")

        // An https:// proxy: its own certificate is checked against proxy_cacert (default: cacert).
        let https = ["https_proxy": network["TK_SQUID_HTTPS_URL"]]
        let untrusted = try network.tokenctl(sandbox, ["refresh"], variables: https)
        #expect(untrusted.status == 78, "\(untrusted)")
        #expect(untrusted.stderr.contains("proxy_cacert"), "\(untrusted)")
        try (String(contentsOfFile: file, encoding: .utf8) + "proxy_cacert = \(network["TK_SQUID_PROXY_CA"])\n").write(
            toFile: file, atomically: true, encoding: .utf8)
        let trusted = try network.tokenctl(sandbox, ["refresh"], variables: https)
        #expect(trusted.status == 0, "\(trusted)")
        #expect(!network.waitForLines("TK_SQUID_HTTPS_LOG", 1).isEmpty)
    }
}
