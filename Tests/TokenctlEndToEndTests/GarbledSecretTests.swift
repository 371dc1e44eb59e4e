import Foundation
import Testing
import TokenctlTestSupport

/// A Secret Service whose answer to a read is not a token set the first time. A fake, by
/// necessity (Scripts/lib/hung_secret_service.py): kwalletd5 does it now and then, when it
/// agrees a session whose keys are not the client's, and cannot be made to on demand.
@Suite("End to end: a garbled secret is read again on a new session (fake Secret Service)")
struct GarbledSecretTests {
    @Test("token: bytes that are not a token set, then the session read again on a new session and its token printed")
    func readAgainOnNewSession() throws {
        let keyring = try PrivateKeyring()
        let sandbox = try Sandbox()
        sandbox.use(keyring)
        let server = try AuthServer()
        try sandbox.login(server)
        let stored = try runProgram(
            "/usr/bin/secret-tool",
            [
                "lookup", "application", "tokenctl", "profile", "default", "issuer", server.url, "client_id", "cli",
                "kind", "session",
            ],
            environment: sandbox.variables)
        let set = try #require(
            try JSONSerialization.jsonObject(with: Data(stored.stdout.utf8)) as? [String: Any], "\(stored)")
        let accessToken = try #require(set["access_token"] as? String)
        let secretFile = sandbox.root + "/stored-session"
        try stored.stdout.write(toFile: secretFile, atomically: true, encoding: .utf8)
        try keyring.replaceWithHungService(.garblesFirstSecret, secretFile: secretFile)

        // Without the kernel-keyring hot cache, so that the token must come from the Secret Service.
        let token = try sandbox.tokenctl("token", extraEnvironment: ["TOKENCTL_TEST_DISABLE_KERNEL_KEYRING": "1"])
        #expect(token.status == 0, "\(token)")
        #expect(token.stdout == accessToken + "\n", "\(token)")
        let calls = keyring.hungServiceCalls()
        let reads = calls.indices.filter { calls[$0].contains(".GetSecrets ") }
        #expect(reads.count == 2, "\(calls)")
        if reads.count == 2 {
            #expect(
                calls[reads[0]..<reads[1]].contains { $0.contains(".OpenSession ") },
                "the second read on a new session: \(calls)")
        }
    }
}
