/// Whole numbers from doubles that came from outside (servers, files, the keyring, argv),
/// without the trap of `Int(_:)` on NaN, infinities and values beyond the type's range.
extension Int64 {
    /// `value` rounded toward zero, clamped to Int64's range; NaN is 0.
    public init(saturating value: Double) {
        if value.isNaN {
            self = 0
        } else if value >= 9.2e18 {
            self = .max
        } else if value <= -9.2e18 {
            self = .min
        } else {
            self = Int64(value)
        }
    }
}

extension Int {
    /// `value` rounded toward zero, clamped to Int's range; NaN is 0.
    public init(saturating value: Double) {
        self = Int(Int64(saturating: value))
    }
}

extension Double {
    /// This value within `range`; NaN becomes the lower bound.
    public func clamped(to range: ClosedRange<Double>) -> Double {
        isNaN ? range.lowerBound : Swift.min(Swift.max(self, range.lowerBound), range.upperBound)
    }
}
