import Foundation
import Testing
import TokenctlTestSupport

/// `status` signature verdicts through the binary: keys cached at login, key rotation, a forged
/// kid (rate-limited re-fetch), offline and unreachable servers, forbidden algorithms.
@Suite("End to end: signature verdicts")
struct SignatureVerdictEndToEndTests {
    /// A profile name of this suite's own: servers stop (freeing their ports for other tests) before
    /// each sandbox drops its logins' hot-cache keys, which are named by profile, issuer and client.
    static let profile = "signature-test"

    func status(_ sandbox: Sandbox, _ extra: String...) throws -> (verdict: Any?, code: Int32, object: [String: Any]) {
        let result = try sandbox.runTokenctl(["--profile", Self.profile, "status", "--json"] + extra, stdin: nil)
        let object = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
        return (object["signature"], result.status, object)
    }

    func jwksRequests(_ server: AuthServer) throws -> Int {
        try server.log().filter { ($0["path"] as? String) == "/jwks" }.count
    }

    /// Replace the stored ID token (the rest of the set unchanged) behind tokenctl's back.
    func plantIDToken(_ sandbox: Sandbox, issuer: String, _ make: (_ original: String) -> String) throws {
        var stored = try #require(try sandbox.storedTokenSet(profile: Self.profile, issuer: issuer))
        let original = try #require(stored["id_token"] as? String)
        stored["id_token"] = make(original)
        let json = String(decoding: try JSONSerialization.data(withJSONObject: stored), as: UTF8.self)
        try sandbox.overwriteStoredTokenSet(json, profile: Self.profile, issuer: issuer)
    }

    static func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(
            of: "/", with: "_"
        )
        .replacingOccurrences(of: "=", with: "")
    }

    @Test("verified right after login, from the keys login cached (no further JWKS request); human output says so")
    func verifiedAfterLogin() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server, profile: Self.profile)
        #expect(try jwksRequests(server) == 1)
        let (verdict, code, object) = try status(sandbox)
        #expect(verdict as? String == "verified" && code == 0, "\(object)")
        #expect(try jwksRequests(server) == 1)
        let human = try sandbox.tokenctl("--profile", Self.profile, "status")
        #expect(human.stdout.contains("  signature:     verified\n"), "\(human)")
        // The cache: public keys only, 0600 in a 0700 directory.
        let directory = sandbox.root + "/home/.cache/tokenctl/jwks"
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(files.count == 1)
        let fileMode =
            try FileManager.default.attributesOfItem(atPath: directory + "/" + files[0])[.posixPermissions] as? Int
        let directoryMode = try FileManager.default.attributesOfItem(atPath: directory)[.posixPermissions] as? Int
        #expect(fileMode == 0o600 && directoryMode == 0o700)
    }

    @Test("ES256 ID tokens verify too")
    func es256() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["id_token_alg": "ES256"])
        try sandbox.login(server, profile: Self.profile)
        #expect(try status(sandbox).verdict as? String == "verified")
    }

    @Test("key rotation: after a refresh the new kid is unknown, one re-fetch, verified")
    func rotation() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server, profile: Self.profile)
        try server.configure(["rotate_signing_key": true])
        #expect(try sandbox.tokenctl("--profile", Self.profile, "refresh").status == 0)
        let (verdict, code, object) = try status(sandbox)
        #expect(verdict as? String == "verified" && code == 0, "\(object)")
        #expect(try jwksRequests(server) == 2, "login, then one re-fetch for the new kid")
        let kids = try server.log().filter { ($0["path"] as? String) == "/jwks" }.last?["kids"] as? [String]
        #expect(kids?.contains("test-rsa-2") == true && kids?.contains("test-rsa") == false)
        #expect(try status(sandbox).verdict as? String == "verified")
        #expect(try jwksRequests(server) == 2, "the new key is cached")
    }

    @Test(
        "a refreshed ID token with a bad signature or a forbidden alg ends the refresh: exit 77, nothing of it stored",
        arguments: [
            #"{"id_token_bad_signature": true}"#, #"{"id_token_alg": "HS256"}"#,
        ])
    func refreshedIDTokenSignature(faultJSON: String) throws {
        let fault = try #require(try JSONSerialization.jsonObject(with: Data(faultJSON.utf8)) as? [String: Any])
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server, profile: Self.profile)
        let before = try #require(
            try sandbox.storedTokenSet(profile: Self.profile, issuer: server.url)?["refresh_token"] as? String)
        try server.configure(fault)
        let result = try sandbox.tokenctl("--profile", Self.profile, "token", "--force")
        #expect(result.status == 77, "\(result)")
        #expect(result.stderr.contains("refreshed ID token"), "\(result)")
        let after = try sandbox.storedTokenSet(profile: Self.profile, issuer: server.url)?["refresh_token"] as? String
        #expect(after == nil || after == before, "the set that came with the bad ID token is never stored")
        #expect(try jwksRequests(server) <= 2, "at most one re-fetch")
    }

    @Test("a refreshed ID token signed by a key the issuer rotated to: one re-fetch during the refresh, stored")
    func refreshedAfterKeyRotation() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server, profile: Self.profile)
        try server.configure(["rotate_signing_key": true])
        let result = try sandbox.tokenctl("--profile", Self.profile, "token", "--force")
        #expect(result.status == 0, "\(result)")
        #expect(try jwksRequests(server) == 2, "login, then one re-fetch for the new kid during the refresh")
        #expect(try status(sandbox).verdict as? String == "verified")
        #expect(try jwksRequests(server) == 2)
    }

    @Test("a forged kid: unverified: unknown key after one re-fetch; a second status within the window asks nothing")
    func forgedKid() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server, profile: Self.profile)
        try plantIDToken(sandbox, issuer: server.url) { original in
            let parts = original.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            return Self.base64URL(#"{"alg":"RS256","typ":"JWT","kid":"forged"}"#) + "." + parts[1] + "." + parts[2]
        }
        let (verdict, code, object) = try status(sandbox)
        #expect(verdict as? String == "unverified: unknown key" && code == 0, "\(object)")
        #expect(try jwksRequests(server) == 2, "one re-fetch")
        #expect(try status(sandbox).verdict as? String == "unverified: unknown key")
        #expect(
            try sandbox.tokenctl("--profile", Self.profile, "status").stdout.contains(
                "signature:     unverified: unknown key"))
        #expect(try jwksRequests(server) == 2, "no further request within the rate-limit window")
    }

    @Test("--offline with the server stopped still gives a verdict from the cache; so does an unreachable server")
    func offline() throws {
        let sandbox = try Sandbox()
        var server: AuthServer? = try AuthServer()
        try sandbox.login(server!, profile: Self.profile)
        server = nil
        let (verdict, code, object) = try status(sandbox, "--offline")
        #expect(verdict as? String == "verified" && code == 0, "\(object)")
        #expect(try status(sandbox).verdict as? String == "verified")
        // Nothing cached and offline: said so, without failing.
        try FileManager.default.removeItem(atPath: sandbox.root + "/home/.cache/tokenctl/jwks")
        let (none, noneCode, _) = try status(sandbox, "--offline")
        #expect(none as? String == "unverified: no keys cached" && noneCode == 0)
        #expect(try status(sandbox).verdict as? String == "unverified: no keys cached", "the server is gone")
    }

    @Test("a stored ID token with alg none or HS256 is invalid; the exit status is unchanged")
    func forbiddenAlgorithms() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer()
        try sandbox.login(server, profile: Self.profile)
        for header in [#"{"alg":"none","typ":"JWT"}"#, #"{"alg":"HS256","typ":"JWT","kid":"test-rsa"}"#] {
            try plantIDToken(sandbox, issuer: server.url) { original in
                let parts = original.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
                return Self.base64URL(header) + "." + parts[1] + "." + (header.contains("none") ? "" : parts[2])
            }
            let (verdict, code, object) = try status(sandbox)
            #expect(verdict as? String == "invalid" && code == 0, "\(header): \(object)")
        }
        #expect(try jwksRequests(server) == 1, "a forbidden alg is not a reason to fetch keys")
    }

    @Test("an opaque access token without an ID token: signature null, reported as opaque")
    func opaque() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["omit_id_token": true])
        try sandbox.login(server, profile: Self.profile)
        let (verdict, code, object) = try status(sandbox)
        #expect(verdict is NSNull && code == 0, "\(object)")
        #expect(object["access_token_format"] as? String == "opaque")
        let human = try sandbox.tokenctl("--profile", Self.profile, "status")
        #expect(
            human.stdout.contains("signature:     none to check (no ID token; the access token is opaque)"), "\(human)")
    }

    @Test("without an ID token a JWT access token is checked: the test server's are HS256, so invalid (access token)")
    func jwtAccessToken() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["omit_id_token": true, "jwt_access_tokens": true])
        try sandbox.login(server, profile: Self.profile)
        let (verdict, code, object) = try status(sandbox)
        #expect(verdict as? String == "invalid" && code == 0, "\(object)")
        #expect(object["claims_source"] as? String == "access_token")
        #expect(
            try sandbox.tokenctl("--profile", Self.profile, "status").stdout.contains(
                "signature:     invalid (access token)\n"))
    }
}
