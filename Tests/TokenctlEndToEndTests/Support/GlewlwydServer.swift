import Foundation
import Testing
import TokenctlTestSupport

/// The real authorization server of the machine sign-in tests, which Scripts/test starts once
/// per run (Scripts/lib/glewlwyd.sh): Debian's glewlwyd 2.7.5 behind nginx terminating TLS with
/// a private CA. Each test registers clients of its own (ids made unique here) through the
/// admin API, so tests run in parallel; nginx's access log shows each request's path and query.
struct GlewlwydServer: Sendable {
    let issuer: String
    let tokenEndpoint: String
    let mtlsTokenEndpoint: String
    let caFile: String
    let caKey: String
    let scope: String
    let directory: String
    let adminURL: String
    let adminUser: String
    let adminPassword: String
    let controlScript: String

    static func require() throws -> GlewlwydServer {
        let env = ProcessInfo.processInfo.environment
        func value(_ name: String) throws -> String {
            guard let value = env["TOKENCTL_GLEWLWYD_" + name], !value.isEmpty else {
                throw HarnessError("glewlwyd is started by Scripts/test (TOKENCTL_GLEWLWYD_\(name)): run Scripts/test")
            }
            return value
        }
        return GlewlwydServer(
            issuer: try value("ISSUER"), tokenEndpoint: try value("TOKEN_ENDPOINT"),
            mtlsTokenEndpoint: try value("MTLS_TOKEN_ENDPOINT"), caFile: try value("CA_FILE"),
            caKey: try value("CA_KEY"), scope: try value("SCOPE"), directory: try value("DIR"),
            adminURL: try value("ADMIN_URL"), adminUser: try value("ADMIN_USER"),
            adminPassword: try value("ADMIN_PASSWORD"), controlScript: try value("CONTROL_PY"))
    }

    /// A client id no other test uses.
    static func uniqueClientID(_ prefix: String) -> String {
        prefix + "-" + UUID().uuidString.prefix(8).lowercased()
    }

    /// Register a client (docs/API.md "Add a new client"; glewlwyd_control.py fills in the
    /// defaults: confidential, the client credentials grant, the machine scope).
    func addClient(_ client: [String: Any]) throws {
        let json = String(decoding: try JSONSerialization.data(withJSONObject: client), as: UTF8.self)
        // One admin session at a time: glewlwyd 2.7.5 fails concurrent admin logins and client
        // writes of the same user (measured: a registration exits 1, another client is refused).
        let result = try runProgram(
            "/usr/bin/flock",
            [
                directory + "/admin.lock", "/usr/bin/python3", controlScript, "--api", adminURL, "--user", adminUser,
                "--password", adminPassword, "--scope", scope, "add-client",
            ], stdin: json)
        guard result.status == 0 else {
            throw HarnessError("registering \(client["client_id"] ?? "?") failed: \(result)")
        }
    }

    /// The requests nginx logged whose request line contains `marker` (e.g. a query string
    /// only one test's token endpoint has).
    func accessLogLines(containing marker: String) throws -> [String] {
        let log = try String(contentsOfFile: directory + "/nginx-access.log", encoding: .utf8)
        return log.split(separator: "\n").map(String.init).filter { $0.contains(marker) }
    }

    /// The access log's lines with `marker` once there are `count` of them (`awaiting`: nginx
    /// writes a request's line after it has sent the answer).
    func accessLogLines(containing marker: String, awaiting count: Int) throws -> [String] {
        try TokenctlTestSupport.awaiting(count) { try accessLogLines(containing: marker) }
    }

    /// The claims of a JWT access token (its signature is glewlwyd's; the tests read what it says).
    static func claims(of token: String) throws -> [String: Any] {
        let parts = token.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ".")
        guard parts.count == 3 else { throw HarnessError("not a JWT: \(token.prefix(20))…") }
        var payload = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        guard let data = Data(base64Encoded: payload),
            let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { throw HarnessError("unreadable JWT payload") }
        return object
    }
}

extension Sandbox {
    /// Write a profile file by hand (0600, its directory 0700), as a user would.
    func writeProfile(_ profile: String, _ text: String) throws {
        let directory = root + "/config/tokenctl/profiles"
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try text.write(toFile: profileFile(profile), atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: profileFile(profile))
    }
}
