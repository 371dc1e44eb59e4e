import CKernelKeyring

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The hit's profile: its name, the path of its file, the file read without blocking, and the
// issuer and client ID in it (ProfileFileSyntax), with the endpoint checks EndpointURL makes.
extension HotPath {
    // MARK: Environment, profile and paths

    static let disableVariable = EnvironmentSwitches.disableKernelKeyring

    /// `getenv` with an empty value treated as unset (as `Environment` does).
    static func variable(_ name: StaticString, _ environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>?)
        -> UnsafePointer<CChar>?
    {
        guard let value = environment(cString(name)), value[0] != 0 else { return nil }
        return value
    }

    /// The profile's name (`--profile`, else `$TOKENCTL_PROFILE`, else `default`) if it is valid.
    public static func profileName(_ request: Request, environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>?)
        -> Bytes?
    {
        let name = request.profile ?? variable(EnvironmentSwitches.profile, environment) ?? cString("default")
        let bytes = Bytes(start: UnsafeRawPointer(name).assumingMemoryBound(to: UInt8.self), count: strlen(name))
        return ProfileName.isValid(utf8: bytes) ? bytes : nil
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
    static func readFile(_ path: UnsafeMutablePointer<UInt8>, into buffer: UnsafeMutablePointer<UInt8>, capacity: Int)
        -> Int?
    {
        // Without blocking, and regular files only: a FIFO in place of the profile file must
        // not hang the hot path (the engine then reports it).
        let descriptor = path.withMemoryRebound(to: CChar.self, capacity: 1) {
            open($0, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        }
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        var count = 0
        while true {
            // One byte of room more than allowed: a file that fills it is too large.
            let room = capacity + 1 - count
            guard room > 0 else { return nil }
            let got = Descriptor.retryingInterrupted { read(descriptor, buffer + count, room) }
            if got < 0 { return nil }
            if got == 0 { break }
            count += got
        }
        return count <= capacity ? count : nil
    }

    // MARK: Profile file

    /// Issuer and client ID of a profile file that `ProfileConfiguration.parse` accepts with a
    /// token endpoint; `nil` for anything else and on any doubt (a non-ASCII value, say).
    // One function on purpose: one pass over the bytes, its state in locals, no allocation and no
    // helper the static front might not inline (see HotPath); a hit's cost is Scripts/bench's (a).
    public static func profileIdentity(_ file: Bytes) -> ProfileIdentity? {
        var issuer: Bytes?
        var clientID: Bytes?
        var tokenEndpoint: Bytes?
        var revocationEndpoint: Bytes?
        var otherEndpoints: (Bytes?, Bytes?, Bytes?, Bytes?, Bytes?)
        var proxy: Bytes?
        var proxyUser: Bytes?
        var seen: UInt64 = 0
        var accepted = true
        let malformedLine = ProfileFileSyntax.scan(file) { entry in
            let key = slice(file, entry.key.lowerBound, entry.key.upperBound)
            let value = slice(file, entry.value.lowerBound, entry.value.upperBound)
            guard let (bit, valueAccepted, slot) = profileKeyRule(key, value) else {
                accepted = false
                return false
            }
            switch slot {
            case .issuer?: issuer = value
            case .clientID?: clientID = value
            case .tokenEndpoint?: tokenEndpoint = value
            case .revocationEndpoint?: revocationEndpoint = value
            case .otherEndpoint(0)?: otherEndpoints.0 = value
            case .otherEndpoint(1)?: otherEndpoints.1 = value
            case .otherEndpoint(2)?: otherEndpoints.2 = value
            case .otherEndpoint(3)?: otherEndpoints.3 = value
            case .otherEndpoint(_)?: otherEndpoints.4 = value
            case .proxy?: proxy = value
            case .proxyUser?: proxyUser = value
            case nil: break
            }
            guard valueAccepted, seen & bit == 0 else {
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
        if let endpoint = otherEndpoints.3, !isValidEndpoint(endpoint) { return nil }
        if let endpoint = otherEndpoints.4, !isValidEndpoint(endpoint) { return nil }
        // ProfileConfiguration refuses a proxy user without the proxy it is the user of.
        if (proxyUser?.count ?? 0) > 0, (proxy?.count ?? 0) == 0 { return nil }
        return ProfileIdentity(issuer: issuer, clientID: clientID)
    }

    /// The index of a machine profile's platform token file key (ProfileConfiguration), for its
    /// bit; nil for another key. Comparisons, not an Array: see `profileKeyRule`.
    static func machineFileKeyIndex(_ key: Bytes) -> Int? {
        if isEqual(key, "subject_token_file") { return 0 }
        if isEqual(key, "subject_token_type") { return 1 }
        if isEqual(key, "requested_token_type") { return 2 }
        if isEqual(key, "assertion_file") { return 3 }
        if isEqual(key, "client_assertion_file") { return 4 }
        return nil
    }

    /// Where `profileIdentity` keeps a key's value.
    enum ProfileKeySlot {
        case issuer, clientID, tokenEndpoint, revocationEndpoint
        case otherEndpoint(Int)
        case proxy, proxyUser
    }

    /// A key of the profile file: its bit (a key given twice is refused), whether its value is
    /// one `ProfileConfiguration` accepts (the keys whose values it checks; the others take
    /// any), and where its value is kept; nil for a key `ProfileConfiguration` does not know.
    // One function on purpose: one chain of byte comparisons, no table (an Array the static front
    // would page in) and no allocation (see HotPath); a hit's cost is Scripts/bench's (a).
    static func profileKeyRule(_ key: Bytes, _ value: Bytes) -> (
        bit: UInt64, valueAccepted: Bool, slot: ProfileKeySlot?
    )? {
        let bit: UInt64
        var valueAccepted = true
        var slot: ProfileKeySlot?
        if isEqual(key, "issuer") {
            bit = 1
            slot = .issuer
        } else if isEqual(key, "client_id") {
            bit = 2
            slot = .clientID
        } else if isEqual(key, "scope") {
            bit = 4
        } else if isEqual(key, "token_endpoint") {
            bit = 8
            slot = .tokenEndpoint
        } else if isEqual(key, "revocation_endpoint") {
            bit = 16
            slot = .revocationEndpoint
        } else if isEqual(key, "cacert") {
            bit = 32
        } else if isEqual(key, "device_authorization_endpoint") {
            bit = 64
            slot = .otherEndpoint(0)
        } else if isEqual(key, "authorization_endpoint") {
            bit = 128
            slot = .otherEndpoint(1)
        } else if isEqual(key, "jwks_uri") {
            bit = 256
            slot = .otherEndpoint(2)
        } else if isEqual(key, "token_endpoint_auth_method") {
            // ProfileConfiguration: empty or a registered method name.
            valueAccepted =
                value.count == 0 || isEqual(value, "client_secret_basic") || isEqual(value, "client_secret_post")
                || isEqual(value, "client_secret_jwt") || isEqual(value, "private_key_jwt") || isEqual(value, "none")
                || isEqual(value, "tls_client_auth") || isEqual(value, "self_signed_tls_client_auth")
            bit = 512
        } else if isEqual(key, "audience") {
            bit = 1024
        } else if isEqual(key, "resource") {
            bit = 2048
        } else if isEqual(key, "git_username") {
            bit = 4096
        } else if isEqual(key, "dpop") {
            // A DPoP session's token needs a proof with it, which only the engine signs:
            // `dpop = true` is the engine's (ProfileConfiguration: empty, true or false).
            valueAccepted = value.count == 0 || isEqual(value, "false")
            bit = 8192
        } else if isEqual(key, "dpop_allow_bearer") {
            valueAccepted = value.count == 0 || isEqual(value, "true") || isEqual(value, "false")
            bit = 16384
        } else if isEqual(key, "provider") {
            // ProfileConfiguration: empty or one of the preset names.
            valueAccepted = value.count == 0 || ProfileFileSyntax.providerNames.contains { isEqual(value, $0) }
            bit = 32768
        } else if isEqual(key, "forward") {
            // Whether the profile is forwarded: its own hits are served as any other.
            valueAccepted = value.count == 0 || isEqual(value, "true") || isEqual(value, "false")
            bit = 65536
        } else if isEqual(key, "forward_scope") {
            bit = 131072
        } else if isEqual(key, "forward_audience") {
            bit = 262144
        } else if isEqual(key, "key_file") {
            // The client key's file: the engine reads it when it asks for a token.
            bit = 524288
        } else if isEqual(key, "certificate_file") {
            bit = 1_048_576
        } else if isEqual(key, "grant") {
            // A machine profile's token is cached and served like a session's.
            valueAccepted =
                value.count == 0 || isEqual(value, "client-credentials") || isEqual(value, "token-exchange")
                || isEqual(value, "jwt-bearer")
            bit = 2_097_152
        } else if isEqual(key, "assertion_audience") {
            bit = 4_194_304
            slot = .otherEndpoint(3)
        } else if isEqual(key, "mtls_token_endpoint") {
            bit = 8_388_608
            slot = .otherEndpoint(4)
        } else if let network = networkKeyRule(key, value) {
            bit = network.bit
            valueAccepted = network.valueAccepted
            slot = isEqual(key, "proxy") ? .proxy : isEqual(key, "proxy_user") ? .proxyUser : nil
        } else if let index = machineFileKeyIndex(key) {
            // A machine's platform token files and types: the engine reads them when it asks for a token.
            bit = 268_435_456 << UInt64(index)
        } else {
            return nil
        }
        return (bit, valueAccepted, slot)
    }

    /// The network keys (`proxy`, `no_proxy`, `proxy_cacert`, `proxy_user`): their bit and
    /// whether ProfileConfiguration accepts the value; nil for another key. They matter to
    /// requests only: a hit sends none (the proxy user's password is read by the engine, before
    /// a request). ProfileConfiguration refuses a `proxy` with credentials (`@`) or a blank and
    /// a `proxy_user` with a colon or a blank: the engine reports them.
    static func networkKeyRule(_ key: Bytes, _ value: Bytes) -> (bit: UInt64, valueAccepted: Bool)? {
        if isEqual(key, "proxy") {
            return (16_777_216, !value.contains { $0 == UInt8(ascii: "@") || $0 == UInt8(ascii: " ") })
        } else if isEqual(key, "no_proxy") {
            return (33_554_432, true)
        } else if isEqual(key, "proxy_cacert") {
            return (67_108_864, true)
        } else if isEqual(key, "proxy_user") {
            let refused = value.contains {
                $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t")
            }
            return (134_217_728, !refused)
        }
        return nil
    }

    /// Whether `EndpointURL(_:)` accepts these bytes (the same checks, in the same order).
    public static func isValidEndpoint(_ url: Bytes) -> Bool {
        let count = url.count
        guard count > 0 else { return false }
        for byte in url where byte <= 0x20 || byte >= 0x7F { return false }
        var schemeEnd = 0
        while true {
            guard schemeEnd + 3 <= count else { return false }
            if url[schemeEnd] == UInt8(ascii: ":") && url[schemeEnd + 1] == UInt8(ascii: "/")
                && url[schemeEnd + 2] == UInt8(ascii: "/")
            {
                break
            }
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
        while authorityEnd < count && url[authorityEnd] != UInt8(ascii: "/") && url[authorityEnd] != UInt8(ascii: "?") {
            authorityEnd += 1
        }
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
            guard url[hostEnd] == UInt8(ascii: ":"), let port = decimal(slice(url, hostEnd + 1, authorityEnd)),
                port <= 65535
            else { return false }
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
            guard part.count <= 1 || part[0] != UInt8(ascii: "0"), let value = decimal(part), value <= 255 else {
                return false
            }
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
}
