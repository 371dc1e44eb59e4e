#if canImport(Glibc)
import Glibc
#endif

/// Wall-clock time and sleeping, injectable so state-machine tests never sleep. (Waits that a
/// change of the wall clock must not stretch are bounded on TokenctlEssentials' `MonotonicClock`.)
public struct Clock: Sendable {
    /// Seconds since the Unix epoch.
    public var now: @Sendable () -> Double
    /// Suspend for the given number of seconds (throws on cancellation).
    public var sleep: @Sendable (Double) async throws -> Void

    public init(now: @escaping @Sendable () -> Double, sleep: @escaping @Sendable (Double) async throws -> Void) {
        self.now = now
        self.sleep = sleep
    }

    /// The system clock.
    public static let system = Clock(
        now: {
            var spec = timespec()
            system_clock_gettime(CLOCK_REALTIME, &spec)
            return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
        },
        sleep: { seconds in
            guard seconds > 0 else { return }
            try await Task.sleep(nanoseconds: UInt64(seconds.clamped(to: 0...1e6) * 1e9))
        }
    )
}
