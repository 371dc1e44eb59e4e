/// What the hot cache keeps for one profile in the kernel user keyring: the access token and
/// just enough to decide whether it may be served, plus the identity it belongs to. Never the
/// refresh token or the ID token: a hit needs neither.
///
/// The payload is text, one `key=value` a line after a version line, so `keyctl print` shows
/// what is cached. The decoder trusts nothing: any key in the user keyring can be written by any
/// process of the user, so a payload that is not exactly this format is a miss.
///
/// ```
/// tokenctl-hotcache-v1
/// profile=default
/// issuer=https://login.example.com
/// client_id=cli
/// token_type=Bearer
/// obtained_at=1764425000.25
/// expires_at=1764428600.25        (absent when the server gave no expiry; `never` when it
///                                  stated none and nothing can renew the token)
/// issued_lifetime=3600            (absent when the server gave no expiry)
/// access_token=eyJhbGciOi...
/// ```
///
/// The token of a `TokenTarget` other than the session's own (`token --scope …`) has its own
/// key and adds its target, in canonical form, before `access_token`: `scope=a b`,
/// `audience=api`, `resource=https://r1 https://r2` (each only when given).
public struct HotCacheEntry: Equatable, Sendable {
    public var profile: ProfileName
    public var issuer: String
    public var clientID: String
    public var accessToken: String
    public var tokenType: String
    public var obtainedAt: Double
    public var expiresAt: Double?
    public var issuedLifetime: Double?
    /// What the token is for: the session's own scope, or a call's narrower one.
    public var target: TokenTarget
    /// The server stated no expiry and no refresh token can renew the token (`expires_at=never`,
    /// `TokenSet.statesNoExpiry`): served until a server rejects it. With `expiresAt` nil and
    /// this false, the assumed lifetime applies (`AccessTokenLifetime`).
    public var statesNoExpiry: Bool

    public init(
        profile: ProfileName, issuer: String, clientID: String, accessToken: String, tokenType: String,
        obtainedAt: Double, expiresAt: Double?, issuedLifetime: Double?, target: TokenTarget = .session,
        statesNoExpiry: Bool = false
    ) {
        self.target = target
        self.statesNoExpiry = statesNoExpiry && expiresAt == nil
        self.profile = profile
        self.issuer = issuer
        self.clientID = clientID
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.obtainedAt = obtainedAt
        self.expiresAt = expiresAt
        self.issuedLifetime = issuedLifetime
    }

    /// The first line of every payload; a new layout gets a new version and old keys become misses.
    public static let versionLine = "tokenctl-hotcache-v1"
    /// The largest payload written or read.
    public static let maximumPayloadSize = 32 * 1024 - 1 // the kernel's limit for a `user` key

    // MARK: Identity and naming

    /// The key's description in the user keyring: `tokenctl:v1:<profile>:<16 hex digits>`, the hex
    /// being FNV-1a 64 of profile, issuer and client ID (and the target's digest, for a target
    /// other than the session's own). Not secret and not a security boundary (the payload's
    /// identity is checked on every read); it keeps profiles, issuers, clients and targets from
    /// sharing a key. Written by `HotPath.keyDescription`, the one implementation the front's
    /// hit uses too.
    public static func keyDescription(
        profile: ProfileName, issuer: String, clientID: String, target: TokenTarget = .session
    ) -> String {
        var (profile, issuer, clientID) = (profile.rawValue, issuer, clientID)
        let digest = target.digest
        let capacity = profile.utf8.count + 64
        return profile.withUTF8 { p in
            issuer.withUTF8 { i in
                clientID.withUTF8 { c in
                    String(unsafeUninitializedCapacity: capacity) { buffer in
                        HotPath.keyDescription(
                            profile: p, issuer: i, clientID: c, targetDigest: digest, into: buffer.baseAddress!,
                            capacity: capacity) ?? 0
                    }
                }
            }
        }
    }

    /// The prefix every key of `profile` starts with (to drop them all at logout).
    public static func keyPrefix(profile: ProfileName) -> String { "tokenctl:v1:" + profile.rawValue + ":" }

    public var keyDescription: String {
        HotCacheEntry.keyDescription(profile: profile, issuer: issuer, clientID: clientID, target: target)
    }

    /// Whether this entry was cached for exactly this profile, issuer, client and target.
    public func belongs(to profile: ProfileName, issuer: String, clientID: String, target: TokenTarget = .session)
        -> Bool
    {
        self.profile == profile && self.issuer == issuer && self.clientID == clientID && self.target == target
    }

    // MARK: Freshness (the same rule as the refresh engine's)

    /// `.infinity` with no stated expiry.
    public var effectiveExpiry: Double {
        AccessTokenLifetime.effectiveExpiry(expiresAt: expiresAt, obtainedAt: obtainedAt, renewable: !statesNoExpiry)
    }

    public func isFresh(at now: Double, minimumTimeToLive: Double) -> Bool {
        AccessTokenLifetime.isFresh(
            expiresAt: expiresAt, issuedLifetime: issuedLifetime, obtainedAt: obtainedAt, at: now,
            minimumTimeToLive: minimumTimeToLive,
            renewable: !statesNoExpiry)
    }

    /// How long the kernel keeps an entry with no stated expiry: a day, after which the engine
    /// reads the Secret Service again (and caches it again), so no key lives on unbounded.
    public static let noExpiryKernelTimeout: UInt32 = 86400

    /// Seconds the kernel should keep the key: until expiry minus the default refresh margin,
    /// rounded down; `nil` when that is under a second (the kernel would read 0 as "forever").
    public func kernelTimeout(at now: Double) -> UInt32? {
        if statesNoExpiry { return HotCacheEntry.noExpiryKernelTimeout }
        let margin = AccessTokenLifetime.refreshMargin(
            issuedLifetime: issuedLifetime, minimumTimeToLive: AccessTokenLifetime.defaultMinimumTimeToLive)
        let seconds = (effectiveExpiry - margin - now).rounded(.down)
        guard seconds >= 1 else { return nil }
        return UInt32(min(seconds, Double(UInt32.max)))
    }

    // MARK: Encoding

    /// The payload bytes.
    ///
    /// - Throws: `HotCacheFormatError` when a field cannot be represented (a line break in a
    ///   value, a token outside the visible ASCII range, a payload over the size limit).
    public func encoded() throws(HotCacheFormatError) -> [UInt8] {
        var fields: [(String, String)] = [
            ("profile", profile.rawValue),
            ("issuer", issuer),
            ("client_id", clientID),
            ("token_type", tokenType),
            ("obtained_at", try HotCacheEntry.number(obtainedAt, "obtained_at")),
        ]
        if let expiresAt { fields.append(("expires_at", try HotCacheEntry.number(expiresAt, "expires_at"))) }
        if statesNoExpiry { fields.append(("expires_at", HotCacheEntry.never)) }
        if let issuedLifetime {
            fields.append(("issued_lifetime", try HotCacheEntry.number(issuedLifetime, "issued_lifetime")))
        }
        if let scope = target.scopeField { fields.append(("scope", scope)) }
        if let audience = target.audience { fields.append(("audience", audience)) }
        if let resource = target.resourceField { fields.append(("resource", resource)) }
        fields.append(("access_token", accessToken))

        var bytes = Array(HotCacheEntry.versionLine.utf8) + [0x0A]
        for (key, value) in fields {
            try HotCacheEntry.validate(key, value)
            bytes += Array(key.utf8) + [UInt8(ascii: "=")] + Array(value.utf8) + [0x0A]
        }
        guard bytes.count <= HotCacheEntry.maximumPayloadSize else { throw .tooLarge(bytes.count) }
        return bytes
    }

    /// Parse a payload read from the keyring.
    ///
    /// - Throws: `HotCacheFormatError` for anything but a well-formed payload of this version.
    // One function on purpose: one pass over the payload's lines, each field checked where it is
    // read, in the order of the hit's reader it must agree with (HotPath.cachedToken; the fuzz
    // target HotPathDifferential compares the two).
    public static func decode(_ bytes: [UInt8]) throws(HotCacheFormatError) -> HotCacheEntry {
        // The syntax is HotCacheEntrySyntax's, the one reader the front's hit uses too; here each
        // field gets its meaning. Fields by position in `fieldKeys`: no Dictionary, whose String
        // hashing would page in about a megabyte of the runtime on the front's hit path.
        var values = [String?](repeating: nil, count: fieldKeys.count)
        var fieldError: HotCacheFormatError?
        let failure = bytes.withUnsafeBufferPointer { payload in
            HotCacheEntrySyntax.scan(payload) { keyRange, valueRange in
                do throws(HotCacheFormatError) {
                    guard let key = text(payload[keyRange]), let value = text(payload[valueRange]) else {
                        throw .malformed("not UTF-8")
                    }
                    guard let position = fieldKeys.firstIndex(of: key) else { throw .malformed("unknown field") }
                    guard values[position] == nil else { throw .malformed("a field given twice") }
                    try validate(key, value)
                    values[position] = value
                    return true
                } catch {
                    fieldError = error
                    return false
                }
            }
        }
        switch failure {
        case .tooLarge(let count)?: throw .tooLarge(count)
        case .noFinalLineBreak?: throw .malformed("no final line break")
        case .unsupportedVersion?: throw .unsupportedVersion
        case .lineWithoutEquals?: throw .malformed("a line without '='")
        case nil: break
        }
        if let fieldError { throw fieldError }
        func field(_ key: String) -> String? { fieldKeys.firstIndex(of: key).flatMap { values[$0] } }
        func required(_ key: String) throws(HotCacheFormatError) -> String {
            guard let value = field(key) else { throw .malformed("'" + key + "' is missing") }
            return value
        }
        func number(_ key: String) throws(HotCacheFormatError) -> Double? {
            guard let text = field(key) else { return nil }
            // Plain decimals only: Double(_:) would also take "0x10", "1e3", "nan" or "inf".
            guard
                text.utf8.allSatisfy({ ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || $0 == UInt8(ascii: ".") }
                ),
                let value = Double(text), value.isFinite, value >= 0, value < 1e12
            else { throw .malformed("'\(key)' is not a time") }
            return value
        }
        guard let profile = ProfileName(rawValue: try required("profile")) else {
            throw .malformed("invalid profile name")
        }
        guard let obtainedAt = try number("obtained_at") else { throw .malformed("'obtained_at' is missing") }
        var target = TokenTarget.session
        if field("scope") != nil || field("audience") != nil || field("resource") != nil {
            guard
                let stored = TokenTarget(
                    storedScope: field("scope"), audience: field("audience"), resource: field("resource"))
            else {
                throw .malformed("not a canonical target")
            }
            target = stored
        }
        let never = field("expires_at") == HotCacheEntry.never
        let expiresAt = never ? nil : try number("expires_at")
        return HotCacheEntry(
            profile: profile, issuer: try required("issuer"), clientID: try required("client_id"),
            accessToken: try required("access_token"), tokenType: try required("token_type"),
            obtainedAt: obtainedAt,
            expiresAt: expiresAt, issuedLifetime: try number("issued_lifetime"), target: target,
            statesNoExpiry: never)
    }

    /// `expires_at`'s value for a token with no stated expiry.
    public static let never = "never"

    private static let fieldKeys: [String] = [
        "profile", "issuer", "client_id", "token_type", "obtained_at", "expires_at", "issued_lifetime", "access_token",
        "scope", "audience", "resource",
    ]

    /// Bytes as a String only if they are valid UTF-8 (no silent replacement characters).
    private static func text(_ bytes: some Collection<UInt8>) -> String? {
        let string = String(decoding: bytes, as: UTF8.self)
        return string.utf8.elementsEqual(bytes) ? string : nil
    }

    private static func number(_ value: Double, _ key: String) throws(HotCacheFormatError) -> String {
        // Milliseconds are plenty, and keep `description` out of exponent notation (1e-05). The
        // range is checked after rounding: 999999999999.9997 rounds to 1e12, which `decode`
        // refuses (found by the HotCacheEntry fuzz target).
        let rounded = (value * 1000).rounded() / 1000
        guard rounded.isFinite, rounded >= 0, rounded < 1e12 else { throw .unrepresentable(key) }
        let text = rounded.description
        guard text.utf8.allSatisfy({ ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || $0 == UInt8(ascii: ".") })
        else {
            throw .unrepresentable(key)
        }
        return text
    }

    /// Tokens and the token type: visible ASCII (RFC 6750 §2.1 b64token is a subset). Other
    /// values: non-empty, no control characters (client IDs from a hand-edited file may hold
    /// spaces or non-ASCII letters).
    private static func validate(_ key: String, _ value: String) throws(HotCacheFormatError) {
        guard !value.isEmpty else { throw .malformed("'\(key)' is empty") }
        switch key {
        case "access_token", "token_type":
            guard value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .unrepresentable(key) }
        default:
            guard
                value.unicodeScalars.allSatisfy({
                    $0.value >= 0x20 && $0.value != 0x7F && !(0x80..<0xA0).contains($0.value)
                })
            else {
                throw .unrepresentable(key)
            }
        }
    }
}

/// A payload that is not a hot-cache entry of this version (treated as a miss), or an entry
/// that cannot be written as one.
public enum HotCacheFormatError: Error, Equatable, CustomStringConvertible {
    case unsupportedVersion
    case malformed(String)
    case unrepresentable(String)
    case tooLarge(Int)

    public var description: String {
        switch self {
        case .unsupportedVersion: "not a tokenctl-hotcache-v1 payload"
        case .malformed(let reason): "malformed hot-cache payload: \(reason)"
        case .unrepresentable(let key): "'\(key)' cannot be stored in the hot cache"
        case .tooLarge(let size): "hot-cache payload of \(size) bytes is over the limit"
        }
    }
}

/// FNV-1a, 64 bits: a tiny non-cryptographic hash for key names (not secret, not a MAC).
public struct FNV1a64: Sendable {
    public private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    public init() {}

    public mutating func update(_ bytes: some Sequence<UInt8>) {
        for byte in bytes {
            value ^= UInt64(byte)
            value &*= 0x0000_0100_0000_01B3
        }
    }

    public mutating func update(_ text: String) { update(text.utf8) }

    /// Sixteen lower-case hex digits.
    public var hexDigest: String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
