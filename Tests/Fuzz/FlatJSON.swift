// Fuzz target: the flat JSON reader (FlatJSONObject) and TokenSet.decode, which reads the secret
// stored in the Secret Service with it. Checks the contract TokenSet.decode documents: whatever it
// accepts, JSONDecoder (the Codable rules it replaces) accepts too, with the same token set; and
// a decoded set goes through what the engine does with one (Shared/TokenSetUse.swift).
//
// Input: the JSON bytes.
// fuzz-extra-sources: Tests/Fuzz/Shared/TokenSetUse.swift Sources/tokenctl/Output.swift Sources/tokenctl/CommandSpecs.swift
@testable import TokenctlCore
import TokenctlEssentials

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFlatJSON(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzSupport.bytes(data, size)
    if let object = try? FlatJSONObject(parsing: bytes) {
        for member in object.members {
            check(object.member(member.key) != nil, "a parsed member cannot be looked up")
            _ = try? object.string(member.key)
            _ = try? object.number(member.key)
            _ = try? object.bool(member.key)
        }
    }
    let set: TokenSet
    do { set = try TokenSet.decode(bytes) } catch {
        _ = error.description
        return 0
    }
    do {
        let codable = try JSONDecoder().decode(TokenSet.self, from: Data(bytes))
        check(codable == set, "TokenSet.decode and JSONDecoder read different token sets")
    } catch {
        fail("TokenSet.decode accepts what JSONDecoder rejects: \(error)")
    }
    TokenSetUse.exercise(set, now: 1_764_425_000)
    return 0
}
