import Foundation
import Testing
import TokenctlTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// DPoP nonces across processes: against a server that demands a nonce in
/// every proof (`dpop_nonce_required`), the nonce one process was given is kept in a file per
/// issuer under `$XDG_CACHE_HOME/tokenctl/dpop-nonce/`, so the next process's first proof
/// carries it: one `use_dpop_nonce` round trip per nonce rotation, not one per process.
@Suite("End to end: DPoP nonces kept across processes")
struct DPoPNonceTests {
    static let profile = "dpop-nonce-kept"

    func importLogin(_ sandbox: Sandbox, _ server: AuthServer) throws -> RunResult {
        try sandbox.start(
            [
                "--profile", Self.profile, "login", "--dpop", "--issuer", server.url, "--client-id", "cli",
                "--refresh-token-stdin",
            ],
            stdin: try server.issue()
        ).wait()
    }

    func nonceDirectory(_ sandbox: Sandbox) -> String { sandbox.root + "/home/.cache/tokenctl/dpop-nonce" }

    /// The /token requests' outcomes and the nonce each proof carried.
    func proofs(_ server: AuthServer) throws -> [(outcome: String, nonce: String?)] {
        try server.tokenRequests().map {
            ($0["outcome"] as? String ?? "?", ($0["dpop"] as? [String: Any])?["nonce"] as? String)
        }
    }

    @Test(
        "two `tokenctl refresh` processes in a row after a login: every first proof carries the kept nonce, one use_dpop_nonce in all"
    )
    func nonceKeptAcrossProcesses() throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["dpop_nonce_required": true])
        let login = try importLogin(sandbox, server)
        #expect(login.status == 0, "\(login)")
        for _ in 0..<2 {
            let refreshed = try sandbox.tokenctl("--profile", Self.profile, "refresh")
            #expect(refreshed.status == 0, "\(refreshed)")
        }
        let seen = try proofs(server)
        #expect(
            seen.map(\.outcome) == ["use_dpop_nonce", "issued", "issued", "issued"],
            "one use_dpop_nonce (the login's), not one per process: \(seen)")
        #expect(seen.dropFirst().allSatisfy { $0.nonce != nil }, "\(seen)")

        // One private file per issuer, holding the nonce and no token.
        let names = try FileManager.default.contentsOfDirectory(atPath: nonceDirectory(sandbox))
        #expect(names.count == 1, "\(names)")
        let file = nonceDirectory(sandbox) + "/" + (names.first ?? "")
        var info = stat()
        #expect(stat(file, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.contains(seen.last?.nonce ?? "?"), "\(text)")
        let stored = try #require(try sandbox.storedTokenSet(profile: Self.profile, issuer: server.url))
        for key in ["access_token", "refresh_token"] {
            #expect(!text.contains(stored[key] as? String ?? "?"), "no token in the nonce file")
        }
    }

    @Test(
        "a nonce file that is a FIFO, or garbage, is ignored: the refresh costs one retry, succeeds, and the file is replaced",
        arguments: ["fifo", "garbage"])
    func badNonceFileIsIgnored(kind: String) throws {
        let sandbox = try Sandbox()
        let server = try AuthServer(["dpop_nonce_required": true])
        #expect(try importLogin(sandbox, server).status == 0)
        let names = try FileManager.default.contentsOfDirectory(atPath: nonceDirectory(sandbox))
        let file = nonceDirectory(sandbox) + "/" + (try #require(names.first))
        try FileManager.default.removeItem(atPath: file)
        if kind == "fifo" {
            #expect(mkfifo(file, 0o600) == 0)
        } else {
            try "\u{1}{\"issuer\":".write(toFile: file, atomically: true, encoding: .utf8)
        }
        let refreshed = try sandbox.tokenctl("--profile", Self.profile, "refresh", "--timeout", "60")
        #expect(refreshed.status == 0, "\(refreshed)")
        #expect(!refreshed.stderr.contains("cache"), "no word about the cache: \(refreshed)")
        let seen = try proofs(server)
        #expect(seen.map(\.outcome) == ["use_dpop_nonce", "issued", "use_dpop_nonce", "issued"], "\(seen)")
        var info = stat()
        #expect(lstat(file, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG, "replaced by a regular file")
        // And the next process uses it.
        #expect(try sandbox.tokenctl("--profile", Self.profile, "refresh").status == 0)
        #expect(try proofs(server).last?.outcome == "issued" && (try proofs(server).count) == 5)
    }
}
