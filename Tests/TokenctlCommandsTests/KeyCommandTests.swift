import Foundation
import Testing
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// `tokenctl key` in-process with the in-memory store of `TestEngine`: what it prints and
/// exits with. The end-to-end suite (KeyCommandTests there) shows the same against the real
/// Secret Service, key files and a software TPM.
@Suite("TokenctlCommands: key create, show, rotate and remove with test doubles")
struct KeyCommandInProcessTests {
    @Test("create prints the public JWK to register; show, rotate, commit and remove say what they did")
    func lifeOfAKey() async throws {
        let engine = try TestEngine()
        let created = try await engine.run("--profile", "m", "key", "create")
        #expect(created.status == .success, "\(created)")
        #expect(created.stderr.hasPrefix("Created an EC P-256 key"), "\(created)")
        let jwk = try #require(JSONValue.parseObject(Array(created.stdout.utf8)), "\(created)")
        #expect(jwk["kty"]?.stringValue == "EC" && jwk["crv"]?.stringValue == "P-256" && jwk["d"] == nil, "\(created)")
        let kid = try #require(jwk["kid"]?.stringValue)

        let shown = try await engine.run("--profile", "m", "key", "show", "--format", "jwk")
        #expect(shown.status == .success && shown.stdout == created.stdout, "\(shown)")

        let again = try await engine.run("--profile", "m", "key", "create")
        #expect(again.status == .configuration && again.stdout.isEmpty, "\(again)")
        #expect(again.stderr.contains("'tokenctl --profile m key rotate'"), "\(again)")

        let rotated = try await engine.run("--profile", "m", "key", "rotate")
        #expect(rotated.status == .success, "\(rotated)")
        #expect(rotated.stderr.contains("'tokenctl --profile m key rotate --commit'"), "\(rotated)")
        let set = try await engine.run("--profile", "m", "key", "show", "--format", "jwks")
        #expect(set.stdout.contains(kid) && set.stdout.components(separatedBy: "\"kid\"").count == 3, "\(set)")

        let removed = try await engine.run("--profile", "m", "key", "remove")
        #expect(removed.status == .success, "\(removed)")
        #expect(removed.stderr.hasPrefix("Removed the "), "\(removed)")
        let none = try await engine.run("--profile", "m", "key", "show")
        #expect(none.status == .configuration, "\(none)")
        #expect(none.stderr.contains("'tokenctl --profile m key create'"), "\(none)")
    }

    @Test("usage: an unknown format is 64 and names the command's help")
    func badFormat() async throws {
        let engine = try TestEngine()
        let result = try await engine.run("key", "show", "--format", "der")
        #expect(result.status == .usage && result.stdout.isEmpty, "\(result)")
    }

    @Test("usage: a certificate for an RSA key inside the TPM is 64 (TLS 1.3 needs RSA-PSS, which the TPM refuses)")
    func tpmRSACertificate() async throws {
        let engine = try TestEngine()
        let result = try await engine.run("key", "create", "--tpm", "--type", "rsa", "--certificate")
        #expect(result.status == .usage && result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.contains("needs an EC key there ('--type ec')"), "\(result)")
    }
}
