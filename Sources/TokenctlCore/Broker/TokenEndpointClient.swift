import TokenctlEssentials

/// Speaks to a token endpoint: the refresh grant (RFC 6749 §6) with retries of transient
/// failures inside one deadline.
public struct TokenEndpointClient: Sendable {
    public var http: any HTTPClient
    public var clock: Clock
    public var retry: RetryPolicy
    /// The command's deadline (`--timeout` from its start), nil for none: no attempt or wait
    /// starts past it, whatever `retry.timeout` says (the lock wait may have used part of it).
    public var deadline: Deadline?
    /// Told (`--verbose`) the identifiers an error answer carries for its server's support
    /// (`errorIdentifiers`); never a token.
    public var narrate: (@Sendable (String) -> Void)?
    /// Secrets the session holds besides those the request carries (its access and ID tokens,
    /// its DPoP key): scrubbed, like the request's own, from every text an answer brings
    /// (`SecretRedaction`).
    public var knownSecrets: [String?] = []

    public init(http: any HTTPClient, clock: Clock, retry: RetryPolicy, deadline: Deadline? = nil) {
        self.http = http
        self.clock = clock
        self.retry = retry
        self.deadline = deadline
    }

    /// Exchange `refreshToken` once, retrying only transient failures.
    ///
    /// - Returns: the final outcome and when its response arrived (local clock).
    public func refresh(
        refreshToken: String, endpoint: String, clientID: String, scope: String? = nil, audience: String? = nil,
        resources: [String] = [],
        credentials: ClientCredentials? = nil,
        onAttempt: @Sendable (Int) -> Void = { _ in }
    ) async throws(TokenctlError) -> (RefreshOutcome, receivedAt: Double) {
        var fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if let scope { fields.append(("scope", scope)) }
        if let audience { fields.append(("audience", audience)) }
        for resource in resources { fields.append(("resource", resource)) }
        let client = credentials ?? ClientCredentials(clientID: clientID)
        return try await exchange(
            building: { () throws(TokenctlError) in try client.formRequest(endpoint, fields) }, completesOnceSent: true,
            onAttempt: onAttempt)
    }

    /// The identifiers of an error answer that its server's support asks for: Entra's
    /// `trace_id` and `correlation_id`
    /// (https://learn.microsoft.com/en-us/entra/identity-platform/reference-error-codes), as
    /// "trace_id X, correlation_id Y"; nil when the answer is no OAuth error or carries none.
    /// Only identifier-shaped values (letters, digits and dashes, at most 64) are shown.
    static func errorIdentifiers(_ response: HTTPResponse) -> String? {
        let object = EndpointAnswer.object(response)
        guard EndpointAnswer.error(in: object) != nil, let object else { return nil }
        let shown = ["trace_id", "correlation_id"].compactMap { name -> String? in
            guard let value = object[name]?.stringValue, (1...64).contains(value.utf8.count),
                value.unicodeScalars.allSatisfy({
                    ($0.isASCII && $0.properties.isAlphabetic) || ("0"..."9").contains($0) || $0 == "-"
                })
            else { return nil }
            return "\(name) \(value)"
        }
        return shown.isEmpty ? nil : shown.joined(separator: ", ")
    }

    /// Send one token request (any grant), retrying only transient failures inside the deadline.
    ///
    /// - Parameter completesOnceSent: a request that spends a rotating refresh token: once
    ///   connected, it gets at least `RetryPolicy.sentRefreshMinimum` to be answered.
    public func exchange(
        _ request: HTTPRequest, completesOnceSent: Bool = false, onAttempt: @Sendable (Int) -> Void = { _ in }
    ) async -> (RefreshOutcome, receivedAt: Double) {
        // Cannot throw: the request is made already.
        (try? await exchange(building: { request }, completesOnceSent: completesOnceSent, onAttempt: onAttempt))
            ?? (.transient(.deadlineExceeded("no time left"), retryAfter: nil), clock.now())
    }

    /// `exchange`, with the request made anew for every attempt (`ClientCredentials.formRequest`):
    /// a client assertion is never sent twice (RFC 7523 §3, a fresh `jti`).
    ///
    /// - Throws: when the first request cannot be made (nothing was sent); a later one that
    ///   cannot ends the retries with the last attempt's outcome.
    public func exchange(
        building makeRequest: () throws(TokenctlError) -> HTTPRequest, completesOnceSent: Bool = false,
        onAttempt: @Sendable (Int) -> Void = { _ in }
    ) async throws(TokenctlError) -> (RefreshOutcome, receivedAt: Double) {
        var request = try makeRequest()
        let end = Deadline.after(retry.timeout, clock: clock).earlier(deadline).time
        var attempt = 0
        var lastOutcome: (RefreshOutcome, receivedAt: Double)?
        while true {
            let remaining = end - clock.now()
            guard remaining > 0 else {
                return (.transient(.deadlineExceeded("no time left"), retryAfter: nil), clock.now())
            }
            if attempt > 0 {
                guard let again = try? makeRequest() else { return lastOutcome! }
                request = again
            }
            // The one place a token endpoint's texts enter: scrubbed of every secret known here.
            let redaction = SecretRedaction(request: request).adding(knownSecrets)
            onAttempt(attempt)
            let result: Result<HTTPResponse, HTTPTransportError>
            let bounded = min(retry.attemptTimeout, remaining)
            let timeout = completesOnceSent ? max(bounded, retry.sentRefreshMinimum) : bounded
            do { result = .success(try await http.send(request, timeout: timeout, connectTimeout: bounded)) } catch {
                result = .failure(error)
            }
            let receivedAt = clock.now()
            let outcome = RefreshOutcome.classify(result, now: receivedAt, endpoint: request.url, redaction: redaction)
            if let narrate, case .success(let response) = result, let identifiers = Self.errorIdentifiers(response) {
                narrate(
                    "the token endpoint's error answer (HTTP \(response.status)) carries \(redaction.scrub(identifiers)): the server's support asks for them"
                )
            }
            guard case .transient(let reason, let retryAfter) = outcome else { return (outcome, receivedAt) }
            // A proxy that refuses its credentials, a certificate that does not verify, a proxy
            // password the Secret Service cannot give: the same again will not pass.
            if case .transport(let kind, _, _) = reason, kind.isSettled { return (outcome, receivedAt) }
            lastOutcome = (outcome, receivedAt)
            let delay = retry.delay(afterAttempt: attempt, retryAfter: retryAfter)
            if attempt + 1 >= retry.maximumAttempts || clock.now() + delay >= end {
                // Waiting would pass the deadline: report the transient failure now.
                return (.transient(reason, retryAfter: retryAfter), receivedAt)
            }
            do { try await clock.sleep(delay) } catch {
                return (.transient(reason, retryAfter: retryAfter), receivedAt)
            }
            attempt += 1
        }
    }
}
