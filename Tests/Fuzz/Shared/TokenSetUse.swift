import TokenctlEssentials

@testable import TokenctlCommands
// What the engine does with every token set it accepts (from a token response, the Secret
// Service, or the rotation journal), for the targets whose parsers produce one: store it and read
// it back (Secret Service JSON, hot-cache payload, rotation journal), decide freshness, and print
// its expiry and time left as `token`, `token --format json`, `refresh`, `status` and `login` do
// (Output.timestamp and Output.duration, from TokenctlCommands). Round trips are checked: what
// one component writes, the other must read back unchanged.
@testable import TokenctlCore

enum TokenSetUse {
    static let identity = SessionIdentity(
        profile: ProfileName(rawValue: "default")!, issuer: "https://login.example.com", clientID: "cli")

    static func exercise(_ set: TokenSet, now: Double) {
        // The Secret Service secret: JSONEncoder writes it, FlatJSONObject reads it.
        if let stored = try? set.encoded() {
            do {
                let back = try TokenSet.decode(stored)
                check(back == set, "TokenSet.decode(encoded()) differs from the set written")
            } catch {
                fail("TokenSet.decode rejects what TokenSet.encoded() wrote: \(error)")
            }
        }
        // A stored DPoP key: its form, as the token command reads it (no key check, no library).
        if let stored = set.dpopKey {
            let key = try? DPoPKey(stored: stored)
            check((key != nil) == DPoPKey.isStoredForm(stored), "DPoPKey(stored:) and isStoredForm disagree")
            if let key { check(key.stored == stored, "a stored DPoP key does not read back as written") }
        }
        _ = set.isFresh(at: now, minimumTimeToLive: 60)
        _ = set.isFresh(at: now, minimumTimeToLive: 31_536_000, capped: false)
        _ = set.timeLeft(at: now)

        // The hot cache.
        let entry = HotCacheEntry(set, for: identity)
        _ = entry.kernelTimeout(at: now)
        _ = entry.isFresh(at: now, minimumTimeToLive: 60)
        if let payload = try? entry.encoded() {
            do {
                let back = try HotCacheEntry.decode(payload)
                check(
                    back.accessToken == entry.accessToken && back.tokenType == entry.tokenType
                        && back.belongs(to: identity.profile, issuer: identity.issuer, clientID: identity.clientID),
                    "HotCacheEntry.decode(encoded()) changed the token or identity")
            } catch {
                fail("HotCacheEntry.decode rejects what encoded() wrote: \(error)")
            }
        }

        // The rotation journal.
        let journaled = RotationJournal.Entry(
            identity: identity, tokenSet: set, journaledAt: now, pendingReason: "fuzz")
        if let payload = try? RotationJournal.encode(journaled) {
            do {
                let back = try RotationJournal.decode(payload)
                check(back.tokenSet == set && back.identity == identity, "RotationJournal.decode(encode()) differs")
            } catch {
                fail("RotationJournal.decode rejects what encode() wrote: \(error)")
            }
        }

        // `token` (its --verbose line is built on every call), `status`, `refresh`, `login`:
        // Output.duration(tokenSet.timeLeft(at: now)).
        // Known crash (crash-exp-1e19 in the TokenResponse, JWT, FlatJSON and RotationJournal
        // corpora): Output.duration traps converting a time left beyond Int (Output.swift:57).
        if !(FuzzSupport.skipKnown && !FuzzSupport.fitsInt64(set.timeLeft(at: now))) {
            _ = Output.duration(set.timeLeft(at: now))
        }
        // `token --format json` ("expires_at"), `refresh` ("expires ..."): Output.timestamp.
        if let expiresAt = set.expiresAt {
            // Known crash (same inputs): Timestamp.iso8601 traps converting an expiry beyond
            // Int64 seconds (Timestamp.swift:6).
            if FuzzSupport.skipKnown && !FuzzSupport.fitsInt64(expiresAt) { return }
            _ = Output.timestamp(expiresAt)
        }
    }
}
