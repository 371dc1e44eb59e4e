import TokenctlEssentials

/// Reads and writes profile configuration files.
public struct ProfileRepository: Sendable {
    public let paths: Paths

    public init(paths: Paths) {
        self.paths = paths
    }

    /// The profile's configuration, or `nil` when the profile does not exist.
    public func load(_ name: ProfileName) throws(TokenctlError) -> ProfileConfiguration? {
        let path = paths.profileFile(name)
        let text: String?
        do { text = try FileIO.readFile(path) } catch {
            throw TokenctlError(.configuration, "cannot read \(path): \(error)")
        }
        guard let text else { return nil }
        do { return try ProfileConfiguration.parse(text, path: path) } catch { throw TokenctlError(error) }
    }

    /// The configuration, or a configuration error telling the user to log in.
    public func require(_ name: ProfileName) throws(TokenctlError) -> ProfileConfiguration {
        guard let configuration = try load(name) else {
            throw TokenctlError(
                .configuration, "profile '\(name)' is not configured (no \(paths.profileFile(name)))",
                hint:
                    "Sign it in first: '\(SuggestedCommand(name, .login([.issuer(.placeholder), .clientID(.placeholder)]), namesDefaultProfile: true))'."
            )
        }
        return configuration
    }

    public func save(_ configuration: ProfileConfiguration, as name: ProfileName) throws(TokenctlError) {
        do {
            try FileIO.ensurePrivateDirectory(paths.configDirectory)
            try FileIO.ensurePrivateDirectory(paths.profilesDirectory)
            try FileIO.writeAtomically(configuration.serialized(profile: name), to: paths.profileFile(name))
        } catch {
            throw TokenctlError(.configuration, "cannot write the profile: \(error)")
        }
    }

    /// Throws unless `save` could write the profile now: the directories are made (0700), a
    /// probe file (0600, no secret in it) is written, synced and removed in the profiles
    /// directory, and no directory is in the profile file's place. What a login
    /// proves before it sends anything to the token endpoint.
    public func checkWritable(_ name: ProfileName) throws(TokenctlError) {
        do {
            try FileIO.ensurePrivateDirectory(paths.configDirectory)
            try FileIO.ensurePrivateDirectory(paths.profilesDirectory)
            try FileIO.probeWritable(directory: paths.profilesDirectory)
            try FileIO.requireReplaceable(paths.profileFile(name))
        } catch {
            throw TokenctlError(.configuration, "cannot write the profile: \(error)")
        }
    }

    /// Remove the profile's file. Returns whether there was one.
    public func remove(_ name: ProfileName) throws(TokenctlError) -> Bool {
        let path = paths.profileFile(name)
        do { return try FileIO.removeFileIfPresent(path) } catch {
            throw TokenctlError(.configuration, "cannot remove \(path): \(error)")
        }
    }

    /// Every configured profile, by name.
    public func all() throws(TokenctlError) -> [ProfileName] {
        let names: [String]
        do { names = try FileIO.listDirectory(paths.profilesDirectory) } catch {
            throw TokenctlError(.configuration, "cannot list profiles: \(error)")
        }
        return names.compactMap { name in
            guard name.hasSuffix(".conf") else { return nil }
            return ProfileName(rawValue: String(name.dropLast(5)))
        }
    }
}
