import Testing
import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

// Per-call targets (`token --scope/--audience/--resource`): the engine's TokenTarget and the
// front's byte-level TokenTargetSyntax must name the same hot-cache key and accept the same
// payloads, whatever the order and spacing of the words.

private func withBytes<R>(_ text: String?, _ body: (UnsafeBufferPointer<UInt8>?) -> R) -> R {
    guard let text else { return body(nil) }
    return Array(text.utf8).withUnsafeBufferPointer { body($0) }
}

private func frontDigest(scope: String?, audience: String?, resource: String?) -> UInt64 {
    withBytes(scope) { s in
        withBytes(audience) { a in
            withBytes(resource) { r in TokenTargetSyntax.digest(scope: s, audience: a, resource: r) }
        }
    }
}

@Suite("Token targets: canonical form, digest and hot-cache payloads")
struct TokenTargetTests {
    @Test("scopes and resources are sets: order, spacing and repeats do not make another target")
    func canonical() throws {
        let a = try TokenTarget(scope: "write read", audience: nil, resource: nil)
        let b = try TokenTarget(scope: "  read write read ", audience: nil, resource: nil)
        #expect(a == b)
        #expect(a.scopeField == "read write")
        #expect(!a.isSession && TokenTarget.session.isSession)
        #expect(try TokenTarget(scope: nil, audience: nil, resource: nil) == .session)
        let full = try TokenTarget(scope: "read", audience: "api", resource: "https://b.test/ https://a.test/")
        #expect(full.resourceField == "https://a.test/ https://b.test/")
        #expect(full.description == "scope 'read', audience 'api', resource 'https://a.test/ https://b.test/'")
        #expect(TokenTarget(storedScope: "read write", audience: nil, resource: nil) == a)
        #expect(
            TokenTarget(storedScope: "write read", audience: nil, resource: nil) == nil, "stored targets are canonical")
    }

    @Test("a stored target reads back as the target its options make: every canonical field, and nothing else")
    func storedFieldsReadBack() throws {
        let targets = [
            try TokenTarget(scope: "read", audience: nil, resource: nil),
            try TokenTarget(scope: "b a c", audience: "api", resource: nil),
            try TokenTarget(scope: nil, audience: "https://api.example/", resource: "https://b.test/ https://a.test/x"),
            try TokenTarget(scope: (0..<32).map { "s\($0)" }.joined(separator: " "), audience: nil, resource: "urn:x"),
        ]
        for target in targets {
            #expect(
                TokenTarget(storedScope: target.scopeField, audience: target.audience, resource: target.resourceField)
                    == target, "\(target)")
        }
        for (scope, audience, resource) in [
            ("a  b", nil, nil), (" a", nil, nil), ("a b ", nil, nil), ("a a", nil, nil), ("a\"b", nil, nil),
            (nil, "two words", nil), (nil, nil, "relative"), (nil, nil, "https://b.test/ https://a.test/"),
            ("", nil, nil), ((0..<33).map { "s\($0)" }.sorted().joined(separator: " "), nil, nil),
        ] as [(String?, String?, String?)] {
            #expect(
                TokenTarget(storedScope: scope, audience: audience, resource: resource) == nil,
                "\(String(describing: scope)) \(String(describing: audience)) \(String(describing: resource))")
        }
    }

    @Test("values a server could not take are usage errors naming the option")
    func invalid() {
        let cases: [(String?, String?, String?, String)] = [
            ("", nil, nil, "--scope"), ("   ", nil, nil, "--scope"), ("a\"b", nil, nil, "--scope"),
            ("a\\b", nil, nil, "--scope"),
            ("caf\u{E9}", nil, nil, "--scope"), ("a\tb", nil, nil, "--scope"),
            (nil, "", nil, "--audience"), (nil, "two words", nil, "--audience"), (nil, "x\u{7}", nil, "--audience"),
            (nil, nil, "relative/path", "--resource"), (nil, nil, "https://a.test/#frag", "--resource"),
            (nil, nil, "", "--resource"),
            (nil, nil, "1http://x", "--resource"),
            ((0..<33).map { "s\($0)" }.joined(separator: " "), nil, nil, "--scope"),
            (String(repeating: "a", count: 1025), nil, nil, "--scope"),
        ]
        for (scope, audience, resource, option) in cases {
            #expect(
                throws: TokenTargetError.self,
                "\(String(describing: scope)) \(String(describing: audience)) \(String(describing: resource))"
            ) {
                try TokenTarget(scope: scope, audience: audience, resource: resource)
            }
            do { _ = try TokenTarget(scope: scope, audience: audience, resource: resource) } catch {
                #expect(error.option == option)
                #expect(error.description.hasPrefix("Invalid value for '\(option)': "))
            }
        }
        #expect((try? TokenTarget(scope: nil, audience: nil, resource: "urn:example:api")) != nil)
    }

    @Test("the front's digest of the words as given equals the engine's of the canonical target")
    func digest() throws {
        let shapes: [(String?, String?, String?)] = [
            ("read", nil, nil), ("write read", nil, nil), ("b  a c", "aud", nil),
            (nil, "api://x", "https://r.test/ urn:x"),
            (nil, nil, "https://r2.test/ https://r1.test/"), ("openid", "a", "https://r.test/"),
        ]
        var digests = Set<UInt64>()
        for (scope, audience, resource) in shapes {
            let target = try TokenTarget(scope: scope, audience: audience, resource: resource)
            #expect(target.digest == frontDigest(scope: scope, audience: audience, resource: resource), "\(target)")
            digests.insert(target.digest!)
        }
        #expect(digests.count == shapes.count, "distinct targets, distinct digests")
        // The same word in another part is another target.
        #expect(
            frontDigest(scope: "x", audience: nil, resource: nil)
                != frontDigest(scope: nil, audience: "x", resource: nil))
        #expect(TokenTarget.session.digest == nil)
    }

    @Test("key descriptions: the session's is what it always was; each target has its own")
    func keys() throws {
        let profile = ProfileName(rawValue: "work")!
        var reference = FNV1a64()
        reference.update("v1")
        for part in ["work", "https://login.example.com", "cli"] {
            reference.update([0])
            reference.update(part)
        }
        let session = HotCacheEntry.keyDescription(
            profile: profile, issuer: "https://login.example.com", clientID: "cli")
        #expect(session == "tokenctl:v1:work:" + reference.hexDigest, "keys of older versions stay valid")
        let read = HotCacheEntry.keyDescription(
            profile: profile, issuer: "https://login.example.com", clientID: "cli",
            target: try TokenTarget(scope: "read", audience: nil, resource: nil))
        let write = HotCacheEntry.keyDescription(
            profile: profile, issuer: "https://login.example.com", clientID: "cli",
            target: try TokenTarget(scope: "write", audience: nil, resource: nil))
        #expect(read.hasPrefix(HotCacheEntry.keyPrefix(profile: profile)) && read.count == session.count)
        #expect(Set([session, read, write]).count == 3)
    }

    @Test("argv: --scope, --audience and --resource after token, once each, are the front's")
    func argvShapes() {
        func request(_ arguments: [String]) -> HotPath.Request? {
            let (count, vector) = argv(arguments)
            return HotPath.recognize(argc: count, argv: vector)
        }
        let full = request([
            "token", "--scope", "read write", "--audience=api", "--resource", "https://r.test/", "--format", "json",
        ])
        #expect(full.map { String(cString: $0.scope!) } == "read write")
        #expect(full.map { String(cString: $0.audience!) } == "api")
        #expect(full.map { String(cString: $0.resource!) } == "https://r.test/")
        #expect(full?.hasTarget == true && request(["token"])?.hasTarget == false)
        #expect(request(["token", "--scope", "a", "--scope", "b"]) == nil, "given twice: the engine says so")
        #expect(request(["--scope", "a", "token"]) == nil, "before the command: the engine says so")
        #expect(request(["token", "--scope"]) == nil)
    }

    @Test("payloads: a target's token is served only for the same target, in any word order")
    func payloads() throws {
        let target = try TokenTarget(scope: "read write", audience: "api", resource: "https://r.test/")
        let entry = HotCacheEntry(
            profile: .default, issuer: "https://login.example.com", clientID: "cli", accessToken: "at_read",
            tokenType: "Bearer",
            obtainedAt: 1_764_425_000, expiresAt: 1_764_428_600, issuedLifetime: 3600, target: target)
        let payload = try entry.encoded()
        #expect(try HotCacheEntry.decode(payload) == entry)
        let text = String(decoding: payload, as: UTF8.self)
        #expect(text.contains("\nscope=read write\naudience=api\nresource=https://r.test/\naccess_token=at_read\n"))

        func served(_ payload: [UInt8], scope: String?, audience: String?, resource: String?) -> Bool {
            payload.withUnsafeBufferPointer { payload in
                withBytes("default") { p in
                    withBytes("https://login.example.com") { i in
                        withBytes("cli") { c in
                            withBytes(scope) { s in
                                withBytes(audience) { a in
                                    withBytes(resource) { r in
                                        HotPath.cachedToken(
                                            payload, profile: p!, issuer: i!, clientID: c!, scope: s, audience: a,
                                            resource: r) != nil
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        #expect(served(payload, scope: "write  read", audience: "api", resource: "https://r.test/"))
        #expect(!served(payload, scope: nil, audience: nil, resource: nil), "never for the session's own token")
        #expect(!served(payload, scope: "read", audience: "api", resource: "https://r.test/"))
        #expect(!served(payload, scope: "read write admin", audience: "api", resource: "https://r.test/"))
        #expect(!served(payload, scope: "read write", audience: "api2", resource: "https://r.test/"))
        #expect(!served(payload, scope: "read write", audience: nil, resource: "https://r.test/"))
        #expect(!served(payload, scope: "read write", audience: "api", resource: nil))
        #expect(!served(payload, scope: "read read", audience: "api", resource: "https://r.test/"))
        // The session's own payload is not a target's.
        var own = entry
        own.target = .session
        #expect(!served(try own.encoded(), scope: "read write", audience: "api", resource: "https://r.test/"))
        #expect(served(try own.encoded(), scope: nil, audience: nil, resource: nil))
        // A payload whose target is not canonical is not one tokenctl wrote.
        let reordered = Array(text.replacingOccurrences(of: "scope=read write", with: "scope=write read").utf8)
        #expect((try? HotCacheEntry.decode(reordered)) == nil)
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        var result = ""
        var rest = Substring(self)
        while let range = rest.firstRange(of: target) {
            result += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}
