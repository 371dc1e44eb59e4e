import Foundation
import Testing
import TokenctlCore
import TokenctlTestSupport

/// Machine profiles against a real server: glewlwyd 2.7.5 behind nginx (TLS, a private CA),
/// started once by Scripts/test. Every test registers its own clients, and points its profile's
/// token endpoint at a query string of its own (`?tk=…`, which glewlwyd ignores) so that nginx's
/// access log shows its requests apart from those of tests running meanwhile.
///
/// Serialized: glewlwyd 2.7.5 writes to its SQLite database without waiting for a lock (no
/// busy timeout), so two writes at once (a client registered while a token is issued, which
/// stores the token) fail at random with "Error executing sql query" and a 403 (measured). The
/// 64-process fan-in makes one token request, so it writes once too.
@Suite("End to end: machine profiles against glewlwyd", .serialized)
struct MachineProfileTests {
    /// A machine login of `clientID` with `method` (nil: chosen from discovery) and `secret`.
    func machineLogin(
        _ sandbox: Sandbox, _ server: GlewlwydServer, profile: String, clientID: String, method: String?,
        secret: String?, marker: String, extra: [String] = []
    ) throws -> RunResult {
        sandbox.forgetsHotCacheAtEnd(profile: profile, issuer: server.issuer, clientID: clientID)
        var arguments = [
            "--profile", profile, "login", "--grant", "client-credentials", "--issuer", server.issuer,
            "--client-id", clientID, "--scope", server.scope, "--cacert", server.caFile,
            "--token-endpoint", server.tokenEndpoint + "?tk=" + marker,
        ]
        if let method { arguments += ["--client-auth", method] }
        if secret != nil { arguments.append("--client-secret-stdin") }
        return try sandbox.start(arguments + extra, stdin: secret.map { $0 + "\n" }).wait()
    }

    func accessToken(_ result: RunResult) -> String { result.stdout.trimmingCharacters(in: .newlines) }

    @Test(
        "a secret's methods: login proves the client, token is issued to it, cached, forced anew, logout forgets",
        arguments: ["client_secret_basic", "client_secret_post"])
    func secretMethod(_ method: String) throws {
        let server = try GlewlwydServer.require()
        let sandbox = try Sandbox()
        let clientID = GlewlwydServer.uniqueClientID(method == "client_secret_basic" ? "m-basic" : "m-post")
        let secret = "secret-" + UUID().uuidString
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": [method], "client_secret": secret,
        ])
        let marker = UUID().uuidString
        let login = try machineLogin(
            sandbox, server, profile: "machine", clientID: clientID, method: method, secret: secret, marker: marker)
        #expect(login.status == 0, "\(login)")
        #expect(login.stderr.contains("machine profile"), "\(login)")
        let file = try String(contentsOfFile: sandbox.profileFile("machine"), encoding: .utf8)
        #expect(file.contains("grant = client-credentials"))
        #expect(file.contains("token_endpoint_auth_method = \(method)"))
        #expect(!file.contains(secret))
        #expect(
            try server.accessLogLines(containing: "tk=\(marker)", awaiting: 1).count == 1,
            "the login's one token request")
        if method == "client_secret_post" {
            // The secret went in the form, so nginx saw no Basic user.
            #expect(try server.accessLogLines(containing: "tk=\(marker)").allSatisfy { !$0.contains(clientID) })
        } else {
            #expect(try server.accessLogLines(containing: "tk=\(marker)").allSatisfy { $0.contains(" \(clientID) [") })
        }

        let token = try sandbox.tokenctl("--profile", "machine", "token")
        #expect(token.status == 0, "\(token)")
        let claims = try GlewlwydServer.claims(of: accessToken(token))
        #expect(claims["client_id"] as? String == clientID)
        #expect(claims["scope"] as? String == server.scope)
        #expect(claims["iss"] as? String == server.issuer)
        // The login's token is served from the cache: no request.
        #expect(try server.accessLogLines(containing: "tk=\(marker)", awaiting: 1).count == 1)
        // A machine's token is a cache: in the kernel keyring only, not in the Secret Service.
        #expect(try sandbox.storedTokenSet(profile: "machine", issuer: server.issuer, clientID: clientID) == nil)
        let storeStatus = try sandbox.tokenctl("--profile", "machine", "status", "--json")
        #expect(storeStatus.stdout.contains("\"store\":\"kernel-keyring\""), "\(storeStatus)")

        let forced = try sandbox.tokenctl("--profile", "machine", "token", "--force")
        #expect(forced.status == 0, "\(forced)")
        #expect(accessToken(forced) != accessToken(token))
        #expect(try GlewlwydServer.claims(of: accessToken(forced))["client_id"] as? String == clientID)
        #expect(try server.accessLogLines(containing: "tk=\(marker)", awaiting: 2).count == 2)

        let header = try sandbox.tokenctl("--profile", "machine", "token", "--format", "header")
        #expect(header.stdout == "Authorization: Bearer \(accessToken(forced))\n", "\(header)")
        let json = try sandbox.tokenctl("--profile", "machine", "token", "--format", "json")
        #expect(json.status == 0 && json.stdout.contains(accessToken(forced)), "\(json)")

        let status = try sandbox.tokenctl("--profile", "machine", "status")
        #expect(status.status == 0, "\(status)")
        #expect(status.stdout.contains("machine") && status.stdout.contains(method), "\(status)")

        // logout forgets the cached token; the next `token` gets one with the client's credentials.
        let logout = try sandbox.tokenctl("--profile", "machine", "logout", "--no-revoke")
        #expect(logout.status == 0, "\(logout)")
        #expect(try sandbox.storedTokenSet(profile: "machine", issuer: server.issuer, clientID: clientID) == nil)
        let again = try sandbox.tokenctl("--profile", "machine", "token")
        #expect(again.status == 0, "\(again)")
        #expect(accessToken(again) != accessToken(forced))
        #expect(try server.accessLogLines(containing: "tk=\(marker)", awaiting: 3).count == 3)

        // A per-call target: its own client credentials request, cached beside the profile's token.
        let targeted = try sandbox.tokenctl(
            "--profile", "machine", "token", "--scope", server.scope)
        #expect(targeted.status == 0, "\(targeted)")
        #expect(try GlewlwydServer.claims(of: accessToken(targeted))["client_id"] as? String == clientID)
        #expect(try server.accessLogLines(containing: "tk=\(marker)", awaiting: 4).count == 4)
        let again2 = try sandbox.tokenctl("--profile", "machine", "token", "--scope", server.scope)
        #expect(again2.stdout == targeted.stdout, "served from the cache")
        #expect(try server.accessLogLines(containing: "tk=\(marker)", awaiting: 4).count == 4)

        let forget = try sandbox.tokenctl("--profile", "machine", "logout", "--no-revoke", "--forget")
        #expect(forget.status == 0, "\(forget)")
        #expect(!FileManager.default.fileExists(atPath: sandbox.profileFile("machine")))
        for path in sandbox.allFiles() {
            let contents = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            #expect(!contents.contains(secret), "the secret is in \(path)")
        }
    }

    @Test(
        "client_secret_jwt: HS256 assertions with aud = the token endpoint; each request's is new (glewlwyd refuses a replayed one)"
    )
    func secretAssertion() throws {
        let server = try GlewlwydServer.require()
        let sandbox = try Sandbox()
        let clientID = GlewlwydServer.uniqueClientID("m-hs")
        let secret = "hs256-" + UUID().uuidString + UUID().uuidString
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": ["client_secret_jwt"], "client_secret": secret,
        ])
        let marker = UUID().uuidString
        // The test's token endpoint has a query string, and glewlwyd wants aud = exactly its
        // own: the hand-set key, which a login keeps.
        try sandbox.writeProfile(
            "hs",
            "issuer = \(server.issuer)\nclient_id = \(clientID)\nassertion_audience = \(server.tokenEndpoint)\n")
        let login = try machineLogin(
            sandbox, server, profile: "hs", clientID: clientID, method: "client_secret_jwt", secret: secret,
            marker: marker)
        #expect(login.status == 0, "\(login)")
        let file = try String(contentsOfFile: sandbox.profileFile("hs"), encoding: .utf8)
        #expect(file.contains("token_endpoint_auth_method = client_secret_jwt"))
        #expect(file.contains("assertion_audience = \(server.tokenEndpoint)"))
        var tokens: [String] = []
        for _ in 0..<3 {
            let forced = try sandbox.tokenctl("--profile", "hs", "token", "--force")
            #expect(forced.status == 0, "\(forced)")
            tokens.append(accessToken(forced))
            #expect(try GlewlwydServer.claims(of: accessToken(forced))["client_id"] as? String == clientID)
        }
        #expect(Set(tokens).count == 3)
        #expect(try server.accessLogLines(containing: "tk=\(marker)", awaiting: 4).count == 4)
        // Another secret at the server: the assertion is refused, 78.
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": ["client_secret_jwt"], "client_secret": secret + "x",
        ])
        let refused = try sandbox.tokenctl("--profile", "hs", "token", "--force")
        #expect(refused.status == 78, "\(refused)")
        #expect(refused.stderr.contains("client_secret_jwt"), "\(refused)")
    }

    @Test(
        "private_key_jwt with the profile's key (chosen over nothing else: no --client-auth); a refused key is 78 naming its thumbprint"
    )
    func keyAssertion() throws {
        let server = try GlewlwydServer.require()
        let sandbox = try Sandbox()
        let clientID = GlewlwydServer.uniqueClientID("m-pk")
        // Client keys are the keyring's per profile name, and the keyring is every test's.
        let (pk, otherProfile) = (clientID, clientID + "-other")
        defer {
            _ = try? sandbox.tokenctl("--profile", pk, "key", "remove")
            _ = try? sandbox.tokenctl("--profile", otherProfile, "key", "remove")
        }
        let create = try sandbox.tokenctl("--profile", pk, "key", "create")
        #expect(create.status == 0, "\(create)")
        let jwks = try sandbox.tokenctl("--profile", pk, "key", "show", "--format", "jwks")
        let keySet = try #require(try JSONSerialization.jsonObject(with: Data(jwks.stdout.utf8)) as? [String: Any])
        let thumbprint = try #require(((keySet["keys"] as? [[String: Any]])?.first?["kid"]) as? String)
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": ["private_key_jwt"], "jwks": keySet,
        ])
        let marker = UUID().uuidString
        try sandbox.writeProfile(
            pk,
            "issuer = \(server.issuer)\nclient_id = \(clientID)\nassertion_audience = \(server.tokenEndpoint)\n")
        let login = try machineLogin(
            sandbox, server, profile: pk, clientID: clientID, method: nil, secret: nil, marker: marker)
        #expect(login.status == 0, "\(login)")
        let file = try String(contentsOfFile: sandbox.profileFile(pk), encoding: .utf8)
        #expect(file.contains("token_endpoint_auth_method = private_key_jwt"))
        for _ in 0..<2 {
            let forced = try sandbox.tokenctl("--profile", pk, "token", "--force")
            #expect(forced.status == 0, "\(forced)")
            #expect(try GlewlwydServer.claims(of: accessToken(forced))["client_id"] as? String == clientID)
        }
        #expect(try server.accessLogLines(containing: "tk=\(marker)", awaiting: 3).count == 3)
        let doctor = try sandbox.tokenctl("doctor")
        #expect(doctor.stdout.contains("[ok]   machine '\(pk)': client-credentials, private_key_jwt"), "\(doctor)")
        #expect(doctor.stdout.contains(thumbprint), "\(doctor)")

        // The server knows another key only: refused, 78, with this key's thumbprint.
        let other = try sandbox.tokenctl("--profile", otherProfile, "key", "create")
        #expect(other.status == 0, "\(other)")
        let otherKeys = try sandbox.tokenctl("--profile", otherProfile, "key", "show", "--format", "jwks")
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": ["private_key_jwt"],
            "jwks": try #require(try JSONSerialization.jsonObject(with: Data(otherKeys.stdout.utf8))),
        ])
        let refused = try sandbox.tokenctl("--profile", pk, "token", "--force")
        #expect(refused.status == 78, "\(refused)")
        #expect(refused.stderr.contains(thumbprint), "\(refused)")
        #expect(refused.stderr.contains("private_key_jwt"), "\(refused)")
    }

    /// The SHA-256 thumbprint of a PEM certificate, base64url (RFC 8705 §3.1), by the openssl CLI.
    static func x5t(_ pemFile: String) throws -> String {
        let result = try runProgram(
            "/bin/sh",
            [
                "-c",
                "openssl x509 -in \"$1\" -outform DER | openssl dgst -sha256 -binary | base64 | tr '+/' '-_' | tr -d '='",
                "x5t", pemFile,
            ])
        guard result.status == 0 else { throw HarnessError("openssl: \(result)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(
        "tls_client_auth: a CA-issued certificate (imported key) at the mTLS alias; the token is bound to it; curl presents the same files"
    )
    func caCertificate() throws {
        let server = try GlewlwydServer.require()
        let sandbox = try Sandbox()
        let clientID = GlewlwydServer.uniqueClientID("m-tls")
        defer { _ = try? sandbox.tokenctl("--profile", clientID, "key", "remove") }
        let directory = sandbox.root + "/pki"
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let (key, certificate) = (directory + "/client.key", directory + "/client.crt")
        let issue = try runProgram(
            "/bin/sh",
            [
                "-c",
                """
                openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/O=tokenctl-test/CN=$1" \
                  -keyout "$2" -out "$2.csr" && \
                openssl x509 -req -in "$2.csr" -CA "$4" -CAkey "$5" -CAcreateserial -days 30 -out "$3" \
                  -extfile /dev/stdin <<EOF
                extendedKeyUsage=clientAuth
                EOF
                """,
                "issue", clientID, key, certificate, server.caFile, server.caKey,
            ])
        #expect(issue.status == 0, "\(issue)")
        let pem =
            try String(contentsOfFile: key, encoding: .utf8) + String(contentsOfFile: certificate, encoding: .utf8)
        let imported = try sandbox.tokenctl("--profile", clientID, "key", "import", stdin: pem)
        #expect(imported.status == 0, "\(imported)")
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": ["tls_client_auth"],
            "tls_client_auth_subject_dn": "CN=\(clientID),O=tokenctl-test",
        ])
        sandbox.forgetsHotCacheAtEnd(profile: clientID, issuer: server.issuer, clientID: clientID)
        let login = try sandbox.tokenctl(
            "--profile", clientID, "login", "--grant", "client-credentials", "--client-auth", "tls_client_auth",
            "--issuer", server.issuer, "--client-id", clientID, "--scope", server.scope, "--cacert", server.caFile)
        #expect(login.status == 0, "\(login)")
        let file = try String(contentsOfFile: sandbox.profileFile(clientID), encoding: .utf8)
        #expect(file.contains("mtls_token_endpoint = \(server.mtlsTokenEndpoint)"))
        let token = try sandbox.tokenctl("--profile", clientID, "token", "--force")
        #expect(token.status == 0, "\(token)")
        let claims = try GlewlwydServer.claims(of: accessToken(token))
        #expect(claims["client_id"] as? String == clientID)
        let thumbprint = try Self.x5t(certificate)
        #expect((claims["cnf"] as? [String: Any])?["x5t#S256"] as? String == thumbprint)
        let status = try sandbox.tokenctl("--profile", clientID, "status")
        #expect(status.stdout.contains("CN=\(clientID)"), "\(status)")

        // A script presents the same certificate to a server that checks it: curl reads the
        // key and certificate files (tokenctl's copy of the key stays in the keyring). Here
        // the server is the mTLS token endpoint itself, which answers 200 only to the
        // certificate it knows, and binds the new token to the same thumbprint.
        let curl = try runProgram(
            "/usr/bin/curl",
            [
                "-sS", "--cacert", server.caFile, "--cert", certificate, "--key", key, "-d",
                "grant_type=client_credentials", "-d", "client_id=\(clientID)", "-d", "scope=\(server.scope)",
                server.mtlsTokenEndpoint,
            ])
        let answer = try #require(
            try JSONSerialization.jsonObject(with: Data(curl.stdout.utf8)) as? [String: Any], "\(curl)")
        let curlToken = try #require(answer["access_token"] as? String)
        #expect(
            (try GlewlwydServer.claims(of: curlToken)["cnf"] as? [String: Any])?["x5t#S256"] as? String == thumbprint)

        // The same files named by key_file and certificate_file (read on every use, never
        // copied): the profile a script shares with curl.
        let files = clientID + "-files"
        try sandbox.writeProfile(
            files,
            "issuer = \(server.issuer)\nclient_id = \(clientID)\nkey_file = \(key)\ncertificate_file = \(certificate)\n"
        )
        sandbox.forgetsHotCacheAtEnd(profile: files, issuer: server.issuer, clientID: clientID)
        let fileLogin = try sandbox.tokenctl(
            "--profile", files, "login", "--grant", "client-credentials", "--client-auth", "tls_client_auth",
            "--issuer", server.issuer, "--client-id", clientID, "--scope", server.scope, "--cacert", server.caFile)
        #expect(fileLogin.status == 0, "\(fileLogin)")
        #expect(try String(contentsOfFile: sandbox.profileFile(files), encoding: .utf8).contains("key_file = \(key)"))
        let fileToken = try sandbox.tokenctl("--profile", files, "token")
        #expect(
            (try GlewlwydServer.claims(of: accessToken(fileToken))["cnf"] as? [String: Any])?["x5t#S256"] as? String
                == thumbprint, "\(fileToken)")

        // The static front alone serves a machine profile's hit (no engine beside the copy).
        let frontOnly = sandbox.root + "/front-only"
        try FileManager.default.createDirectory(atPath: frontOnly, withIntermediateDirectories: true)
        // Copied by cp(1): a write descriptor opened here would reach the programs other tests start
        // meanwhile, and executing the copy would fail with ETXTBSY while one holds it.
        let copy = try runProgram("/bin/cp", [sandbox.environment.binary, frontOnly + "/tokenctl"])
        #expect(copy.status == 0, "\(copy)")
        let hit = try runProgram(
            frontOnly + "/tokenctl", ["--profile", files, "token"], environment: sandbox.variables)
        #expect(hit.status == 0 && hit.stdout == fileToken.stdout, "\(hit)")

        // Another subject at the server: the certificate is refused, 78 naming its thumbprint.
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": ["tls_client_auth"],
            "tls_client_auth_subject_dn": "CN=someone-else,O=tokenctl-test",
        ])
        let refused = try sandbox.tokenctl("--profile", clientID, "token", "--force")
        #expect(refused.status == 78, "\(refused)")
        #expect(refused.stderr.contains(thumbprint), "\(refused)")
    }

    @Test(
        "self_signed_tls_client_auth: 'key create --certificate', registered as a JWK with x5c; the token is bound to it"
    )
    func selfSignedCertificate() throws {
        let server = try GlewlwydServer.require()
        let sandbox = try Sandbox()
        let clientID = GlewlwydServer.uniqueClientID("m-self")
        defer { _ = try? sandbox.tokenctl("--profile", clientID, "key", "remove") }
        let create = try sandbox.tokenctl(
            "--profile", clientID, "key", "create", "--certificate", "--common-name", clientID)
        #expect(create.status == 0, "\(create)")
        let certificate = try registerSelfSigned(sandbox, server, clientID: clientID)
        sandbox.forgetsHotCacheAtEnd(profile: clientID, issuer: server.issuer, clientID: clientID)
        let login = try sandbox.tokenctl(
            "--profile", clientID, "login", "--grant", "client-credentials", "--client-auth",
            "self_signed_tls_client_auth", "--issuer", server.issuer, "--client-id", clientID, "--scope", server.scope,
            "--cacert", server.caFile)
        #expect(login.status == 0, "\(login)")
        let token = try sandbox.tokenctl("--profile", clientID, "token")
        #expect(token.status == 0, "\(token)")
        let claims = try GlewlwydServer.claims(of: accessToken(token))
        #expect(claims["client_id"] as? String == clientID)
        #expect((claims["cnf"] as? [String: Any])?["x5t#S256"] as? String == (try Self.x5t(certificate)))
    }

    /// Registers the profile `clientID`'s key and self-signed certificate with glewlwyd for
    /// self_signed_tls_client_auth (the JWK with `x5c`); returns the certificate's file.
    func registerSelfSigned(_ sandbox: Sandbox, _ server: GlewlwydServer, clientID: String) throws -> String {
        let certificate = sandbox.root + "/\(clientID).crt"
        let shown = try sandbox.tokenctl("--profile", clientID, "key", "show", "--format", "certificate")
        try shown.stdout.write(toFile: certificate, atomically: true, encoding: .utf8)
        let der = try runProgram(
            "/bin/sh", ["-c", "openssl x509 -in \"$1\" -outform DER | base64 -w0", "der", certificate])
        let jwk = try sandbox.tokenctl("--profile", clientID, "key", "show", "--format", "jwk")
        var key = try #require(try JSONSerialization.jsonObject(with: Data(jwk.stdout.utf8)) as? [String: Any])
        key["x5c"] = [der.stdout.trimmingCharacters(in: .whitespacesAndNewlines)]
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": ["self_signed_tls_client_auth"],
            "jwks": ["keys": [key]],
        ])
        return certificate
    }

    @Test("without --client-auth, a client with a secret gets client_secret_basic from glewlwyd's six methods")
    func methodFromDiscovery() throws {
        let server = try GlewlwydServer.require()
        let sandbox = try Sandbox()
        let clientID = GlewlwydServer.uniqueClientID("m-chosen")
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": ["client_secret_basic"], "client_secret": "chosen-1",
        ])
        let login = try machineLogin(
            sandbox, server, profile: "chosen", clientID: clientID, method: nil, secret: "chosen-1", marker: clientID)
        #expect(login.status == 0, "\(login)")
        let file = try String(contentsOfFile: sandbox.profileFile("chosen"), encoding: .utf8)
        #expect(file.contains("token_endpoint_auth_method = client_secret_basic"))
        #expect(file.contains("mtls_token_endpoint = \(server.mtlsTokenEndpoint)"))
        // Signing in again needs no options: the machine profile signs in as a machine.
        let again = try sandbox.tokenctl("--profile", "chosen", "login")
        #expect(again.status == 0, "\(again)")
        #expect(try server.accessLogLines(containing: "tk=\(clientID)", awaiting: 2).count == 2)
    }

    @Test("a refused secret is 78 naming what to register where; nothing is stored")
    func refusedSecret() throws {
        let server = try GlewlwydServer.require()
        let sandbox = try Sandbox()
        let clientID = GlewlwydServer.uniqueClientID("m-refused")
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": ["client_secret_basic"], "client_secret": "right",
        ])
        let login = try machineLogin(
            sandbox, server, profile: "refused", clientID: clientID, method: "client_secret_basic", secret: "wrong",
            marker: clientID)
        #expect(login.status == 78, "\(login)")
        #expect(login.stderr.contains("refused the client"), "\(login)")
        #expect(login.stderr.contains(clientID) && login.stderr.contains("client_secret_basic"), "\(login)")
        #expect(!login.stderr.contains("wrong"))
        #expect(!FileManager.default.fileExists(atPath: sandbox.profileFile("refused")))

        // A profile whose secret the server no longer takes: `token` is 78 as well, the cache kept.
        let good = try machineLogin(
            sandbox, server, profile: "rotated", clientID: clientID, method: "client_secret_basic", secret: "right",
            marker: clientID)
        #expect(good.status == 0, "\(good)")
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": ["client_secret_basic"], "client_secret": "rotated",
        ])
        let forced = try sandbox.tokenctl("--profile", "rotated", "token", "--force")
        #expect(forced.status == 78, "\(forced)")
        #expect(forced.stderr.contains("login --client-secret-stdin"), "\(forced)")
    }

    @Test("64 processes asking a machine profile whose token expired: one token request, one token")
    func fanIn64() throws {
        let server = try GlewlwydServer.require()
        let sandbox = try Sandbox()
        let clientID = GlewlwydServer.uniqueClientID("m-fanin")
        try server.addClient([
            "client_id": clientID, "token_endpoint_auth_method": ["client_secret_post"], "client_secret": "fan-in",
        ])
        let login = try machineLogin(
            sandbox, server, profile: "default", clientID: clientID, method: "client_secret_post", secret: "fan-in",
            marker: clientID)
        #expect(login.status == 0, "\(login)")
        let first = try sandbox.tokenctl("token")
        #expect(first.status == 0, "\(first)")
        // The token leaves the kernel keyring, where a machine's token lives, as at its expiry.
        HotCache(environment: .fixed([:])).invalidate(profile: .default, issuer: server.issuer, clientID: clientID)
        // The login's own line first (nginx writes it after answering), else it would count as the 64's.
        let before = try server.accessLogLines(containing: "tk=\(clientID)", awaiting: 1).count

        let results = try sandbox.concurrently(64, ["token"])

        let access = try #require(results.first?.stdout)
        #expect(access != first.stdout)
        for result in results {
            #expect(result.status == 0, "\(result)")
            #expect(result.stdout == access, "every process served the one new token")
        }
        let after = try server.accessLogLines(containing: "tk=\(clientID)", awaiting: before + 1).count
        #expect(after - before == 1, "one token request")
    }
}
