import Synchronization
import TokenctlEssentials

/// Sends requests with DPoP proofs (RFC 9449 §4): every POST to one of `endpoints` (the token
/// and revocation endpoints) gets a fresh proof in a `DPoP` header; other requests (discovery,
/// JWKS, the device authorization endpoint) pass through unchanged.
///
/// Server nonces (§8): a `use_dpop_nonce` answer that carries a `DPoP-Nonce` is retried once
/// with that nonce; the last nonce any answer carried is kept per issuer (`DPoPIssuerState`:
/// for this process, and on disk for the next ones) and sent with later proofs.
///
/// Clocks (§11.1): a proof's `iat` must be near the server's time. It is the local time plus the
/// session's measured offset from the server's clock; before a session has one (at login), an
/// `invalid_dpop_proof` answer whose `Date` shows the local clock more than 30 s off is retried
/// once with `iat` on the server's clock, and the offset is kept for the issuer.
public struct DPoPHTTPClient: HTTPClient {
    public var base: any HTTPClient
    public var key: DPoPKey
    public var issuer: String
    public var endpoints: Set<String>
    public var clock: Clock
    /// Server clock minus local clock (`TokenSet.serverClockOffset`): a proof's `iat` is on the
    /// server's clock, so a skewed local clock does not make proofs the server refuses.
    public var serverClockOffset: Double?
    public var issuerState: DPoPIssuerState

    public init(
        _ base: any HTTPClient, key: DPoPKey, issuer: String, endpoints: Set<String>, clock: Clock,
        serverClockOffset: Double? = nil,
        issuerState: DPoPIssuerState = .shared
    ) {
        self.base = base
        self.key = key
        self.issuer = issuer
        self.endpoints = endpoints
        self.clock = clock
        self.serverClockOffset = serverClockOffset
        self.issuerState = issuerState
    }

    public func send(_ request: HTTPRequest, timeout: Double) async throws(HTTPTransportError) -> HTTPResponse {
        try await self.send(request, timeout: timeout, connectTimeout: timeout)
    }

    public func send(_ request: HTTPRequest, timeout: Double, connectTimeout: Double) async throws(HTTPTransportError)
        -> HTTPResponse
    {
        guard request.method == .post, endpoints.contains(request.url) else {
            return try await base.send(request, timeout: timeout, connectTimeout: connectTimeout)
        }
        let started = clock.now()
        var offset = serverClockOffset ?? issuerState.clockOffset(issuer) ?? 0
        var response = try await base.send(
            try signed(request, nonce: issuerState.nonce(issuer), offset: offset), timeout: timeout,
            connectTimeout: connectTimeout)
        // One retry each, inside what is left of this attempt's time: with the nonce the server
        // asked for, then with iat on the server's clock.
        var retriedForNonce = false
        var retriedForClock = false
        while true {
            let nonce = response.header("dpop-nonce").flatMap(Self.usableNonce)
            if let nonce { issuerState.remember(nonce: nonce, for: issuer) }
            let left = max(1, timeout - (clock.now() - started))
            if !retriedForNonce, nonce != nil, Self.asksForNonce(response) {
                retriedForNonce = true
            } else if !retriedForClock, Self.refusesProof(response), let serverDate = response.serverDate,
                case let measured = serverDate - clock.now(), abs(measured - offset) > 30
            {
                retriedForClock = true
                offset = measured
                issuerState.remember(clockOffset: measured, for: issuer)
            } else {
                return response
            }
            response = try await base.send(
                try signed(request, nonce: issuerState.nonce(issuer), offset: offset), timeout: left,
                connectTimeout: min(connectTimeout, left))
        }
    }

    /// `request` with a new proof for it, its `iat` at local time plus `offset`.
    func signed(_ request: HTTPRequest, nonce: String?, offset: Double) throws(HTTPTransportError) -> HTTPRequest {
        let proof: String
        do {
            proof = try DPoPProof.make(
                key: key, method: request.method.rawValue, url: request.url,
                issuedAt: Int(saturating: (clock.now() + offset.clamped(to: -1e9...1e9)).rounded(.down)), nonce: nonce)
        } catch {
            throw HTTPTransportError(.other, "cannot sign a DPoP proof: \(error)")
        }
        var signed = request
        signed.headers.removeAll { $0.name.lowercased() == "dpop" }
        signed.headers.append(("DPoP", proof))
        return signed
    }

    /// An authorization server's `use_dpop_nonce` (§8: 400 with the error in the body) or a
    /// resource server's (§9: 401 with it in `WWW-Authenticate`).
    static func asksForNonce(_ response: HTTPResponse) -> Bool {
        switch response.status {
        case 400: JSONValue.parseObject(response.body)?["error"]?.stringValue == "use_dpop_nonce"
        case 401: response.header("www-authenticate")?.contains("use_dpop_nonce") ?? false
        default: false
        }
    }

    /// An authorization server's `invalid_dpop_proof` (400, error in the body).
    static func refusesProof(_ response: HTTPResponse) -> Bool {
        response.status == 400 && JSONValue.parseObject(response.body)?["error"]?.stringValue == "invalid_dpop_proof"
    }

    /// A nonce as §8.1 allows it (NQCHAR: printable ASCII but `"` and `\`), bounded; nil otherwise.
    public static func usableNonce(_ value: String) -> String? {
        guard !value.isEmpty, value.utf8.count <= 1024,
            value.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
        else { return nil }
        return value
    }
}

/// What this process learnt of each issuer's DPoP: the last nonce it gave, and its clock's
/// offset when a proof was refused for the local clock.
///
/// With a `DPoPNonceCache` (every command's state, `TokenctlService.dpopState`) the nonces live
/// on across processes: the first proof of a process to an issuer carries the nonce the last
/// process was given, and every new nonce an answer carries is written for the next one.
public final class DPoPIssuerState: Sendable {
    /// This process's memory only (unit tests; clients made without a service).
    public static let shared = DPoPIssuerState()
    public let persisted: DPoPNonceCache?
    private let nonces = Mutex<[String: String]>([:])
    /// Issuers whose file was read already (read once per process, before the first proof).
    private let loaded = Mutex<Set<String>>([])
    private let offsets = Mutex<[String: Double]>([:])

    public init(persisted: DPoPNonceCache? = nil) {
        self.persisted = persisted
    }

    public func nonce(_ issuer: String) -> String? {
        if let persisted, loaded.withLock({ $0.insert(issuer).inserted }) {
            if let kept = persisted.load(issuer) {
                // A nonce an answer of this process gave meanwhile wins over the file's.
                return nonces.withLock { current in
                    if current[issuer] == nil { current[issuer] = kept }
                    return current[issuer]
                }
            }
        }
        return nonces.withLock { $0[issuer] }
    }

    /// The nonce an answer carried: kept for this process, and written for the next ones when it
    /// is new (one that every answer repeats is not written again).
    public func remember(nonce: String, for issuer: String) {
        let changed = nonces.withLock { current in
            defer { current[issuer] = nonce }
            return current[issuer] != nonce
        }
        if changed { persisted?.store(nonce, for: issuer) }
    }

    public func clockOffset(_ issuer: String) -> Double? { offsets.withLock { $0[issuer] } }

    public func remember(clockOffset: Double, for issuer: String) { offsets.withLock { $0[issuer] = clockOffset } }
}

/// What a token response must be after a request with a DPoP proof (RFC 9449 §5): a DPoP
/// token, whose `cnf.jkt` (when the token is a JWT) names our key; and after a request without
/// one, not a DPoP token (tokenctl could not use it).
public enum DPoPBinding {
    public enum Refusal: Error, Equatable, CustomStringConvertible {
        /// The server answered a proof with a Bearer token (it ignored DPoP).
        case downgraded
        /// A JWT access token bound to another key, or to none.
        case wrongConfirmation(String)
        /// A DPoP token for a request without a proof.
        case unrequested

        /// The reason of the `dpopDowngradeRefused` event.
        public var eventReason: String {
            switch self {
            case .downgraded: "bearer"
            case .wrongConfirmation: "cnf-jkt"
            case .unrequested: "unrequested"
            }
        }

        public var description: String {
            switch self {
            case .downgraded: "the server answered a DPoP-bound request with a Bearer token (it ignored the proof)"
            case .wrongConfirmation(let what): "the access token is not bound to this session's DPoP key: \(what)"
            case .unrequested: "the server issued a DPoP token although no DPoP proof was sent"
            }
        }
    }

    /// What to do about a refusal, for `profile`.
    public static func hint(_ profile: ProfileName, _ refusal: Refusal) -> Suggestion {
        switch refusal {
        case .downgraded:
            "If the server does not bind this client's tokens, set 'dpop_allow_bearer = true' in the profile's file to accept Bearer tokens, or run '\(tokenctl: profile, .login([.noDPoP]))'."
        case .wrongConfirmation:
            "The server bound the token to a key that is not this session's: report it to the server's operator; '\(tokenctl: profile, .login([.noDPoP]))' signs in without DPoP."
        case .unrequested:
            "Run '\(tokenctl: profile, .login([.dpop]))' to sign in with a DPoP key."
        }
    }

    /// Check `response` against the key its request was signed with (nil: no proof sent).
    ///
    /// - Parameter allowBearer: the profile's `dpop_allow_bearer`: a Bearer answer is accepted.
    public static func check(_ response: TokenResponse, key: DPoPKey?, allowBearer: Bool) throws(Refusal) {
        guard let key else {
            if response.tokenType == "DPoP" { throw .unrequested }
            return
        }
        guard response.tokenType == "DPoP" else {
            if allowBearer { return }
            throw .downgraded
        }
        // §6.1: a JWT access token names its key in cnf.jkt. An opaque token cannot be checked.
        guard let claims = UnverifiedJWT.claims(of: response.accessToken) else { return }
        guard case .object(let confirmation)? = claims["cnf"], let jkt = confirmation["jkt"]?.stringValue else {
            throw .wrongConfirmation("it is a JWT without cnf.jkt")
        }
        guard jkt == key.thumbprint else { throw .wrongConfirmation("its cnf.jkt is another key's") }
    }
}
