import Synchronization
import TokenctlCore
import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

// MARK: A lock ThreadSanitizer sees

/// A pthread mutex around a value, for the test doubles. Not Synchronization.Mutex: its futex
/// path runs in the uninstrumented standard library, so `Scripts/test --sanitize thread` cannot
/// see the order it imposes and reports the accesses it guards as races (false positives, once
/// the broker reads the store from several Dispatch threads at a time).
public final class TestLock<State>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var state: State

    public init(_ state: State) {
        self.state = state
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func withLock<T, E: Error>(_ body: (inout State) throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }
}

// MARK: Virtual time

/// A clock whose `sleep` advances virtual time instantly and records the requested delay.
public final class VirtualClock: Sendable {
    private let state: TestLock<(now: Double, sleeps: [Double])>

    public init(now: Double = 1_700_000_000) {
        state = TestLock((now, []))
    }

    public var now: Double { state.withLock { $0.now } }
    public var sleeps: [Double] { state.withLock { $0.sleeps } }

    public func advance(_ seconds: Double) {
        state.withLock { $0.now += seconds }
    }

    public var clock: Clock {
        Clock(
            now: { self.now },
            sleep: { seconds in
                try Task.checkCancellation()
                self.state.withLock {
                    $0.sleeps.append(seconds)
                    $0.now += max(0, seconds)
                }
            })
    }
}

// MARK: A scripted HTTP server

/// An `HTTPClient` that records every request and answers from a handler.
public final class FakeHTTPClient: HTTPClient {
    public typealias Handler =
        @Sendable (_ request: HTTPRequest, _ index: Int) async -> Result<HTTPResponse, HTTPTransportError>

    private let log = Mutex<[(request: HTTPRequest, timeout: Double, connectTimeout: Double)]>([])
    private let handler: Handler

    public init(_ handler: @escaping Handler) {
        self.handler = handler
    }

    /// Answers in order; the last answer repeats.
    public convenience init(script: [Result<HTTPResponse, HTTPTransportError>]) {
        self.init { _, index in script[min(index, script.count - 1)] }
    }

    public var requests: [HTTPRequest] { log.withLock { $0.map(\.request) } }
    public var timeouts: [Double] { log.withLock { $0.map(\.timeout) } }
    public var connectTimeouts: [Double] { log.withLock { $0.map(\.connectTimeout) } }
    public var requestCount: Int { log.withLock { $0.count } }

    public func send(_ request: HTTPRequest, timeout: Double) async throws(HTTPTransportError) -> HTTPResponse {
        try await send(request, timeout: timeout, connectTimeout: timeout)
    }

    public func send(_ request: HTTPRequest, timeout: Double, connectTimeout: Double) async throws(HTTPTransportError)
        -> HTTPResponse
    {
        let index = log.withLock { log in
            log.append((request, timeout, connectTimeout))
            return log.count - 1
        }
        return try await handler(request, index).get()
    }
}

/// Real sleeping, briefly, so that concurrent callers overlap; a cancelled sleep is reported
/// as a transport failure so a test can see that cancellation reached the request.
public func slowNetwork(milliseconds: UInt64 = 50) async -> HTTPTransportError? {
    do { try await Task.sleep(nanoseconds: milliseconds * 1_000_000) } catch {
        return HTTPTransportError(.other, "cancelled in flight")
    }
    return nil
}

// MARK: Fixtures

extension HTTPResponse {
    public static func json(_ status: Int, _ body: String, headers: [String: String] = [:]) -> HTTPResponse {
        var all = ["content-type": "application/json"]
        all.merge(headers) { $1 }
        return HTTPResponse(status: status, headers: all, body: Array(body.utf8))
    }

    public static func text(_ status: Int, _ body: String, contentType: String? = nil, headers: [String: String] = [:])
        -> HTTPResponse
    {
        var all = headers
        if let contentType { all["content-type"] = contentType }
        return HTTPResponse(status: status, headers: all, body: Array(body.utf8))
    }

    /// A 200 token response.
    public static func tokens(
        access: String = "access-2", refresh: String? = "refresh-2", expiresIn: Double? = 3600,
        headers: [String: String] = [:]
    ) -> HTTPResponse {
        var fields = ["\"access_token\": \"\(access)\"", "\"token_type\": \"Bearer\""]
        if let refresh { fields.append("\"refresh_token\": \"\(refresh)\"") }
        if let expiresIn { fields.append("\"expires_in\": \(expiresIn)") }
        return .json(200, "{" + fields.joined(separator: ", ") + "}", headers: headers)
    }

    public static let invalidGrant = HTTPResponse.json(
        400, #"{"error": "invalid_grant", "error_description": "Token is expired"}"#)
}

extension TokenSet {
    /// A stored set obtained at `obtainedAt` that expires `expiresIn` seconds later.
    public static func fixture(
        accessToken: String = "access-1", refreshToken: String? = "refresh-1", obtainedAt: Double,
        expiresIn: Double = 3600
    ) -> TokenSet {
        TokenSet(
            accessToken: accessToken, refreshToken: refreshToken, expiresAt: obtainedAt + expiresIn,
            issuedLifetime: expiresIn, obtainedAt: obtainedAt)
    }
}

/// An unsigned JWT carrying `claims` (a JSON object body).
public func unsignedJWT(_ claims: String) -> String {
    func base64URL(_ text: String) -> String {
        String(
            Data(text.utf8).base64EncodedString().compactMap { (character: Character) -> Character? in
                switch character {
                case "+": "-"
                case "/": "_"
                case "=": nil
                default: character
                }
            })
    }
    return base64URL(#"{"alg":"none","typ":"JWT"}"#) + "." + base64URL(claims) + ".sig"
}

public func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// The decoded form fields of a request body.
public func formFields(_ request: HTTPRequest) -> [String: String] {
    let text = String(decoding: request.body ?? [], as: UTF8.self)
    var fields: [String: String] = [:]
    for pair in text.split(separator: "&") {
        let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        fields[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
    }
    return fields
}
