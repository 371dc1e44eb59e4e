import TokenctlEssentials

/// A profile's client keys (private_key_jwt, mTLS): where each slot's key is found, kept and removed.
///
/// A software key is kept in the Secret Service (its own item per profile and slot). A TPM key's
/// wrapped blob is useless without the TPM that made it, so it is kept in a 0600 file under
/// tokenctl's state directory: a machine with no Secret Service can still use it. A key that
/// another program rotates on disk is named by the profile (`key_file`, `certificate_file`)
/// and read from there on every use, never copied.
public struct ClientKeys: Sendable {
    let store: any SessionStore
    let paths: Paths
    let clock: Clock

    /// The largest key or certificate file read (a PEM key with a certificate chain is a few KB).
    public static let maximumFileBytes = 64 * 1024

    public init(store: any SessionStore, paths: Paths, clock: Clock) {
        self.store = store
        self.paths = paths
        self.clock = clock
    }

    /// The directory of TPM key blobs (0700).
    public var tpmKeyDirectory: String { paths.stateDirectory + "/client-keys" }

    /// The file a TPM key's blob (with its certificate) is kept in, 0600.
    public func tpmKeyFile(_ profile: ProfileName, slot: ClientKey.Slot) -> String {
        tpmKeyDirectory + "/\(profile.rawValue).\(slot.rawValue).tpm.json"
    }

    /// The key in `slot`: the profile's key files (`current` only, when `configuration` names
    /// them), the TPM blob file, or the Secret Service.
    ///
    /// - Parameter absentSecretServiceIsEmpty: a machine with no Secret Service has no key in
    ///   it (for `key create --tpm`, which needs none); otherwise that is an error (69).
    public func key(
        of profile: ProfileName, slot: ClientKey.Slot, configuration: ProfileConfiguration? = nil,
        absentSecretServiceIsEmpty: Bool = false
    ) throws(TokenctlError) -> ClientKey? {
        if slot == .current, let configuration, let keyFile = configuration.keyFile {
            return try fileKey(keyFile: keyFile, certificateFile: configuration.certificateFile)
        }
        if slot == .current, configuration?.certificateFile != nil {
            throw TokenctlError(
                .configuration, "profile '\(profile)' has 'certificate_file' without 'key_file' (its key)",
                hint: "Add 'key_file = PATH' of the certificate's key to \(paths.profileFile(profile)).")
        }
        let blobFile = tpmKeyFile(profile, slot: slot)
        let blob: String?
        do { blob = try FileIO.readFile(blobFile, limit: Self.maximumFileBytes) } catch {
            throw TokenctlError(.configuration, "cannot read the TPM key of profile '\(profile)': \(error)")
        }
        if let blob {
            return try ClientKey(stored: Array(blob.utf8), location: .tpm(blobFile: blobFile))
        }
        let stored: [UInt8]?
        do { stored = try store.readClientKey(profile, slot: slot) } catch {
            if absentSecretServiceIsEmpty, SessionStoreRouter.isAbsent(error) { return nil }
            throw TokenctlError(error)
        }
        guard let stored else { return nil }
        return try ClientKey(stored: stored, location: .keyring)
    }

    /// A key (and certificate) read from files another program keeps: on every use, bounded,
    /// regular files only (a FIFO or device in their place is refused, never read).
    public func fileKey(keyFile: String, certificateFile: String?) throws(TokenctlError) -> ClientKey {
        func readBounded(_ path: String, _ what: String) throws(TokenctlError) -> [UInt8] {
            let text: String?
            do { text = try FileIO.readFile(path, limit: Self.maximumFileBytes) } catch {
                throw TokenctlError(
                    .configuration, "cannot read the client \(what) file \(TerminalText.short(path)): \(error)")
            }
            guard let text, !text.isEmpty else {
                throw TokenctlError(
                    .configuration, "the client \(what) file \(TerminalText.short(path)) is missing or empty")
            }
            return Array(text.utf8)
        }
        let keyPEM = try readBounded(keyFile, "key")
        var key: ClientKey
        do { key = try ClientKey(privateKeyPEM: keyPEM, location: .file(keyFile)) } catch {
            throw TokenctlError(.configuration, "the client key file \(TerminalText.short(keyFile)): \(error.message)")
        }
        if let certificateFile {
            do { try key.attach(certificatePEM: try readBounded(certificateFile, "certificate")) } catch {
                throw TokenctlError(
                    .configuration,
                    "the client certificate file \(TerminalText.short(certificateFile)): \(error.message)")
            }
        }
        return key
    }

    /// Keep `key` in `slot`: a TPM key in its blob file, any other in the Secret Service.
    public func save(_ key: ClientKey, for profile: ProfileName, slot: ClientKey.Slot) throws(TokenctlError) {
        if key.isTPM {
            do {
                try FileIO.ensurePrivateDirectory(paths.stateDirectory)
                try FileIO.ensurePrivateDirectory(tpmKeyDirectory)
                try FileIO.writeAtomically(
                    String(decoding: key.stored, as: UTF8.self), to: tpmKeyFile(profile, slot: slot), mode: 0o600)
            } catch {
                throw TokenctlError(.configuration, "cannot keep the TPM key of profile '\(profile)': \(error)")
            }
            return
        }
        do { try store.writeClientKey(key.stored, for: profile, slot: slot) } catch { throw TokenctlError(error) }
    }

    /// Remove the key in `slot` wherever it is kept (the Secret Service is asked only when there
    /// was no TPM key). Returns whether one existed.
    @discardableResult
    public func remove(_ profile: ProfileName, slot: ClientKey.Slot) throws(TokenctlError) -> Bool {
        let removedFile: Bool
        do { removedFile = try FileIO.removeFileIfPresent(tpmKeyFile(profile, slot: slot)) } catch {
            throw TokenctlError(.configuration, "cannot remove the TPM key of profile '\(profile)': \(error)")
        }
        if removedFile { return true }
        do { return try store.deleteClientKey(profile, slot: slot) } catch { throw TokenctlError(error) }
    }

    /// Make the `next` key the current one (the current one is dropped).
    public func promote(_ profile: ProfileName) throws(TokenctlError) -> ClientKey {
        guard let next = try key(of: profile, slot: .next) else {
            throw TokenctlError(
                .configuration, "profile '\(profile)' has no next key to promote",
                hint: "Run '\(tokenctl: profile, .key(.rotate, []))' first.")
        }
        var promoted = next
        if case .tpm = next.location { promoted.location = .tpm(blobFile: tpmKeyFile(profile, slot: .current)) }
        _ = try remove(profile, slot: .current)
        try save(promoted, for: profile, slot: .current)
        _ = try remove(profile, slot: .next)
        return promoted
    }
}

extension TokenctlService {
    /// The profile's client keys (make, keep, rotate, remove).
    public var clientKeys: ClientKeys { ClientKeys(store: store, paths: profiles.paths, clock: clock) }

    /// The profile's current key: from the profile's `key_file`/`certificate_file` (read on every
    /// use) or else where tokenctl keeps it (the TPM blob file, the Secret Service); nil for none.
    public func clientKey(of profile: ProfileName) throws(TokenctlError) -> ClientKey? {
        try clientKeys.key(of: profile, slot: .current, configuration: try profiles.load(profile))
    }
}
