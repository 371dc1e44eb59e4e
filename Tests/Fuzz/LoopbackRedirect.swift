@testable import TokenctlCore

// Fuzz target: the request head a browser (or anything on this machine) sends to the one-shot
// loopback listener of `login --browser` (LoopbackRedirectServer.acceptLoop: the head up to the
// blank line, the request line, the Host check, the callback path, FormEncoding.decode of the
// query). The parsing is inline in acceptLoop, which reads from an accepted socket, so the input
// goes through a real TCP connection to 127.0.0.1: one listener for the whole run, one client
// connection per input (sent whole, then shut down for writing, then closed with a reset so no
// TIME_WAIT piles up). acceptLoop runs under a clock that expires once this input's connection
// has been dealt with, so a rejected request ends the call instead of waiting for another.
//
// Input: the bytes the client sends; every "$PORT" in it is replaced by the listener's port, so
// the seeds can carry a valid `Host: 127.0.0.1:$PORT`.
// fuzz-extra-sources:
#if canImport(Glibc)
import Glibc
#endif

let listener = try! LoopbackRedirectServer(port: 0)
let portText = Array(String(listener.port).utf8)
nonisolated(unsafe) var clockCalls = 0
nonisolated(unsafe) var currentClient: Int32 = -1
/// Before the deadline until the listener has dealt with this input's connection (answered or
/// closed it: the client socket turns readable), long past it afterwards. Not a fixed number of
/// readings: an accept or poll interrupted by libFuzzer's timer signal (EINTR) goes round the
/// loop again, and must still take this input's connection, not leave it for the next input.
let oneShotClock = Clock(
    now: {
        clockCalls += 1
        var client = pollfd(fd: currentClient, events: Int16(POLLIN), revents: 0)
        let answered = poll(&client, 1, 0) > 0
        return answered || clockCalls > 100 ? 100 : 0
    }, sleep: { _ in })

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLoopbackRedirect(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var request: [UInt8] = []
    let bytes = FuzzSupport.bytes(data, size)
    var index = 0
    let placeholder = Array("$PORT".utf8)
    while index < bytes.count {
        if bytes[index...].starts(with: placeholder) {
            request += portText
            index += placeholder.count
        } else {
            request.append(bytes[index])
            index += 1
        }
    }

    let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    check(client >= 0, "socket: \(errno)")
    defer { close(client) }
    var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
    setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = listener.port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    // A connect interrupted by libFuzzer's timer signal goes on in the background: retry until
    // it says so (EALREADY while in progress, EISCONN once done).
    while true {
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if connected == 0 || errno == EISCONN { break }
        check(errno == EINTR || errno == EALREADY, "connect: \(errno)")
    }
    var sent = 0
    while sent < request.count {
        let count = request[sent...].withUnsafeBytes {
            send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { break } // a full buffer (non-blocking): the listener reads at most 16 KiB anyway
        sent += count
    }
    shutdown(client, Int32(SHUT_WR))

    clockCalls = 0
    currentClient = client
    if let callback = listener.acceptLoop(deadline: 1, clock: oneShotClock) {
        // Only a GET to /callback with our own Host gets here.
        _ = callback.parameters["code"]
        _ = callback.parameters["state"]
        callback.respond(status: 200, title: "Signed in", message: "You can close this window.")
    }
    // Drain the answer so the listener's send never blocks on a full buffer.
    var buffer = [UInt8](repeating: 0, count: 4096)
    while buffer.withUnsafeMutableBytes({ recv(client, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
    return 0
}
