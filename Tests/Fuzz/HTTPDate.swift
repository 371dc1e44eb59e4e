// Fuzz target: HTTP-date parsing (RFC 9110 §5.6.7: IMF-fixdate, RFC 850, asctime) and
// Retry-After (delay-seconds or an HTTP-date), as a token endpoint's `Date` and `Retry-After`
// headers reach them, and what the token endpoint client then does with the delay.
//
// Input: RETRY-AFTER-VALUE [ "\n" DATE-VALUE ], each decoded as UTF-8 with repair (as header
// bytes from libcurl are).
// fuzz-extra-sources: Tests/Fuzz/Shared/KnownHTTPDateCrash.swift
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
