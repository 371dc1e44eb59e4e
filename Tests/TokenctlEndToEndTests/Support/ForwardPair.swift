import Foundation
import Testing
import TokenctlTestSupport

/// A serving sandbox (the machine with the session) running `tokenctl forward listen` on a
/// socket, and a client sandbox (a remote host's user: its own HOME and XDG directories, no
/// profile, no session) with TOKENCTL_FORWARD_SOCKET naming that socket.
final class ForwardPair: @unchecked Sendable {
    let serving: Sandbox
    let client: Sandbox
    let socket: String
    private(set) var listener: RunningCommand?

    init(socket: String? = nil) throws {
        serving = try Sandbox()
        client = try Sandbox()
        self.socket = socket ?? serving.root + "/runtime/tokenctl/forward.sock"
        client.variables["TOKENCTL_FORWARD_SOCKET"] = self.socket
        // The client has no session bus of its own: a remote host usually has none.
        client.variables["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent/bus"
    }

    /// A pair whose serving side is signed in to `server` (profile `default`), shares its
    /// sessions (`forward enable --no-unit`) and listens.
    static func listening(for server: AuthServer) throws -> ForwardPair {
        let pair = try ForwardPair()
        try pair.serving.login(server)
        #expect(try pair.serving.tokenctl("forward", "enable", "--no-unit").status == 0)
        try pair.listen()
        return pair
    }

    /// Start `forward listen` and wait until it serves.
    func listen(extra: [String] = []) throws {
        // `--socket` names a place of the user's: listen makes no directory for it.
        try FileManager.default.createDirectory(
            atPath: (socket as NSString).deletingLastPathComponent, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        let command = try serving.start(["forward", "listen", "--socket", socket] + extra)
        listener = command
        guard command.waitForStandardError(containing: "serving forwarded tokens", timeout: 20) != nil else {
            command.signal(SIGKILL)
            throw HarnessError("forward listen did not start: \(command.currentStandardError)")
        }
    }

    /// Stop the listener (SIGTERM) and return how it ended.
    @discardableResult
    func stop() -> RunResult? {
        guard let listener else { return nil }
        listener.signal(SIGTERM)
        self.listener = nil
        return listener.wait()
    }

    deinit {
        if let listener {
            listener.signal(SIGKILL)
            _ = listener.wait()
        }
    }

    /// The serving side's event log lines of one event kind (the refusal log's too).
    /// The serving side's events of `kind` once there are `count` of them (`awaiting`: it
    /// records a hand-out after the answer has gone out).
    func events(_ kind: String, awaiting count: Int) throws -> [[String: Any]] {
        try TokenctlTestSupport.awaiting(count) { try events(kind) }
    }

    func events(_ kind: String) throws -> [[String: Any]] {
        let directory = serving.root + "/state/tokenctl/"
        let text = ["events.jsonl.1", "events.jsonl", "forward-refusals.jsonl.1", "forward-refusals.jsonl"].map {
            (try? String(contentsOfFile: directory + $0, encoding: .utf8)) ?? ""
        }.joined()
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["event"] as? String == kind }
    }

    /// Send raw bytes to the socket (python3, no tokenctl) and return what came back.
    func raw(_ script: String) throws -> RunResult {
        try runProgram(
            "/usr/bin/python3",
            [
                "-c",
                "import socket, sys, time\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(30)\ns.connect(sys.argv[1])\n"
                    + script,
                socket,
            ])
    }
}
