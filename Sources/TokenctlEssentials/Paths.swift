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
    /// `$XDG_RUNTIME_DIR/tokenctl`, or `$XDG_STATE_HOME/tokenctl/locks` when there is no runtime directory.
    public var lockDirectory: String
    /// `$XDG_STATE_HOME/tokenctl` (default `~/.local/state/tokenctl`).
    public var stateDirectory: String
    /// `$XDG_CACHE_HOME/tokenctl` (default `~/.cache/tokenctl`): discovery documents and JWK Sets only.
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
        let lock: String
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            lock = runtime + "/tokenctl"
        } else {
            lock = state + "/locks"
        }
        return Paths(configDirectory: config, lockDirectory: lock, stateDirectory: state, cacheDirectory: cache)
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
