// Fuzz target: a hot-cache payload (a `user` key in the kernel user keyring, writable by any
// process of the user) as the engine reads it: HotCacheEntry.decode, then freshness and the
// kernel timeout at several times, and the encode/decode round trip (after one normalization:
// the encoder keeps milliseconds).
//
// Input: the payload bytes.
// fuzz-extra-sources:
import TokenctlEssentials

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHotCacheEntry(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzSupport.bytes(data, size)
    let entry: HotCacheEntry
    do { entry = try HotCacheEntry.decode(bytes) } catch {
        _ = error.description
        return 0
    }
    check(ProfileName.isValid(entry.profile.rawValue), "an invalid profile name decoded")
    for now in [0, entry.obtainedAt, entry.effectiveExpiry - 1, 1_764_425_000, 99_999_999_999] {
        _ = entry.isFresh(at: now, minimumTimeToLive: 60)
        _ = entry.isFresh(at: now, minimumTimeToLive: 0)
        _ = entry.kernelTimeout(at: now)
    }
    _ = entry.keyDescription
    if let expiresAt = entry.expiresAt { _ = Timestamp.iso8601(expiresAt) }
    guard let payload = try? entry.encoded() else { return 0 }
    guard let normalized = try? HotCacheEntry.decode(payload) else {
        fail("HotCacheEntry.decode rejects what encoded() wrote")
    }
    check(
        normalized.accessToken == entry.accessToken && normalized.profile == entry.profile
            && normalized.issuer == entry.issuer && normalized.clientID == entry.clientID,
        "the round trip changed the entry")
    check(abs(normalized.obtainedAt - entry.obtainedAt) <= 0.0005 + 1e-9 * entry.obtainedAt, "obtained_at moved")
    guard let again = try? normalized.encoded() else { fail("a decoded, normalized entry cannot be encoded") }
    check(again == payload, "encoding is not stable after one normalization")
    return 0
}
