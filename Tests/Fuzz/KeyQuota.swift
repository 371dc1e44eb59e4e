// Fuzz target: `/proc/key-users` as `doctor`'s journal-quota check reads it
// (`KernelKeyQuota.parse`), and the summary and room it then reports.
//
// Input: UID-LINE "\n" FILE, where UID-LINE is the uid looked up in decimal (an unparsable one
// means uid 0) and FILE the rest, decoded as UTF-8 with repair (as `FileIO.readFile` gives it).
@testable import TokenctlCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeyQuota(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzSupport.bytes(data, size)
    let parts = bytes.split(separator: 0x0A, maxSplits: 1, omittingEmptySubsequences: false)
    let uid = Int(String(decoding: parts[0], as: UTF8.self)) ?? 0
    let text = parts.count > 1 ? String(decoding: parts[1], as: UTF8.self) : ""
    guard let quota = KernelKeyQuota.parse(keyUsers: text, uid: uid) else { return 0 }
    // A quota the parser believed: no negative use, positive limits, room never negative.
    check(quota.usedBytes >= 0 && quota.usedKeys >= 0, "a negative use was believed")
    check(quota.maximumBytes > 0 && quota.maximumKeys > 0, "a zero or negative limit was believed")
    check(quota.bytesLeft >= 0 && quota.keysLeft >= 0, "negative room")
    check(quota.bytesLeft <= quota.maximumBytes && quota.keysLeft <= quota.maximumKeys, "more room than the limit")
    check(quota.summary.contains(" of "), "a summary without its figures")
    // The line it came from names this uid, and parsing again gives the same answer.
    let namesUID = text.split(separator: "\n").contains { line in
        guard let first = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).first, first.last == ":" else {
            return false
        }
        return Int(first.dropLast()) == uid
    }
    check(namesUID, "a quota from a line of another uid")
    check(KernelKeyQuota.parse(keyUsers: text, uid: uid) == quota, "parsing is not deterministic")
    return 0
}
