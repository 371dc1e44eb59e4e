// Fuzz target: the forward protocol, both directions: a request as the serving side reads it
// (from any process that can open the socket) and an answer as a client reads it (from
// whatever serves the socket it was given). Decoded messages must encode to messages that
// decode to the same value.
//
// Input: the message bytes; the first byte's low bit picks request (0) or answer (1).
// fuzz-extra-sources:
import TokenctlEssentials

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzForwardProtocol(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzSupport.bytes(data, size)
    guard let first = bytes.first else { return 0 }
    let message = Array(bytes.dropFirst())
    if first & 1 == 0 {
        guard let request = try? ForwardRequest.decode(message) else { return 0 }
        check(!request.profile.isEmpty, "a request without a profile decoded")
        check(request.minimumTimeToLive.map { $0 >= 0 && $0 <= 31_536_000 } ?? true, "an absurd min_ttl decoded")
        guard let again = try? ForwardRequest.decode(request.encoded()) else {
            fail("ForwardRequest.decode rejects what encoded() wrote")
        }
        check(again == request, "the request's round trip changed it")
    } else {
        guard let answer = try? ForwardAnswer.decode(message) else { return 0 }
        switch answer {
        case .token(let token):
            check(!token.accessToken.isEmpty && !token.accessToken.utf8.contains(0x20), "an unusable token decoded")
            check(token.obtainedAt >= 0 && token.obtainedAt < 1e12, "an absurd obtained_at decoded")
        case .failure(let failure):
            check(failure.status >= 1 && failure.status <= 125, "an absurd exit status decoded")
        }
        guard let again = try? ForwardAnswer.decode(answer.encoded()) else {
            fail("ForwardAnswer.decode rejects what encoded() wrote")
        }
        _ = again
    }
    return 0
}
