import TokenctlEssentials

/// A token a platform gives a job in a file and rotates there (a Kubernetes projected service
/// account token, a CI job's OIDC token): the subject token of a token exchange (RFC 8693
/// §2.1), the assertion of the JWT bearer grant (RFC 7523 §2.1), a federated client assertion
/// (RFC 7521 §4.2). Read again for every request, bounded (`ClientKeys.maximumFileBytes`),
/// regular files only, never copied anywhere; refused before anything is sent when it is
/// missing, empty, too large, not a JWT where one is expected, or expired by its `exp`. A
/// message names the file, never its content.
public struct PlatformTokenFile: Sendable, Equatable {
    /// What the file holds, for messages and its profile key.
    public enum Role: String, Sendable {
        case subjectToken = "subject token"
        case assertion = "assertion"
        case clientAssertion = "client assertion"

        /// The profile key that names the file.
        public var profileKey: String {
            switch self {
            case .subjectToken: "subject_token_file"
            case .assertion: "assertion_file"
            case .clientAssertion: "client_assertion_file"
            }
        }
    }

    public var path: String
    public var role: Role
    /// Whether the token must be a JWT (an assertion, a subject token of a JWT type); any
    /// other is checked as a JWT only when it looks like one (three dot-separated parts).
    public var mustBeJWT: Bool

    /// RFC 8693 §3's token type a subject token defaults to.
    public static let defaultSubjectTokenType = "urn:ietf:params:oauth:token-type:jwt"

    /// The subject token types that are JWTs (RFC 8693 §3).
    static let jwtTokenTypes = [
        "urn:ietf:params:oauth:token-type:jwt", "urn:ietf:params:oauth:token-type:id_token",
    ]

    public init(path: String, role: Role, mustBeJWT: Bool = true) {
        self.path = path
        self.role = role
        self.mustBeJWT = mustBeJWT
    }

    /// The subject token file of a token exchange of type `tokenType` (nil: the default, a JWT).
    public static func subjectToken(_ path: String, tokenType: String?) -> PlatformTokenFile {
        PlatformTokenFile(
            path: path, role: .subjectToken, mustBeJWT: jwtTokenTypes.contains(tokenType ?? defaultSubjectTokenType))
    }

    /// What a file's token says about itself, for `status`: readable, and its `exp`.
    public struct Inspection: Sendable, Equatable {
        /// nil: the file can be used now; else why not.
        public var problem: String?
        /// The token's `exp` (seconds since 1970), when it is a JWT with one.
        public var expiresAt: Double?
    }

    /// The file's token, checked, for a request now: `now` is on the clock of whoever checks
    /// its `exp` (ours corrected by a trusted server offset, as an assertion's times are).
    ///
    /// - Throws: 78 naming the file (and the profile key) and why, never the content.
    public func read(now: Double) throws(TokenctlError) -> String {
        let (token, problem) = load(now: now)
        if let problem {
            throw TokenctlError(
                .configuration, "the \(role.rawValue) file \(TerminalText.short(path)) (\(role.profileKey)) \(problem)",
                hint:
                    "Nothing was sent. The platform that writes this file (a projected service account token, a CI job's ID token) must keep a current token there."
            )
        }
        return token ?? ""
    }

    /// The file's state without throwing: for `status`.
    public func inspect(now: Double) -> Inspection {
        let (token, problem) = load(now: now)
        let expiry = token.flatMap { Self.expiry(Self.jwtClaims($0)) }
        return Inspection(problem: problem, expiresAt: expiry)
    }

    /// The token and nil, or why it cannot be used (a token read is returned with an
    /// expiry problem, so that `inspect` still tells its `exp`).
    private func load(now: Double) -> (String?, String?) {
        let text: String?
        do { text = try FileIO.readFile(path, limit: ClientKeys.maximumFileBytes) } catch {
            return (
                nil,
                "cannot be read (a regular file of at most \(ClientKeys.maximumFileBytes / 1024) KiB): \(error.operation) failed"
            )
        }
        guard let text else { return (nil, "is missing") }
        return check(text, now: now)
    }

    /// The token in a file's `text`, and nil, or why it cannot be used.
    func check(_ text: String, now: Double) -> (String?, String?) {
        // A trailing newline is how most tools write a file; the token itself has no blanks.
        let token = String(text.reversed().drop(while: { $0.isWhitespace }).reversed())
        guard !token.isEmpty else { return (nil, "is empty") }
        guard token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            return (nil, "does not hold one token (it has blanks, control or non-ASCII characters)")
        }
        let looksLikeJWT = token.split(separator: ".", omittingEmptySubsequences: false).count == 3
        guard mustBeJWT || looksLikeJWT else { return (token, nil) }
        guard let claims = Self.jwtClaims(token) else {
            return (nil, "does not hold a JWT (three base64url parts, a JSON header and payload)")
        }
        if let expiry = Self.expiry(claims), expiry <= now {
            return (token, "holds a token that expired at \(Timestamp.iso8601(expiry))")
        }
        return (token, nil)
    }

    /// The `exp` claim (RFC 7519 §4.1.4), when there is one.
    static func expiry(_ claims: [String: JSONValue]?) -> Double? {
        guard case .number(let expiry)? = claims?["exp"] else { return nil }
        return expiry
    }

    /// A compact JWS's claims, when its header and payload are base64url JSON objects.
    static func jwtClaims(_ token: String) -> [String: JSONValue]? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        let base64URL = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        guard parts.count == 3, parts.allSatisfy({ $0.allSatisfy(base64URL.contains) }),
            let header = UnverifiedJWT.base64URLDecode(String(parts[0])), JSONValue.parseObject(header) != nil,
            let payload = UnverifiedJWT.base64URLDecode(String(parts[1]))
        else { return nil }
        return JSONValue.parseObject(payload)
    }
}
