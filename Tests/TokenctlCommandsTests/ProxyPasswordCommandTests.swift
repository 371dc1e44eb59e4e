import Foundation
import Testing
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// `tokenctl proxy-password` in-process with the in-memory store of `TestEngine`: what it
/// prints and exits with. CompanyNetworkTests shows the same against the real Secret Service
/// and a squid that asks for the password.
@Suite("TokenctlCommands: proxy-password set and remove with test doubles")
struct ProxyPasswordCommandTests {
    func writeProfile(_ engine: TestEngine, _ name: String, _ text: String) throws {
        let path = engine.paths.profileFile(ProfileName(rawValue: name)!)
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    @Test("set reads the password on stdin and says where it went; remove says whether there was one")
    func setAndRemove() async throws {
        let engine = try TestEngine()
        try writeProfile(
            engine, "corp",
            "issuer = https://idp.example\nclient_id = c\nproxy = http://proxy.example:3128\nproxy_user = alice\n")
        let set = try await engine.run(
            "--profile", "corp", "proxy-password", "set", "--password-stdin", stdin: "s3cret-proxy\n")
        #expect(set.status == .success, "\(set)")
        #expect(set.stdout.isEmpty)
        #expect(
            set.stderr == "Stored the password of the proxy user alice at proxy.example:3128 in the Secret Service.\n",
            "\(set)")
        #expect(engine.store.proxyPasswords == ["user alice at proxy.example:3128": "s3cret-proxy"])

        let removed = try await engine.run("--profile", "corp", "proxy-password", "remove")
        #expect(removed.status == .success, "\(removed)")
        #expect(
            removed.stderr
                == "Removed the password of the proxy user alice at proxy.example:3128 from the Secret Service.\n",
            "\(removed)")
        #expect(engine.store.proxyPasswords.isEmpty)
        let again = try await engine.run("--profile", "corp", "proxy-password", "remove")
        #expect(again.status == .success, "\(again)")
        #expect(again.stderr == "No password is stored for the proxy user alice at proxy.example:3128.\n", "\(again)")
        for result in [set, removed, again] { #expect(!(result.stdout + result.stderr).contains("s3cret")) }
    }

    @Test("set without --password-stdin is a usage error (64); a profile without proxy_user stores nothing (78)")
    func refusals() async throws {
        let engine = try TestEngine()
        let bare = try await engine.run("--profile", "corp", "proxy-password", "set")
        #expect(bare.status == .usage, "\(bare)")
        try writeProfile(engine, "plain", "issuer = https://idp.example\nclient_id = c\n")
        let plain = try await engine.run(
            "--profile", "plain", "proxy-password", "set", "--password-stdin", stdin: "s3cret-proxy\n")
        #expect(plain.status == .configuration, "\(plain)")
        #expect(plain.stderr.contains("proxy_user"), "\(plain)")
        #expect(engine.store.proxyPasswords.isEmpty)
    }
}
