import Testing
import TokenctlCore
import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

private func entry(
    profile: String = "default", issuer: String = "https://login.example.com", clientID: String = "cli",
    accessToken: String = "at_0123456789", expiresAt: Double? = 1_764_428_600.25, issuedLifetime: Double? = 3600
) -> HotCacheEntry {
    HotCacheEntry(
        profile: ProfileName(rawValue: profile)!, issuer: issuer, clientID: clientID, accessToken: accessToken,
        tokenType: "Bearer", obtainedAt: 1_764_425_000.25, expiresAt: expiresAt, issuedLifetime: issuedLifetime)
}

private func payload(_ text: String) -> [UInt8] { Array(text.utf8) }

private let validPayload = """
    tokenctl-hotcache-v1
    profile=default
    issuer=https://login.example.com
    client_id=cli
    token_type=Bearer
    obtained_at=1764425000.25
    access_token=at_x

    """

@Suite("Hot cache payload")
struct HotCachePayloadTests {
    @Test("encode → decode round trip, with and without the optional fields")
    func roundTrip() throws {
        for original in [
            entry(), entry(expiresAt: nil, issuedLifetime: nil), entry(clientID: "client with spaces and é"),
        ] {
            #expect(try HotCacheEntry.decode(try original.encoded()) == original)
        }
    }

    @Test("a time that rounds to 1e12 is not written (decode would refuse it): found by the HotCacheEntry fuzz target")
    func timeRoundingToTheLimit() throws {
        let payload = Array(
            "tokenctl-hotcache-v1\nprofile=w\nissuer=httpsa\nclient_id=mFDFFF\ntoken_type=r\nobtained_at=999999999999.9997000\naccess_token=t\n"
                .utf8)
        let decoded = try HotCacheEntry.decode(payload)
        #expect(throws: HotCacheFormatError.self) { _ = try decoded.encoded() }
        var nearLimit = decoded
        nearLimit.obtainedAt = 999_999_999_999.999
        #expect(try HotCacheEntry.decode(try nearLimit.encoded()).obtainedAt == 999_999_999_999.999)
    }

    @Test("the payload is the documented text, access token last")
    func layout() throws {
        let text = String(decoding: try entry().encoded(), as: UTF8.self)
        #expect(
            text == """
                tokenctl-hotcache-v1
                profile=default
                issuer=https://login.example.com
                client_id=cli
                token_type=Bearer
                obtained_at=1764425000.25
                expires_at=1764428600.25
                issued_lifetime=3600.0
                access_token=at_0123456789

                """)
        #expect(try HotCacheEntry.decode(payload(validPayload)).accessToken == "at_x")
    }

    @Test("key description: profile in clear, FNV-1a 64 of profile, issuer and client")
    func keyDescription() {
        let base = entry().keyDescription
        #expect(base == "tokenctl:v1:default:e1a4a6087379dc78")
        #expect(entry(profile: "other").keyDescription != base)
        #expect(entry(issuer: "https://login.example.com/").keyDescription != base)
        #expect(entry(clientID: "cli2").keyDescription != base)
        // The separators keep ("ab", "c") and ("a", "bc") apart.
        #expect(
            entry(issuer: "https://x/a", clientID: "bc").keyDescription
                != entry(issuer: "https://x/ab", clientID: "c").keyDescription)
    }

    @Test("FNV-1a 64 known answers")
    func fnvVectors() {
        for (input, digest) in [("", "cbf29ce484222325"), ("a", "af63dc4c8601ec8c"), ("foobar", "85944171f73967e8")] {
            var hash = FNV1a64()
            hash.update(input)
            #expect(hash.hexDigest == digest)
        }
    }

    @Test("identity check and freshness follow the refresh engine's margin rule")
    func identityAndFreshness() {
        let cached = entry()
        #expect(
            cached.belongs(to: ProfileName(rawValue: "default")!, issuer: "https://login.example.com", clientID: "cli"))
        #expect(
            !cached.belongs(to: ProfileName(rawValue: "default")!, issuer: "https://evil.example.com", clientID: "cli"))
        #expect(
            !cached.belongs(
                to: ProfileName(rawValue: "default")!, issuer: "https://login.example.com", clientID: "cli2"))
        let expiry = cached.expiresAt!
        #expect(cached.isFresh(at: expiry - 61, minimumTimeToLive: 60))
        #expect(!cached.isFresh(at: expiry - 59, minimumTimeToLive: 60))
        #expect(!cached.isFresh(at: expiry - 61, minimumTimeToLive: 120), "--min-ttl larger than what is left misses")
        // 30-second tokens: the margin is capped at half the lifetime.
        let short = entry(expiresAt: 1000, issuedLifetime: 30)
        #expect(short.isFresh(at: 984, minimumTimeToLive: 60))
        #expect(!short.isFresh(at: 986, minimumTimeToLive: 60))
    }

    @Test("kernel timeout: expiry minus the default margin, never 0 (which means forever)")
    func kernelTimeout() {
        let cached = entry()
        let expiry = cached.expiresAt!
        #expect(cached.kernelTimeout(at: expiry - 3600) == 3540)
        #expect(cached.kernelTimeout(at: expiry - 60.5) == nil)
        #expect(cached.kernelTimeout(at: expiry + 10) == nil)
        #expect(entry(expiresAt: 1001, issuedLifetime: 1).kernelTimeout(at: 1000) == nil)
    }

    @Test("values that cannot be stored are refused on encode")
    func unrepresentable() {
        #expect(throws: HotCacheFormatError.self) { try entry(accessToken: "two\nlines").encoded() }
        #expect(throws: HotCacheFormatError.self) { try entry(accessToken: "has space").encoded() }
        #expect(throws: HotCacheFormatError.self) { try entry(issuer: "https://x\n").encoded() }
        #expect(throws: HotCacheFormatError.self) { try entry(clientID: "").encoded() }
        #expect(throws: HotCacheFormatError.self) { try entry(expiresAt: .infinity).encoded() }
        #expect(throws: HotCacheFormatError.self) {
            try entry(accessToken: String(repeating: "a", count: 40_000)).encoded()
        }
    }

    @Test(
        "hostile payloads are rejected, never half-read",
        arguments: [
            "",
            "tokenctl-hotcache-v1",
            "tokenctl-hotcache-v2\nprofile=default\n",
            "tokenctl-hotcache-v1\n",
            "TOKENCTL-HOTCACHE-V1\n" + validPayload.split(separator: "\n", maxSplits: 1)[1],
            validPayload.replacingFirst("access_token=at_x", with: "access_token=at x"),
            validPayload.replacingFirst("access_token=at_x", with: "access_token="),
            validPayload.replacingFirst("access_token=at_x", with: "access_token=at_x\r"),
            validPayload.replacingFirst("access_token=at_x\n", with: ""),
            validPayload.replacingFirst("obtained_at=1764425000.25\n", with: ""),
            validPayload.replacingFirst("obtained_at=1764425000.25", with: "obtained_at=nan"),
            validPayload.replacingFirst("obtained_at=1764425000.25", with: "obtained_at=-1"),
            validPayload.replacingFirst("obtained_at=1764425000.25", with: "obtained_at=1e400"),
            validPayload.replacingFirst("obtained_at=1764425000.25", with: "obtained_at=0x10"),
            validPayload + "expires_at=inf\n",
            validPayload + "access_token=at_y\n",
            validPayload + "refresh_token=rt\n",
            validPayload + "no equals sign\n",
            validPayload + "\n",
            validPayload.replacingFirst("profile=default", with: "profile=../etc"),
            validPayload.replacingFirst("profile=default", with: "profile="),
            validPayload.replacingFirst("client_id=cli", with: "client_id=c\u{1}li"),
            validPayload.replacingFirst(
                "issuer=https://login.example.com", with: "issuer=https://login.example.com\u{7F}"),
            validPayload.replacingFirst("token_type=Bearer", with: "token_type=Bea rer"),
            String(validPayload.dropLast()),
            validPayload.replacingFirst("\n", with: "\r\n"),
        ])
    func hostilePayloads(text: String) {
        #expect(throws: HotCacheFormatError.self) { try HotCacheEntry.decode(payload(text)) }
    }

    @Test("hostile bytes: invalid UTF-8, NUL, oversize")
    func hostileBytes() {
        var invalid = payload(validPayload)
        invalid.insert(0xFF, at: invalid.count - 2)
        #expect(throws: HotCacheFormatError.self) { try HotCacheEntry.decode(invalid) }
        var withNull = payload(validPayload)
        withNull.insert(0, at: withNull.count - 2)
        #expect(throws: HotCacheFormatError.self) { try HotCacheEntry.decode(withNull) }
        let huge = payload(
            validPayload.replacingFirst(
                "access_token=at_x", with: "access_token=" + String(repeating: "a", count: 40_000)))
        #expect(throws: HotCacheFormatError.self) { try HotCacheEntry.decode(huge) }
        #expect(throws: HotCacheFormatError.self) { try HotCacheEntry.decode([UInt8](repeating: 0x0A, count: 100)) }
    }
}

@Suite("ISO 8601 timestamps without Foundation")
struct TimestampTests {
    @Test(
        "known dates, leap day, before the epoch, far future",
        arguments: [
            (0.0, "1970-01-01T00:00:00Z"), (951_782_400, "2000-02-29T00:00:00Z"),
            (1_764_426_016.9, "2025-11-29T14:20:16Z"),
            (-1, "1969-12-31T23:59:59Z"), (4_102_444_800, "2100-01-01T00:00:00Z"),
            (253_402_300_799, "9999-12-31T23:59:59Z"),
        ])
    func vectors(seconds: Double, text: String) {
        #expect(Timestamp.iso8601(seconds) == text)
    }
}

@Suite("Hot cache in the kernel user keyring (this process)")
struct KernelHotCacheTests {
    /// A unique identity, so parallel tests and runs never meet.
    static func uniqueEntry(_ clientID: String) -> HotCacheEntry {
        var cached = entry(issuer: "https://unit-test.invalid/\(getpid())/\(clock())", clientID: clientID)
        let now = Double(time(nil))
        cached.obtainedAt = now
        cached.expiresAt = now + 3600
        return cached
    }

    @Test("store → lookup → invalidate; user-only permissions; nothing left behind")
    func roundTrip() throws {
        guard KernelKeyring.isAvailable() else { return } // the fallback is tested end to end
        let cache = HotCache(environment: .fixed([:]))
        #expect(cache.state == .kernelKeyring)
        let cached = Self.uniqueEntry("unit-roundtrip")
        #expect(cache.store(cached, now: cached.obtainedAt))
        #expect(cache.lookup(profile: cached.profile, issuer: cached.issuer, clientID: cached.clientID) == cached)
        #expect(cache.lookup(profile: cached.profile, issuer: cached.issuer, clientID: "other") == nil)

        // An older entry never replaces a newer one; a newer one does.
        var older = cached
        older.accessToken = "at_older"
        older.obtainedAt -= 10
        #expect(!cache.store(older, now: cached.obtainedAt))
        var newer = cached
        newer.accessToken = "at_newer"
        newer.obtainedAt += 10
        #expect(cache.store(newer, now: cached.obtainedAt))
        #expect(
            cache.lookup(profile: cached.profile, issuer: cached.issuer, clientID: cached.clientID)?.accessToken
                == "at_newer")

        cache.invalidate(profile: cached.profile, issuer: cached.issuer, clientID: cached.clientID)
        #expect(cache.lookup(profile: cached.profile, issuer: cached.issuer, clientID: cached.clientID) == nil)
        guard case .success(nil) = KernelKeyring.search(cached.keyDescription) else {
            Issue.record("the key is still reachable from @u after invalidation")
            return
        }
    }

    @Test("the test switch: no reads, no writes, state 'none'")
    func disabled() {
        let cache = HotCache(environment: .fixed([HotCache.disableVariable: "1"]))
        #expect(cache.isDisabled)
        #expect(cache.state == .none)
        let cached = Self.uniqueEntry("unit-disabled")
        #expect(!cache.store(cached, now: cached.obtainedAt))
        #expect(
            HotCache(environment: .fixed([:])).lookup(
                profile: cached.profile, issuer: cached.issuer, clientID: cached.clientID) == nil)
    }
}

extension String {
    fileprivate func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = self.firstRange(of: target) else { return self }
        return String(self[..<range.lowerBound]) + replacement + String(self[range.upperBound...])
    }
}
