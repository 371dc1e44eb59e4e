import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Discovery documents cached per issuer under `$XDG_CACHE_HOME/tokenctl/discovery/`, so a
/// second login (or a later `status` check of ID tokens) need not fetch them again.
///
/// A document holds only public metadata, never a secret. Files are written atomically with
/// mode 0600; an unreadable, corrupt or stale entry is simply ignored and fetched again.
public struct DiscoveryCache: Sendable {
    public var directory: String
    public var lifetime: Double
    public var clock: Clock

    public init(directory: String, lifetime: Double = 86_400, clock: Clock = .system) {
        self.directory = directory
        self.lifetime = lifetime
        self.clock = clock
    }

    public struct Entry: Codable, Equatable, Sendable {
        public var issuer: String
        public var url: String
        public var fetchedAt: Double
        /// The document exactly as served.
        public var document: String
        /// The RFC 8414 document that filled gaps of the OIDC one, when there was one.
        public var supplementURL: String?
        public var supplementDocument: String?

        enum CodingKeys: String, CodingKey {
            case issuer, url, document
            case fetchedAt = "fetched_at"
            case supplementURL = "supplement_url"
            case supplementDocument = "supplement_document"
        }
    }

    /// One file per issuer: a readable prefix plus a hash, so different issuers never collide.
    public func file(for issuer: EndpointURL) -> String {
        directory + "/" + Self.fileName(for: issuer.string)
    }

    /// `<readable prefix>-<FNV-1a hash>.json` for an issuer (shared with the JWKS cache).
    static func fileName(for issuer: String) -> String {
        var readable = ""
        for scalar in issuer.unicodeScalars.prefix(80) {
            let allowed =
                (scalar >= "a" && scalar <= "z") || (scalar >= "A" && scalar <= "Z") || (scalar >= "0" && scalar <= "9")
                || scalar == "." || scalar == "-"
            readable.unicodeScalars.append(allowed ? scalar : "_")
        }
        // FNV-1a, 64 bits: stable across runs (Swift's Hasher is seeded per process).
        var hash = FNV1a64()
        hash.update(issuer)
        return readable + "-" + hash.hexDigest + ".json"
    }

    /// The cached entry for `issuer` if it is younger than `lifetime` and for that issuer.
    public func load(_ issuer: EndpointURL) -> Entry? {
        guard let text = try? FileIO.readFile(file(for: issuer)),
            let entry = try? JSONDecoder().decode(Entry.self, from: Data(text.utf8)),
            entry.issuer == issuer.string
        else { return nil }
        let age = clock.now() - entry.fetchedAt
        guard age >= -300, age < lifetime else { return nil }
        return entry
    }

    public func store(
        _ issuer: EndpointURL, url: String, document: String, supplement: (url: String, document: String)? = nil
    ) {
        let entry = Entry(
            issuer: issuer.string, url: url, fetchedAt: clock.now(), document: document,
            supplementURL: supplement?.url, supplementDocument: supplement?.document)
        guard let data = try? JSONEncoder().encode(entry) else { return }
        do {
            try FileIO.ensurePrivateDirectory(directory)
            try FileIO.writeAtomically(String(decoding: data, as: UTF8.self), to: file(for: issuer), mode: 0o600)
        } catch {
            // A read-only or full cache directory only costs a refetch next time.
        }
    }

    /// Forget the entry (after it led to an error, or on explicit request).
    public func remove(_ issuer: EndpointURL) {
        try? FileIO.removeFile(file(for: issuer))
    }
}
