import Dispatch
import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The one-shot HTTP listener on 127.0.0.1 that receives the authorization response of a
/// native app (RFC 8252 §7.3). Plain POSIX sockets: it reads one request line per connection,
/// answers with a short page, and ignores anything that is not a GET to the callback path.
public final class LoopbackRedirectServer: @unchecked Sendable {
    public static let callbackPath = "/callback"

    private let descriptor: Int32
    public let port: UInt16
    /// Why the last redirect to the callback path was refused (its state, its Host, its
    /// method), for the message when no accepted one comes in time. Written only by the accept
    /// loop, read after it has returned.
    public private(set) var lastRefusal: String?

    /// Bind 127.0.0.1:`port` (0: an ephemeral port chosen by the kernel).
    ///
    /// - Throws: `TokenctlError` — a port already in use is reported as such.
    public init(port: UInt16 = 0) throws(TokenctlError) {
        let socketDescriptor = system_socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socketDescriptor >= 0 else {
            throw TokenctlError(
                .unexpected, "cannot create a socket for the redirect: \(system_strerror(system_errno))")
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian // 127.0.0.1 only: never reachable from the network
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                system_bind(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, system_listen(socketDescriptor, 8) == 0 else {
            let code = system_errno
            system_close(socketDescriptor)
            if code == EADDRINUSE {
                throw TokenctlError(
                    .invalidInput, "port \(port) on 127.0.0.1 is already in use",
                    hint:
                        "Choose another port with \(options: .login([.port(.omitted)])), or omit \(options: .login([.port(.omitted)])) to let the system pick a free one."
                )
            }
            throw TokenctlError(.unexpected, "cannot listen on 127.0.0.1:\(port): \(system_strerror(code))")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { system_getsockname(socketDescriptor, $0, &length) }
        }
        self.descriptor = socketDescriptor
        self.port = UInt16(bigEndian: actual.sin_port)
    }

    deinit { system_close(descriptor) }

    public var redirectURI: String { "http://127.0.0.1:\(port)\(Self.callbackPath)" }

    /// What the browser brought back, as query parameters, plus a way to answer it.
    public struct Callback: Sendable {
        public var parameters: [String: String]
        fileprivate let connection: Int32

        /// Send the page and close the connection.
        public func respond(status: Int, title: String, message: String) {
            let body = """
                <!doctype html><html><head><meta charset="utf-8"><title>tokenctl: \(title)</title></head>
                <body style="font-family:sans-serif;margin:3em"><h1>\(title)</h1><p>\(message)</p></body></html>
                """
            LoopbackRedirectServer.send(connection, status: status, body: body)
            system_close(connection)
        }
    }

    /// Wait up to `timeout` seconds for a GET to the callback path carrying `expectedState`.
    /// Anything else (a favicon, a probe from another local process, a wrong or missing
    /// `state`, a malformed or oversized request) gets an error page and waiting goes on, so
    /// no other process can end the sign-in; each connection has at most a few seconds.
    ///
    /// - Returns: `nil` on timeout.
    public func waitForCallback(timeout: Double, expectedState: String? = nil, clock: Clock = .system) async
        -> Callback?
    {
        // A private queue: the loop blocks in poll(2) and must not hold a shared worker.
        await withCheckedContinuation { continuation in
            DispatchQueue(label: "tokenctl.loopback-redirect").async {
                continuation.resume(
                    returning: self.acceptLoop(
                        deadline: clock.now() + timeout, expectedState: expectedState, clock: clock))
            }
        }
    }

    /// How long one connection may take to send its request head.
    static let connectionTimeLimit: Double = 3

    /// The blocking loop behind `waitForCallback` (also for tests that bring their own thread).
    func acceptLoop(deadline: Double, expectedState: String? = nil, clock: Clock = .system) -> Callback? {
        while true {
            let remaining = deadline - clock.now()
            guard remaining > 0 else { return nil }
            var descriptorSet = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = system_poll(&descriptorSet, 1, Int32(min(remaining, 1) * 1000))
            if ready <= 0 { continue }
            let connection = system_accept(descriptor, nil, nil)
            guard connection >= 0 else { continue }
            _ = system_fcntl(connection, F_SETFD, FD_CLOEXEC)
            // A stalled or trickling client must not hold up the login: the whole head within
            // a few seconds, however it arrives.
            guard
                let head = Self.readHead(
                    connection, until: min(deadline, clock.now() + Self.connectionTimeLimit), clock: clock)
            else {
                Self.send(connection, status: 400, body: "Bad request\n")
                system_close(connection)
                continue
            }
            let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
            let requestLine = lines.first.map(String.init) ?? ""
            let parts = requestLine.split(separator: " ")
            // DNS-rebinding guard: the Host must be our own address, not a name pointing at it.
            let host = lines.dropFirst().first { $0.lowercased().hasPrefix("host:") }.map {
                $0.dropFirst(5).trimmingCharacters(in: " \t")
            }
            guard parts.count == 3, parts[0] == "GET", host == "127.0.0.1:\(port)" else {
                if parts.count == 3, Self.path(of: parts[1]) == Self.callbackPath {
                    lastRefusal =
                        parts[0] != "GET"
                        ? "it came as \(TerminalText.short(String(parts[0].prefix(16)))), not GET"
                        : "it was addressed to \(host.map { "'\(TerminalText.short(String($0.prefix(64))))'" } ?? "no host"), not 127.0.0.1:\(port)"
                }
                Self.send(connection, status: parts.count == 3 && parts[0] != "GET" ? 405 : 400, body: "Bad request\n")
                system_close(connection)
                continue
            }
            let target = parts[1]
            guard Self.path(of: target) == Self.callbackPath else {
                Self.send(connection, status: 404, body: "Not found\n")
                system_close(connection)
                continue
            }
            let query = target.contains("?") ? String(target[target.index(after: target.firstIndex(of: "?")!)...]) : ""
            let parameters = FormEncoding.decode(query)
            // RFC 6749 §10.12: a response whose state we did not send is someone else's (CSRF,
            // or a local process probing ports): refuse it and keep waiting for ours.
            if let expectedState, parameters["state"] != expectedState {
                lastRefusal = Self.stateRefusal(parameters)
                Self.send(
                    connection, status: 400, body: "This response is not for the sign-in tokenctl is waiting for.\n")
                system_close(connection)
                continue
            }
            return Callback(parameters: parameters, connection: connection)
        }
    }

    private static func path(of target: Substring) -> String {
        target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
    }

    /// Why a redirect with another state than ours was refused, and what it said otherwise: the
    /// names of its parameters and a server's error code, never a value that can be a secret
    /// (a code, a state, a token).
    static func stateRefusal(_ parameters: [String: String]) -> String {
        var reason = parameters["state"] == nil ? "it carried no state" : "its state did not match this login"
        if let error = parameters["error"] {
            reason += " (it reported error '\(TerminalText.short(String(error.prefix(64))))')"
        } else if parameters["code"] != nil {
            reason += " (it carried a code)"
        }
        return reason
    }

    /// The request head (up to the blank line), at most 16 KiB, received before `until`.
    private static func readHead(_ connection: Int32, until: Double, clock: Clock) -> String? {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        while bytes.count < 16 * 1024 {
            let remaining = until - clock.now()
            guard remaining > 0 else { return nil }
            guard Descriptor.waitReadable(connection, within: max(0.001, remaining)) > 0 else { return nil }
            let count = Descriptor.retryingInterrupted {
                buffer.withUnsafeMutableBytes { system_recv(connection, $0.baseAddress, $0.count, 0) }
            }
            guard count > 0 else { return nil }
            bytes += buffer[0..<count]
            if let text = String(validating: bytes, as: UTF8.self), let end = text.firstRange(of: "\r\n\r\n") {
                return String(text[..<end.lowerBound])
            }
        }
        return nil
    }

    fileprivate static func send(_ connection: Int32, status: Int, body: String) {
        let reason = [200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"][status] ?? "Error"
        let bodyBytes = Array(body.utf8)
        let contentType = body.hasPrefix("<!doctype") ? "text/html; charset=utf-8" : "text/plain; charset=utf-8"
        let head =
            "HTTP/1.1 \(status) \(reason)\r\nContent-Type: \(contentType)\r\nContent-Length: \(bodyBytes.count)\r\n"
            + "Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nConnection: close\r\n\r\n"
        var bytes = Array(head.utf8) + bodyBytes
        while !bytes.isEmpty {
            let sent = Descriptor.retryingInterrupted {
                bytes.withUnsafeBytes { system_send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            guard sent > 0 else { return }
            bytes.removeFirst(sent)
        }
    }
}

extension FormEncoding {
    /// Parse `a=b&c=d` (percent- and `+`-decoding); the first occurrence of a name wins.
    public static func decode(_ query: String) -> [String: String] {
        var result: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = unescape(String(parts[0]))
            let value = parts.count > 1 ? unescape(String(parts[1])) : ""
            if result[name] == nil { result[name] = value }
        }
        return result
    }

    public static func unescape(_ text: String) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                if let high = iterator.next(), let low = iterator.next(), let h = hex(high), let l = hex(low) {
                    bytes.append(h << 4 | l)
                } else {
                    bytes.append(byte)
                }
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
