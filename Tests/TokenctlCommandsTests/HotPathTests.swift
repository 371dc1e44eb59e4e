import Testing
import TokenctlCommands
import TokenctlCore
import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

// The byte-level hit (HotPath) must accept only what the general readers accept, with the same
// meaning, and render exactly what the front printed through them. Each test compares the two.

/// argv as C strings (argv[0] = "tokenctl"), leaked: tests only (TokenTargetTests too).
func argv(_ arguments: [String]) -> (Int32, UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
    let all = ["tokenctl"] + arguments
    let vector = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: all.count + 1)
    for (index, argument) in all.enumerated() { vector[index] = strdup(argument) }
    vector[all.count] = nil
    return (Int32(all.count), vector)
}

private struct Recognized: Equatable {
    var profile: String?
    var format: HotPath.Format
    var minimumTimeToLive: Int64
    var verbose: Bool
}

private func recognize(_ arguments: [String]) -> Recognized? {
    let (count, vector) = argv(arguments)
    guard let request = HotPath.recognize(argc: count, argv: vector) else { return nil }
    return Recognized(
        profile: request.profile.map { String(cString: $0) }, format: request.format,
        minimumTimeToLive: request.minimumTimeToLive, verbose: request.verbose)
}

/// What the old front accepted as a hit request, through the general parser.
private func general(_ arguments: [String]) -> Recognized? {
    let parser = CommandLineParser(toolName: "tokenctl", commands: [SharedCommandSpecs.token])
    guard let invocation = try? parser.parse(arguments), invocation.action == .run("token"),
        !invocation.options.has("--force")
    else { return nil }
    var minimumTimeToLive: Int64 = 60
    if let text = invocation.options.value("--min-ttl") {
        guard let value = Double(text), value.isFinite, value >= 0, value <= 31_536_000 else { return nil }
        minimumTimeToLive = Int64(value)
    }
    let format: HotPath.Format
    switch invocation.options.value("--format") ?? "raw" {
    case "raw": format = .raw
    case "header": format = .header
    case "json": format = .json
    default: return nil
    }
    return Recognized(
        profile: invocation.profileName, format: format, minimumTimeToLive: minimumTimeToLive,
        verbose: invocation.verbose)
}

private func environment(_ values: [String: String]) -> (UnsafePointer<CChar>) -> UnsafePointer<CChar>? {
    let strings = values.mapValues { UnsafePointer(strdup($0)!) }
    return { name in strings[String(cString: name)] }
}

private func bytes<R>(_ text: String, _ body: (HotPath.Bytes) -> R) -> R {
    let array = Array(text.utf8)
    return array.withUnsafeBufferPointer(body)
}

@Suite("Hot path: argv")
struct HotPathArgumentTests {
    @Test("the common shapes are recognized, with the general parser's meaning")
    func accepted() {
        let cases: [([String], Recognized)] = [
            (["token"], Recognized(profile: nil, format: .raw, minimumTimeToLive: 60, verbose: false)),
            (
                ["--profile", "work", "token"],
                Recognized(profile: "work", format: .raw, minimumTimeToLive: 60, verbose: false)
            ),
            (
                ["token", "--profile", "work"],
                Recognized(profile: "work", format: .raw, minimumTimeToLive: 60, verbose: false)
            ),
            (
                ["--profile=work", "token"],
                Recognized(profile: "work", format: .raw, minimumTimeToLive: 60, verbose: false)
            ),
            (
                ["token", "--format", "json"],
                Recognized(profile: nil, format: .json, minimumTimeToLive: 60, verbose: false)
            ),
            (
                ["token", "--format=header"],
                Recognized(profile: nil, format: .header, minimumTimeToLive: 60, verbose: false)
            ),
            (
                ["token", "--format", "raw", "--min-ttl", "300"],
                Recognized(profile: nil, format: .raw, minimumTimeToLive: 300, verbose: false)
            ),
            (["token", "--min-ttl=0"], Recognized(profile: nil, format: .raw, minimumTimeToLive: 0, verbose: false)),
            (
                ["token", "--min-ttl", "31536000"],
                Recognized(profile: nil, format: .raw, minimumTimeToLive: 31_536_000, verbose: false)
            ),
            (["-v", "token"], Recognized(profile: nil, format: .raw, minimumTimeToLive: 60, verbose: true)),
            (
                ["token", "--verbose", "-v"],
                Recognized(profile: nil, format: .raw, minimumTimeToLive: 60, verbose: true)
            ),
            (
                ["--verbose", "--profile", "a.b_c-d", "token", "--format=json", "--min-ttl=007"],
                Recognized(profile: "a.b_c-d", format: .json, minimumTimeToLive: 7, verbose: true)
            ),
            // Validated later, like the general path: an invalid profile name is a miss then.
            (
                ["--profile", "--format", "token"],
                Recognized(profile: "--format", format: .raw, minimumTimeToLive: 60, verbose: false)
            ),
        ]
        for (arguments, expected) in cases {
            #expect(recognize(arguments) == expected, "\(arguments)")
            #expect(general(arguments) == expected, "\(arguments)")
        }
    }

    @Test("every other shape goes to the engine")
    func rejected() {
        let cases: [[String]] = [
            [], ["status"], ["login"], ["help"], ["help", "token"], ["token", "token"], ["token", "extra"],
            ["token", "--force"], ["token", "--timeout", "5"], ["token", "--timeout=5"], ["--", "token"],
            ["token", "--"],
            ["-h"], ["token", "-h"], ["token", "--help"], ["--version"], ["token", "--version"], ["-"], ["token", "-"],
            [""], ["token", ""], ["Token"], ["token", "--format", "yaml"], ["token", "--format"],
            ["token", "--format="],
            ["token", "--format", "json", "--format", "json"], ["token", "--format=raw", "--format", "raw"],
            ["--format", "json", "token"], ["--min-ttl", "5", "token"],
            ["token", "--min-ttl"], ["token", "--min-ttl", ""], ["token", "--min-ttl", "-1"],
            ["token", "--min-ttl", "1.5"],
            ["token", "--min-ttl", "1e3"], ["token", "--min-ttl", "0x10"], ["token", "--min-ttl", "31536001"],
            ["token", "--min-ttl", "9999999999"], ["token", "--min-ttl", " 5"],
            ["token", "--min-ttl", "5", "--min-ttl", "5"],
            ["--profile"], ["token", "--profile"], ["--profile", "a", "--profile", "a", "token"],
            ["--profile=a", "token", "--profile=a"],
            ["--profile", "x"], ["token", "--verbose=1"], ["token", "-v=1"], ["token", "-vv"], ["token", "--verb"],
            ["token", "--profiles", "x"], ["token", "--formats=json"], ["token", "--min-ttls=3"],
            ["token", "--unknown"],
            ["token", "-x"], ["tok\u{65}n\u{301}"],
        ]
        for arguments in cases {
            #expect(recognize(arguments) == nil, "\(arguments)")
        }
    }
}

@Suite("Hot path: profile and paths")
struct HotPathProfileTests {
    @Test("the profile name: --profile, else TOKENCTL_PROFILE (empty is unset), else default; invalid names miss")
    func profileName() {
        func name(_ arguments: [String], _ values: [String: String]) -> String? {
            let (count, vector) = argv(arguments)
            let request = HotPath.recognize(argc: count, argv: vector)!
            return HotPath.profileName(request, environment: environment(values)).map {
                String(decoding: $0, as: UTF8.self)
            }
        }
        #expect(name(["token"], [:]) == "default")
        #expect(name(["token"], ["TOKENCTL_PROFILE": ""]) == "default")
        #expect(name(["token"], ["TOKENCTL_PROFILE": "env"]) == "env")
        #expect(name(["--profile", "arg", "token"], ["TOKENCTL_PROFILE": "env"]) == "arg")
        #expect(name(["--profile=", "token"], ["TOKENCTL_PROFILE": "env"]) == nil)
        #expect(name(["token"], ["TOKENCTL_PROFILE": "../x"]) == nil)
        #expect(name(["token", "--profile", "-x"], [:]) == nil)
        #expect(name(["token", "--profile", String(repeating: "a", count: 65)], [:]) == nil)
        #expect(
            name(["token", "--profile", String(repeating: "a", count: 64)], [:]) == String(repeating: "a", count: 64))
        #expect(name(["token", "--profile", "é"], [:]) == nil)
    }

    @Test("the profile file's path is Paths.resolve's, and a miss wherever Paths.resolve fails")
    func paths() {
        let profile = "work"
        let environments: [[String: String]] = [
            ["HOME": "/home/u"], ["HOME": "/home/u", "XDG_CONFIG_HOME": "/cfg"],
            ["XDG_CONFIG_HOME": "/cfg", "XDG_STATE_HOME": "/st"],
            ["XDG_CONFIG_HOME": "/cfg"], ["HOME": "relative"], ["HOME": ""], [:],
            ["HOME": "/h", "XDG_CONFIG_HOME": "relative"],
            ["HOME": "/h", "XDG_CONFIG_HOME": ""], ["XDG_CONFIG_HOME": "/cfg", "XDG_STATE_HOME": "st"],
            ["HOME": "/h", "XDG_STATE_HOME": "/s", "XDG_RUNTIME_DIR": "/r"],
            ["HOME": "/" + String(repeating: "x", count: 5000)],
        ]
        for values in environments {
            var buffer = [UInt8](repeating: 0xFF, count: 4096)
            let mine = bytes(profile) { name in
                buffer.withUnsafeMutableBufferPointer { out in
                    HotPath.profileFilePath(
                        profile: name, environment: environment(values), into: out.baseAddress!, capacity: out.count)
                }
            }.map { String(decoding: buffer[0..<$0], as: UTF8.self) }
            let expected = try? Paths.resolve(.fixed(values)).profileFile(ProfileName(rawValue: profile)!)
            if let mine { #expect(buffer[mine.utf8.count] == 0) }
            #expect(mine == (expected.flatMap { $0.utf8.count < 4096 ? $0 : nil }), "\(values)")
        }
        // A non-ASCII byte right after the leading slash: Paths tests Characters; a doubt, so a miss.
        let doubtful = bytes(profile) { name in
            var buffer = [UInt8](repeating: 0, count: 4096)
            return buffer.withUnsafeMutableBufferPointer { out in
                HotPath.profileFilePath(
                    profile: name, environment: environment(["HOME": "/\u{301}h"]), into: out.baseAddress!,
                    capacity: out.count)
            }
        }
        #expect(doubtful == nil)
    }

    static let goodProfile = """
        # tokenctl profile 'default'.
        issuer = https://login.example.com
        client_id = cli
        token_endpoint = https://login.example.com/token

        """

    @Test("every key ProfileConfiguration writes is known to the hot path")
    func everyKeyKnown() {
        for key in ProfileConfiguration.keys {
            let value =
                key == "token_endpoint_auth_method"
                ? "client_secret_basic"
                : key == "client_id" || key == "scope" || key == "cacert" || key == "proxy_user"
                    ? "x"
                    : key == "dpop" || key == "dpop_allow_bearer"
                        ? "false"
                        : key == "provider"
                            ? "github"
                            : key == "grant"
                                ? "client-credentials"
                                : key == "forward"
                                    ? "true" : key.hasPrefix("forward_") ? "a b" : "https://a.example/\(key)"
            var text = "issuer = https://a.example\nclient_id = c\ntoken_endpoint = https://a.example/t\n"
            if !["issuer", "client_id", "token_endpoint"].contains(key) { text += "\(key) = \(value)\n" }
            if key == "proxy_user" { text += "proxy = http://p.example:1\n" }
            #expect(bytes(text) { HotPath.profileIdentity($0) != nil }, "\(key)")
        }
        // A proxy user needs the profile's proxy, as ProfileConfiguration says.
        let network = "issuer = https://a.example\nclient_id = c\ntoken_endpoint = https://a.example/t\n"
        #expect(bytes(network + "proxy_user = alice\n") { HotPath.profileIdentity($0) == nil })
        #expect(bytes(network + "proxy = \nproxy_user = alice\n") { HotPath.profileIdentity($0) == nil })
        #expect(bytes(network + "proxy = p:1\nproxy_user = a:b\n") { HotPath.profileIdentity($0) == nil })
        #expect(bytes(network + "proxy = p:1\nproxy_user = alice\n") { HotPath.profileIdentity($0) != nil })
        #expect(bytes(network + "proxy_user = \n") { HotPath.profileIdentity($0) != nil })
        // A DPoP profile is the engine's: its token is useless without a proof the engine signs.
        let dpop = "issuer = https://a.example\nclient_id = c\ntoken_endpoint = https://a.example/t\ndpop = true\n"
        #expect(bytes(dpop) { HotPath.profileIdentity($0) == nil })
        let allowBearer =
            "issuer = https://a.example\nclient_id = c\ntoken_endpoint = https://a.example/t\ndpop_allow_bearer = true\n"
        #expect(bytes(allowBearer) { HotPath.profileIdentity($0) != nil })
        // Every preset name, as ProfileConfiguration knows them; an unknown one is the engine's to report.
        #expect(ProfileFileSyntax.providerNames.map { "\($0)" } == Provider.names)
        let base = "issuer = https://a.example\nclient_id = c\ntoken_endpoint = https://a.example/t\n"
        for name in Provider.names {
            #expect(bytes(base + "provider = \(name)\n") { HotPath.profileIdentity($0) != nil }, "\(name)")
        }
        #expect(bytes(base + "provider = gihub\n") { HotPath.profileIdentity($0) == nil })
        // A proxy with credentials or a blank: refused by both (the engine says why).
        for proxy in ["http://u:p@corp:3128", "corp 3128"] {
            #expect(bytes(base + "proxy = \(proxy)\n") { HotPath.profileIdentity($0) == nil }, "\(proxy)")
            #expect(throws: ConfigurationError.self) {
                try ProfileConfiguration.parse(base + "proxy = \(proxy)\n", path: "p")
            }
        }
        #expect(
            bytes(base + "proxy = corp:3128\nno_proxy = .corp, 10.0.0.0/8\n") { HotPath.profileIdentity($0) != nil })
        #expect(throws: ConfigurationError.self) {
            try ProfileConfiguration.parse(base + "provider = gihub\n", path: "p")
        }
    }

    @Test(
        "profile files: accepted only where ProfileConfiguration accepts them with a token endpoint, same issuer and client"
    )
    func profileFiles() {
        let accepted = [
            Self.goodProfile,
            "issuer=https://a.example\nclient_id=c\ntoken_endpoint=https://a.example/t",
            "\t issuer \t=\t https://a.example/ \r\r\n  # comment\n\n#x=y\nclient_id = my client \ntoken_endpoint = https://a.example:8443/t?x=1\n"
                + "scope = openid email\nrevocation_endpoint = http://127.0.0.1:9/r\ncacert = /etc/ca.pem\n",
            "issuer = http://localhost:8080\nclient_id = c\ntoken_endpoint = http://[::1]:1/t\nscope =\ncacert =\n",
            "issuer = HTTPS://A.example\nclient_id = a=b\ntoken_endpoint = https://[fe80::1]/t\n# é comment\n",
            // Every key a login writes (the hot path must know them all, or every hit misses).
            ProfileConfiguration(
                issuer: try! EndpointURL("https://a.example"), clientID: "c", scope: "openid",
                tokenEndpoint: try! EndpointURL("https://a.example/t"),
                revocationEndpoint: try! EndpointURL("https://a.example/r"),
                caBundle: "/etc/ca.pem", deviceAuthorizationEndpoint: try! EndpointURL("https://a.example/d"),
                authorizationEndpoint: try! EndpointURL("https://a.example/a"),
                jwksURI: try! EndpointURL("https://a.example/j"),
                tokenEndpointAuthMethod: .clientSecretPost
            ).serialized(profile: .default),
            // A machine profile, as `login --grant client-credentials` writes it: its hits are
            // served as a session's.
            {
                var machine = ProfileConfiguration(
                    issuer: try! EndpointURL("https://a.example"), clientID: "c", scope: "machine",
                    tokenEndpoint: try! EndpointURL("https://a.example/t"),
                    tokenEndpointAuthMethod: .selfSignedTLSClientAuth)
                machine.grant = .clientCredentials
                machine.assertionAudience = "https://a.example/t"
                machine.mtlsTokenEndpoint = try! EndpointURL("https://mtls.a.example/t")
                return machine.serialized(profile: .default)
            }(),
            Self.goodProfile + "token_endpoint_auth_method = private_key_jwt\n",
            Self.goodProfile + "grant = client-credentials\ntoken_endpoint_auth_method = tls_client_auth\n",
            // The platform's token files, as `login --grant token-exchange` and `jwt-bearer` write them.
            {
                var machine = ProfileConfiguration(
                    issuer: try! EndpointURL("https://a.example"), clientID: "c",
                    tokenEndpoint: try! EndpointURL("https://a.example/t"), tokenEndpointAuthMethod: .privateKeyJWT)
                machine.grant = .tokenExchange
                machine.subjectTokenFile = "/var/run/secrets/tokens/token"
                machine.subjectTokenType = "urn:ietf:params:oauth:token-type:id_token"
                machine.requestedTokenType = "urn:ietf:params:oauth:token-type:access_token"
                machine.clientAssertionFile = "/var/run/secrets/azure/token"
                return machine.serialized(profile: .default)
            }(),
            Self.goodProfile + "grant = jwt-bearer\nassertion_file = /run/ci/id-token\n",
        ]
        let rejected = [
            "", "issuer = https://a.example\nclient_id = c\n", // no token endpoint: the engine refuses it
            Self.goodProfile + "bogus = 1\n", Self.goodProfile + "issuer = https://b.example\n",
            Self.goodProfile + "no equals sign\n",
            Self.goodProfile + "scope = a\u{7}b\n", Self.goodProfile + "scope = a\u{7F}b\n",
            Self.goodProfile + "scope = caf\u{E9}\n",
            Self.goodProfile + "cacert = a\u{0}b\n", Self.goodProfile + "Issuer = https://b.example\n",
            "issuer = https://a.example\nclient_id =\ntoken_endpoint = https://a.example/t\n",
            "issuer =\nclient_id = c\ntoken_endpoint = https://a.example/t\n",
            "issuer = http://a.example\nclient_id = c\ntoken_endpoint = https://a.example/t\n",
            "issuer = https://a.example\nclient_id = c\ntoken_endpoint = https://a.example:99999/t\n",
            "issuer = https://a.example\nclient_id = c\ntoken_endpoint = https://a.example/t\nrevocation_endpoint = ftp://x/\n",
            "issuer = https://a.example\nclient_id = c\ntoken_endpoint = https://a.example/t\nrevocation_endpoint =\n",
            "issuer = https://a.example\nclient_id = c\ntoken_endpoint = https://a.example/t\nclient_id = c\n",
            "issuer = https://a.example\nclient_id = c\rd\ntoken_endpoint = https://a.example/t\n",
            // Valid, but a doubt:
            "issuer = https://a.example\nclient_id = caf\u{E9}\ntoken_endpoint = https://a.example/t\n",
            Self.goodProfile + "jwks_uri = ftp://x/\n",
            Self.goodProfile + "token_endpoint_auth_method = private_key_jwt_\n",
            Self.goodProfile + "grant = password\n",
            Self.goodProfile + "subject_token_file = /a\nsubject_token_file = /b\n",
            Self.goodProfile + "mtls_token_endpoint = ftp://x/\n",
            Self.goodProfile + "assertion_audience =\n",
        ]
        for text in accepted + rejected {
            let mine = bytes(text) { file in
                HotPath.profileIdentity(file).map {
                    (String(decoding: $0.issuer, as: UTF8.self), String(decoding: $0.clientID, as: UTF8.self))
                }
            }
            let configuration = try? ProfileConfiguration.parse(text, path: "p")
            if let mine {
                #expect(configuration?.tokenEndpoint != nil, "\(text)")
                #expect(configuration?.issuer.string == mine.0, "\(text)")
                #expect(configuration?.clientID == mine.1, "\(text)")
            }
            #expect((mine != nil) == accepted.contains(text), "\(text)")
        }
    }

    @Test("URL checks agree with EndpointURL")
    func urls() {
        let urls = [
            "https://a", "https://a.example/", "HTTPS://A.EXAMPLE:443/x?y#", "https://a.example/#frag",
            "https://u@a.example/",
            "https://a.example/p@q", "https://a.example?x@y", "http://localhost", "http://LOCALHOST:8080/",
            "http://localhost.evil/",
            "http://127.0.0.1", "http://127.1.2.3:80/", "http://127.0.0.256/", "http://127.0.0", "http://127.0.0.1.1",
            "http://0127.0.0.1",
            "http://127..0.1", "http://[::1]:8000/x", "http://[::2]/", "https://[::1", "https://[::1]x",
            "https://[::1]:", "https://a:",
            "https://a:65535", "https://a:65536", "https://a:0x10", "https://:80", "https://", "https:///path", "a://b",
            "https:/a",
            "", " https://a", "https://a b", "https://\u{E9}", "ftp://a", "httpx://a", "https://a:1:2", "https://a?b:c",
            "://a",
            "x://y://z", "https://a.example:00000000000000000000443/",
        ]
        for url in urls {
            let mine = bytes(url) { HotPath.isValidEndpoint($0) }
            #expect(mine == ((try? EndpointURL(url)) != nil), "\(url)")
        }
    }
}

/// The old front's hit, through the general readers (`HotCacheEntry.decode`, `isFresh`) and
/// `OldFrontRendering`, with the min-ttl note it printed, for comparison.
private func reference(
    payload: [UInt8], profile: String, issuer: String, clientID: String,
    format: HotPath.Format, minimumTimeToLive: Double, verbose: Bool, now: Double
) -> (log: String, output: String)? {
    guard let entry = try? HotCacheEntry.decode(payload),
        entry.belongs(to: ProfileName(rawValue: profile)!, issuer: issuer, clientID: clientID),
        entry.isFresh(at: now, minimumTimeToLive: minimumTimeToLive)
    else { return nil }
    let rendered = OldFrontRendering.render(entry, profile: profile, format: format, verbose: verbose, now: now)
    var log = rendered.log
    let margin = AccessTokenLifetime.refreshMargin(
        issuedLifetime: entry.issuedLifetime, minimumTimeToLive: minimumTimeToLive)
    if verbose, margin < minimumTimeToLive, !entry.statesNoExpiry {
        log +=
            "tokenctl: min-ttl \(Int(minimumTimeToLive)) s capped at \(Int(margin.rounded(.down))) s, half the access token's lifetime (a longer one could never be met)\n"
    }
    return (log, rendered.output)
}

private func mine(
    payload: [UInt8], profile: String, issuer: String, clientID: String,
    format: HotPath.Format, minimumTimeToLive: Int64, verbose: Bool, now: HotPath.Instant
) -> (log: String, output: String)? {
    var request = HotPath.Request()
    request.format = format
    request.minimumTimeToLive = minimumTimeToLive
    request.verbose = verbose
    var out = [UInt8](repeating: 0, count: 2 * HotCacheEntry.maximumPayloadSize + 512)
    return payload.withUnsafeBufferPointer { payload in
        bytes(profile) { profile in
            bytes(issuer) { issuer in
                bytes(clientID) { clientID in
                    guard let token = HotPath.cachedToken(payload, profile: profile, issuer: issuer, clientID: clientID)
                    else { return nil }
                    guard
                        let rendered = out.withUnsafeMutableBufferPointer({
                            HotPath.render(token, profile: profile, request: request, now: now, into: $0)
                        })
                    else { return nil }
                    return (
                        String(decoding: out[0..<rendered.logCount], as: UTF8.self),
                        String(
                            decoding: out[rendered.logCount..<(rendered.logCount + rendered.outputCount)], as: UTF8.self
                        )
                    )
                }
            }
        }
    }
}

@Suite("Hot path: payload and output")
struct HotPathOutputTests {
    static func entry(
        profile: String = "default", issuer: String = "https://login.example.com", clientID: String = "cli",
        accessToken: String = "at_0123456789", tokenType: String = "Bearer",
        obtainedAt: Double = 1_764_425_000.25, expiresAt: Double? = 1_764_428_600.25, issuedLifetime: Double? = 3600,
        statesNoExpiry: Bool = false
    ) -> HotCacheEntry {
        HotCacheEntry(
            profile: ProfileName(rawValue: profile)!, issuer: issuer, clientID: clientID, accessToken: accessToken,
            tokenType: tokenType, obtainedAt: obtainedAt, expiresAt: expiresAt, issuedLifetime: issuedLifetime,
            statesNoExpiry: statesNoExpiry)
    }

    @Test("key description: the same as HotCacheEntry's")
    func keyDescription() {
        for (profile, issuer, clientID) in [
            ("default", "https://login.example.com", "cli"), ("a", "https://x/a", "bc"),
            ("w-1.x_y", "http://127.0.0.1:9/", "c d"),
        ] {
            let expected = HotCacheEntry.keyDescription(
                profile: ProfileName(rawValue: profile)!, issuer: issuer, clientID: clientID)
            var buffer = [UInt8](repeating: 0, count: 128)
            let count = bytes(profile) { p in
                bytes(issuer) { i in
                    bytes(clientID) { c in
                        buffer.withUnsafeMutableBufferPointer {
                            HotPath.keyDescription(
                                profile: p, issuer: i, clientID: c, into: $0.baseAddress!, capacity: 128)
                        }
                    }
                }
            }
            #expect(count.map { String(decoding: buffer[0..<$0], as: UTF8.self) } == expected)
        }
    }

    @Test("hit output equals the general path's, all formats, verbose or not, across freshness boundaries")
    func sameOutput() throws {
        let entries = [
            Self.entry(),
            Self.entry(expiresAt: nil, issuedLifetime: nil),
            // No stated expiry: served at every offset, with every min-ttl.
            Self.entry(expiresAt: nil, issuedLifetime: nil, statesNoExpiry: true),
            Self.entry(expiresAt: 1_764_425_030, issuedLifetime: 30), // a 30-second token: margin 15 s
            Self.entry(accessToken: "a\"b\\c~!", tokenType: "DPoP"),
            Self.entry(accessToken: String(repeating: "\"", count: 16_000)),
            Self.entry(obtainedAt: 1_764_425_000, expiresAt: 1_764_425_000 + 86_400 * 3, issuedLifetime: 86_400 * 3),
            Self.entry(obtainedAt: 0.001, expiresAt: 951_868_800.999, issuedLifetime: 0.5), // leap day 2000
        ]
        let offsets: [Double] = [
            -10, 0, 0.25, 1, 14.5, 15.25, 59, 119.75, 120.25, 239, 300, 3000, 3539.25, 3540.25, 3600, 7300, 200_000,
            1e7,
        ]
        var hits = 0
        for entry in entries {
            let payload = try entry.encoded()
            for offset in offsets {
                // Whole milliseconds from obtained_at plus 0.5 ms: no Double rounding ties at the boundaries.
                let nowMilliseconds = Int64((entry.obtainedAt * 1000).rounded()) + Int64(offset * 1000) + 0
                let now = HotPath.Instant(
                    seconds: nowMilliseconds / 1000, nanoseconds: (nowMilliseconds % 1000) * 1_000_000 + 500_000)
                let nowDouble = Double(now.seconds) + Double(now.nanoseconds) / 1e9
                for format in [HotPath.Format.raw, .header, .json] {
                    for verbose in [false, true] {
                        for ttl in [0, 60, 600, 31_536_000] as [Int64] {
                            let expected = reference(
                                payload: payload, profile: entry.profile.rawValue, issuer: entry.issuer,
                                clientID: entry.clientID,
                                format: format, minimumTimeToLive: Double(ttl), verbose: verbose, now: nowDouble)
                            let actual = mine(
                                payload: payload, profile: entry.profile.rawValue, issuer: entry.issuer,
                                clientID: entry.clientID,
                                format: format, minimumTimeToLive: ttl, verbose: verbose, now: now)
                            #expect(actual?.log == expected?.log, "\(entry) \(offset) \(format) \(ttl)")
                            #expect(actual?.output == expected?.output, "\(entry) \(offset) \(format) \(ttl)")
                            if actual != nil { hits += 1 }
                        }
                    }
                }
            }
        }
        #expect(hits > 100)
    }

    @Test("payloads: accepted only where HotCacheEntry.decode accepts them and the identity matches")
    func payloads() throws {
        let good = String(decoding: try Self.entry().encoded(), as: UTF8.self)
        let lines = good.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var variants = [
            good, String(good.dropLast()), good + "\n", "tokenctl-hotcache-v2" + good.dropFirst(20),
            good.replacingFirst("=", ""),
        ]
        variants.append(
            String(
                decoding: try Self.entry(expiresAt: nil, issuedLifetime: nil, statesNoExpiry: true).encoded(),
                as: UTF8.self))
        // Each line dropped, doubled, or with its value emptied or changed.
        for index in 1..<(lines.count - 1) {
            var dropped = lines
            dropped.remove(at: index)
            variants.append(dropped.joined(separator: "\n"))
            var doubled = lines
            doubled.insert(lines[index], at: index)
            variants.append(doubled.joined(separator: "\n"))
            let key = lines[index].prefix { $0 != "=" }
            for value in [
                "", " ", "x", "never", "Never", "never ", "1e3", "0x10", "12.", ".5", "1.2345", "1.2.3", "nan",
                "99999999999", "999999999999",
                "https://login.example.com ", "cli\u{7}", "cli\u{E9}", "Bearer x", "default2", "-x", "=", "a=b",
            ] {
                var changed = lines
                changed[index] = key + "=" + value
                variants.append(changed.joined(separator: "\n"))
            }
        }
        variants.append(good.replacingFirst("client_id", "Client_id"))
        variants.append(good.replacingFirst("access_token=", "access_token ="))
        variants.append(good + "unknown=1\n")
        var accepted = 0
        for text in variants {
            let payload = Array(text.utf8)
            let decoded = try? HotCacheEntry.decode(payload)
            let token = payload.withUnsafeBufferPointer { payload in
                bytes("default") { p in
                    bytes("https://login.example.com") { i in
                        bytes("cli") { c in
                            HotPath.cachedToken(payload, profile: p, issuer: i, clientID: c).map { token in
                                (
                                    String(decoding: token.accessToken, as: UTF8.self),
                                    String(decoding: token.tokenType, as: UTF8.self),
                                    token.obtainedAt, token.expiresAt, token.issuedLifetime, token.statesNoExpiry
                                )
                            }
                        }
                    }
                }
            }
            guard let token else { continue }
            accepted += 1
            #expect(
                decoded?.belongs(to: .default, issuer: "https://login.example.com", clientID: "cli") == true, "\(text)")
            #expect(decoded?.accessToken == token.0 && decoded?.tokenType == token.1, "\(text)")
            func double(_ time: HotPath.Time?) -> Double? {
                time.map { Double($0.seconds) + Double($0.milliseconds) / 1000 }
            }
            #expect(
                decoded?.obtainedAt == double(token.2) && decoded?.expiresAt == double(token.3)
                    && decoded?.issuedLifetime == double(token.4) && decoded?.statesNoExpiry == token.5, "\(text)")
        }
        #expect(accepted > 10)
    }
}

extension String {
    fileprivate func replacingFirst(_ target: String, _ replacement: String) -> String {
        let bytes = Array(utf8)
        let needle = Array(target.utf8)
        guard bytes.count >= needle.count else { return self }
        for index in 0...(bytes.count - needle.count) where Array(bytes[index..<(index + needle.count)]) == needle {
            return String(
                decoding: Array(bytes[..<index]) + Array(replacement.utf8) + Array(bytes[(index + needle.count)...]),
                as: UTF8.self)
        }
        return self
    }
}
