#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CKernelKeyring

/// The static front's `token` hit, at the level of bytes: argv as C strings, the environment
/// through `getenv`, the profile file and the hot-cache payload as raw bytes, the output written
/// with `write(2)`. No String, Array, Dictionary, Double parsing or printing, and nothing generic
/// that is not specialized here: each of those pages in parts of the Swift runtime (metadata
/// instantiation, the demangler, Unicode tables, strtod), which cost a hit more than the work.
///
/// It recognizes only the common shapes and says "not mine" (`nil`/`false`) on any doubt; the
/// front then execs the engine, whose full parser and readers decide exactly as they always do.
/// So everything this accepts is a subset of what `CommandLineParser`, `ProfileConfiguration`,
/// `EndpointURL` and `HotCacheEntry.decode` accept, with the same meaning (tests check both).
///
/// Accepted argv (after argv[0]): `token` once; before or after it `--profile NAME`,
/// `--profile=NAME` (once) and `-v`/`--verbose`; after it `--format raw|header|json` and
/// `--min-ttl N` (decimal digits, at most 31536000), and `--scope S`, `--audience A`,
/// `--resource R` (a target, see `TokenTarget`), each once, also as `--opt=value`.
/// Anything else (`--force`, `--timeout`, `--`, `-h`, `help`, other values) is the engine's.
public enum HotPath {
    public typealias Bytes = UnsafeBufferPointer<UInt8>

    public enum Format: Sendable, Equatable {
        case raw, header, json
    }

    /// What a recognized `token` invocation asks for.
    public struct Request {
        /// `--profile`'s value as given (a C string in argv), else `nil`.
        public var profile: UnsafePointer<CChar>?
        public var format: Format = .raw
        /// Whole seconds.
        public var minimumTimeToLive = Int64(AccessTokenLifetime.defaultMinimumTimeToLive)
        public var verbose = false
        /// `--scope`, `--audience` and `--resource` as given (C strings in argv), else `nil`.
        public var scope: UnsafePointer<CChar>?
        public var audience: UnsafePointer<CChar>?
        public var resource: UnsafePointer<CChar>?

        public init() {}

        /// Whether a target other than the session's own is asked for.
        public var hasTarget: Bool { scope != nil || audience != nil || resource != nil }
    }

    /// A wall-clock time, as `clock_gettime` gives it.
    public struct Instant: Sendable {
        public var seconds: Int64
        public var nanoseconds: Int64

        public init(seconds: Int64, nanoseconds: Int64) {
            self.seconds = seconds
            self.nanoseconds = nanoseconds
        }

        public static func now() -> Instant {
            var spec = timespec()
            clock_gettime(CLOCK_REALTIME, &spec)
            return Instant(seconds: Int64(spec.tv_sec), nanoseconds: Int64(spec.tv_nsec))
        }
    }

    /// A payload time: whole seconds and milliseconds (the encoder writes at most 3 decimals).
    public struct Time: Sendable, Equatable {
        public var seconds: Int64
        public var milliseconds: Int64
    }

    /// The parts of a profile file a hit needs (slices of the file's bytes).
    public struct ProfileIdentity {
        public var issuer: Bytes
        public var clientID: Bytes
    }

    /// The parts of a hot-cache payload a hit needs (slices of the payload's bytes).
    public struct CachedToken {
        public var accessToken: Bytes
        public var tokenType: Bytes
        public var obtainedAt: Time
        public var expiresAt: Time?
        public var issuedLifetime: Time?
    }

    /// Where a hit's output was rendered: the `--verbose` line (maybe empty), then standard
    /// output, back to back from the start of the output buffer.
    public struct Rendered: Equatable {
        public var logCount: Int
        public var outputCount: Int
    }

    // MARK: The whole hit

    static let fileCapacity = 16 * 1024
    static let pathCapacity = Int(PATH_MAX) + 1
    static let descriptionCapacity = 128
    static let payloadCapacity = HotCacheEntry.maximumPayloadSize
    static let outputCapacity = 2 * HotCacheEntry.maximumPayloadSize + 512

    /// Serve `token` from the hot cache if this invocation is a plain hit: write the token (and
    /// the `--verbose` line) and return true. False means nothing was written: run the engine.
    public static func serve(
        argc: Int32, argv: UnsafePointer<UnsafeMutablePointer<CChar>?>, now: Instant,
        environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>?
    ) -> Bool {
        guard let request = recognize(argc: argc, argv: argv) else { return false }
        // One block for every buffer, filled front to back with only what each step produced:
        // a hit's path, file, key name, payload and output usually share one or two pages,
        // and only the pages touched are ever faulted in.
        let total = pathCapacity + fileCapacity + descriptionCapacity + payloadCapacity + outputCapacity
        guard let block = malloc(total)?.assumingMemoryBound(to: UInt8.self) else { return false }
        var payload = block
        var payloadCount = 0
        var output = block
        var rendered: Rendered?
        defer {
            // The token was in these bytes.
            explicit_bzero(payload, payloadCount)
            if let rendered { explicit_bzero(output, rendered.logCount + rendered.outputCount) }
            free(block)
        }

        let path = block
        guard environment(cString(disableVariable)).map({ !isEqual(cString: $0, "1") }) ?? true,
              let profile = profileName(request, environment: environment),
              let pathCount = profileFilePath(profile: profile, environment: environment, into: path, capacity: pathCapacity)
        else { return false }
        let file = path + pathCount + 1
        guard let fileCount = readFile(path, into: file, capacity: fileCapacity),
              let identity = profileIdentity(Bytes(start: file, count: fileCount))
        else { return false }
        let description = file + fileCount
        let target = requestedTarget(request)
        guard let descriptionCount = keyDescription(
            profile: profile, issuer: identity.issuer, clientID: identity.clientID,
            targetDigest: request.hasTarget ? TokenTargetSyntax.digest(scope: target.scope, audience: target.audience, resource: target.resource) : nil,
            into: description, capacity: descriptionCapacity)
        else { return false }
        description[descriptionCount] = 0

        let key = description.withMemoryRebound(to: CChar.self, capacity: descriptionCount + 1) {
            tk_keyctl_search(tk_key_spec_user_keyring(), "user", $0)
        }
        guard key >= 0 else { return false }
        payload = description + descriptionCount + 1
        let size = tk_keyctl_read(key, payload, payloadCapacity)
        guard size > 0 else { return false }
        payloadCount = min(Int(size), payloadCapacity)
        guard Int(size) <= payloadCapacity else { return false }
        output = payload + payloadCount

        guard let token = cachedToken(
            Bytes(start: payload, count: payloadCount), profile: profile, issuer: identity.issuer, clientID: identity.clientID,
            scope: target.scope, audience: target.audience, resource: target.resource)
        else { return false }
        rendered = render(
            token, profile: profile, request: request, now: now,
            into: UnsafeMutableBufferPointer(start: output, count: outputCapacity))
        guard let rendered else { return false }

        // Scripts read our stdout through pipes that may close early: never die of SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        writeAll(2, output, rendered.logCount)
        writeAll(1, output + rendered.logCount, rendered.outputCount)
        return true
    }

    // MARK: argv

    /// The `token` invocation in argv (argv[0] skipped), or `nil` for any other shape. Read with
    /// `ArgumentSyntax`, as the engine's parser reads it.
    public static func recognize(argc: Int32, argv: UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Request? {
        var request = Request()
        var sawToken = false
        var sawFormat = false
        var sawMinimumTimeToLive = false
        var accepted = true
        let isName = ArgumentSyntax.isName
        // The options a hit may carry that take a value (elsewhere, any option means "not mine").
        let takesValue = { (name: Bytes) -> Bool in
            isName(name, "--profile") || isName(name, "--format") || isName(name, "--min-ttl")
                || isName(name, "--scope") || isName(name, "--audience") || isName(name, "--resource")
        }
        let arguments = UnsafeBufferPointer(start: argv + 1, count: max(0, Int(argc) - 1))
        ArgumentSyntax.scan(arguments, takesValue: takesValue) { _, item in
            switch item {
            case .endOfOptions:
                accepted = false  // `--`: the engine's
            case .operand(let argument):
                // A command or an argument: only the one `token`.
                if sawToken || !isEqual(cString: argument, "token") { accepted = false } else { sawToken = true }
            case .option(let name, let value, let inline):
                if isName(name, "-v") || isName(name, "--verbose") {
                    if inline { accepted = false }
                    request.verbose = true
                } else if isName(name, "--profile") {
                    if request.profile != nil || value == nil { accepted = false }
                    request.profile = value
                } else if !sawToken || value == nil {
                    accepted = false  // anything else before `token`, and any flag (`--force`, `-h`)
                } else if isName(name, "--format") {
                    if sawFormat { accepted = false }
                    sawFormat = true
                    if isEqual(cString: value!, "raw") {
                        request.format = .raw
                    } else if isEqual(cString: value!, "header") {
                        request.format = .header
                    } else if isEqual(cString: value!, "json") {
                        request.format = .json
                    } else {
                        accepted = false
                    }
                } else if isName(name, "--min-ttl") {
                    if sawMinimumTimeToLive { accepted = false }
                    sawMinimumTimeToLive = true
                    if let seconds = wholeSeconds(value!) { request.minimumTimeToLive = seconds } else { accepted = false }
                } else if isName(name, "--scope") {
                    if request.scope != nil { accepted = false }
                    request.scope = value
                } else if isName(name, "--audience") {
                    if request.audience != nil { accepted = false }
                    request.audience = value
                } else if isName(name, "--resource") {
                    if request.resource != nil { accepted = false }
                    request.resource = value
                } else {
                    accepted = false
                }
            }
            return accepted ? .proceed : .stop
        }
        guard accepted, sawToken, requestedTarget(request).acceptable else { return nil }
        return request
    }

    /// 1–9 decimal digits, at most a year (the engine's limit for `--min-ttl`).
    static func wholeSeconds(_ text: UnsafePointer<CChar>) -> Int64? {
        var value: Int64 = 0
        var index = 0
        while text[index] != 0 {
            let digit = UInt8(bitPattern: text[index])
            guard index < 9, digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(digit - UInt8(ascii: "0"))
            index += 1
        }
        guard index > 0, value <= 31_536_000 else { return nil }
        return value
    }

    /// The target's values as bytes; not `acceptable` when a value is one the engine's
    /// `TokenTarget` refuses (the same `TokenTargetSyntax.check`): `recognize` leaves those to
    /// the engine, which says what is wrong.
    static func requestedTarget(_ request: Request) -> (scope: Bytes?, audience: Bytes?, resource: Bytes?, acceptable: Bool) {
        var acceptable = true
        func bytes(_ value: UnsafePointer<CChar>?, _ part: TokenTargetSyntax.Part) -> Bytes? {
            guard let value else { return nil }
            let result = Bytes(start: UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self), count: strlen(value))
            if TokenTargetSyntax.check(result, part) != nil { acceptable = false }
            return result
        }
        return (bytes(request.scope, .scope), bytes(request.audience, .audience), bytes(request.resource, .resource), acceptable)
    }

    // MARK: Environment, profile and paths

    static let disableVariable = EnvironmentSwitches.disableKernelKeyring

    /// `getenv` with an empty value treated as unset (as `Environment` does).
    static func variable(_ name: StaticString, _ environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>?) -> UnsafePointer<CChar>? {
        guard let value = environment(cString(name)), value[0] != 0 else { return nil }
        return value
    }

    /// The profile's name (`--profile`, else `$TOKENCTL_PROFILE`, else `default`) if it is valid.
    public static func profileName(_ request: Request, environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>?) -> Bytes? {
        let name = request.profile ?? variable(EnvironmentSwitches.profile, environment) ?? cString("default")
        let bytes = Bytes(start: UnsafeRawPointer(name).assumingMemoryBound(to: UInt8.self), count: strlen(name))
        return isValidProfileName(bytes) ? bytes : nil
    }

    /// `ProfileName.isValid`, on bytes.
    public static func isValidProfileName(_ name: Bytes) -> Bool {
        guard name.count >= 1, name.count <= 64, name[0] != UInt8(ascii: "."), name[0] != UInt8(ascii: "-") else { return false }
        for byte in name {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                continue
            default:
                return false
            }
        }
        return true
    }

    /// `Paths.resolve(...).profileFile(profile)` as a C string in `buffer`; its length, or `nil`
    /// where `Paths.resolve` would fail (no usable HOME) or the path does not fit.
    public static func profileFilePath(
        profile: Bytes, environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>?,
        into buffer: UnsafeMutablePointer<UInt8>, capacity: Int
    ) -> Int? {
        // `Paths` takes a value that `hasPrefix("/")`, a test on Characters: a non-ASCII byte
        // after the slash (a combining mark?) is a doubt.
        // after the slash (a combining mark?) is a doubt. So is any non-ASCII byte at all: the
        // engine reads the variable as a String (invalid UTF-8 becomes U+FFFD), and the two must
        // name the same file; the engine answers such environments (found by the differential
        // fuzz target).
        var doubt = false
        func absolute(_ name: StaticString) -> UnsafePointer<CChar>? {
            guard let value = variable(name, environment), value[0] == CChar(UInt8(ascii: "/")) else { return nil }
            var index = 1
            while value[index] != 0 {
                if UInt8(bitPattern: value[index]) >= 0x80 { doubt = true }
                index += 1
            }
            return value
        }
        let home = absolute("HOME")
        let state = absolute("XDG_STATE_HOME")
        let config = absolute("XDG_CONFIG_HOME")
        // Paths.resolve also needs a state directory, or it throws.
        guard !doubt, state != nil || home != nil else { return nil }
        var writer = Writer(buffer, capacity: capacity - 1)
        if let config {
            writer.append(cString: config)
        } else if let home {
            writer.append(cString: home)
            writer.append("/.config")
        } else {
            return nil
        }
        writer.append("/tokenctl/profiles/")
        writer.append(profile)
        writer.append(".conf")
        guard !writer.overflowed else { return nil }
        buffer[writer.count] = 0
        return writer.count
    }

    /// The whole file at `path` if it fits in `capacity` bytes; `nil` on any error.
    static func readFile(_ path: UnsafeMutablePointer<UInt8>, into buffer: UnsafeMutablePointer<UInt8>, capacity: Int) -> Int? {
        // Without blocking, and regular files only: a FIFO in place of the profile file must
        // not hang the hot path (the engine then reports it).
        let descriptor = path.withMemoryRebound(to: CChar.self, capacity: 1) { open($0, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        var count = 0
        while true {
            // One byte of room more than allowed: a file that fills it is too large.
            let room = capacity + 1 - count
            guard room > 0 else { return nil }
            let got = read(descriptor, buffer + count, room)
            if got < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if got == 0 { break }
            count += got
        }
        return count <= capacity ? count : nil
    }

    // MARK: Profile file

    /// Issuer and client ID of a profile file that `ProfileConfiguration.parse` accepts with a
    /// token endpoint; `nil` for anything else and on any doubt (a non-ASCII value, say).
    public static func profileIdentity(_ file: Bytes) -> ProfileIdentity? {
        var issuer: Bytes?
        var clientID: Bytes?
        var tokenEndpoint: Bytes?
        var revocationEndpoint: Bytes?
        var otherEndpoints: (Bytes?, Bytes?, Bytes?)
        var seen: UInt16 = 0
        var accepted = true
        let malformedLine = ProfileFileSyntax.scan(file) { entry in
                let key = slice(file, entry.key.lowerBound, entry.key.upperBound)
                let value = slice(file, entry.value.lowerBound, entry.value.upperBound)
                let bit: UInt16
                if isEqual(key, "issuer") {
                    bit = 1; issuer = value
                } else if isEqual(key, "client_id") {
                    bit = 2; clientID = value
                } else if isEqual(key, "scope") {
                    bit = 4
                } else if isEqual(key, "token_endpoint") {
                    bit = 8; tokenEndpoint = value
                } else if isEqual(key, "revocation_endpoint") {
                    bit = 16; revocationEndpoint = value
                } else if isEqual(key, "cacert") {
                    bit = 32
                } else if isEqual(key, "device_authorization_endpoint") {
                    bit = 64; otherEndpoints.0 = value
                } else if isEqual(key, "authorization_endpoint") {
                    bit = 128; otherEndpoints.1 = value
                } else if isEqual(key, "jwks_uri") {
                    bit = 256; otherEndpoints.2 = value
                } else if isEqual(key, "token_endpoint_auth_method") {
                    // ProfileConfiguration: empty, client_secret_basic or client_secret_post.
                    guard value.count == 0 || isEqual(value, "client_secret_basic") || isEqual(value, "client_secret_post") else {
                        accepted = false
                        return false
                    }
                    bit = 512
                } else if isEqual(key, "audience") {
                    bit = 1024
                } else if isEqual(key, "resource") {
                    bit = 2048
                } else if isEqual(key, "git_username") {
                    bit = 4096
                } else {
                    accepted = false
                    return false
                }
                guard seen & bit == 0 else {
                    accepted = false
                    return false
                }
                seen |= bit
                for byte in value where byte < 0x20 || byte >= 0x7F {
                    accepted = false
                    return false
                }
                return true
        }
        guard accepted, malformedLine == nil else { return nil }
        guard let issuer, isValidEndpoint(issuer),
              let clientID, clientID.count > 0,
              let tokenEndpoint, isValidEndpoint(tokenEndpoint)
        else { return nil }
        if let revocationEndpoint, !isValidEndpoint(revocationEndpoint) { return nil }
        if let endpoint = otherEndpoints.0, !isValidEndpoint(endpoint) { return nil }
        if let endpoint = otherEndpoints.1, !isValidEndpoint(endpoint) { return nil }
        if let endpoint = otherEndpoints.2, !isValidEndpoint(endpoint) { return nil }
        return ProfileIdentity(issuer: issuer, clientID: clientID)
    }

    /// Whether `EndpointURL(_:)` accepts these bytes (the same checks, in the same order).
    public static func isValidEndpoint(_ url: Bytes) -> Bool {
        let count = url.count
        guard count > 0 else { return false }
        for byte in url where byte <= 0x20 || byte >= 0x7F { return false }
        var schemeEnd = 0
        while true {
            guard schemeEnd + 3 <= count else { return false }
            if url[schemeEnd] == UInt8(ascii: ":") && url[schemeEnd + 1] == UInt8(ascii: "/") && url[schemeEnd + 2] == UInt8(ascii: "/") { break }
            schemeEnd += 1
        }
        let https: Bool
        if isEqualIgnoringCase(slice(url, 0, schemeEnd), "https") {
            https = true
        } else if isEqualIgnoringCase(slice(url, 0, schemeEnd), "http") {
            https = false
        } else {
            return false
        }
        let rest = schemeEnd + 3
        for index in rest..<count where url[index] == UInt8(ascii: "#") { return false }
        var authorityEnd = rest
        while authorityEnd < count && url[authorityEnd] != UInt8(ascii: "/") && url[authorityEnd] != UInt8(ascii: "?") { authorityEnd += 1 }
        for index in rest..<authorityEnd where url[index] == UInt8(ascii: "@") { return false }
        var hostEnd = rest
        if rest < authorityEnd && url[rest] == UInt8(ascii: "[") {
            while hostEnd < authorityEnd && url[hostEnd] != UInt8(ascii: "]") { hostEnd += 1 }
            guard hostEnd < authorityEnd else { return false }
            hostEnd += 1
        } else {
            while hostEnd < authorityEnd && url[hostEnd] != UInt8(ascii: ":") { hostEnd += 1 }
        }
        guard hostEnd > rest else { return false }
        if hostEnd < authorityEnd {
            guard url[hostEnd] == UInt8(ascii: ":"), let port = decimal(slice(url, hostEnd + 1, authorityEnd)), port <= 65535 else { return false }
        }
        return https || isLoopback(slice(url, rest, hostEnd))
    }

    /// `EndpointURL.isLoopback` of the lower-cased host.
    static func isLoopback(_ host: Bytes) -> Bool {
        if isEqualIgnoringCase(host, "localhost") || isEqual(host, "[::1]") { return true }
        var parts = 0
        var partStart = 0
        for index in 0...host.count where index == host.count || host[index] == UInt8(ascii: ".") {
            let part = slice(host, partStart, index)
            if parts == 0 {
                guard isEqual(part, "127") else { return false }
            }
            guard let value = decimal(part), value <= 255 else { return false }
            parts += 1
            partStart = index + 1
        }
        return parts == 4
    }

    /// A non-empty run of ASCII digits, saturating far above any port or octet.
    static func decimal(_ digits: Bytes) -> Int? {
        guard digits.count > 0 else { return nil }
        var value = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0") && digit <= UInt8(ascii: "9") else { return nil }
            value = min(value * 10 + Int(digit - UInt8(ascii: "0")), 1 << 20)
        }
        return value
    }

    // MARK: The key and its payload

    /// `HotCacheEntry.keyDescription` (which calls this), written to `buffer` (not terminated);
    /// its length. `targetDigest`: `TokenTargetSyntax.digest` of a target other than the
    /// session's own, else nil.
    public static func keyDescription(
        profile: Bytes, issuer: Bytes, clientID: Bytes, targetDigest: UInt64? = nil, into buffer: UnsafeMutablePointer<UInt8>, capacity: Int
    ) -> Int? {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func update(_ byte: UInt8) {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        update(UInt8(ascii: "v"))
        update(UInt8(ascii: "1"))
        update(0); for byte in profile { update(byte) }
        update(0); for byte in issuer { update(byte) }
        update(0); for byte in clientID { update(byte) }
        if let targetDigest {
            update(0); update(UInt8(ascii: "t"))
            for shift in stride(from: 0, to: 64, by: 8) { update(UInt8(truncatingIfNeeded: targetDigest >> UInt64(shift))) }
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
    public static func cachedToken(
        _ payload: Bytes, profile: Bytes, issuer: Bytes, clientID: Bytes, scope: Bytes? = nil, audience: Bytes? = nil, resource: Bytes? = nil
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
                duplicate = values.0 != nil; values.0 = value
            } else if isEqual(key, "issuer") {
                duplicate = values.1 != nil; values.1 = value
            } else if isEqual(key, "client_id") {
                duplicate = values.2 != nil; values.2 = value
            } else if isEqual(key, "token_type") {
                duplicate = values.3 != nil; values.3 = value; token = true
            } else if isEqual(key, "obtained_at") {
                duplicate = values.4 != nil; values.4 = value
            } else if isEqual(key, "expires_at") {
                duplicate = values.5 != nil; values.5 = value
            } else if isEqual(key, "issued_lifetime") {
                duplicate = values.6 != nil; values.6 = value
            } else if isEqual(key, "access_token") {
                duplicate = values.7 != nil; values.7 = value; token = true
            } else if isEqual(key, "scope") {
                duplicate = targetValues.0 != nil; targetValues.0 = value
            } else if isEqual(key, "audience") {
                duplicate = targetValues.1 != nil; targetValues.1 = value
            } else if isEqual(key, "resource") {
                duplicate = targetValues.2 != nil; targetValues.2 = value
            } else {
                duplicate = true  // an unknown field
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
        guard let cachedProfile = values.0, isValidProfileName(cachedProfile), isEqual(cachedProfile, profile),
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
        guard same(targetValues.0, scope, .scope), same(targetValues.1, audience, .audience), same(targetValues.2, resource, .resource)
        else { return nil }
        var expiresAt: Time?
        if let text = values.5 {
            guard let value = time(text) else { return nil }
            expiresAt = value
        }
        var issuedLifetime: Time?
        if let text = values.6 {
            guard let value = time(text) else { return nil }
            issuedLifetime = value
        }
        return CachedToken(
            accessToken: accessToken, tokenType: tokenType, obtainedAt: obtainedAt, expiresAt: expiresAt, issuedLifetime: issuedLifetime)
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

    // MARK: Freshness and output

    static let nanosecondsPerSecond: Int64 = 1_000_000_000
    /// `AccessTokenLifetime.assumedLifetime`.
    static let assumedLifetime: Int64 = 300 * nanosecondsPerSecond
    /// Times further than this from now are left to the engine (keeps nanoseconds in Int64).
    static let horizon: Int64 = 4_000_000_000

    /// Decide freshness (`AccessTokenLifetime.Rule`, in exact integer nanoseconds relative to
    /// `now`) and render the hit as the front always has; `nil` when the token is not fresh
    /// enough, or does not fit.
    public static func render(
        _ token: CachedToken, profile: Bytes, request: Request, now: Instant, into output: UnsafeMutableBufferPointer<UInt8>
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
        // AccessTokenLifetime's rule, in integer nanoseconds relative to the whole second of now.
        let effectiveExpiry = AccessTokenLifetime.Rule.effectiveExpiry(expiresAt: expiresAt, obtainedAt: obtainedAt, assumedLifetime: assumedLifetime)
        let margin = AccessTokenLifetime.Rule.margin(lifetime: lifetime, minimumTimeToLive: request.minimumTimeToLive * nanosecondsPerSecond, half: { $0 / 2 })
        guard AccessTokenLifetime.Rule.isFresh(now: now.nanoseconds, margin: margin, expiry: effectiveExpiry) else { return nil }

        guard let base = output.baseAddress else { return nil }
        var writer = Writer(base, capacity: output.count)
        if request.verbose {
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
        var offset = 0
        while offset < count {
            let written = write(descriptor, bytes + offset, count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
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
        bytes.count == literal.utf8CodeUnitCount && (bytes.count == 0 || memcmp(bytes.baseAddress!, literal.utf8Start, bytes.count) == 0)
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
            if let source = bytes.baseAddress, bytes.count > 0 { (base + count).update(from: source, count: bytes.count) }
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
            var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch, enough for Int64
            var remaining = UInt64(max(0, value))
            var length = 0
            withUnsafeMutableBytes(of: &digits) { scratch in
                repeat {
                    scratch[23 - length] = UInt8(ascii: "0") + UInt8(remaining % 10)
                    remaining /= 10
                    length += 1
                } while remaining > 0 || length < width
                append(Bytes(start: scratch.baseAddress!.assumingMemoryBound(to: UInt8.self) + 24 - length, count: length))
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
