import TokenctlEssentials

/// A key that signs client assertions (RFC 7523 §2.2 private_key_jwt; HMAC for client_secret_jwt, OpenID Connect Core §9).
public protocol ClientAssertionSigner: Sendable {
    /// The JWS `kid` header: the RFC 7638 thumbprint of the public key; nil for an HMAC secret.
    var keyID: String? { get }
    /// The JWS `alg` values this key can sign with, preferred first ("ES256", "RS256", "PS256", "HS256").
    var algorithms: [String] { get }
    /// The JWS signature of `signingInput` (RFC 7515 §5.1) with `algorithm`.
    func signature(of signingInput: [UInt8], algorithm: String) throws(TokenctlError) -> [UInt8]
}

public enum ClientAssertion {
    /// RFC 7523 §2.2.
    public static let type = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    /// The longest lifetime an assertion gets: a short one limits what a captured assertion is
    /// worth (RFC 7523 §3 item 4 asks for an `exp` "reasonably" near; RFC 7521 §8.2 on replay).
    public static let maximumLifetime: TimeInterval = 300

    /// A compact JWS (RFC 7523 §3): iss = sub = clientID, aud = audience, a fresh random jti,
    /// iat/nbf = now, exp = now + lifetime (at most 300 s), header alg (+ kid when the signer has one, typ JWT).
    /// `algorithm`: nil picks the signer's first algorithm that `serverAlgorithms` (discovery's
    /// token_endpoint_auth_signing_alg_values_supported, nil when not advertised) allows; none allowed is a 78 error.
    public static func make(
        clientID: String, audience: String, signer: any ClientAssertionSigner, serverAlgorithms: [String]?,
        now: Date, lifetime: TimeInterval = 300
    ) throws(TokenctlError) -> String {
        try make(
            clientID: clientID, audience: audience, signer: signer, serverAlgorithms: serverAlgorithms,
            algorithm: nil, now: now, lifetime: lifetime)
    }

    /// `make` with the algorithm chosen by the caller (a profile's setting); nil chooses as above.
    /// An algorithm the key cannot sign with, or that the server does not allow, is a 78 error.
    public static func make(
        clientID: String, audience: String, signer: any ClientAssertionSigner, serverAlgorithms: [String]?,
        algorithm: String?, now: Date, lifetime: TimeInterval = 300, jti: String = SecureRandom.token()
    ) throws(TokenctlError) -> String {
        let chosen = try chooseAlgorithm(signer: signer, serverAlgorithms: serverAlgorithms, requested: algorithm)
        var header: [(String, JSONText.Value)] = [("alg", .string(chosen))]
        if let keyID = signer.keyID { header.append(("kid", .string(keyID))) }
        header.append(("typ", .string("JWT")))
        let issuedAt = Int(now.timeIntervalSince1970.rounded(.down))
        let seconds = Int(min(max(lifetime, 1), maximumLifetime).rounded(.down))
        let claims: [(String, JSONText.Value)] = [
            ("iss", .string(clientID)), ("sub", .string(clientID)), ("aud", .string(audience)), ("jti", .string(jti)),
            ("iat", .number(issuedAt)), ("nbf", .number(issuedAt)), ("exp", .number(issuedAt + seconds)),
        ]
        let signingInput =
            Base64URL.encode(Array(JSONText.object(header).utf8)) + "."
            + Base64URL.encode(Array(JSONText.object(claims).utf8))
        let signature = try signer.signature(of: Array(signingInput.utf8), algorithm: chosen)
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// The `alg` of an assertion: `requested` when the key and the server allow it, else the
    /// signer's first one the server allows (all of them when it advertises none).
    public static func chooseAlgorithm(
        signer: any ClientAssertionSigner, serverAlgorithms: [String]?, requested: String? = nil
    ) throws(TokenctlError) -> String {
        func allowed(_ algorithm: String) -> Bool { serverAlgorithms.map { $0.contains(algorithm) } ?? true }
        let offered = serverAlgorithms.map { $0.joined(separator: ", ") } ?? ""
        if let requested {
            guard signer.algorithms.contains(requested) else {
                throw TokenctlError(
                    .configuration,
                    "the client key cannot sign with '\(TerminalText.short(requested))' (it signs with \(signer.algorithms.joined(separator: ", ")))"
                )
            }
            guard allowed(requested) else {
                throw TokenctlError(
                    .configuration,
                    "the server does not accept client assertions signed with '\(TerminalText.short(requested))' (it accepts \(TerminalText.short(offered)))"
                )
            }
            return requested
        }
        guard let chosen = signer.algorithms.first(where: allowed) else {
            throw TokenctlError(
                .configuration,
                "the server accepts client assertions signed with \(TerminalText.short(offered)) only; the client key signs with \(signer.algorithms.joined(separator: ", "))",
                hint:
                    "Use a key of a type the server accepts ('\(tokenctl: .default, .key(.create, [.type(.word("ec"))]))' for ES256, '\(tokenctl: .default, .key(.create, [.type(.word("rsa"))]))' for RS256 and PS256)."
            )
        }
        return chosen
    }
}

/// client_secret_jwt's signer: HMAC-SHA256 keyed with the client secret.
public struct ClientSecretSigner: ClientAssertionSigner, CustomStringConvertible {
    private let secret: [UInt8]

    public init(secret: String) { self.secret = Array(secret.utf8) }

    public var keyID: String? { nil }
    public var algorithms: [String] { ["HS256"] }

    public func signature(of signingInput: [UInt8], algorithm: String) throws(TokenctlError) -> [UInt8] {
        guard algorithm == "HS256" else {
            throw TokenctlError(
                .configuration, "a client secret signs with HS256 only, not '\(TerminalText.short(algorithm))'")
        }
        guard !secret.isEmpty else { throw TokenctlError(.configuration, "the client secret is empty") }
        do { return try OpenSSL.hmacSHA256(key: secret, message: signingInput) } catch {
            throw TokenctlError(.unexpected, "cannot sign the client assertion: \(error)")
        }
    }

    /// Never the secret itself.
    public var description: String { "ClientSecretSigner(HS256)" }
}
