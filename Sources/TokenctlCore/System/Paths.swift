import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where tokenctl keeps its files, following the XDG Base Directory specification.
///
/// Nothing under these paths ever holds a secret: configuration, locks and state only.
public struct Paths: Sendable, Equatable {
    /// `$XDG_CONFIG_HOME/tokenctl` (default `~/.config/tokenctl`).
    public var configDirectory: String
    /// Where the per-profile refresh locks live: `/run/user/<uid>/tokenctl`, or `/tmp/tokenctl-<uid>`
    /// where systemd-logind made no runtime directory (see `runtimeLockDirectory`).
    public var lockDirectory: String
    /// `$XDG_STATE_HOME/tokenctl` (default `~/.local/state/tokenctl`).
    public var stateDirectory: String
    /// `$XDG_CACHE_HOME/tokenctl` (default `~/.cache/tokenctl`): discovery documents, JWK Sets
    /// and DPoP nonces only (public values the servers hand anyone).
    public var cacheDirectory: String

    /// - Parameter cacheDirectory: defaults to `cache` beside the state directory (tests).
    public init(configDirectory: String, lockDirectory: String, stateDirectory: String, cacheDirectory: String? = nil) {
        self.configDirectory = configDirectory
        self.lockDirectory = lockDirectory
        self.stateDirectory = stateDirectory
        self.cacheDirectory = cacheDirectory ?? stateDirectory + "/cache"
    }

    /// Resolve the paths from the environment.
    ///
    /// - Throws: `PathsError.noHome` when neither the XDG variables nor `HOME` locate a home.
    public static func resolve(_ environment: Environment = .process) throws(PathsError) -> Paths {
        func home() throws(PathsError) -> String {
            if let home = environment["HOME"], home.hasPrefix("/") { return home }
            throw PathsError.noHome
        }
        func base(_ variable: String, _ fallback: String) throws(PathsError) -> String {
            // XDG: a relative path in these variables is invalid and must be ignored.
            if let value = environment[variable], value.hasPrefix("/") { return value }
            return try home() + "/" + fallback
        }
        let config = try base("XDG_CONFIG_HOME", ".config") + "/tokenctl"
        let state = try base("XDG_STATE_HOME", ".local/state") + "/tokenctl"
        // The cache is optional: without HOME or XDG_CACHE_HOME it lives under the state directory.
        let cache = (try? base("XDG_CACHE_HOME", ".cache")).map { $0 + "/tokenctl" } ?? state + "/cache"
        let lock = runtimeLockDirectory(environment)
        return Paths(configDirectory: config, lockDirectory: lock, stateDirectory: state, cacheDirectory: cache)
    }

    /// The variable that moves the lock directory (tests, unusual setups): every process of the
    /// user that shares a session must then see the same value, or two of them refresh at once.
    public static let runtimeDirectoryVariable = EnvironmentSwitches.runtimeDirectory

    /// The lock directory, derived from the user id alone, so that every process of one user
    /// agrees on it however its environment is set: cron and `env -i` lack `XDG_RUNTIME_DIR`,
    /// `su -` and some `sudo` shells carry another user's. Two processes locking two files both
    /// refresh, and a strict server then revokes the whole token family.
    ///
    /// `/run/user/<uid>/tokenctl` when `/run/user/<uid>` is a directory owned by the user with
    /// mode 0700 (systemd-logind's runtime directory); otherwise `/tmp/tokenctl-<uid>`, which the
    /// lock provider creates with mode 0700 and refuses when another user owns it.
    public static func runtimeLockDirectory(_ environment: Environment, userID: uid_t = FileIO.userID) -> String {
        if let override = environment[runtimeDirectoryVariable], override.hasPrefix("/"), override.count < 1024 {
            return override + "/tokenctl"
        }
        let runtime = "/run/user/\(userID)"
        if FileIO.isPrivateDirectory(runtime, ownedBy: userID) {
            return runtime + "/tokenctl"
        }
        return "/tmp/tokenctl-\(userID)"
    }

    /// The directory of profile files.
    public var profilesDirectory: String { configDirectory + "/profiles" }

    /// The configuration file of one profile.
    public func profileFile(_ profile: ProfileName) -> String {
        profilesDirectory + "/" + profile.rawValue + ".conf"
    }

    /// The cached discovery documents, one file per issuer.
    public var discoveryCacheDirectory: String { cacheDirectory + "/discovery" }

    /// The cached JWK Sets (public signing keys), one file per issuer.
    public var jwksCacheDirectory: String { cacheDirectory + "/jwks" }

    /// The last DPoP nonce of each authorization server (`DPoPNonceCache`), one file per issuer.
    public var dpopNonceCacheDirectory: String { cacheDirectory + "/dpop-nonce" }

    /// The forward's serving socket (`tokenctl forward`): beside the locks, in the same
    /// uid-derived directory (`/run/user/UID/tokenctl/forward.sock`, the socket unit's
    /// `%t/tokenctl/forward.sock`).
    public var forwardSocket: String { lockDirectory + "/" + ForwardProtocol.servingName }

    /// The cross-process refresh lock of one profile.
    public func lockFile(_ profile: ProfileName) -> String {
        lockDirectory + "/" + profile.rawValue + ".lock"
    }
}

public enum PathsError: Error, Equatable, CustomStringConvertible {
    case noHome

    public var description: String {
        "HOME is not set (or not absolute) and XDG_CONFIG_HOME/XDG_STATE_HOME do not say where tokenctl's files are"
    }
}
