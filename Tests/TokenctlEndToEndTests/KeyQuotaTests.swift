import Foundation
import Testing
import TokenctlTestSupport

/// The rotation journal under a full kernel key quota, as a real non-root
/// user whose quota another program (keyctl) has filled: doctor measures the room left against
/// the largest session, and a refresh that cannot be journaled says what really happened.
/// Serialized: the quota belongs to the one test user.
@Suite("End to end: the kernel key quota of a non-root user", .serialized)
struct KeyQuotaTests {
    /// The "journal quota" check of `doctor --json`: (level, detail, hint).
    static func journalQuotaCheck(_ user: NonRootUser) throws -> (level: String, detail: String, hint: String?) {
        let result = try user.tokenctl("doctor", "--json")
        let document = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result)")
        let checks = try #require(document["checks"] as? [[String: Any]])
        let check = try #require(checks.first { $0["name"] as? String == "journal quota" }, "\(result)")
        return (check["level"] as? String ?? "?", check["detail"] as? String ?? "?", check["hint"] as? String)
    }

    /// The number before `suffix` in `text` ("… 1234 bytes and one key in the journal").
    static func number(before suffix: String, in text: String) -> Int? {
        guard let range = text.range(of: suffix) else { return nil }
        return Int(text[..<range.lowerBound].split(separator: " ").last ?? "")
    }

    @Test(
        "doctor as a non-root user: ok with the room left and the largest session's size; a warning with both figures once another program fills the quota"
    )
    func doctorMeasuresTheQuota() throws {
        let user = try NonRootUser()
        let server = try AuthServer()
        try user.login(server)
        let roomy = try Self.journalQuotaCheck(user)
        #expect(roomy.level == "ok", "\(roomy)")
        #expect(roomy.detail.contains("of 20000 bytes and"), "the non-root limit is measured: \(roomy)")
        let size = try #require(Self.number(before: " bytes and one key in the journal", in: roomy.detail), "\(roomy)")
        #expect(roomy.detail.contains("the largest session ('default') takes \(size) bytes"), "\(roomy)")
        #expect(size > 200 && size < 20_000, "\(roomy)")

        try user.fillQuota(leaving: size / 2)
        let full = try Self.journalQuotaCheck(user)
        #expect(full.level == "warn", "\(full)")
        let left = try #require(Self.number(before: " of 20000 bytes", in: full.detail), "\(full)")
        #expect(left < size, "\(full)")
        #expect(
            full.detail.contains(
                "but the largest session ('default') takes \(size) bytes and one key in the journal: a refresh now is written to the Secret Service alone"
            ), "\(full)")
        #expect(full.hint?.contains("keyctl show @u") == true, "\(full)")
    }

    @Test(
        "a full quota and a working Secret Service: the refresh is stored, the session goes on, and nothing claims otherwise"
    )
    func refreshStoredWithoutJournal() throws {
        let user = try NonRootUser()
        let server = try AuthServer() // one-use refresh tokens, no grace period
        try server.configure(["access_ttl": 1])
        try user.login(server)
        try server.configure(["access_ttl": 3600])
        try user.fillQuota(leaving: 20)
        sleep(seconds: 1.05)
        let result = try user.tokenctl("token")
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        let next = try user.tokenctl("token", "--force")
        #expect(next.status == 0, "the rotated refresh token was stored: \(next)")
        #expect(try server.stats()["reuse_detected"] == 0)
    }

    @Test(
        "a full quota and a Secret Service write that fails: one true message, saying the session is lost (one-use server) or kept (no rotation)",
        arguments: [true, false])
    func refreshNeitherJournaledNorStored(rotating: Bool) throws {
        let user = try NonRootUser()
        let server = try AuthServer(["rotate": rotating])
        try server.configure(["access_ttl": 1])
        try user.login(server)
        // The answer waits 5 s (token's deadline is 30 s): room to lock the keyring meanwhile.
        try server.configure(["access_ttl": 3600, "delay_seconds": 5])
        sleep(seconds: 1.05)
        try user.fillQuota(leaving: 20)
        // The keyring is locked while the request is at the server: the read before worked, the write after fails.
        let command = try user.start(["token"])
        try server.waitForTokenRequests(2)
        try user.lockKeyring()
        let result = command.wait()
        try user.unlockKeyring()
        try server.configure(["delay_seconds": 0])
        #expect(result.status == 69, "\(result)")
        #expect(result.stdout.isEmpty, "an unsaved rotation is never printed")
        #expect(result.stderr.contains("the refreshed session could not be saved: "), "\(result)")
        #expect(
            result.stderr.contains(
                "the rotation journal (kernel keyring) could not hold it either: this user's kernel key quota is full ("
            ), "\(result)")
        #expect(!result.stderr.contains("probably"), "\(result)")
        if rotating {
            #expect(
                result.stderr.contains(
                    "The server rotated the refresh token and nothing could hold the new one, so the session is lost"),
                "\(result)")
            #expect(!result.stderr.contains("kept"), "\(result)")
            // True: the stored refresh token was spent, and nothing holds its successor.
            #expect(try user.tokenctl("token").status == 77)
        } else {
            #expect(
                result.stderr.contains(
                    "The server did not rotate the refresh token, so the stored one still works: the session is kept"),
                "\(result)")
            #expect(!result.stderr.contains("lost"), "\(result)")
            #expect(try user.tokenctl("token").status == 0, "the session was kept")
        }
    }
}
