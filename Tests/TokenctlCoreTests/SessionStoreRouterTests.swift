import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// Which profiles keep their tokens in the kernel keyring only (`SessionStoreRouter`), and that
/// such a profile's calls never reach the Secret Service side while every other profile's do
/// (here a store that fails as a machine with no session bus does). The kernel keyring side is
/// the hot cache, switched off by its test switch: a read is a miss, as after the token's expiry.
@Suite("SessionStoreRouter: a TPM key's machine profile needs no Secret Service")
struct SessionStoreRouterTests {
    /// A private directory for a test's profile files, and the paths in it.
    static func temporaryPaths() -> (root: String, paths: Paths) {
        let root = NSTemporaryDirectory() + "tokenctl-router-" + UUID().uuidString
        return (
            root,
            Paths(configDirectory: root + "/config", lockDirectory: root + "/run", stateDirectory: root + "/state")
        )
    }

    static func machine(_ method: ClientAuthenticationMethod) throws -> ProfileConfiguration {
        var configuration = ProfileConfiguration(
            issuer: try EndpointURL("https://idp.example"), clientID: "robot",
            tokenEndpoint: try EndpointURL("https://idp.example/token"), tokenEndpointAuthMethod: method)
        configuration.grant = .clientCredentials
        return configuration
    }

    @Test("kernel keyring only: a machine profile with a TPM key, no secret, no DPoP key, no key_file")
    func decision() throws {
        let keyed = try Self.machine(.privateKeyJWT)
        #expect(SessionStoreRouter.needsNoSecretService(keyed, hasTPMKey: true))
        #expect(!SessionStoreRouter.needsNoSecretService(keyed, hasTPMKey: false))
        #expect(SessionStoreRouter.needsNoSecretService(try Self.machine(.tlsClientAuth), hasTPMKey: true))
        for method in [ClientAuthenticationMethod.clientSecretBasic, .clientSecretPost, .clientSecretJWT] {
            #expect(!SessionStoreRouter.needsNoSecretService(try Self.machine(method), hasTPMKey: true))
        }
        var person = keyed
        person.grant = nil
        #expect(!SessionStoreRouter.needsNoSecretService(person, hasTPMKey: true), "a refresh token")
        var dpop = keyed
        dpop.dpop = true
        #expect(!SessionStoreRouter.needsNoSecretService(dpop, hasTPMKey: true), "a DPoP key")
        var files = keyed
        files.keyFile = "/etc/robot/key.pem"
        #expect(!SessionStoreRouter.needsNoSecretService(files, hasTPMKey: true))
    }

    @Test("a TPM key's machine profile never reaches the Secret Service side; a software key's does (and fails)")
    func routing() throws {
        let (root, paths) = Self.temporaryPaths()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let keyring = InMemorySessionStore()
        keyring.failure = StoreError(.noSessionBus, "cannot connect to the D-Bus session bus")
        let router = SessionStoreRouter(
            keyring: keyring,
            kernelOnly: KernelKeyringTokenStore(
                hotCache: HotCache(environment: .fixed([HotCache.disableVariable: "1"]))),
            paths: paths)
        let profiles = ProfileRepository(paths: paths)
        let (tpm, software) = (try #require(ProfileName(rawValue: "tpm")), try #require(ProfileName(rawValue: "sw")))
        try profiles.save(try Self.machine(.privateKeyJWT), as: tpm)
        try profiles.save(try Self.machine(.privateKeyJWT), as: software)
        let blob = ClientKeys(store: keyring, paths: paths, clock: .system).tpmKeyFile(tpm, slot: .current)
        try FileManager.default.createDirectory(
            atPath: (blob as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try "blob".write(toFile: blob, atomically: true, encoding: .utf8)

        #expect(router.keepsTokensInKernelKeyringOnly(tpm))
        #expect(!router.keepsTokensInKernelKeyringOnly(software))
        let tpmIdentity = SessionIdentity(profile: tpm, configuration: try Self.machine(.privateKeyJWT))
        #expect(try router.read(tpmIdentity) == nil)
        try router.checkWritable(tpmIdentity)
        #expect(try router.readClientSecret(tpmIdentity) == nil)
        #expect(try router.readClientKey(tpm, slot: .next) == nil, "no Secret Service, no key in it")
        #expect(try router.bounded(until: .after(30)).read(tpmIdentity) == nil)

        let softwareIdentity = SessionIdentity(profile: software, configuration: try Self.machine(.privateKeyJWT))
        #expect(throws: StoreError.self) { try router.read(softwareIdentity) }
        #expect(throws: StoreError.self) { try router.readClientKey(software, slot: .current) }
        #expect(throws: StoreError.self) { try router.checkWritable(softwareIdentity) }

        // A login declares its profile's choice before the file says it.
        router.declareKernelKeyringOnly(software, true)
        #expect(try router.bounded(until: .after(30)).read(softwareIdentity) == nil)
        router.declareKernelKeyringOnly(tpm, false)
        #expect(throws: StoreError.self) { try router.read(tpmIdentity) }
    }

    @Test(
        "a kernel-keyring-only profile keeps the server clock offset beside its token, also after the token has gone; logout drops it"
    )
    func clockOffsetBesideTheToken() throws {
        guard KernelKeyring.isAvailable() else { return } // no kernel keyring here: nothing to keep
        let (root, paths) = Self.temporaryPaths()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let hotCache = HotCache(environment: .fixed([:]))
        let router = SessionStoreRouter(
            keyring: InMemorySessionStore(), kernelOnly: KernelKeyringTokenStore(hotCache: hotCache), paths: paths)
        let name = try #require(ProfileName(rawValue: "clock-" + UUID().uuidString.prefix(8).lowercased()))
        let other = try #require(ProfileName(rawValue: "other-" + UUID().uuidString.prefix(8).lowercased()))
        router.declareKernelKeyringOnly(name, true)
        let identity = SessionIdentity(profile: name, configuration: try Self.machine(.privateKeyJWT))
        defer { _ = try? router.delete(identity) }
        let now = Date().timeIntervalSince1970
        let set = TokenSet(
            accessToken: "at-" + UUID().uuidString, refreshToken: nil, expiresAt: now + 3600, issuedLifetime: 3600,
            obtainedAt: now, serverClockOffset: -42.5)

        try router.write(set, for: identity)
        #expect(try router.read(identity)?.serverClockOffset == -42.5)
        // The token leaves the keyring (its expiry): the offset stays for the next request.
        hotCache.invalidate(profile: identity.profile, issuer: identity.issuer, clientID: identity.clientID)
        #expect(try router.read(identity) == nil)
        #expect(router.rememberedServerClockOffset(identity) == -42.5)
        // A profile whose set lives in the Secret Service carries its own offset there.
        let elsewhere = SessionIdentity(profile: other, configuration: try Self.machine(.privateKeyJWT))
        #expect(router.rememberedServerClockOffset(elsewhere) == nil)
        // Logout forgets it with the token.
        try router.write(set, for: identity)
        #expect(try router.delete(identity))
        #expect(router.rememberedServerClockOffset(identity) == nil)
    }

    @Test(
        "a machine's token lives in the kernel keyring where it can be used (not with a DPoP key, never a person's); its secret still needs the Secret Service"
    )
    func machineTokensInTheKernelKeyring() throws {
        typealias Router = SessionStoreRouter
        for method in ClientAuthenticationMethod.allCases {
            let machine = try Self.machine(method)
            #expect(Router.keepsTokensInKernelKeyringOnly(machine, hasTPMKey: false, kernelKeyringUsable: true))
            #expect(!Router.keepsTokensInKernelKeyringOnly(machine, hasTPMKey: false, kernelKeyringUsable: false))
        }
        var dpop = try Self.machine(.clientSecretBasic)
        dpop.dpop = true
        #expect(!Router.keepsTokensInKernelKeyringOnly(dpop, hasTPMKey: false, kernelKeyringUsable: true))
        var person = try Self.machine(.clientSecretBasic)
        person.grant = nil
        #expect(!Router.keepsTokensInKernelKeyringOnly(person, hasTPMKey: false, kernelKeyringUsable: true))
        // A TPM key without a secret: in the kernel keyring whatever it can do (there is no
        // other place).
        let tpm = try Self.machine(.privateKeyJWT)
        #expect(Router.keepsTokensInKernelKeyringOnly(tpm, hasTPMKey: true, kernelKeyringUsable: false))

        // A login's check before sending: a secret's profile needs the Secret Service writable.
        let (root, paths) = Self.temporaryPaths()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let keyring = InMemorySessionStore()
        keyring.failure = StoreError(.noSessionBus, "cannot connect to the D-Bus session bus")
        let router = Router(
            keyring: keyring, kernelOnly: KernelKeyringTokenStore(hotCache: HotCache(environment: .fixed([:]))),
            paths: paths)
        let (secret, keyed) = (try #require(ProfileName(rawValue: "sec")), try #require(ProfileName(rawValue: "tpm")))
        router.declare(secret, configuration: try Self.machine(.clientSecretBasic), hasTPMKey: false)
        router.declare(keyed, configuration: tpm, hasTPMKey: true)
        let secretIdentity = SessionIdentity(profile: secret, configuration: try Self.machine(.clientSecretBasic))
        #expect(throws: StoreError.self) { try router.checkWritable(secretIdentity) }
        try router.checkWritable(SessionIdentity(profile: keyed, configuration: tpm))
        #expect(router.needsNoSecretService(keyed) && !router.needsNoSecretService(secret))
    }
}
