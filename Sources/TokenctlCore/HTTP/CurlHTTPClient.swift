// Every libcurl call of tokenctl lives in this file. libcurl is loaded on first use
// (Sources/CCurl), so runs that never speak HTTP never map it.
import CCurl
import Dispatch
import Synchronization
import TokenctlEssentials

/// HTTP over libcurl: TLS verification always on, no redirects, http/https only,
/// connect and total timeouts, and a cap on the response size.
public struct CurlHTTPClient: HTTPClient {
    // The memberwise initializer is the one: every setting but the user agent has its default here.

    /// The profile's CA bundle and proxy keys (`NetworkRoute` resolves them per request).
    public var network = NetworkSettings()
    /// Where the proxy and CA variables are read (`NetworkRoute`).
    public var environment: Environment = .process
    /// `-v`: told the route of each request (proxy and CA, never credentials).
    public var narrate: (@Sendable (String) -> Void)? = nil
    /// The passwords of the profiles' `proxy_user`s (nil: none can be read).
    public var proxyPasswords: ProxyPasswords? = nil
    /// A PEM bundle of extra trusted CAs (private PKI), or nil for the system store.
    public var caBundle: String? {
        get { network.caBundle }
        set { network.caBundle = newValue }
    }
    public var connectTimeout: Double = 10
    public var maximumResponseBytes: Int = 1 << 20
    public var userAgent: String

    public func send(_ request: HTTPRequest, timeout: Double) async throws(HTTPTransportError) -> HTTPResponse {
        try await send(request, timeout: timeout, connectTimeout: min(connectTimeout, timeout))
    }

    public func send(_ request: HTTPRequest, timeout: Double, connectTimeout: Double) async throws(HTTPTransportError)
        -> HTTPResponse
    {
        // libcurl's easy interface blocks; keep it off Swift's cooperative thread pool. The
        // worker lets go of the request before the caller resumes: a key inside the TPM that the
        // request loaded is flushed then, not when the worker's closure happens to be freed
        // (after a command that exits at once, never: a TPM without a resource manager keeps it).
        let transfer = Transfer(request)
        let result: Result<HTTPResponse, HTTPTransportError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let result = Result { () throws(HTTPTransportError) -> HTTPResponse in
                    try self.perform(
                        transfer.request, timeout: timeout, connectTimeout: min(self.connectTimeout, connectTimeout))
                }
                transfer.finish()
                continuation.resume(returning: result)
            }
        }
        return try result.get()
    }

    /// A request handed to the worker thread, dropped by it when the transfer ends.
    private final class Transfer: @unchecked Sendable {
        private var held: HTTPRequest?
        init(_ request: HTTPRequest) { held = request }
        /// Read by the worker only, before `finish`.
        var request: HTTPRequest { held! }
        func finish() { held = nil }
    }

    /// Close the connections this process keeps for its next request. Call it before this
    /// process runs another program (`exec`, a browser): libcurl opens its sockets without
    /// close-on-exec, so the program would inherit a connection to the server and libcurl's
    /// internal socket pair.
    public static func closeKeptConnections() {
        CurlHandlePool.shared.closeAll()
    }

    func perform(_ request: HTTPRequest, timeout: Double) throws(HTTPTransportError) -> HTTPResponse {
        try perform(request, timeout: timeout, connectTimeout: min(connectTimeout, timeout))
    }

    func perform(_ request: HTTPRequest, timeout: Double, connectTimeout: Double) throws(HTTPTransportError)
        -> HTTPResponse
    {
        if let failure = tokenctl_curl_load() {
            throw HTTPTransportError(
                .other, "cannot load libcurl (\(TOKENCTL_CURL_SONAME)): \(String(cString: failure)); install libcurl4")
        }
        guard let easy = CurlHandlePool.shared.take() else {
            throw HTTPTransportError(.other, "libcurl could not create a handle")
        }
        defer { CurlHandlePool.shared.give(back: easy) }
        let accumulator = ResponseAccumulator(limit: maximumResponseBytes)
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { tokenctl_curl_slist_free_all(headerList) }
        try setLimits(on: easy, timeout: timeout, connectTimeout: connectTimeout, url: request.url)
        let route = try self.route(to: request.url)
        try Self.apply(route, to: easy, check: Self.check)
        narrate?("\(request.method.rawValue) \(Self.withoutQuery(request.url)): \(route)")
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        defer { errorBuffer.deallocate() }
        try Self.check(tokenctl_curl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer))
        if let certificate = request.clientCertificate { try presentCertificate(certificate, on: easy, Self.check) }
        try Self.setRequest(request, on: easy, headerList: &headerList)
        try Self.collect(into: accumulator, on: easy)

        let code = withExtendedLifetime(accumulator) { tokenctl_curl_easy_perform(easy) }
        guard code == CURLE_OK else {
            throw failure(
                code, accumulator: accumulator, errorBuffer: errorBuffer, route: route, request: request, easy: easy)
        }
        var status = 0
        _ = tokenctl_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        // An http:// URL through a proxy: the proxy's 407 is the response (RFC 9110 §15.5.8).
        if status == 407, route.proxy != nil {
            throw proxyRefused(route)
        }
        return HTTPResponse(status: status, headers: accumulator.headers, body: accumulator.body)
    }

    /// A libcurl call's code as an error, for the calls that fail only when libcurl cannot.
    static func check(_ code: CURLcode) throws(HTTPTransportError) {
        guard code == CURLE_OK else {
            throw HTTPTransportError(.other, "libcurl: \(String(cString: tokenctl_curl_easy_strerror(code)))")
        }
    }

    /// What every request is held to: the URL (http or https only), verified TLS, no redirects
    /// and no .netrc, the timeouts, the response size and the user agent.
    private func setLimits(on easy: UnsafeMutableRawPointer, timeout: Double, connectTimeout: Double, url: String)
        throws(HTTPTransportError)
    {
        let check = Self.check
        try check(tokenctl_curl_setopt_string(easy, CURLOPT_URL, url))
        try check(tokenctl_curl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https"))
        try check(tokenctl_curl_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        try check(tokenctl_curl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0))
        try check(tokenctl_curl_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 1))
        try check(tokenctl_curl_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 2))
        try check(tokenctl_curl_setopt_long(easy, CURLOPT_NETRC, 0))
        try check(
            tokenctl_curl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(min(connectTimeout, timeout) * 1000)))
        )
        try check(tokenctl_curl_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, Int(timeout * 1000))))
        try check(tokenctl_curl_setopt_long(easy, CURLOPT_MAXFILESIZE, maximumResponseBytes))
        try check(tokenctl_curl_setopt_string(easy, CURLOPT_USERAGENT, userAgent))
    }

    /// The request's headers (into `headerList`, which the caller frees after the transfer),
    /// method and body.
    private static func setRequest(
        _ request: HTTPRequest, on easy: UnsafeMutableRawPointer, headerList: inout UnsafeMutablePointer<curl_slist>?
    ) throws(HTTPTransportError) {
        for header in request.headers {
            headerList = tokenctl_curl_slist_append(headerList, "\(header.name): \(header.value)")
        }
        // No "Expect: 100-continue" round trip for small POSTs.
        headerList = tokenctl_curl_slist_append(headerList, "Expect:")
        try check(tokenctl_curl_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList))
        switch request.method {
        case .get:
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_HTTPGET, 1))
        case .post, .delete:
            if request.method == .delete {
                try check(tokenctl_curl_setopt_string(easy, CURLOPT_CUSTOMREQUEST, "DELETE"))
            }
            let body = request.body ?? []
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_POSTFIELDSIZE, body.count))
            // COPYPOSTFIELDS: libcurl keeps its own copy; a Swift buffer's pointer dies after the call.
            try body.withUnsafeBufferPointer { buffer throws(HTTPTransportError) in
                let pointer = UnsafeMutableRawPointer(mutating: buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                try check(tokenctl_curl_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, pointer))
            }
        }
    }

    /// The response's body and headers into `accumulator`, through libcurl's callbacks.
    private static func collect(into accumulator: ResponseAccumulator, on easy: UnsafeMutableRawPointer)
        throws(HTTPTransportError)
    {
        let context = Unmanaged.passUnretained(accumulator).toOpaque()
        try check(tokenctl_curl_setopt_callback(easy, CURLOPT_WRITEFUNCTION, curlWriteBody))
        try check(tokenctl_curl_setopt_pointer(easy, CURLOPT_WRITEDATA, context))
        try check(tokenctl_curl_setopt_callback(easy, CURLOPT_HEADERFUNCTION, curlWriteHeader))
        try check(tokenctl_curl_setopt_pointer(easy, CURLOPT_HEADERDATA, context))
    }

    /// The error of a transfer that failed with `code`: too large a response, what the proxy or
    /// the certificates explain, else the kind of libcurl's code.
    private func failure(
        _ code: CURLcode, accumulator: ResponseAccumulator, errorBuffer: UnsafeMutablePointer<CChar>,
        route: NetworkRoute, request: HTTPRequest, easy: UnsafeMutableRawPointer
    ) -> HTTPTransportError {
        if accumulator.exceeded || code == CURLE_FILESIZE_EXCEEDED {
            return HTTPTransportError(
                .responseTooLarge, "the response from \(request.url) exceeds \(maximumResponseBytes) bytes")
        }
        let detail = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : nil
        if let error = networkError(code, detail: detail, route: route, request: request, easy: easy) {
            return error
        }
        return HTTPTransportError(
            CurlHTTPClient.kind(of: code),
            "\(request.method.rawValue) \(request.url): \(String(cString: tokenctl_curl_easy_strerror(code)))")
    }

    /// The client certificate and its key on this request's TLS connection (RFC 8705 §2), from
    /// memory: libcurl copies both (CURL_BLOB_COPY), and no file of the key is ever written.
    /// libcurl reuses a kept connection only for the same client certificate. A key inside the
    /// TPM goes to libssl at each new connection's handshake instead (CURLOPT_SSL_CTX_FUNCTION),
    /// which libcurl does not compare: such a request gets a connection and a TLS session of
    /// its own, closed after it, so that no other request shares it.
    private func presentCertificate(
        _ certificate: ClientCertificate, on easy: UnsafeMutableRawPointer?,
        _ check: (CURLcode) throws(HTTPTransportError) -> Void
    ) throws(HTTPTransportError) {
        switch certificate.privateKey {
        case .pem(let key):
            try check(tokenctl_curl_setopt_string(easy, CURLOPT_SSLCERTTYPE, "PEM"))
            try check(tokenctl_curl_setopt_string(easy, CURLOPT_SSLKEYTYPE, "PEM"))
            try check(
                certificate.certificatePEM.withUnsafeBytes {
                    tokenctl_curl_setopt_blob(easy, CURLOPT_SSLCERT_BLOB, $0.baseAddress, $0.count)
                })
            try check(
                key.withUnsafeBytes { tokenctl_curl_setopt_blob(easy, CURLOPT_SSLKEY_BLOB, $0.baseAddress, $0.count) }
            )
        case .loaded(let key):
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_FRESH_CONNECT, 1))
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_FORBID_REUSE, 1))
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_SSL_SESSIONID_CACHE, 0))
            let code = tokenctl_curl_setopt_ssl_context(easy, key.installer, key.installerData)
            guard code == CURLE_OK else {
                throw HTTPTransportError(
                    .tls,
                    "this libcurl cannot present a key inside the TPM (CURLOPT_SSL_CTX_FUNCTION: \(String(cString: tokenctl_curl_easy_strerror(code))))"
                )
            }
        case .tpm:
            throw HTTPTransportError(.other, "the client certificate's key inside the TPM was not loaded")
        }
    }
}

// MARK: Proxies and CA bundles

extension CurlHTTPClient {
    /// Sets the route's proxy and CA options. CURLOPT_PROXY is always set ("" for none) and
    /// CURLOPT_NOPROXY is "": libcurl reads the proxy variables itself otherwise, and would send
    /// loopback requests through `http_proxy`. The proxy's credentials go apart from its URL
    /// (CURLOPT_PROXYUSERNAME/PASSWORD), so that libcurl never has them from a URL and no text
    /// that names the proxy carries them.
    static func apply(
        _ route: NetworkRoute, to easy: UnsafeMutableRawPointer,
        check: (CURLcode) throws(HTTPTransportError) -> Void
    ) throws(HTTPTransportError) {
        try check(tokenctl_curl_setopt_string(easy, CURLOPT_PROXY, route.proxy?.url ?? ""))
        try check(tokenctl_curl_setopt_string(easy, CURLOPT_NOPROXY, ""))
        if let proxy = route.proxy {
            if let username = proxy.username {
                try check(tokenctl_curl_setopt_string(easy, CURLOPT_PROXYUSERNAME, username))
            }
            if let password = proxy.password {
                try check(tokenctl_curl_setopt_string(easy, CURLOPT_PROXYPASSWORD, password))
            }
            if proxy.isHTTPS, let proxyCAFile = route.proxyCAFile {
                try check(tokenctl_curl_setopt_string(easy, CURLOPT_PROXY_CAINFO, proxyCAFile))
            }
        }
        if let caFile = route.caFile { try check(tokenctl_curl_setopt_string(easy, CURLOPT_CAINFO, caFile)) }
        if let caDirectory = route.caDirectory {
            try check(tokenctl_curl_setopt_string(easy, CURLOPT_CAPATH, caDirectory))
        }
    }

    /// The error of a failed transfer that the proxy or the certificates explain, with what
    /// to change; nil for the others.
    func networkError(
        _ code: CURLcode, detail: String?, route: NetworkRoute, request: HTTPRequest, easy: UnsafeMutableRawPointer
    ) -> HTTPTransportError? {
        let source = route.proxySource.map { " (from \($0))" } ?? ""
        var connectCode = 0
        _ = tokenctl_curl_getinfo_long(easy, CURLINFO_HTTP_CONNECTCODE, &connectCode)
        if route.proxy != nil, connectCode == 407 {
            return proxyRefused(route)
        }
        if let proxy = route.proxy, code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_PROXY {
            return HTTPTransportError(
                code == CURLE_COULDNT_CONNECT ? .connect : .resolve,
                "cannot reach the proxy \(proxy)\(source): \(detail ?? String(cString: tokenctl_curl_easy_strerror(code)))"
            )
        }
        var proxyVerify = 0
        _ = tokenctl_curl_getinfo_long(easy, CURLINFO_PROXY_SSL_VERIFYRESULT, &proxyVerify)
        if let proxy = route.proxy, proxy.isHTTPS, proxyVerify != 0 {
            return HTTPTransportError(
                .proxyCertificate,
                "the certificate of the proxy \(proxy)\(source) did not verify against \(route.proxyCAFile.map { "the CA file \($0)" } ?? "the system's CA certificates"): \(detail ?? "")",
                advice: HTTPTransportError.proxyCertificateAdvice)
        }
        guard code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE else { return nil }
        let (_, host) = NetworkRoute.schemeAndHost(of: request.url)
        var caInUse = [route.caFile.map { "the CA file \($0)" }, route.caDirectory.map { "the CA directory \($0)" }]
            .compactMap { $0 }.joined(separator: " and ")
        if caInUse.isEmpty {
            var defaultFile: UnsafePointer<CChar>?
            _ = tokenctl_curl_getinfo_string(easy, CURLINFO_CAINFO, &defaultFile)
            caInUse = "the system's CA file " + (defaultFile.map { String(cString: $0) } ?? "(libcurl's default)")
        } else if let caSource = route.caSource {
            caInUse += " (\(caSource))"
        }
        let advice = HTTPTransportError.certificateAdvice
        if code == CURLE_SSL_CACERT_BADFILE {
            return HTTPTransportError(
                .certificate, "cannot use \(caInUse) to verify \(host): \(detail ?? "")", advice: advice)
        }
        let names = certificateNames(of: request.url, route: route)
        let sent =
            names.map { " The certificate it sent: subject \($0.subject), issuer \($0.issuer)." }
            ?? " (Its certificate could not be read again.)"
        return HTTPTransportError(
            .certificate,
            "the certificate of \(host) did not verify against \(caInUse)\(route.proxy.map { " through the proxy \($0)" } ?? ""): \(detail ?? "verification failed").\(sent)",
            advice: advice)
    }

    /// The subject and issuer of the certificate the server sends, from a second handshake
    /// that verifies nothing and sends no request (CURLOPT_CONNECT_ONLY, CURLOPT_CERTINFO):
    /// libcurl keeps no certificate information of a handshake that failed verification.
    /// Through the same proxy, so a TLS-inspecting proxy's certificate is the one named. A
    /// handle of its own, cleaned up at once: nothing it connected is reused.
    func certificateNames(of url: String, route: NetworkRoute) -> (subject: String, issuer: String)? {
        guard let easy = tokenctl_curl_easy_init() else { return nil }
        defer { tokenctl_curl_easy_cleanup(easy) }
        func check(_ code: CURLcode) throws(HTTPTransportError) {
            guard code == CURLE_OK else { throw HTTPTransportError(.other, "") }
        }
        do {
            try check(tokenctl_curl_setopt_string(easy, CURLOPT_URL, url))
            try check(tokenctl_curl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "https"))
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_NETRC, 0))
            try Self.apply(route, to: easy, check: check)
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 0))
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 0))
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_CERTINFO, 1))
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_CONNECT_ONLY, 1))
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(connectTimeout * 1000))))
            try check(tokenctl_curl_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, Int(connectTimeout * 1000))))
        } catch { return nil }
        guard tokenctl_curl_easy_perform(easy) == CURLE_OK,
            let subject = tokenctl_curl_certinfo_field(easy, 0, "Subject:"),
            let issuer = tokenctl_curl_certinfo_field(easy, 0, "Issuer:")
        else { return nil }
        return (
            TerminalText.short(String(cString: subject).trimmingCharacters(in: " ")),
            TerminalText.short(String(cString: issuer).trimmingCharacters(in: " "))
        )
    }
}

/// Easy handles kept for the next request of this process, with their open connections:
/// `refresh --all` over many profiles at one issuer reuses a few kept-alive connections (and
/// their TLS sessions) instead of connecting once per profile. libcurl reuses a connection only
/// for the same host, port and TLS settings (the CA bundle among them); `curl_easy_reset`
/// clears every option, header and callback of the request before. A handle serves one request
/// at a time; at most `capacity` wait here (the width of `refresh --all`), the rest are closed.
private final class CurlHandlePool: Sendable {
    static let shared = CurlHandlePool()
    static let capacity = 8

    private struct Handles: @unchecked Sendable { var idle: [UnsafeMutableRawPointer] = [] }
    private let handles = Mutex(Handles())

    /// A kept handle, reset, or a new one (nil when libcurl cannot make one).
    func take() -> UnsafeMutableRawPointer? {
        if let kept = handles.withLock({ $0.idle.popLast() }) {
            tokenctl_curl_easy_reset(kept)
            return kept
        }
        return tokenctl_curl_easy_init()
    }

    func closeAll() {
        for handle in handles.withLock({ state in
            defer { state.idle = [] }
            return state.idle
        }) {
            tokenctl_curl_easy_cleanup(handle)
        }
    }

    func give(back handle: UnsafeMutableRawPointer) {
        let kept = handles.withLock { state in
            guard state.idle.count < Self.capacity else { return false }
            state.idle.append(handle)
            return true
        }
        if !kept { tokenctl_curl_easy_cleanup(handle) }
    }
}
