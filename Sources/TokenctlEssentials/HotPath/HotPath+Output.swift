import CKernelKeyring

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The hit's decision and output: freshness (AccessTokenLifetime.Rule in integer nanoseconds),
// the rendering of each format, and the byte helpers every part uses.
extension HotPath {
    // MARK: Freshness and output

    static let nanosecondsPerSecond: Int64 = 1_000_000_000
    /// `AccessTokenLifetime.assumedLifetime`.
    static let assumedLifetime: Int64 = 300 * nanosecondsPerSecond
    /// Times further than this from now are left to the engine (keeps nanoseconds in Int64).
    static let horizon: Int64 = 4_000_000_000

    /// Decide freshness (`AccessTokenLifetime.Rule`, in exact integer nanoseconds relative to
    /// `now`) and render the hit as the front always has; `nil` when the token is not fresh
    /// enough, or does not fit.
    // One function on purpose: one pass over the bytes, its state in locals, no allocation and no
    // helper the static front might not inline (see HotPath); a hit's cost is Scripts/bench's (a).
    public static func render(
        _ token: CachedToken, profile: Bytes, request: Request, now: Instant,
        into output: UnsafeMutableBufferPointer<UInt8>
    ) -> Rendered? {
        func relative(_ time: Time) -> Int64? {
            let seconds = time.seconds - now.seconds
            guard seconds >= -horizon, seconds <= horizon else { return nil }
            return seconds * nanosecondsPerSecond + time.milliseconds * 1_000_000
        }
        guard let obtainedAt = relative(token.obtainedAt) else { return nil }
        var expiresAt: Int64?
        if let time = token.expiresAt {
            guard let value = relative(time) else { return nil }
            expiresAt = value
        }
        var lifetime = assumedLifetime
        if let time = token.issuedLifetime {
            guard time.seconds <= horizon else { return nil }
            lifetime = time.seconds * nanosecondsPerSecond + time.milliseconds * 1_000_000
        }
        // AccessTokenLifetime's rule, in integer nanoseconds relative to the whole second of now
        // (nil: no stated expiry, always fresh).
        let effectiveExpiry = AccessTokenLifetime.Rule.effectiveExpiry(
            expiresAt: expiresAt, obtainedAt: obtainedAt, assumedLifetime: assumedLifetime,
            renewable: !token.statesNoExpiry)
        let margin = AccessTokenLifetime.Rule.margin(
            lifetime: lifetime, minimumTimeToLive: request.minimumTimeToLive * nanosecondsPerSecond, half: { $0 / 2 })
        guard AccessTokenLifetime.Rule.isFresh(now: now.nanoseconds, margin: margin, expiry: effectiveExpiry) else {
            return nil
        }

        guard let base = output.baseAddress else { return nil }
        var writer = Writer(base, capacity: output.count)
        if request.verbose, effectiveExpiry == nil {
            // Output.validity's wording.
            writer.append("tokenctl: access token for '")
            writer.append(profile)
            writer.append("' with no expiry stated (kernel keyring cache)\n")
        } else if request.verbose, let effectiveExpiry {
            writer.append("tokenctl: access token for '")
            writer.append(profile)
            writer.append("' valid for ")
            // Output.duration's wording: "45 s", "59 min", "2 h 5 min".
            let total = (effectiveExpiry - now.nanoseconds) / nanosecondsPerSecond
            if total < 120 {
                writer.append(decimal: total)
                writer.append(" s")
            } else if total < 7200 {
                writer.append(decimal: total / 60)
                writer.append(" min")
            } else {
                writer.append(decimal: total / 3600)
                writer.append(" h ")
                writer.append(decimal: total % 3600 / 60)
                writer.append(" min")
            }
            writer.append(" (kernel keyring cache)\n")
            if margin < request.minimumTimeToLive * nanosecondsPerSecond {
                // The engine's wording (TokenBroker.narrateMargin), in whole seconds.
                writer.append("tokenctl: min-ttl ")
                writer.append(decimal: request.minimumTimeToLive)
                writer.append(" s capped at ")
                writer.append(decimal: margin / nanosecondsPerSecond)
                writer.append(" s, half the access token's lifetime (a longer one could never be met)\n")
            }
        }
        let logCount = writer.count
        switch request.format {
        case .raw:
            writer.append(token.accessToken)
        case .header:
            writer.append("Authorization: ")
            writer.append(token.tokenType)
            writer.append(byte: UInt8(ascii: " "))
            writer.append(token.accessToken)
        case .json:
            writer.append("{\"access_token\":")
            writer.appendJSONString(token.accessToken)
            writer.append(",\"token_type\":")
            writer.appendJSONString(token.tokenType)
            if let expiresAt, let time = token.expiresAt {
                writer.append(",\"expires_at\":\"")
                writer.appendISO8601(seconds: time.seconds)
                writer.append("\",\"expires_in\":")
                let left = expiresAt - now.nanoseconds
                writer.append(decimal: left < 0 ? 0 : left / nanosecondsPerSecond)
            }
            writer.append(byte: UInt8(ascii: "}"))
        }
        writer.append(byte: 0x0A)
        guard !writer.overflowed else { return nil }
        return Rendered(logCount: logCount, outputCount: writer.count - logCount)
    }

    static func writeAll(_ descriptor: Int32, _ bytes: UnsafeMutablePointer<UInt8>, _ count: Int) {
        Descriptor.writeAll(descriptor, bytes, count)
    }

    // MARK: Bytes

    static func cString(_ literal: StaticString) -> UnsafePointer<CChar> {
        // String literals are stored NUL-terminated (StaticString.utf8Start's documentation).
        UnsafeRawPointer(literal.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    static func isEqual(cString: UnsafePointer<CChar>, _ literal: StaticString) -> Bool {
        strcmp(cString, HotPath.cString(literal)) == 0
    }

    static func isEqual(_ bytes: Bytes, _ literal: StaticString) -> Bool {
        bytes.count == literal.utf8CodeUnitCount
            && (bytes.count == 0 || memcmp(bytes.baseAddress!, literal.utf8Start, bytes.count) == 0)
    }

    static func isEqual(_ a: Bytes, _ b: Bytes) -> Bool {
        a.count == b.count && (a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0)
    }

    /// ASCII case-insensitive equality with a lower-case literal.
    static func isEqualIgnoringCase(_ bytes: Bytes, _ literal: StaticString) -> Bool {
        guard bytes.count == literal.utf8CodeUnitCount else { return false }
        let expected = literal.utf8Start
        for index in 0..<bytes.count {
            var byte = bytes[index]
            if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { byte += 32 }
            if byte != expected[index] { return false }
        }
        return true
    }

    static func isSpace(_ byte: UInt8) -> Bool { ProfileFileSyntax.isSpace(byte) }

    static func slice(_ bytes: Bytes, _ start: Int, _ end: Int) -> Bytes {
        Bytes(start: bytes.baseAddress.map { $0 + start }, count: end - start)
    }

    /// Appends bytes to a fixed buffer; remembers an overflow instead of writing past it.
    struct Writer {
        let base: UnsafeMutablePointer<UInt8>
        let capacity: Int
        var count = 0
        var overflowed = false

        init(_ base: UnsafeMutablePointer<UInt8>, capacity: Int) {
            self.base = base
            self.capacity = capacity
        }

        mutating func append(byte: UInt8) {
            guard count < capacity else {
                overflowed = true
                return
            }
            base[count] = byte
            count += 1
        }

        mutating func append(_ bytes: Bytes) {
            guard bytes.count <= capacity - count else {
                overflowed = true
                return
            }
            if let source = bytes.baseAddress, bytes.count > 0 {
                (base + count).update(from: source, count: bytes.count)
            }
            count += bytes.count
        }

        mutating func append(_ literal: StaticString) {
            append(Bytes(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
        }

        mutating func append(cString: UnsafePointer<CChar>) {
            append(Bytes(start: UnsafeRawPointer(cString).assumingMemoryBound(to: UInt8.self), count: strlen(cString)))
        }

        /// A non-negative integer in decimal, at least `width` digits (zero-padded).
        mutating func append(decimal value: Int64, width: Int = 1) {
            var digits: (UInt64, UInt64, UInt64) = (0, 0, 0) // 24 bytes of scratch, enough for Int64
            var remaining = UInt64(max(0, value))
            var length = 0
            withUnsafeMutableBytes(of: &digits) { scratch in
                repeat {
                    scratch[23 - length] = UInt8(ascii: "0") + UInt8(remaining % 10)
                    remaining /= 10
                    length += 1
                } while remaining > 0 || length < width
                append(
                    Bytes(start: scratch.baseAddress!.assumingMemoryBound(to: UInt8.self) + 24 - length, count: length))
            }
        }

        /// `Output.jsonString` of a token: visible ASCII, so only `"` and `\` are escaped.
        mutating func appendJSONString(_ bytes: Bytes) {
            append(byte: UInt8(ascii: "\""))
            for byte in bytes {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { append(byte: UInt8(ascii: "\\")) }
                append(byte: byte)
            }
            append(byte: UInt8(ascii: "\""))
        }

        /// `Timestamp.iso8601` of whole seconds (non-negative), `YYYY-MM-DDTHH:MM:SSZ`.
        mutating func appendISO8601(seconds: Int64) {
            let days = seconds / 86_400
            let secondOfDay = seconds % 86_400
            let (year, month, day) = Timestamp.civilDate(daysSinceEpoch: days)
            append(decimal: year, width: 4)
            append(byte: UInt8(ascii: "-"))
            append(decimal: month, width: 2)
            append(byte: UInt8(ascii: "-"))
            append(decimal: day, width: 2)
            append(byte: UInt8(ascii: "T"))
            append(decimal: secondOfDay / 3600, width: 2)
            append(byte: UInt8(ascii: ":"))
            append(decimal: secondOfDay % 3600 / 60, width: 2)
            append(byte: UInt8(ascii: ":"))
            append(decimal: secondOfDay % 60, width: 2)
            append(byte: UInt8(ascii: "Z"))
        }
    }
}
