import Foundation
import Testing
import TokenctlCore
import TokenctlTestSupport

/// Where the Secret Service is (or is not) for a test of a TPM key's machine profile.
enum SecretServicePresence: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// The shared bus and gnome-keyring Scripts/test started.
    case present
    /// A session bus of the test's own whose gnome-keyring was killed: no org.freedesktop.secrets.
    case busWithoutSecretService = "bus without secret service"
    /// DBUS_SESSION_BUS_ADDRESS unset and no bus socket in the runtime directory.
    case noBus = "no bus"

    var testDescription: String { rawValue }
}

/// A machine profile whose key was made in a TPM (swtpm, Scripts/lib/swtpm.sh) against glewlwyd
/// (in the suite of the machine profiles: glewlwyd's database takes one write at a time).
extension MachineProfileTests {
    @Test(
        "a --tpm key signs the assertions glewlwyd accepts; the token lives in the kernel keyring only, with or without a Secret Service",
        arguments: SecretServicePresence.allCases)
    func tpmKeyMachineProfile(_ presence: SecretServicePresence) throws {
        let server = try GlewlwydServer.require()
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let sandbox = try Sandbox()
        var keyring: PrivateKeyring?
        switch presence {
        case .present: break
        case .busWithoutSecretService:
            let own = try PrivateKeyring()
            try own.kill()
            sandbox.use(own)
            keyring = own
        case .noBus:
            sandbox.variables["DBUS_SESSION_BUS_ADDRESS"] = nil
        }
        defer { withExtendedLifetime(keyring) {} }
        sandbox.variables.merge(tpm.environment) { $1 }
        let clientID = GlewlwydServer.uniqueClientID("m-tpm")
        let profile = clientID
        let create = try sandbox.tokenctl("--profile", profile, "key", "create", "--tpm")
        #expect(create.status == 0, "\(create)")
        let pem = try sandbox.tokenctl("--profile", profile, "key", "show", "--format", "pem")
        #expect(pem.status == 0, "\(pem)")
        #expect(pem.stdout.hasPrefix("-----BEGIN PUBLIC KEY-----") && !pem.stdout.contains("PRIVATE"), "\(pem)")
        let jwk = try sandbox.tokenctl("--profile", profile, "key", "show", "--format", "jwk")
        #expect(jwk.status == 0, "\(jwk)")
        let key = try #require(try JSONSerialization.jsonObject(with: Data(jwk.stdout.utf8)) as? [String: Any])
        #expect(key["d"] == nil, "no private part")
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": ["private_key_jwt"], "jwks": ["keys": [key]],
        ])
        // glewlwyd wants aud = exactly its token endpoint, and the test's has a query string.
        try sandbox.writeProfile(
            profile,
            "issuer = \(server.issuer)\nclient_id = \(clientID)\nassertion_audience = \(server.tokenEndpoint)\n")
        let marker = UUID().uuidString
        let login = try machineLogin(
            sandbox, server, profile: profile, clientID: clientID, method: "private_key_jwt", secret: nil,
            marker: marker)
        #expect(login.status == 0, "\(login)")
        var tokens: [String] = []
        let token = try sandbox.tokenctl("--profile", profile, "token")
        #expect(token.status == 0, "\(token)")
        tokens.append(accessToken(token))
        #expect(try GlewlwydServer.claims(of: accessToken(token))["client_id"] as? String == clientID)
        // Another process: the kernel keyring's entry, no request (the login's is the one so far).
        let cached = try sandbox.tokenctl("--profile", profile, "token")
        #expect(cached.stdout == token.stdout, "\(cached)")
        #expect(try server.accessLogLines(containing: "tk=\(marker)", awaiting: 1).count == 1)
        // A forced token: a fresh assertion, which glewlwyd (refusing a replayed one) accepts.
        let forced = try sandbox.tokenctl("--profile", profile, "token", "--force")
        #expect(forced.status == 0, "\(forced)")
        tokens.append(accessToken(forced))
        #expect(accessToken(forced) != accessToken(token))
        #expect(try GlewlwydServer.claims(of: accessToken(forced))["client_id"] as? String == clientID)
        #expect(try server.accessLogLines(containing: "tk=\(marker)", awaiting: 2).count == 2)
        let again = try sandbox.tokenctl("--profile", profile, "token")
        #expect(again.stdout == forced.stdout, "the forced token is the one cached: \(again)")

        let status = try sandbox.tokenctl("--profile", profile, "status")
        #expect(status.status == 0, "\(status)")
        #expect(
            status.stdout.contains(
                "store:         kernel-keyring (a machine's token, cached in the kernel keyring only)"),
            "\(status)")
        let statusJSON = try sandbox.tokenctl("--profile", profile, "status", "--json")
        #expect(statusJSON.stdout.contains("\"store\":\"kernel-keyring\""), "\(statusJSON)")
        let doctor = try sandbox.tokenctl("doctor", "--timeout", "10")
        #expect(doctor.stdout.contains("[ok]   machine '\(profile)': client-credentials, private_key_jwt"), "\(doctor)")
        if presence != .present {
            #expect(
                doctor.stdout.contains("not needed: every profile is a machine profile whose key is in the TPM"),
                "\(doctor)")
        }
        #expect(
            try sandbox.storedTokenSet(profile: profile, issuer: server.issuer, clientID: clientID) == nil,
            "nothing in the Secret Service")

        let logout = try sandbox.tokenctl("--profile", profile, "logout", "--no-revoke")
        #expect(logout.status == 0, "\(logout)")
        #expect(logout.stderr.contains("Logged out profile '\(profile)'"), "the cached token was removed: \(logout)")
        let afterLogout = try sandbox.tokenctl("--profile", profile, "token")
        #expect(afterLogout.status == 0, "\(afterLogout)")
        tokens.append(accessToken(afterLogout))
        #expect(!tokens.dropLast().contains(accessToken(afterLogout)), "logout forgot the cached token")
        #expect(try server.accessLogLines(containing: "tk=\(marker)", awaiting: 3).count == 3)
        try expectFreshAssertions(server, marker: marker, count: 3)
        // No token in any file of the user's (home, configuration, state, cache, runtime).
        for path in sandbox.allFiles() {
            let contents = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            for token in tokens { #expect(!contents.contains(token), "a token is in \(path)") }
        }
        // The provider flushed what it loaded: nothing left in a TPM without a resource manager.
        #expect(try tpm.transients().isEmpty)
        if presence != .present { try expectSecretServiceStillNeeded(sandbox, server, presence) }
        _ = try sandbox.tokenctl("--profile", profile, "logout", "--no-revoke", "--forget")
    }

    @Test(
        "self_signed_tls_client_auth with a key inside the TPM: the handshake is signed there, glewlwyd binds the token to its certificate, nothing stays loaded"
    )
    func tpmKeyMutualTLS() throws {
        let server = try GlewlwydServer.require()
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let sandbox = try Sandbox()
        sandbox.variables.merge(tpm.environment) { $1 }
        let clientID = GlewlwydServer.uniqueClientID("m-tpm-tls")
        defer { _ = try? sandbox.tokenctl("--profile", clientID, "logout", "--no-revoke", "--forget") }
        let create = try sandbox.tokenctl(
            "--profile", clientID, "key", "create", "--tpm", "--certificate", "--common-name", clientID)
        #expect(create.status == 0, "\(create)")
        let certificate = try registerSelfSigned(sandbox, server, clientID: clientID)
        // Discovery and the token request go to the same nginx: the token request must not
        // reuse discovery's connection (which presented no certificate).
        let login = try sandbox.tokenctl(
            "--profile", clientID, "login", "--grant", "client-credentials", "--client-auth",
            "self_signed_tls_client_auth", "--issuer", server.issuer, "--client-id", clientID, "--scope", server.scope,
            "--cacert", server.caFile)
        #expect(login.status == 0, "\(login)")
        let thumbprint = try Self.x5t(certificate)
        // Each process flushes the key it loaded before it exits: nothing is left in a TPM
        // without a resource manager (whose three object slots would fill in three runs).
        var tokens: [String] = []
        for arguments in [["token"]] + Array(repeating: ["token", "--force"], count: 8) {
            let token = try sandbox.start(["--profile", clientID] + arguments).wait()
            #expect(token.status == 0, "\(token)")
            let claims = try GlewlwydServer.claims(of: accessToken(token))
            #expect(claims["client_id"] as? String == clientID)
            #expect((claims["cnf"] as? [String: Any])?["x5t#S256"] as? String == thumbprint, "\(claims)")
            tokens.append(accessToken(token))
            #expect(try tpm.transients().isEmpty, "after \(arguments)")
        }
        #expect(Set(tokens).count == tokens.count, "each forced token is a new one")
        let verbose = try sandbox.tokenctl("--profile", clientID, "--verbose", "token", "--force")
        for token in tokens + [accessToken(verbose)] {
            #expect(!verbose.stderr.contains(token), "no token in the narration")
        }
    }

    /// What nginx received at the token endpoint (its log of each client assertion's claims,
    /// Scripts/lib/glewlwyd.sh): `count` assertions, no jti twice (no replay), each living at most
    /// 5 minutes and unexpired when it arrived.
    func expectFreshAssertions(_ server: GlewlwydServer, marker: String, count: Int) throws {
        let received = try server.receivedAssertions(containing: "tk=\(marker)")
        #expect(received.count == count, "\(received)")
        #expect(Set(received.map(\.jti)).count == received.count, "a jti was sent twice: \(received)")
        for assertion in received {
            #expect(assertion.exp - assertion.iat <= 300, "\(assertion)")
            #expect(assertion.exp > assertion.receivedAt, "expired when it arrived: \(assertion)")
        }
    }

    /// With no Secret Service, a software key and a client secret still need one: 69, with the
    /// diagnostics of a missing bus or service, and nothing sent.
    func expectSecretServiceStillNeeded(
        _ sandbox: Sandbox, _ server: GlewlwydServer, _ presence: SecretServicePresence
    ) throws {
        let said = presence == .noBus ? "session bus" : "no Secret Service"
        let software = try sandbox.tokenctl("--profile", "software", "key", "create")
        #expect(software.status == 69, "\(software)")
        #expect(software.stderr.contains(said), "\(software)")
        let marker = UUID().uuidString
        let secret = try machineLogin(
            sandbox, server, profile: "with-secret", clientID: GlewlwydServer.uniqueClientID("m-sec"),
            method: "client_secret_basic", secret: "secret-" + UUID().uuidString, marker: marker)
        #expect(secret.status == 69, "\(secret)")
        #expect(secret.stderr.contains(said), "\(secret)")
        #expect(try server.accessLogLines(containing: "tk=\(marker)").isEmpty, "nothing sent")
    }
}

extension GlewlwydServer {
    /// A client assertion as nginx received it: when (its `$msec`), and its jti, iat and exp.
    struct ReceivedAssertion: Sendable, CustomStringConvertible {
        var receivedAt: Double
        var jti: String
        var iat: Double
        var exp: Double
        var description: String { "jti \(jti) iat \(iat) exp \(exp) received \(receivedAt)" }
    }

    /// The client assertions of the requests whose request line contains `marker`, from
    /// nginx-assertions.log ("MSEC URI jti=… iat=… exp=…"; a line that does not parse is an error).
    func receivedAssertions(containing marker: String) throws -> [ReceivedAssertion] {
        let log = try String(contentsOfFile: directory + "/nginx-assertions.log", encoding: .utf8)
        return try log.split(separator: "\n").filter { $0.contains(marker) }.map { line in
            let fields = line.split(separator: " ")
            var claims: [String: String] = [:]
            for field in fields.dropFirst(2) {
                let pair = field.split(separator: "=", maxSplits: 1)
                if pair.count == 2 { claims[String(pair[0])] = String(pair[1]) }
            }
            guard let receivedAt = fields.first.flatMap({ Double($0) }), let jti = claims["jti"],
                let iat = claims["iat"].flatMap(Double.init), let exp = claims["exp"].flatMap(Double.init)
            else { throw HarnessError("unreadable assertion log line: \(line)") }
            return ReceivedAssertion(receivedAt: receivedAt, jti: jti, iat: iat, exp: exp)
        }
    }
}
