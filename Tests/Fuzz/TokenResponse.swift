import TokenctlEssentials

@testable import TokenctlCommands
// Fuzz target: a token endpoint's answer, through what the engine does with it:
// RefreshOutcome.classify (status, headers, body: TokenResponse.parse for a 200, the OAuth
// error otherwise, Retry-After for 429/5xx), then the token set built from a success
// (TokenSet(response:): expiry from expires_in or the access token's JWT exp, clock skew from
// Date) stored, read back and printed (Shared/TokenSetUse.swift). The same body also goes to
// DeviceAuthorization.parse (the other JSON a login reads from a token-like endpoint), and the
// answer to what DPoPHTTPClient reads of it (DPoP-Nonce, use_dpop_nonce, invalid_dpop_proof).
//
// Input: optionally a head, then a blank line, then the body:
//   STATUS "\n" (NAME ":" VALUE "\n")* "\n" BODY
// Without a blank line the whole input is the body of a 200 without headers.
// fuzz-extra-sources: Tests/Fuzz/Shared/TokenSetUse.swift Tests/Fuzz/Shared/KnownHTTPDateCrash.swift
@testable import TokenctlCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTokenResponse(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzSupport.bytes(data, size)
    let response = exchange(bytes)
    let now = 1_764_425_000.0
    if FuzzSupport.skipKnown,
        [response.header("date"), response.header("retry-after")].contains(where: {
            $0.map(KnownCrash.yearBeyondInt32) == true
        })
    {
        return -1
    }

    _ = try? TokenResponse.parse(response.body)
    _ = try? DeviceAuthorization.parse(response.body, endpoint: "https://login.example.com/device")
    // The same body as either encoding (GitHub answers form-encoded).
    _ = try? DeviceAuthorization.parse(EndpointAnswer.object(response), endpoint: "https://login.example.com/device")

    // What DPoPHTTPClient reads of any answer: a nonce (NQCHAR only, bounded) and whether the
    // server asks for one or refuses a proof.
    if let nonce = response.header("dpop-nonce").flatMap(DPoPHTTPClient.usableNonce) {
        check(
            nonce.utf8.count <= 1024 && nonce.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E && $0 != 0x22 && $0 != 0x5C },
            "an unusable DPoP nonce accepted")
    }
    _ = DPoPHTTPClient.asksForNonce(response)
    _ = DPoPHTTPClient.refusesProof(response)

    let outcome = RefreshOutcome.classify(.success(response), now: now)
    switch outcome {
    case .success(let token, let serverDate):
        check(
            token.accessToken.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "an access token with whitespace was accepted"
        )
        check(token.tokenType == "Bearer" || token.tokenType == "DPoP", "token type not normalized")
        // A bearer request may not be answered with a DPoP token; a Bearer answer passes.
        do { try DPoPBinding.check(token, key: nil, allowBearer: false) } catch {
            check(
                error == .unrequested && token.tokenType == "DPoP", "a bearer answer refused by the DPoP binding check")
        }
        if let expiresIn = token.expiresIn {
            check(expiresIn.isFinite && expiresIn >= 0, "expires_in out of range accepted")
        }
        let previous = TokenSet(
            accessToken: "old", refreshToken: "r0", expiresAt: now - 1, issuedLifetime: 300, obtainedAt: now - 301)
        for prior in [nil, previous] {
            let set = TokenSet(response: token, receivedAt: now, serverDate: serverDate, previous: prior)
            TokenSetUse.exercise(set, now: now)
        }
    case .unusableTokens(let unusable):
        // The refresh token kept from such an answer is one tokenctl could send again, and the
        // message about the answer never carries it.
        if case .rotated(let refreshToken) = unusable.refreshToken {
            check(
                !refreshToken.isEmpty && refreshToken.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F },
                "an unusable rotated refresh token was kept")
            check(
                refreshToken.utf8.count < 8 || !unusable.description.contains(refreshToken),
                "the message about an unusable answer shows its refresh token")
        }
    case .grantEnded(let reason), .clientRefused(let reason):
        _ = reason.description
        _ = reason.className
    case .transient(let reason, let retryAfter):
        _ = reason.description
        _ = reason.className
        _ = reason.requestMayHaveReachedServer
        if let retryAfter { check(retryAfter >= 0, "negative Retry-After") }
    case .notTheServersVerdict(let answer):
        // Something else in the path answered: never a 2xx, and its words name no token.
        check(!(200..<300).contains(answer.status), "a 2xx taken for another answerer's page")
        _ = answer.description
        _ = answer.advice
        _ = answer.className
        _ = answer.mayPass
    }
    return 0
}

/// The response the input describes, its header lines read by CurlHTTPClient's own
/// ResponseAccumulator.appendHeaderLine, one line at a time as libcurl hands them over: every
/// header as it arrives (Date, Retry-After, WWW-Authenticate, DPoP-Nonce, anything), though
/// tokenctl reads only the first two.
func exchange(_ bytes: [UInt8]) -> HTTPResponse {
    guard let blank = (0..<max(0, bytes.count - 1)).first(where: { bytes[$0] == 0x0A && bytes[$0 + 1] == 0x0A }) else {
        return HTTPResponse(status: 200, headers: [:], body: bytes)
    }
    let head = bytes[..<blank].split(separator: 0x0A, omittingEmptySubsequences: false)
    let statusText = String(decoding: head.first ?? [], as: UTF8.self)
    let status = Int(statusText).map { min(max($0, 0), 999) } ?? 200
    let accumulator = ResponseAccumulator(limit: 1 << 20)
    for line in head.dropFirst() {
        (Array(line) + [0x0D, 0x0A]).withUnsafeBufferPointer { accumulator.appendHeaderLine($0) }
    }
    for (name, value) in accumulator.headers {
        check(name == name.lowercased(), "a header name kept upper case")
        check(value == value.trimmingCharacters(in: " \t\r\n"), "a header value kept surrounding whitespace")
    }
    return HTTPResponse(status: status, headers: accumulator.headers, body: Array(bytes[(blank + 2)...]))
}
