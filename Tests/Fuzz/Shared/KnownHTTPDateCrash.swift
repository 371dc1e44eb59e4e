// The predicate of a known crash, shared by the targets that reach HTTPDate.parse (HTTPDate,
// TokenResponse through the Date and Retry-After headers). Used only with --skip-known.
enum KnownCrash {
    /// Known crash (crash-year-* in the HTTPDate and TokenResponse corpora): HTTPDate.parse traps at
    /// `Int32(year - 1900)` (HTTPDate.swift:31) for a date that passes its checks with a year
    /// beyond Int32.max + 1900. This mirrors HTTPDate.parse up to that line, exactly.
    static func yearBeyondInt32(_ text: String) -> Bool {
        let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        func month(_ name: Substring) -> Int? { months.firstIndex(of: name.lowercased()) }
        func clock(_ text: String) -> [Int]? {
            let parts = text.split(separator: ":").compactMap { Int($0) }
            guard parts.count == 3, (0...23).contains(parts[0]), (0...59).contains(parts[1]),
                (0...60).contains(parts[2])
            else { return nil }
            return parts
        }
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        var day: Int?
        var monthIndex: Int?
        var year: Int?
        var time: [Int]?
        switch fields.count {
        case 4 where fields[3] == "GMT":
            let parts = fields[1].split(separator: "-")
            guard parts.count == 3 else { return false }
            day = Int(parts[0])
            monthIndex = month(parts[1])
            year = Int(parts[2]).map { $0 < 70 ? 2000 + $0 : ($0 < 100 ? 1900 + $0 : $0) }
            time = clock(fields[2])
        case 6 where fields[5] == "GMT":
            day = Int(fields[1])
            monthIndex = month(Substring(fields[2]))
            year = Int(fields[3])
            time = clock(fields[4])
        case 5:
            monthIndex = month(Substring(fields[1]))
            day = Int(fields[2])
            time = clock(fields[3])
            year = Int(fields[4])
        default:
            return false
        }
        guard let day, monthIndex != nil, let year, time != nil, (1...31).contains(day), year >= 1970 else {
            return false
        }
        return Int32(exactly: year - 1900) == nil
    }
}
