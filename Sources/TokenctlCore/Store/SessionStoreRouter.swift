import Synchronization
import TokenctlEssentials

/// Where each profile's tokens live: the Secret Service (behind the rotation journal) for a
/// person's session, and the kernel keyring only for a machine profile's.
///
/// A machine profile has no refresh token: its access token is a cache of what the client's
/// own credentials obtain again at any time (RFC 6749 §4.4, and the platform grants of RFC 8693
/// and RFC 7523). The hot cache's entry in the user keyring (readable by this user only, kept
/// across processes and logouts until the token's expiry or a reboot) is then the whole of
/// what is kept: writing it to the Secret Service too would cost a keyring write per token
/// (gnome-keyring rewrites its whole file) and keep nothing a new request does not give. Where
/// the kernel keyring cannot be used (a container that forbids keyctl, the test switch), the
/// Secret Service keeps it as before. A DPoP key is a secret of the set: such a profile's set
/// stays in the Secret Service. Its client secret or key stays there too.
///
/// One kind needs no Secret Service at all: a machine profile whose key is in the TPM (its
/// key's blob is wrapped by the TPM, a 0600 file useless on another machine) and which has no
/// client secret, no DPoP key and no `key_file`: it works on a server with no keyring.
///
/// The choice is the profile's, read from its file; a login declares it before the profile is
/// saved (`declareKernelKeyringOnly`). Client keys always go to the Secret Service side (a TPM
/// key's blob is found in its file before the store is asked).
public final class SessionStoreRouter: WrappingSessionStore, Sendable {
    /// The store of every other profile: the Secret Service behind the rotation journal.
    public let keyring: any SessionStore
    public var secrets: any SessionStore { keyring }
    let kernelOnly: KernelKeyringTokenStore
    let paths: Paths
    /// What logins in this process declared, and what was decided from profile files, one
    /// `Placement` per profile (shared with the bounded copies).
    private let declared: Declarations

    /// Where a profile's things are: its tokens, and whether it needs a Secret Service at all.
    struct Placement: Sendable {
        var tokensInKernelKeyring: Bool
        var withoutSecretService: Bool
    }

    final class Declarations: Sendable {
        let placements = Mutex<[ProfileName: Placement]>([:])
    }

    public convenience init(keyring: any SessionStore, kernelOnly: KernelKeyringTokenStore, paths: Paths) {
        self.init(keyring: keyring, kernelOnly: kernelOnly, paths: paths, declared: Declarations())
    }

    private init(keyring: any SessionStore, kernelOnly: KernelKeyringTokenStore, paths: Paths, declared: Declarations) {
        self.keyring = keyring
        self.kernelOnly = kernelOnly
        self.paths = paths
        self.declared = declared
    }

    /// Whether `configuration` (with a TPM key in its current slot) needs no Secret Service: a
    /// machine profile that authenticates without a secret and holds no DPoP key, whose key is
    /// not one another program keeps in files.
    public static func needsNoSecretService(_ configuration: ProfileConfiguration, hasTPMKey: Bool) -> Bool {
        hasTPMKey && configuration.isMachine && configuration.tokenEndpointAuthMethod?.usesSecret != true
            && !configuration.dpop && configuration.keyFile == nil
    }

    /// Whether `configuration` keeps its tokens in the kernel keyring only: a machine profile
    /// without a DPoP key, where the kernel keyring can be used, or where it needs no Secret
    /// Service at all.
    public static func keepsTokensInKernelKeyringOnly(
        _ configuration: ProfileConfiguration, hasTPMKey: Bool, kernelKeyringUsable: Bool
    ) -> Bool {
        guard configuration.isMachine, !configuration.dpop else { return false }
        return kernelKeyringUsable || needsNoSecretService(configuration, hasTPMKey: hasTPMKey)
    }

    /// `keepsTokensInKernelKeyringOnly` for this process's kernel keyring.
    public func keepsTokensInKernelKeyringOnly(_ configuration: ProfileConfiguration, hasTPMKey: Bool) -> Bool {
        Self.keepsTokensInKernelKeyringOnly(
            configuration, hasTPMKey: hasTPMKey, kernelKeyringUsable: kernelOnly.hotCache.state == .kernelKeyring)
    }

    public func keepsTokensInKernelKeyringOnly(_ profile: ProfileName) -> Bool {
        placement(profile).tokensInKernelKeyring
    }

    /// Whether `profile` needs no Secret Service (`needsNoSecretService`): its token, secret
    /// and keys are all elsewhere.
    public func needsNoSecretService(_ profile: ProfileName) -> Bool {
        placement(profile).withoutSecretService
    }

    /// `profile`'s placement: declared by a login, else decided from its file once per process
    /// (a profile without a readable file: the Secret Service for everything, not kept).
    func placement(_ profile: ProfileName) -> Placement {
        if let known = declared.placements.withLock({ $0[profile] }) { return known }
        guard let configuration = try? ProfileRepository(paths: paths).load(profile) else {
            return Placement(tokensInKernelKeyring: false, withoutSecretService: false)
        }
        let decided = placement(of: configuration, hasTPMKey: hasTPMKey(profile))
        return declared.placements.withLock { placements in
            // A login's declaration made meanwhile wins.
            if let known = placements[profile] { return known }
            placements[profile] = decided
            return decided
        }
    }

    func placement(of configuration: ProfileConfiguration, hasTPMKey: Bool) -> Placement {
        Placement(
            tokensInKernelKeyring: keepsTokensInKernelKeyringOnly(configuration, hasTPMKey: hasTPMKey),
            withoutSecretService: Self.needsNoSecretService(configuration, hasTPMKey: hasTPMKey))
    }

    /// Whether `profile`'s current key is in the TPM (its blob file exists).
    func hasTPMKey(_ profile: ProfileName) -> Bool {
        FileIO.exists(ClientKeys(store: keyring, paths: paths, clock: .system).tpmKeyFile(profile, slot: .current))
    }

    public func declareKernelKeyringOnly(_ profile: ProfileName, _ kernelOnly: Bool) {
        var placement = placement(profile)
        placement.tokensInKernelKeyring = kernelOnly
        declared.placements.withLock { [placement] in $0[profile] = placement }
    }

    /// A login's declaration of where the profile it is about to save keeps its tokens and
    /// whether it needs the Secret Service, before its file says so.
    public func declare(_ profile: ProfileName, configuration: ProfileConfiguration, hasTPMKey: Bool) {
        let placement = placement(of: configuration, hasTPMKey: hasTPMKey)
        declared.placements.withLock { $0[profile] = placement }
    }

    private func tokens(_ identity: SessionIdentity) -> any SessionStore {
        keepsTokensInKernelKeyringOnly(identity.profile) ? kernelOnly : keyring
    }

    public func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? {
        try tokens(identity).read(identity)
    }
    public func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) {
        try tokens(identity).write(tokenSet, for: identity)
    }
    public func delete(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        let deleted = try tokens(identity).delete(identity)
        // A machine profile's set that an earlier version kept in the Secret Service goes too.
        if keepsTokensInKernelKeyringOnly(identity.profile), !needsNoSecretService(identity.profile) {
            return (try? keyring.delete(identity)) == true || deleted
        }
        return deleted
    }
    public func delete(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) throws(StoreError) -> Bool {
        try tokens(identity).delete(identity, ifRefreshTokenIs: refreshToken)
    }
    public func storedIdentities() throws(StoreError) -> [SessionIdentity] { try keyring.storedIdentities() }
    public func readClientSecret(_ identity: SessionIdentity) throws(StoreError) -> String? {
        try secrets(identity).readClientSecret(identity)
    }
    public func deleteClientSecret(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        try secrets(identity).deleteClientSecret(identity)
    }

    /// Where `identity`'s client secret is: nowhere for a profile that needs no Secret Service.
    private func secrets(_ identity: SessionIdentity) -> any SessionStore {
        needsNoSecretService(identity.profile) ? kernelOnly : keyring
    }
    public func readClientKey(_ profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) -> [UInt8]? {
        do { return try keyring.readClientKey(profile, slot: slot) } catch {
            // Without a Secret Service there is no key in it: a TPM key's other slot is empty.
            guard Self.isAbsent(error), hasTPMKey(profile) else { throw error }
            return nil
        }
    }
    public func deleteClientKey(_ profile: ProfileName, slot: ClientKey.Slot) throws(StoreError) -> Bool {
        do { return try keyring.deleteClientKey(profile, slot: slot) } catch {
            guard Self.isAbsent(error), hasTPMKey(profile) else { throw error }
            return false
        }
    }
    public func checkAvailable() throws(StoreError) { try keyring.checkAvailable() }
    public func checkWritable(_ identity: SessionIdentity) throws(StoreError) {
        try tokens(identity).checkWritable(identity)
        // A machine's token goes to the kernel keyring, its client secret or key to the Secret
        // Service: a login must find that writable too before it sends anything.
        if keepsTokensInKernelKeyringOnly(identity.profile), !needsNoSecretService(identity.profile) {
            try keyring.checkWritable(identity)
        }
    }
    public func bounded(until deadline: Deadline) -> any SessionStore {
        SessionStoreRouter(
            keyring: keyring.bounded(until: deadline), kernelOnly: kernelOnly, paths: paths, declared: declared)
    }
    public func persist(_ tokenSet: TokenSet, for identity: SessionIdentity, replacing previous: TokenSet?)
        throws(StoreError) -> PersistOutcome
    {
        try tokens(identity).persist(tokenSet, for: identity, replacing: previous)
    }
    public func completePendingWrite(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? {
        try tokens(identity).completePendingWrite(identity)
    }
    public func pendingWrite(_ identity: SessionIdentity) -> RotationJournal.Entry? {
        tokens(identity).pendingWrite(identity)
    }

    /// The errors that say there is no Secret Service on this machine (as opposed to one that
    /// is locked or failing).
    static func isAbsent(_ error: StoreError) -> Bool {
        error.reason == .noSessionBus || error.reason == .noSecretService
    }
}

/// A machine profile's access token in the kernel keyring only: the hot cache's entry (the
/// user keyring, readable by this user only, gone at the token's expiry less the refresh
/// margin) is the whole of what is kept. Nothing else of the set is: it has no refresh token,
/// and a set with a DPoP key is never routed here. A miss is a token to ask for.
public struct KernelKeyringTokenStore: SessionStore {
    let hotCache: HotCache
    let clock: Clock

    public init(hotCache: HotCache, clock: Clock = .system) {
        self.hotCache = hotCache
        self.clock = clock
    }

    public func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? {
        hotCache.lookup(profile: identity.profile, issuer: identity.issuer, clientID: identity.clientID).map {
            var tokenSet = TokenSet(cached: $0)
            tokenSet.serverClockOffset = serverClockOffset(identity)
            return tokenSet
        }
    }
    public func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) {
        hotCache.remember(tokenSet, for: identity, now: clock.now())
        if let offset = tokenSet.serverClockOffset, !hotCache.isDisabled {
            KernelKeyringClockOffset.remember(offset, for: identity)
        }
    }
    public func delete(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        let existed = try self.read(identity) != nil
        hotCache.forget(identity)
        KernelKeyringClockOffset.forget(identity)
        return existed
    }
    /// The server clock offset last measured for `identity`, kept after its token has gone
    /// (`KernelKeyringClockOffset`).
    public func serverClockOffset(_ identity: SessionIdentity) -> Double? {
        hotCache.isDisabled ? nil : KernelKeyringClockOffset.recall(identity)
    }
    public func delete(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) throws(StoreError) -> Bool {
        false
    }
    public func storedIdentities() throws(StoreError) -> [SessionIdentity] { [] }
}

extension SessionStore {
    /// The Secret Service side of this store: the router's `keyring`, else the store itself.
    var secretServiceSide: any SessionStore { (self as? SessionStoreRouter)?.keyring ?? self }

    /// Whether `profile`'s tokens live in the kernel keyring only (see `SessionStoreRouter`).
    public func tokensInKernelKeyringOnly(_ profile: ProfileName) -> Bool {
        (self as? SessionStoreRouter)?.keepsTokensInKernelKeyringOnly(profile) ?? false
    }

    /// Whether `profile` needs no Secret Service at all (see `SessionStoreRouter`).
    public func needsNoSecretService(_ profile: ProfileName) -> Bool {
        (self as? SessionStoreRouter)?.needsNoSecretService(profile) ?? false
    }

    /// The server clock offset kept for a profile whose tokens live in the kernel keyring only,
    /// also when it has no token (`KernelKeyringClockOffset`); nil for every other profile,
    /// whose stored set carries its own.
    public func rememberedServerClockOffset(_ identity: SessionIdentity) -> Double? {
        guard let router = self as? SessionStoreRouter, router.keepsTokensInKernelKeyringOnly(identity.profile) else {
            return nil
        }
        return router.kernelOnly.serverClockOffset(identity)
    }
}
