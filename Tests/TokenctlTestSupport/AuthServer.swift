import Foundation
import Testing

/// One local test authorization server (Scripts/testserver/authserver.py) for one test, so
/// tests can set faults, grace periods and lifetimes without disturbing each other.
/// Stopped by PID when the test drops it.
public final class AuthServer: @unchecked Sendable {
    public let url: String
    private let server: RunningCommand
    private let directory: String

    public init(_ configuration: [String: Any] = [:]) throws {
        let environment = try TestEnvironment.require()
        directory = NSTemporaryDirectory() + "tokenctl-authserver-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let portFile = directory + "/port"
        server = try RunningCommand(
            executable: environment.python,
            arguments: [environment.authServerScript, "--port", "0", "--port-file", portFile, "--exit-with-parent"],
            environment: ProcessInfo.processInfo.environment, stdin: nil, directory: directory)
        var port: String?
        for _ in 0..<400 {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8), !text.isEmpty {
                port = text.trimmingCharacters(in: .whitespacesAndNewlines)
                break
            }
            usleep(25_000)
        }
        guard let port else {
            server.signal(SIGKILL)
            throw HarnessError("the test authorization server did not start: \(server.wait())")
        }
        url = "http://127.0.0.1:\(port)"
        // A new server may get the port (and so the issuer URL) of one that an earlier test used:
        // start from a shared keyring holding nothing for this issuer.
        for kind in ["session", "client-secret"] {
            _ = try? runProgram(
                "/usr/bin/secret-tool", ["clear", "application", "tokenctl", "issuer", url, "kind", kind])
        }
        if !configuration.isEmpty { try configure(configuration) }
    }

    private var stopped = false

    /// Stop the server now (a test that must not let it end while a command still runs).
    public func stop() {
        guard !stopped else { return }
        stopped = true
        server.signal(SIGTERM)
        _ = server.wait()
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }

    // MARK: Test control API

    @discardableResult
    public func request(_ method: String, _ path: String, json: Any? = nil) throws -> Any {
        var arguments = ["-sS", "-X", method, url + path]
        var input: String?
        if let json {
            // The body goes through stdin: argv is too small for large fault bodies.
            input = String(decoding: try JSONSerialization.data(withJSONObject: json), as: UTF8.self)
            arguments += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
        }
        let result = try runProgram("/usr/bin/curl", arguments, stdin: input)
        guard result.status == 0 else { throw HarnessError("curl \(path) failed: \(result)") }
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8), options: [.fragmentsAllowed])
    }

    public func issue(clientID: String = "cli", subject: String = "alice", scope: String = "openid offline_access")
        throws
        -> String
    {
        let answer = try request("POST", "/_test/issue", json: ["client_id": clientID, "sub": subject, "scope": scope])
        guard let token = (answer as? [String: Any])?["refresh_token"] as? String else {
            throw HarnessError("no refresh token issued")
        }
        return token
    }

    public func configure(_ configuration: [String: Any]) throws {
        try request("POST", "/_test/config", json: configuration)
    }

    public func log() throws -> [[String: Any]] {
        (try request("GET", "/_test/log") as? [[String: Any]]) ?? []
    }

    /// Requests that reached /token with the refresh grant, by outcome.
    public func tokenRequests() throws -> [[String: Any]] {
        try log().filter { ($0["path"] as? String) == "/token" }
    }

    public func stats() throws -> [String: Int] {
        (try request("GET", "/_test/stats") as? [String: Int]) ?? [:]
    }

    public func tokenStatus(_ token: String) throws -> [String: Any] {
        (try request("GET", "/_test/token-status?token=\(token)") as? [String: Any]) ?? [:]
    }
}
