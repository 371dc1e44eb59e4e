import TokenctlEssentials

@testable import TokenctlCommands
// Fuzz target: a rotation journal payload (a `user` key in the kernel user keyring, writable by
// any process of the user) as RotationJournal.decode reads it; an accepted entry's token set goes
// through what the engine does with one (Shared/TokenSetUse.swift), and the entry must survive
// encode/decode when it can be encoded.
//
// Input: the payload bytes.
// fuzz-extra-sources: Tests/Fuzz/Shared/TokenSetUse.swift
@testable import TokenctlCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRotationJournal(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzSupport.bytes(data, size)
    guard let entry = try? RotationJournal.decode(bytes) else { return 0 }
    _ = entry.isNewer(than: nil)
    _ = entry.isNewer(
        than: TokenSet(
            accessToken: "a", refreshToken: "r", expiresAt: nil, issuedLifetime: nil, obtainedAt: 1_764_425_000))
    _ = RotationJournal.keyDescription(entry.identity)
    if let payload = try? RotationJournal.encode(entry) {
        guard let back = try? RotationJournal.decode(payload) else {
            fail("RotationJournal.decode rejects what encode() wrote")
        }
        check(
            back.identity == entry.identity && back.tokenSet == entry.tokenSet,
            "the journal round trip changed the entry")
    }
    TokenSetUse.exercise(entry.tokenSet, now: 1_764_425_000)
    return 0
}
