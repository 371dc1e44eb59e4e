#if canImport(Glibc)
import Glibc
#endif

/// HTTP-date parsing (RFC 9110 §5.6.7): IMF-fixdate, and the obsolete RFC 850 and asctime forms.
public enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since the epoch, or `nil` when `text` is not an HTTP-date.
    public static func parse(_ text: String) -> Double? {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        var day: Int?
        var month: Int?
        var year: Int?
        var time: [Int]?
        switch fields.count {
        case 4 where fields[3] == "GMT":
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            let parts = fields[1].split(separator: "-")
            guard parts.count == 3 else { return nil }
            day = Int(parts[0])
            month = monthIndex(parts[1])
            year = Int(parts[2]).map { $0 < 70 ? 2000 + $0 : ($0 < 100 ? 1900 + $0 : $0) }
            time = clock(fields[2])
        case 6 where fields[5] == "GMT":
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            day = Int(fields[1])
            month = monthIndex(Substring(fields[2]))
            year = Int(fields[3])
            time = clock(fields[4])
        case 5:
            // asctime: Sun Nov  6 08:49:37 1994
            month = monthIndex(Substring(fields[1]))
            day = Int(fields[2])
            time = clock(fields[3])
            year = Int(fields[4])
        default:
            return nil
        }
        // Years past 9999 are no HTTP-date (RFC 9110 has four digits) and would not fit a tm.
        guard let day, let month, let year, let time, (1...31).contains(day), (1970...9999).contains(year) else {
            return nil
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(time[0])
        parts.tm_min = Int32(time[1])
        parts.tm_sec = Int32(time[2])
        let seconds = system_timegm(&parts)
        return seconds < 0 ? nil : Double(seconds)
    }

    /// Format as IMF-fixdate (for test servers and fixtures).
    public static func format(_ seconds: Double) -> String {
        var time = time_t(seconds)
        var parts = tm()
        system_gmtime_r(&time, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return
            "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)].capitalized) \(parts.tm_year + 1900) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    private static func monthIndex(_ name: Substring) -> Int? {
        months.firstIndex(of: name.lowercased())
    }

    private static func clock(_ text: String) -> [Int]? {
        let parts = text.split(separator: ":").compactMap { Int($0) }
        guard parts.count == 3, (0...23).contains(parts[0]), (0...59).contains(parts[1]), (0...60).contains(parts[2])
        else { return nil }
        return parts
    }
}

extension String {
    fileprivate var capitalized: String { prefix(1).uppercased() + dropFirst() }
}
