import Foundation
import Testing
import TokenctlTestSupport

/// The real authorization server Scripts/test starts: django-oauth-toolkit 3.4.1 (5-second access
/// tokens, rotation with a 2-second grace period, reuse protection), and a helper that plays its
/// user through the server's own login and consent pages.
struct DotServer: Sendable {
    let base: String
    let python: String
    let userScript: String

    var issuer: String { base + "/o" }
    var deviceEndpoint: String { base + "/o/device-authorization/" }
    var revocationEndpoint: String { base + "/o/revoke_token/" }
    var tokenEndpoint: String { base + "/o/token/" }

    static func require() throws -> DotServer {
        let env = ProcessInfo.processInfo.environment
        guard let base = env["TOKENCTL_DOTSERVER_URL"], let python = env["TOKENCTL_DOT_PYTHON"],
            let script = env["TOKENCTL_DOTUSER_PY"]
        else {
            throw HarnessError("the django-oauth-toolkit server is started by Scripts/test: run Scripts/test")
        }
        return DotServer(base: base, python: python, userScript: script)
    }

    /// Sign in as alice and approve (or deny) the device code.
    func approveDevice(userCode: String, deny: Bool = false) throws -> RunResult {
        try runProgram(
            python, [userScript, "device", "--base", base, "--user-code", userCode] + (deny ? ["--deny"] : []))
    }

    /// Sign in as alice and answer the consent page of `url`, following the redirect to tokenctl.
    func authorize(url: String, deny: Bool = false) throws -> RunResult {
        try runProgram(python, [userScript, "authorize", "--base", base, "--url", url] + (deny ? ["--deny"] : []))
    }

    /// The server's own answer to a refresh with `refreshToken` (status and OAuth error), sent with curl.
    func tryRefresh(_ refreshToken: String, clientID: String, secret: String? = nil) throws -> (
        status: Int, error: String?
    ) {
        var arguments = [
            "-sS", "-o", "-", "-w", "\n%{http_code}", "-X", "POST", tokenEndpoint,
            "--data-urlencode", "grant_type=refresh_token", "--data-urlencode", "refresh_token=\(refreshToken)",
            "--data-urlencode", "client_id=\(clientID)",
        ]
        if let secret { arguments += ["--data-urlencode", "client_secret=\(secret)"] }
        let result = try runProgram("/usr/bin/curl", arguments)
        let lines = result.stdout.split(separator: "\n")
        let status = Int(lines.last ?? "") ?? 0
        let body = lines.dropLast().joined(separator: "\n")
        let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
        return (status, object?["error"] as? String)
    }

    /// Whether the server accepts `accessToken` (its userinfo endpoint answers 200).
    func acceptsAccessToken(_ accessToken: String) throws -> Bool {
        let result = try runProgram(
            "/usr/bin/curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Authorization: Bearer \(accessToken)",
                base + "/o/userinfo/",
            ])
        return result.stdout == "200"
    }
}
