/// When something must have ended, as a `Clock` time (seconds since the epoch): a command's
/// `--timeout` counted from its start, or a wait's own bound. One value, passed down, rather
/// than a number of seconds and a start time in each place that waits.
public struct Deadline: Sendable, Equatable, Comparable {
    /// The `Clock` time it falls at.
    public var time: Double

    public init(_ time: Double) {
        self.time = time
    }

    /// `seconds` from now on `clock`.
    public static func after(_ seconds: Double, clock: Clock = .system) -> Deadline {
        Deadline(clock.now() + seconds)
    }

    /// Seconds left on `clock` (negative once past).
    public func remaining(clock: Clock = .system) -> Double {
        time - clock.now()
    }

    /// This deadline or `other`, whichever comes first (this one when `other` is nil): a wait's
    /// own bound within the command's.
    public func earlier(_ other: Deadline?) -> Deadline {
        guard let other else { return self }
        return Swift.min(self, other)
    }

    public static func < (left: Deadline, right: Deadline) -> Bool { left.time < right.time }
}
