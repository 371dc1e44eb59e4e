import CKernelKeyring

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The hit's hot-cache key (its description) and payload (HotCacheEntrySyntax), for the profile's
// identity and the target asked for.
extension HotPath {
    // MARK: The key and its payload

    /// `HotCacheEntry.keyDescription` (which calls this), written to `buffer` (not terminated);
    /// its length. `targetDigest`: `TokenTargetSyntax.digest` of a target other than the
    /// session's own, else nil.
    public static func keyDescription(
        profile: Bytes, issuer: Bytes, clientID: Bytes, targetDigest: UInt64? = nil,
        into buffer: UnsafeMutablePointer<UInt8>, capacity: Int
    ) -> Int? {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func update(_ byte: UInt8) {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        update(UInt8(ascii: "v"))
        update(UInt8(ascii: "1"))
        update(0)
        for byte in profile { update(byte) }
        update(0)
        for byte in issuer { update(byte) }
        update(0)
        for byte in clientID { update(byte) }
        if let targetDigest {
            update(0)
            update(UInt8(ascii: "t"))
            for shift in stride(from: 0, to: 64, by: 8) {
                update(UInt8(truncatingIfNeeded: targetDigest >> UInt64(shift)))
            }
        }

        var writer = Writer(buffer, capacity: capacity - 1)
        writer.append("tokenctl:v1:")
        writer.append(profile)
        writer.append(byte: UInt8(ascii: ":"))
        var shift: UInt64 = 64
        while shift > 0 {
            shift -= 4
            let nibble = UInt8((hash >> shift) & 0xF)
            writer.append(byte: nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10)
        }
        return writer.overflowed ? nil : writer.count
    }

    /// The token in a payload that `HotCacheEntry.decode` accepts and that belongs to exactly
    /// this identity and target (the same sets of words; no target fields for the session's own
    /// token); `nil` for anything else and on any doubt.
    // One function on purpose: one pass over the bytes, its state in locals, no allocation and no
    // helper the static front might not inline (see HotPath); a hit's cost is Scripts/bench's (a).
    public static func cachedToken(
        _ payload: Bytes, profile: Bytes, issuer: Bytes, clientID: Bytes, scope: Bytes? = nil, audience: Bytes? = nil,
        resource: Bytes? = nil
    ) -> CachedToken? {
        // profile, issuer, client_id, token_type, obtained_at, expires_at, issued_lifetime, access_token
        var values: (Bytes?, Bytes?, Bytes?, Bytes?, Bytes?, Bytes?, Bytes?, Bytes?)
        // scope, audience, resource
        var targetValues: (Bytes?, Bytes?, Bytes?)
        var accepted = true
        let failure = HotCacheEntrySyntax.scan(payload) { keyRange, valueRange in
            let key = slice(payload, keyRange.lowerBound, keyRange.upperBound)
            let value = slice(payload, valueRange.lowerBound, valueRange.upperBound)
            var token = false
            var duplicate = false
            if value.count == 0 {
                duplicate = true
            } else if isEqual(key, "profile") {
                duplicate = values.0 != nil
                values.0 = value
            } else if isEqual(key, "issuer") {
                duplicate = values.1 != nil
                values.1 = value
            } else if isEqual(key, "client_id") {
                duplicate = values.2 != nil
                values.2 = value
            } else if isEqual(key, "token_type") {
                duplicate = values.3 != nil
                values.3 = value
                token = true
            } else if isEqual(key, "obtained_at") {
                duplicate = values.4 != nil
                values.4 = value
            } else if isEqual(key, "expires_at") {
                duplicate = values.5 != nil
                values.5 = value
            } else if isEqual(key, "issued_lifetime") {
                duplicate = values.6 != nil
                values.6 = value
            } else if isEqual(key, "access_token") {
                duplicate = values.7 != nil
                values.7 = value
                token = true
            } else if isEqual(key, "scope") {
                duplicate = targetValues.0 != nil
                targetValues.0 = value
            } else if isEqual(key, "audience") {
                duplicate = targetValues.1 != nil
                targetValues.1 = value
            } else if isEqual(key, "resource") {
                duplicate = targetValues.2 != nil
                targetValues.2 = value
            } else {
                duplicate = true // an unknown field
            }
            // Tokens: visible ASCII (as the decoder checks); other values: printable ASCII
            // (the decoder also takes other Unicode; such entries go to the engine).
            let lowest: UInt8 = token ? 0x21 : 0x20
            var printable = true
            for byte in value where byte < lowest || byte >= 0x7F { printable = false }
            accepted = !duplicate && printable
            return accepted
        }
        guard failure == nil, accepted else { return nil }
        guard let cachedProfile = values.0, ProfileName.isValid(utf8: cachedProfile), isEqual(cachedProfile, profile),
            let cachedIssuer = values.1, isEqual(cachedIssuer, issuer),
            let cachedClientID = values.2, isEqual(cachedClientID, clientID),
            let tokenType = values.3, let accessToken = values.7,
            let obtainedText = values.4, let obtainedAt = time(obtainedText)
        else { return nil }
        // The target: each part present in both with the same words, or in neither; stored in
        // canonical form, as `TokenTarget(storedScope:…)` requires.
        func same(_ cached: Bytes?, _ asked: Bytes?, _ part: TokenTargetSyntax.Part) -> Bool {
            guard let cached, let asked else { return cached == nil && asked == nil }
            guard TokenTargetSyntax.isCanonical(cached, part) else { return false }
            return part == .audience ? isEqual(cached, asked) : TokenTargetSyntax.sameWords(cached, asked)
        }
        guard same(targetValues.0, scope, .scope), same(targetValues.1, audience, .audience),
            same(targetValues.2, resource, .resource)
        else { return nil }
        var expiresAt: Time?
        var statesNoExpiry = false
        if let text = values.5 {
            if isEqual(text, "never") {
                statesNoExpiry = true
            } else {
                guard let value = time(text) else { return nil }
                expiresAt = value
            }
        }
        var issuedLifetime: Time?
        if let text = values.6 {
            guard let value = time(text) else { return nil }
            issuedLifetime = value
        }
        return CachedToken(
            accessToken: accessToken, tokenType: tokenType, obtainedAt: obtainedAt, expiresAt: expiresAt,
            issuedLifetime: issuedLifetime,
            statesNoExpiry: statesNoExpiry)
    }

    /// A payload time as the encoder writes it: 1–11 digits, optionally `.` and 1–3 digits.
    static func time(_ text: Bytes) -> Time? {
        var seconds: Int64 = 0
        var index = 0
        while index < text.count && text[index] != UInt8(ascii: ".") {
            let digit = text[index]
            guard index < 11, digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
            seconds = seconds * 10 + Int64(digit - UInt8(ascii: "0"))
            index += 1
        }
        guard index > 0 else { return nil }
        var milliseconds: Int64 = 0
        if index < text.count {
            let fraction = text.count - index - 1
            guard fraction >= 1, fraction <= 3 else { return nil }
            var scale: Int64 = 100
            for digit in slice(text, index + 1, text.count) {
                guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
                milliseconds += Int64(digit - UInt8(ascii: "0")) * scale
                scale /= 10
            }
        }
        return Time(seconds: seconds, milliseconds: milliseconds)
    }
}
