import Foundation
import TokenctlTestSupport

/// idpyoidc (PyPI), a real RFC 8693 token exchange server, one test's own: started and stopped
/// through the project's shell library (Scripts/lib/idpyoidc.sh, whose header lists what it
/// does and what was measured). Clients are registered at its admin endpoint with the admin
/// token the harness wrote; its log (one line per request) shows what reached it.
final class IdpyoidcServer: @unchecked Sendable {
    let directory: String
    let issuer: String
    let tokenEndpoint: String
    private let shell = ShellServices(variable: "TOKENCTL_IDPYOIDC_SH", file: "idpyoidc.sh")
    private let once = StopOnce()

    /// The subject token type idpyoidc exchanges (only its own access tokens).
    static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"

    init() throws {
        directory = "/tmp/tk-idp-" + String(UUID().uuidString.prefix(8))
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let started = try shell.start(
            in: directory,
            """
            tk_require_idpyoidc_venv
            tk_idpyoidc_start
            printf 'issuer=%s\\n' "$TK_IDPYOIDC_ISSUER"
            """)
        let values = ShellServices.values(of: started.stdout)
        guard started.status == 0, let issuer = values["issuer"] else {
            shell.stop(in: directory)
            try? FileManager.default.removeItem(atPath: directory)
            throw HarnessError("starting idpyoidc (Scripts/lib/idpyoidc.sh) failed: \(started)")
        }
        self.issuer = issuer
        tokenEndpoint = issuer + "/token"
    }

    var serverDirectory: String { directory + "/idpyoidc" }

    /// Register a client (the harness's fields: client_id, client_secret, client_authn_method,
    /// allowed_scopes, jwks, token_usage_rules).
    func addClient(_ client: [String: Any]) throws {
        let body = String(decoding: try JSONSerialization.data(withJSONObject: client), as: UTF8.self)
        let result = try runProgram(
            "/usr/bin/curl",
            [
                "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "@\(serverDirectory)/admin-header", "-H",
                "Content-Type: application/json", "--data-binary", "@-", issuer + "/tk-admin/clients",
            ], stdin: body)
        guard result.stdout == "201" else { throw HarnessError("registering \(client["client_id"] ?? "?"): \(result)") }
    }

    /// A client credentials token of `clientID` (client_secret_basic), asked with curl: a
    /// subject token for an exchange.
    func clientCredentialsToken(_ clientID: String, secret: String) throws -> String {
        let result = try runProgram(
            "/usr/bin/curl",
            ["-sf", "-u", "\(clientID):\(secret)", "-d", "grant_type=client_credentials", tokenEndpoint])
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
            let token = object["access_token"] as? String
        else { throw HarnessError("client credentials of \(clientID): \(result)") }
        return token
    }

    /// RFC 7662 introspection of `token`, asked by `clientID` (client_secret_basic).
    func introspect(_ token: String, clientID: String, secret: String) throws -> [String: Any] {
        let result = try runProgram(
            "/usr/bin/curl",
            ["-sf", "-u", "\(clientID):\(secret)", "--data-urlencode", "token@-", issuer + "/introspection"],
            stdin: token)
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        else { throw HarnessError("introspection: \(result)") }
        return object
    }

    /// How many token requests reached the server (its log: one line per request).
    func tokenRequests() throws -> Int {
        let log = try String(contentsOfFile: serverDirectory + "/server.log", encoding: .utf8)
        return log.split(separator: "\n").filter { $0.contains("\"POST /token ") }.count
    }

    /// The clients idpyoidc accepted at its token endpoint, one per request, as server.py logs
    /// them: "client_id=ID authenticated=BOOL credentials=NAMES" (authenticated: idpyoidc's own
    /// flag, False for a public client; NAMES: which of authorization, client_secret and
    /// client_assertion the request carried, or none).
    func tokenClients() throws -> [String] {
        try log().split(separator: "\n").compactMap { line in
            line.range(of: "token client: ").map { String(line[$0.upperBound...]) }
        }
    }

    /// The server's log, to check that a token never reached it (its own logging is off).
    func log() throws -> String { try String(contentsOfFile: serverDirectory + "/server.log", encoding: .utf8) }

    func stop() { shell.stop(in: directory, once: once) }

    deinit { stop() }
}
