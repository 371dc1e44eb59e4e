import Dispatch
import Synchronization
import Testing

@testable import TokenctlCore

/// Synchronous on purpose: the listener and the client each get their own thread, so the test
/// does not depend on a busy cooperative pool while other suites run.
@Suite("Loopback redirect listener (RFC 8252 §7.3)")
struct LoopbackRedirectServerTests {
    let http = CurlHTTPClient(userAgent: "tokenctl-test")

    @Test("only a GET to /callback with our own Host is taken; others are answered and ignored")
    func filtering() throws {
        let server = try LoopbackRedirectServer()
        #expect(server.redirectURI == "http://127.0.0.1:\(server.port)/callback")
        let received = Mutex<LoopbackRedirectServer.Callback?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue(label: "test.listener").async {
            let callback = server.acceptLoop(deadline: Clock.system.now() + 30)
            received.withLock { $0 = callback }
            callback?.respond(status: 200, title: "Signed in", message: "Return to the terminal.")
            done.signal()
        }
        let base = "http://127.0.0.1:\(server.port)"
        #expect(try http.perform(HTTPRequest(method: .get, url: base + "/favicon.ico"), timeout: 20).status == 404)
        // A page on another origin resolving its name to 127.0.0.1 (DNS rebinding) sends its own Host.
        #expect(
            try http.perform(
                HTTPRequest(method: .get, url: base + "/callback?code=x&state=y", headers: [("Host", "evil.example")]),
                timeout: 20
            ).status == 400)
        #expect(
            try http.perform(HTTPRequest(method: .post, url: base + "/callback", body: []), timeout: 20).status == 405)
        let response = try http.perform(
            HTTPRequest(method: .get, url: base + "/callback?code=c%2B1&state=s+1"), timeout: 20)
        done.wait()
        #expect(received.withLock { $0?.parameters } == ["code": "c+1", "state": "s 1"])
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self).contains("Return to the terminal."))
        #expect(response.header("cache-control") == "no-store")
    }

    @Test("a port in use is reported as such; waiting times out with nil")
    func portInUseAndTimeout() throws {
        let first = try LoopbackRedirectServer()
        #expect {
            _ = try LoopbackRedirectServer(port: first.port)
        } throws: { error in
            (error as? TokenctlError)?.message.contains("already in use") == true
                && (error as? TokenctlError)?.exitStatus == .usage
        }
        #expect(first.acceptLoop(deadline: Clock.system.now() + 0.3) == nil)
    }
}
