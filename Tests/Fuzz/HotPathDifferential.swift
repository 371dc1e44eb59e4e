import TokenctlCore

@testable import TokenctlCommands
@testable import TokenctlEssentials

// Differential fuzz target: the static front's byte-level hit (HotPath) against the engine's
// general readers, on the same bytes. HotPath.swift promises: "everything this accepts is a
// subset of what CommandLineParser, ProfileConfiguration, EndpointURL and HotCacheEntry.decode
// accept, with the same meaning", and it says "not mine" only for documented shapes (doubts).
// So this target traps when
//   - HotPath accepts what the general reader rejects, or both accept with different values;
//   - HotPath rejects what the general reader accepts although the input is inside HotPath's
//     documented grammar (the reverse check; each mode says what that grammar is);
//   - for the exact equivalences (EndpointURL, profile names, key descriptions, paths): any
//     difference at all.
//
// Every HotPath entry point is public and reachable without refactoring: recognize (argv),
// profileName, profileFilePath, profileIdentity (profile file), isValidEndpoint,
// ProfileName.isValid (bytes), keyDescription, cachedToken (payload), render. Only `serve` is not
// fuzzed (it reads the file and the kernel keyring through system calls); its steps are.
//
// Input: a mode byte, then the mode's bytes:
//   0 argv: arguments after argv[0], split on NUL; the general side decodes them as UTF-8
//     with repair (CommandLine.arguments), HotPath reads the raw C strings.
//   1 profile file: the file's bytes (FileIO.readFile decodes with repair for the engine).
//   2 hot-cache payload: checked for identity (default, https://login.example.com, cli) and
//     for the identity the payload itself names.
//   3 primitives: the bytes as a URL, a profile name, and (split on NUL) profile/issuer/client
//     of a key description.
//   4 a whole hit without system calls: sections split on 0x1E:
//     argv (NUL-separated) | environment (NUL-separated NAME=value) | profile file | payload |
//     now ("SECONDS.NANOSECONDS"), rendered by HotPath.render and by the old front's general
//     rendering (Tests/TokenctlCommandsTests/OldFrontRendering.swift, shared with HotPathTests).
// fuzz-extra-sources: Tests/TokenctlCommandsTests/OldFrontRendering.swift
#if canImport(Glibc)
import Glibc
#endif

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHotPathDifferential(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzSupport.bytes(data, size)
    guard let mode = bytes.first else { return 0 }
    let rest = Array(bytes.dropFirst())
    switch mode % 5 {
    case 0:
        Differential.argv(
            rest.isEmpty ? [] : rest.split(separator: 0, omittingEmptySubsequences: false).map(Array.init))
    case 1: Differential.profileFile(rest)
    case 2: Differential.payload(rest)
    case 3: Differential.primitives(rest)
    default: Differential.wholeHit(rest)
    }
    return 0
}

enum Differential {
    static let defaultIssuer = "https://login.example.com"
    static let defaultClientID = "cli"

    // MARK: Mode 0: argv

    /// The meaning of a recognized `token` invocation, on either side.
    struct Recognized: Equatable {
        var profile: String?
        var format: HotPath.Format
        var minimumTimeToLive: Double
        var verbose: Bool
        /// `--scope`, `--audience`, `--resource` as given.
        var target: [String?] = [nil, nil, nil]
    }

    static func argv(_ arguments: [[UInt8]]) {
        withCArguments(arguments) { count, vector in
            let mine = HotPath.recognize(argc: count, argv: vector).map {
                Recognized(
                    profile: $0.profile.map { String(cString: $0) }, format: $0.format,
                    minimumTimeToLive: Double($0.minimumTimeToLive), verbose: $0.verbose,
                    target: [$0.scope, $0.audience, $0.resource].map { $0.map { String(cString: $0) } })
            }
            let strings = arguments.map { String(decoding: $0, as: UTF8.self) }
            let general = plainTokenInvocation(strings)
            if let mine {
                guard let general else {
                    fail("HotPath.recognize accepts argv the engine does not run as a plain token hit: \(strings)")
                }
                check(mine == general, "HotPath.recognize and the engine read argv differently: \(mine) vs \(general)")
            } else if let general, insideDocumentedGrammar(arguments, general) {
                fail("HotPath.recognize rejects a plain token invocation inside its documented grammar: \(strings)")
            }
        }
    }

    /// What the engine makes of argv when it is a `token` the front could serve (no --force,
    /// no --timeout, and values `TokenCommand` accepts): `Commands.parser` (the engine's), then
    /// `--format` as TokenCommand checks it and `--min-ttl` as CommandContext.seconds parses it.
    static func plainTokenInvocation(_ arguments: [String]) -> Recognized? {
        guard let invocation = try? Commands.parser.parse(arguments), invocation.action == .run("token"),
            !invocation.options.has("--force"), invocation.options.value("--timeout") == nil
        else { return nil }
        let format: HotPath.Format
        switch invocation.options.value("--format") ?? "raw" {
        case "raw": format = .raw
        case "header": format = .header
        case "json": format = .json
        default: return nil
        }
        var minimumTimeToLive = AccessTokenLifetime.defaultMinimumTimeToLive
        if let text = invocation.options.value("--min-ttl") {
            guard let number = Double(text), number.isFinite, number >= 0, number <= 31_536_000 else { return nil }
            minimumTimeToLive = number
        }
        // A target TokenTarget refuses is a usage error, not a hit.
        let target = ["--scope", "--audience", "--resource"].map { invocation.options.value($0) }
        guard (try? TokenTarget(scope: target[0], audience: target[1], resource: target[2])) != nil else { return nil }
        return Recognized(
            profile: invocation.profileName, format: format, minimumTimeToLive: minimumTimeToLive,
            verbose: invocation.verbose, target: target)
    }

    /// HotPath's documented grammar (HotPath.swift, above `enum HotPath`): `--min-ttl` as 1–9
    /// decimal digits (`wholeSeconds`), and no `--` anywhere (the engine's).
    static func insideDocumentedGrammar(_ arguments: [[UInt8]], _ general: Recognized) -> Bool {
        if arguments.contains(Array("--".utf8)) { return false }
        for (index, argument) in arguments.enumerated() {
            var value: ArraySlice<UInt8>?
            if argument == Array("--min-ttl".utf8) {
                value = index + 1 < arguments.count ? arguments[index + 1][...] : nil
            } else if argument.starts(with: "--min-ttl=".utf8) {
                value = argument.dropFirst(10)
            }
            if let value,
                !(1...9).contains(value.count)
                    || !value.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
            {
                return false
            }
        }
        return true
    }

    // MARK: Mode 1: profile file

    static func profileFile(_ file: [UInt8]) {
        let mine = file.withUnsafeBufferPointer { buffer in
            HotPath.profileIdentity(buffer).map { (issuer: Array($0.issuer), clientID: Array($0.clientID)) }
        }
        let general = try? ProfileConfiguration.parse(String(decoding: file, as: UTF8.self), path: "/fuzz/default.conf")
        if let mine {
            guard let general, general.tokenEndpoint != nil, !general.dpop else {
                fail(
                    "HotPath.profileIdentity accepts a profile file ProfileConfiguration rejects (or one without token_endpoint, or a DPoP one)"
                )
            }
            check(
                Array(general.issuer.string.utf8) == mine.issuer && Array(general.clientID.utf8) == mine.clientID,
                "HotPath.profileIdentity and ProfileConfiguration read different issuer or client_id")
        } else if let general, general.tokenEndpoint != nil, !general.dpop, valuesArePrintableASCII(file) {
            // (`dpop = true` is the engine's by design: its token needs a proof the front cannot sign.)
            fail(
                "HotPath.profileIdentity rejects a profile file ProfileConfiguration accepts, all values printable ASCII"
            )
        }
    }

    /// HotPath's documented doubt for profile files is a non-ASCII value: every value here is
    /// printable ASCII (lines as ProfileConfiguration splits and trims them).
    static func valuesArePrintableASCII(_ file: [UInt8]) -> Bool {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D }
        for line in file.split(separator: 0x0A, omittingEmptySubsequences: false) {
            let trimmed = line.drop(while: isSpace)
            guard let first = trimmed.first, first != UInt8(ascii: "#") else { continue }
            guard let equals = trimmed.firstIndex(of: UInt8(ascii: "=")) else { return false }
            if !trimmed[(equals + 1)...].allSatisfy({ $0 >= 0x20 && $0 < 0x7F || $0 == 0x09 || $0 == 0x0D }) {
                return false
            }
            // Tabs and CRs count only as the trimmed edges: inside a value they are control characters.
            let value = trimmed[(equals + 1)...].drop(while: isSpace).reversed().drop(while: isSpace)
            if value.contains(where: { $0 < 0x20 }) { return false }
        }
        return true
    }

    // MARK: Mode 2: hot-cache payload

    struct Token: Equatable {
        var accessToken: [UInt8]
        var tokenType: [UInt8]
        var obtainedAt: Double
        var expiresAt: Double?
        var issuedLifetime: Double?
        var statesNoExpiry = false
    }

    static func payload(_ payload: [UInt8]) {
        let general = try? HotCacheEntry.decode(payload)
        checkPayload(payload, general, profile: "default", issuer: defaultIssuer, clientID: defaultClientID)
        if let general {
            checkPayload(
                payload, general, profile: general.profile.rawValue, issuer: general.issuer, clientID: general.clientID)
            // For the target the payload names (words reversed: a set, as the front asks).
            let target = general.target
            func reversed(_ field: String?) -> String? {
                field.map { $0.split(separator: " ").reversed().joined(separator: "  ") }
            }
            checkPayload(
                payload, general, profile: general.profile.rawValue, issuer: general.issuer, clientID: general.clientID,
                target: [reversed(target.scopeField), target.audience, reversed(target.resourceField)])
        }
    }

    /// HotPath's payload time as a Double, the way the decoder gets it from the same text:
    /// `Double("S.mmm")` of the same decimal (correctly rounded either way).
    static func seconds(_ time: HotPath.Time) -> Double {
        let milliseconds = String(time.milliseconds)
        return Double("\(time.seconds).\(String(repeating: "0", count: 3 - milliseconds.count))\(milliseconds)")!
    }

    static func withOptionalBytes<R>(_ text: String?, _ body: (HotPath.Bytes?) -> R) -> R {
        guard let text else { return body(nil) }
        return Array(text.utf8).withUnsafeBufferPointer { body($0) }
    }

    static func mine(
        _ payload: [UInt8], profile: String, issuer: String, clientID: String, target: [String?] = [nil, nil, nil]
    ) -> Token? {
        payload.withUnsafeBufferPointer { payload in
            Array(profile.utf8).withUnsafeBufferPointer { profile in
                Array(issuer.utf8).withUnsafeBufferPointer { issuer in
                    Array(clientID.utf8).withUnsafeBufferPointer { clientID in
                        withOptionalBytes(target[0]) { s in
                            withOptionalBytes(target[1]) { a in
                                withOptionalBytes(target[2]) { r in
                                    HotPath.cachedToken(
                                        payload, profile: profile, issuer: issuer, clientID: clientID, scope: s,
                                        audience: a, resource: r
                                    ).map {
                                        Token(
                                            accessToken: Array($0.accessToken), tokenType: Array($0.tokenType),
                                            obtainedAt: seconds($0.obtainedAt),
                                            expiresAt: $0.expiresAt.map(seconds),
                                            issuedLifetime: $0.issuedLifetime.map(seconds),
                                            statesNoExpiry: $0.statesNoExpiry)
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    static func checkPayload(
        _ payload: [UInt8], _ general: HotCacheEntry?, profile: String, issuer: String, clientID: String,
        target: [String?] = [nil, nil, nil]
    ) {
        let mine = mine(payload, profile: profile, issuer: issuer, clientID: clientID, target: target)
        // The engine's target for what the front was asked (a request TokenTarget refuses is
        // never recognized, so any here is valid).
        let asked = try? TokenTarget(scope: target[0], audience: target[1], resource: target[2])
        let belongs =
            general.map { entry in
                guard let asked else { return false }
                return ProfileName(rawValue: profile).map {
                    entry.belongs(to: $0, issuer: issuer, clientID: clientID, target: asked)
                } ?? false
            } ?? false
        if let mine {
            guard let general, belongs else {
                fail("HotPath.cachedToken accepts a payload HotCacheEntry.decode rejects, or for another identity")
            }
            let expected = Token(
                accessToken: Array(general.accessToken.utf8), tokenType: Array(general.tokenType.utf8),
                obtainedAt: general.obtainedAt, expiresAt: general.expiresAt, issuedLifetime: general.issuedLifetime,
                statesNoExpiry: general.statesNoExpiry)
            check(
                mine == expected,
                "HotPath.cachedToken and HotCacheEntry.decode read different values: \(mine) vs \(expected)")
        } else if general != nil, belongs, payloadInsideDocumentedGrammar(payload) {
            fail("HotPath.cachedToken rejects a payload HotCacheEntry.decode accepts, inside its documented grammar")
        }
    }

    /// HotPath's documented payload grammar: values printable ASCII (tokens visible ASCII, as
    /// the decoder also requires), times of 1–11 digits, optionally `.` and 1–3 digits.
    static func payloadInsideDocumentedGrammar(_ payload: [UInt8]) -> Bool {
        for line in payload.split(separator: 0x0A).dropFirst() {
            guard let equals = line.firstIndex(of: UInt8(ascii: "=")) else { return false }
            let key = String(decoding: line[..<equals], as: UTF8.self)
            let value = line[(equals + 1)...]
            guard value.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return false }
            if key == "expires_at" && value.elementsEqual("never".utf8) { continue } // no stated expiry
            if ["obtained_at", "expires_at", "issued_lifetime"].contains(key) {
                let parts = value.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
                let digits: (ArraySlice<UInt8>) -> Bool = {
                    $0.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
                }
                guard parts.count <= 2, (1...11).contains(parts[0].count), digits(parts[0]) else { return false }
                if parts.count == 2 { guard (1...3).contains(parts[1].count), digits(parts[1]) else { return false } }
            }
        }
        return true
    }

    // MARK: Mode 3: primitives

    static func primitives(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        bytes.withUnsafeBufferPointer { buffer in
            let endpoint = HotPath.isValidEndpoint(buffer)
            let general = (try? EndpointURL(text)) != nil
            check(
                endpoint == general,
                "HotPath.isValidEndpoint says \(endpoint), EndpointURL says \(general) for \(Array(text.utf8))")
            // The hit checks argv's bytes; the engine checks the decoded string.
            let name = ProfileName.isValid(utf8: buffer)
            check(name == ProfileName.isValid(text), "ProfileName.isValid on bytes and on the string differ")
        }
        let parts = bytes.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false).map(Array.init)
        guard parts.count == 3, let profile = ProfileName(rawValue: String(decoding: parts[0], as: UTF8.self)),
            let issuer = String(validating: parts[1], as: UTF8.self),
            let clientID = String(validating: parts[2], as: UTF8.self)
        else { return }
        checkKeyDescription(profile: profile, issuer: issuer, clientID: clientID)
    }

    static func checkKeyDescription(profile: ProfileName, issuer: String, clientID: String) {
        let expected = Array(HotCacheEntry.keyDescription(profile: profile, issuer: issuer, clientID: clientID).utf8)
        let capacity = 128 // HotPath.descriptionCapacity
        var buffer = [UInt8](repeating: 0, count: capacity)
        let count = Array(profile.rawValue.utf8).withUnsafeBufferPointer { p in
            Array(issuer.utf8).withUnsafeBufferPointer { i in
                Array(clientID.utf8).withUnsafeBufferPointer { c in
                    buffer.withUnsafeMutableBufferPointer {
                        HotPath.keyDescription(
                            profile: p, issuer: i, clientID: c, into: $0.baseAddress!, capacity: capacity)
                    }
                }
            }
        }
        if let count {
            check(
                Array(buffer[..<count]) == expected, "HotPath.keyDescription differs from HotCacheEntry.keyDescription")
        } else {
            check(expected.count > capacity - 1, "HotPath.keyDescription gave up on a description that fits")
        }
    }

    // MARK: Mode 4: a whole hit

    static let watchedVariables = [
        "TOKENCTL_PROFILE", "HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
        "TOKENCTL_TEST_DISABLE_KERNEL_KEYRING",
    ]

    static func wholeHit(_ bytes: [UInt8]) {
        let sections = bytes.split(separator: 0x1E, maxSplits: 4, omittingEmptySubsequences: false).map(Array.init)
        func section(_ index: Int) -> [UInt8] { index < sections.count ? sections[index] : [] }
        let arguments =
            section(0).isEmpty
            ? [Array("token".utf8)] : section(0).split(separator: 0, omittingEmptySubsequences: false).map(Array.init)

        // The environment: the first NAME=value of each name, as getenv finds it.
        var variables: [(name: String, value: [UInt8])] = []
        for entry in section(1).split(separator: 0) {
            guard let equals = entry.firstIndex(of: UInt8(ascii: "=")) else { continue }
            let name = String(decoding: entry[..<equals], as: UTF8.self)
            if !variables.contains(where: { $0.name == name }) {
                variables.append((name, Array(entry[(equals + 1)...])))
            }
        }
        if !variables.contains(where: { $0.name == "HOME" }) { variables.append(("HOME", Array("/home/user".utf8))) }
        var strings: [(String, UnsafeMutablePointer<CChar>)] = []
        for variable in variables {
            let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: variable.value.count + 1)
            for (index, byte) in variable.value.enumerated() { pointer[index] = CChar(bitPattern: byte) }
            pointer[variable.value.count] = 0
            strings.append((variable.name, pointer))
        }
        defer { for (_, pointer) in strings { pointer.deallocate() } }
        let lookup: (UnsafePointer<CChar>) -> UnsafePointer<CChar>? = { name in
            let wanted = String(cString: name)
            return strings.first { $0.0 == wanted }.map { UnsafePointer($0.1) }
        }
        // The engine's Environment.process: String(cString:) of getenv's bytes.
        var decoded: [String: String] = [:]
        for (name, pointer) in strings where decoded[name] == nil { decoded[name] = String(cString: pointer) }
        let environment = Environment.fixed(decoded)

        withCArguments(arguments) { count, vector in
            guard let request = HotPath.recognize(argc: count, argv: vector) else { return }
            // The profile: --profile, else TOKENCTL_PROFILE, else default (tokenctl/main.swift).
            let mine = HotPath.profileName(request, environment: lookup).map { Array($0) }
            let generalText =
                request.profile.map { String(cString: $0) } ?? environment["TOKENCTL_PROFILE"]
                ?? ProfileName.default.rawValue
            let general = ProfileName(rawValue: generalText)
            check(
                mine == general.map { Array($0.rawValue.utf8) },
                "HotPath.profileName and the engine pick different profiles")
            guard let profile = general else { return }

            // The profile file's path.
            let pathCapacity = Int(PATH_MAX) + 1
            var path = [UInt8](repeating: 0xFF, count: pathCapacity)
            let pathCount = Array(profile.rawValue.utf8).withUnsafeBufferPointer { name in
                path.withUnsafeMutableBufferPointer {
                    HotPath.profileFilePath(
                        profile: name, environment: lookup, into: $0.baseAddress!, capacity: pathCapacity)
                }
            }
            let expectedPath = (try? Paths.resolve(environment)).map { Array($0.profileFile(profile).utf8) }
            // Fixed divergence (regression-path-invalid-utf8-home): a HOME, XDG_CONFIG_HOME or
            // XDG_STATE_HOME that is not UTF-8 reaches Paths as U+FFFD (Environment.process,
            // String(cString:)); HotPath now leaves any non-ASCII value to the engine.
            if let pathCount {
                check(path[pathCount] == 0, "the path is not NUL-terminated")
                check(
                    Array(path[..<pathCount]) == expectedPath,
                    "HotPath.profileFilePath differs from Paths.resolve: \(Array(path[..<pathCount])) vs \(expectedPath.map { Array($0) } ?? [])"
                )
            } else if pathCount == nil, let expectedPath, expectedPath.count < pathCapacity - 1 {
                let doubt = ["HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"].contains { name in
                    guard let value = variables.first(where: { $0.name == name })?.value else { return false }
                    return value.count > 1 && value[0] == UInt8(ascii: "/") && value.dropFirst().contains { $0 >= 0x80 }
                }
                check(
                    doubt,
                    "HotPath.profileFilePath gives up where Paths.resolve finds the file, without a documented doubt")
            }

            // The file, the key, the payload.
            let file = section(2)
            guard
                let identity = file.withUnsafeBufferPointer({ buffer in
                    HotPath.profileIdentity(buffer).map {
                        (
                            issuer: String(decoding: $0.issuer, as: UTF8.self),
                            clientID: String(decoding: $0.clientID, as: UTF8.self)
                        )
                    }
                })
            else { return }
            checkKeyDescription(profile: profile, issuer: identity.issuer, clientID: identity.clientID)
            let payload = section(3)
            let entry = try? HotCacheEntry.decode(payload)
            let target = [request.scope, request.audience, request.resource].map { $0.map { String(cString: $0) } }
            checkPayload(
                payload, entry, profile: profile.rawValue, issuer: identity.issuer, clientID: identity.clientID,
                target: target)
            let asked = try? TokenTarget(scope: target[0], audience: target[1], resource: target[2])
            check(asked != nil, "HotPath.recognize took a target TokenTarget refuses")

            // Rendering at `now`.
            let now = instant(section(4))
            let rendered = render(
                payload, profile: profile.rawValue, issuer: identity.issuer, clientID: identity.clientID,
                request: request, now: now)
            guard let entry, let asked,
                entry.belongs(to: profile, issuer: identity.issuer, clientID: identity.clientID, target: asked),
                Differential.mine(
                    payload, profile: profile.rawValue, issuer: identity.issuer, clientID: identity.clientID,
                    target: target) != nil
            else {
                check(rendered == nil, "HotPath rendered a payload it does not accept")
                return
            }
            compareRendering(rendered, entry: entry, profile: profile.rawValue, request: request, now: now)
        }
    }

    static func instant(_ text: [UInt8]) -> HotPath.Instant {
        let parts = String(decoding: text, as: UTF8.self).split(separator: ".", maxSplits: 1)
        let seconds = parts.first.flatMap { Int64($0) }.map { min(max($0, 0), 99_999_999_999) } ?? 1_764_425_000
        let nanoseconds = parts.count > 1 ? (Int64(parts[1]).map { abs($0 % 1_000_000_000) } ?? 0) : 500_000_000
        return HotPath.Instant(seconds: seconds, nanoseconds: nanoseconds)
    }

    static func render(
        _ payload: [UInt8], profile: String, issuer: String, clientID: String, request: HotPath.Request,
        now: HotPath.Instant
    ) -> (log: [UInt8], output: [UInt8])? {
        var out = [UInt8](repeating: 0, count: 2 * HotCacheEntry.maximumPayloadSize + 512) // HotPath.outputCapacity
        return payload.withUnsafeBufferPointer { payload in
            Array(profile.utf8).withUnsafeBufferPointer { profile in
                Array(issuer.utf8).withUnsafeBufferPointer { issuer in
                    Array(clientID.utf8).withUnsafeBufferPointer { clientID in
                        guard
                            let token = HotPath.cachedToken(
                                payload, profile: profile, issuer: issuer, clientID: clientID,
                                scope: request.scope.map {
                                    HotPath.Bytes(
                                        start: UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self),
                                        count: strlen($0))
                                },
                                audience: request.audience.map {
                                    HotPath.Bytes(
                                        start: UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self),
                                        count: strlen($0))
                                },
                                resource: request.resource.map {
                                    HotPath.Bytes(
                                        start: UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self),
                                        count: strlen($0))
                                }),
                            let rendered = out.withUnsafeMutableBufferPointer({
                                HotPath.render(token, profile: profile, request: request, now: now, into: $0)
                            })
                        else { return nil }
                        return (
                            Array(out[0..<rendered.logCount]),
                            Array(out[rendered.logCount..<(rendered.logCount + rendered.outputCount)])
                        )
                    }
                }
            }
        }
    }

    /// Compare with the old front's rendering through the general readers (Double time).
    /// HotPath decides in exact integer nanoseconds; Double arithmetic on epoch times is off by
    /// microseconds, so a decision or a whole-second count within 1 ms of its boundary may differ.
    static func compareRendering(
        _ rendered: (log: [UInt8], output: [UInt8])?, entry: HotCacheEntry, profile: String, request: HotPath.Request,
        now: HotPath.Instant
    ) {
        let nowSeconds = Double(now.seconds) + Double(now.nanoseconds) / 1e9
        let horizon: Int64 = 4_000_000_000 // HotPath.horizon
        // HotPath.render leaves to the engine a payload time more than `horizon` seconds from
        // now (whole seconds, exactly), and an issued lifetime over `horizon` seconds.
        func beyondHorizon(_ time: Double) -> Bool { abs(Int64(time.rounded(.down)) - now.seconds) > horizon }
        let leftToEngine =
            beyondHorizon(entry.obtainedAt) || entry.expiresAt.map(beyondHorizon) == true
            || Int64((entry.issuedLifetime ?? 0).rounded(.down)) > horizon
        // Exact: effective expiry minus (now + margin), in nanoseconds (Int64 is enough within the horizon).
        func nanoseconds(_ time: Double) -> Int64 {
            let whole = Int64(time.rounded(.down))
            let milliseconds = Int64(((time - time.rounded(.down)) * 1000).rounded())
            return (whole - now.seconds) * 1_000_000_000 + milliseconds * 1_000_000 - now.nanoseconds
        }
        let fresh = entry.isFresh(at: nowSeconds, minimumTimeToLive: Double(request.minimumTimeToLive))
        if leftToEngine {
            check(rendered == nil, "HotPath served a time beyond its documented horizon")
            return
        }
        if entry.statesNoExpiry {
            // No stated expiry: always fresh, rendered exactly as the old front's words.
            check(fresh, "the general rule finds a token with no stated expiry stale")
            let reference = OldFrontRendering.render(
                entry, profile: profile, format: request.format, verbose: request.verbose, now: nowSeconds)
            check(
                rendered.map { $0.output == Array(reference.output.utf8) && $0.log == Array(reference.log.utf8) }
                    == true,
                "HotPath renders a token with no stated expiry differently, or not at all")
            return
        }
        let expiry = entry.expiresAt.map(nanoseconds) ?? (nanoseconds(entry.obtainedAt) + 300_000_000_000)
        let lifetime = entry.issuedLifetime.map { Int64(($0 * 1000).rounded()) * 1_000_000 } ?? 300_000_000_000
        let margin = max(0, min(request.minimumTimeToLive * 1_000_000_000, lifetime / 2))
        let nearBoundary = abs(expiry - margin) < 1_000_000
        guard let rendered else {
            check(
                !fresh || nearBoundary,
                "HotPath misses a token the general rule finds fresh (exact distance \(expiry - margin) ns)")
            return
        }
        check(
            fresh || nearBoundary,
            "HotPath serves a token the general rule finds stale (exact distance \(expiry - margin) ns)")
        guard fresh else { return }
        let reference = OldFrontRendering.render(
            entry, profile: profile, format: request.format, verbose: request.verbose, now: nowSeconds)
        if rendered.output != Array(reference.output.utf8) || rendered.log != Array(reference.log.utf8) {
            // Whole seconds (expires_in, the verbose duration) near a second boundary may round apart.
            let left = expiry // relative to now, in ns
            let nearSecond = abs(left % 1_000_000_000) < 1_000_000 || abs(left % 1_000_000_000) > 999_000_000
            check(
                nearSecond,
                "HotPath renders differently from the old front: \(String(decoding: rendered.log + rendered.output, as: UTF8.self)) vs \(reference.log + reference.output)"
            )
        }
    }

    // MARK: C argv

    /// argv[0] = "tokenctl", then `arguments` as NUL-terminated C strings, then a null pointer.
    static func withCArguments(
        _ arguments: [[UInt8]], _ body: (Int32, UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Void
    ) {
        let all = [Array("tokenctl".utf8)] + arguments
        let vector = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: all.count + 1)
        for (index, argument) in all.enumerated() {
            let string = UnsafeMutablePointer<CChar>.allocate(capacity: argument.count + 1)
            for (offset, byte) in argument.enumerated() { string[offset] = CChar(bitPattern: byte) }
            string[argument.count] = 0
            vector[index] = string
        }
        vector[all.count] = nil
        defer {
            for index in 0..<all.count { vector[index]?.deallocate() }
            vector.deallocate()
        }
        body(Int32(all.count), UnsafePointer(vector))
    }
}
