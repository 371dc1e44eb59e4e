/// ISO 8601 UTC timestamps (`2026-11-29T14:20:16Z`) without Foundation, for the static front's
/// `token --format json`: the same text the engine's `Date.formatted(.iso8601)` prints.
public enum Timestamp {
    /// Whole seconds since the Unix epoch, rounded down, as `YYYY-MM-DDTHH:MM:SSZ`.
    public static func iso8601(_ epochSeconds: Double) -> String {
        // Years 0000 to 9999 only: a stored or served time beyond them is shown at the bound.
        let seconds = min(max(Int64(saturating: epochSeconds.rounded(.down)), -62_167_219_200), 253_402_300_799)
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let yearText = String(year)
        return String(repeating: "0", count: max(0, 4 - yearText.count)) + yearText
            + "-\(two(month))-\(two(day))T\(two(secondOfDay / 3600)):\(two(secondOfDay % 3600 / 60)):\(two(secondOfDay % 60))Z"
    }

    /// The civil date of a day counted from 1970-01-01 (Howard Hinnant's days_from_civil,
    /// inverted). Non-generic and allocation-free: the static front's hit path uses it too.
    @inline(__always)
    public static func civilDate(daysSinceEpoch days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
