// Fuzz target: HTTP-date parsing (RFC 9110 §5.6.7: IMF-fixdate, RFC 850, asctime) and
// Retry-After (delay-seconds or an HTTP-date), as a token endpoint's `Date` and `Retry-After`
// headers reach them, and what the token endpoint client then does with the delay.
//
// Input: RETRY-AFTER-VALUE [ "\n" DATE-VALUE ], each decoded as UTF-8 with repair (as header
// bytes from libcurl are).
// fuzz-extra-sources:
@testable import TokenctlCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPDate(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzSupport.bytes(data, size)
    let parts = bytes.split(separator: 0x0A, maxSplits: 1, omittingEmptySubsequences: false)
    let retryAfter = String(decoding: parts[0], as: UTF8.self)
    let date = parts.count > 1 ? String(decoding: parts[1], as: UTF8.self) : nil
    if FuzzSupport.skipKnown, KnownCrash.yearBeyondInt32(retryAfter) || date.map(KnownCrash.yearBeyondInt32) == true {
        return -1
    }

    if let seconds = HTTPDate.parse(retryAfter) {
        check(seconds.isFinite && seconds >= 0, "HTTPDate.parse gave a negative or non-finite time")
    }
    if let date { _ = HTTPDate.parse(date) }
    var headers = ["retry-after": retryAfter]
    if let date { headers["date"] = date }
    let now = 1_764_425_000.0
    for status in [429, 503, 200] {
        let response = HTTPResponse(status: status, headers: headers, body: [])
        if let delay = RefreshOutcome.retryAfter(response, now: now) {
            check(!delay.isNaN && delay >= 0, "Retry-After gave a negative or NaN delay")
        }
        _ = response.serverDate
        // What TokenEndpointClient.exchange does with a transient outcome.
        let outcome = RefreshOutcome.classify(.success(response), now: now)
        if case .transient(let reason, let after) = outcome {
            let delay = RetryPolicy(random: { 0.5 }).delay(afterAttempt: 0, retryAfter: after)
            _ = now + delay >= now + 30
            _ = reason.description
        }
    }
    return 0
}

enum KnownCrash {
    /// Known crash (Tests/Fuzz/Corpus/HTTPDate/crash-year-3000000000): HTTPDate.parse traps at
    /// `Int32(year - 1900)` (HTTPDate.swift:31) for a date that passes its checks with a year
    /// beyond Int32.max + 1900. This mirrors HTTPDate.parse up to that line, exactly.
    static func yearBeyondInt32(_ text: String) -> Bool {
        let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        func month(_ name: Substring) -> Int? { months.firstIndex(of: name.lowercased()) }
        func clock(_ text: String) -> [Int]? {
            let parts = text.split(separator: ":").compactMap { Int($0) }
            guard parts.count == 3, (0...23).contains(parts[0]), (0...59).contains(parts[1]), (0...60).contains(parts[2]) else { return nil }
            return parts
        }
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        var day: Int?, monthIndex: Int?, year: Int?, time: [Int]?
        switch fields.count {
        case 4 where fields[3] == "GMT":
            let parts = fields[1].split(separator: "-")
            guard parts.count == 3 else { return false }
            day = Int(parts[0]); monthIndex = month(parts[1]); year = Int(parts[2]).map { $0 < 70 ? 2000 + $0 : ($0 < 100 ? 1900 + $0 : $0) }
            time = clock(fields[2])
        case 6 where fields[5] == "GMT":
            day = Int(fields[1]); monthIndex = month(Substring(fields[2])); year = Int(fields[3]); time = clock(fields[4])
        case 5:
            monthIndex = month(Substring(fields[1])); day = Int(fields[2]); time = clock(fields[3]); year = Int(fields[4])
        default:
            return false
        }
        guard let day, monthIndex != nil, let year, time != nil, (1...31).contains(day), year >= 1970 else { return false }
        return Int32(exactly: year - 1900) == nil
    }
}
