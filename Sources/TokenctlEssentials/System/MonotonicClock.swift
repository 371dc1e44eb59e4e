#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Seconds on the monotonic clock (clock_gettime(2), CLOCK_MONOTONIC): for bounding waits,
/// which a change of the wall clock must not stretch or cut short. The one monotonic clock of
/// the front and the engine; wall-clock time, which tokens and deadlines are stated in, is
/// TokenctlCore's `Clock`.
public enum MonotonicClock {
    public static func now() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}
