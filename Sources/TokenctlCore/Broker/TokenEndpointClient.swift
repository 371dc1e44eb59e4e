import TokenctlEssentials

/// Speaks to a token endpoint: the refresh grant (RFC 6749 §6) with retries of transient
/// failures inside one deadline.
public struct TokenEndpointClient: Sendable {
    public var http: any HTTPClient
    public var clock: Clock
    public var retry: RetryPolicy

    public init(http: any HTTPClient, clock: Clock, retry: RetryPolicy) {
        self.http = http
        self.clock = clock
        self.retry = retry
    }

    /// Exchange `refreshToken` once, retrying only transient failures.
    ///
    /// - Returns: the final outcome and when its response arrived (local clock).
    public func refresh(
        refreshToken: String, endpoint: String, clientID: String, scope: String? = nil, audience: String? = nil,
        resources: [String] = [],
        credentials: ClientCredentials? = nil,
        onAttempt: @Sendable (Int) -> Void = { _ in }
    ) async -> (RefreshOutcome, receivedAt: Double) {
        var fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if let scope { fields.append(("scope", scope)) }
        if let audience { fields.append(("audience", audience)) }
        for resource in resources { fields.append(("resource", resource)) }
        let client = credentials ?? ClientCredentials(clientID: clientID)
        return await exchange(client.formRequest(endpoint, fields), completesOnceSent: true, onAttempt: onAttempt)
    }

    /// Send one token request (any grant), retrying only transient failures inside the deadline.
    ///
    /// - Parameter completesOnceSent: a request that spends a rotating refresh token: once
    ///   connected, it gets at least `RetryPolicy.sentRefreshMinimum` to be answered.
    public func exchange(
        _ request: HTTPRequest, completesOnceSent: Bool = false, onAttempt: @Sendable (Int) -> Void = { _ in }
    ) async -> (RefreshOutcome, receivedAt: Double) {
        let start = clock.now()
        let end = min(start + retry.deadline, retry.commandDeadline?.time ?? .infinity)
        var attempt = 0
        while true {
            let remaining = end - clock.now()
            guard remaining > 0 else {
                return (.transient(.deadlineExceeded("no time left"), retryAfter: nil), clock.now())
            }
            onAttempt(attempt)
            let result: Result<HTTPResponse, HTTPTransportError>
            let bounded = min(retry.attemptTimeout, remaining)
            let timeout = completesOnceSent ? max(bounded, retry.sentRefreshMinimum) : bounded
            do { result = .success(try await http.send(request, timeout: timeout, connectTimeout: bounded)) } catch {
                result = .failure(error)
            }
            let receivedAt = clock.now()
            let outcome = RefreshOutcome.classify(result, now: receivedAt)
            guard case .transient(let reason, let retryAfter) = outcome else { return (outcome, receivedAt) }
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
