import TokenctlEssentials

/// Session items no configured profile uses (`TokenctlService.orphanedSessions`,
/// `removeOrphanedSessions`): their profile is gone, or its issuer or client changed.
struct OrphanedSessions {
    let service: TokenctlService

    /// See `TokenctlService.orphanedSessions`.
    func list() throws(TokenctlError) -> [SessionIdentity] {
        let stored: [SessionIdentity]
        do { stored = try service.store.storedIdentities() } catch { throw TokenctlError(error) }
        let profiles = service.profiles
        var inUse = Set<SessionIdentity>()
        for name in try profiles.all() {
            // A profile whose file is broken still claims its items: never delete on a typo.
            guard let configuration = try? profiles.load(name) else {
                stored.filter { $0.profile == name }.forEach { inUse.insert($0) }
                continue
            }
            inUse.insert(SessionIdentity(profile: name, configuration: configuration))
        }
        return stored.filter { !inUse.contains($0) }.sorted {
            ($0.profile, $0.issuer, $0.clientID) < ($1.profile, $1.issuer, $1.clientID)
        }
    }

    /// See `TokenctlService.removeOrphanedSessions`.
    func removeAll() throws(TokenctlError) -> [SessionIdentity] {
        let orphans = try list()
        for identity in orphans {
            do { try service.store.delete(identity) } catch { throw TokenctlError(error) }
            service.hotCache?.forget(identity)
        }
        return orphans
    }
}
