/// Capped exponential backoff with full jitter, inside one overall timeout.
public struct RetryPolicy: Sendable {
    /// The first backoff ceiling, in seconds.
    public var initialDelay: Double
    /// No backoff exceeds this.
    public var maximumDelay: Double
    /// All attempts and waits of one exchange end within this many seconds of its start (the
    /// command's deadline, `TokenEndpointClient.deadline`, may end them sooner).
    public var timeout: Double
    /// A single request never takes longer than this.
    public var attemptTimeout: Double
    /// No wait is shorter than this, so `Retry-After: 0` or a near-zero jitter cannot make
    /// back-to-back requests.
    public var minimumDelay: Double = 0.1
    /// A refresh request that reached the server is given at least this long to be answered,
    /// even past the deadline: abandoning it could leave the server's rotation unseen (the old
    /// refresh token spent, the new one never stored). Connecting stays inside the deadline.
    public var sentRefreshMinimum: Double = 5
    /// At most this many requests per exchange, whatever the deadline.
    public var maximumAttempts: Int = 8
    /// A uniform random number in [0, 1) (injectable for tests).
    public var random: @Sendable () -> Double

    public init(
        initialDelay: Double = 0.5, maximumDelay: Double = 8, timeout: Double = 30, attemptTimeout: Double = 15,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.timeout = timeout
        self.attemptTimeout = attemptTimeout
        self.random = random
    }

    /// The wait before attempt `attempt + 1` (attempt counts from 0): full jitter over
    /// min(maximum, initial × 2^attempt), or the server's Retry-After when it asks for longer
    /// (a `Retry-After: 0` or a negative one never makes requests back to back).
    public func delay(afterAttempt attempt: Int, retryAfter: Double?) -> Double {
        let ceiling = min(maximumDelay, initialDelay * Double(1 << min(attempt, 20)))
        let backoff = max(minimumDelay, random() * ceiling)
        guard let retryAfter, !retryAfter.isNaN else { return backoff }
        return max(backoff, retryAfter)
    }
}
