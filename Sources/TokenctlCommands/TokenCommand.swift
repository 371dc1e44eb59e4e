import TokenctlCore
import TokenctlEssentials

enum TokenCommand: EngineCommand {
    /// Shared with the front, which parses `token` hits with exactly the engine's options.
    static let spec = SharedCommandSpecs.token

    /// What `token` prints.
    typealias Format = SharedCommandSpecs.TokenFormat

    /// The request a DPoP proof is for (`--method`, `--url`, `--nonce`).
    struct ProofRequest: Equatable, Sendable {
        var method: String
        var url: String
        var nonce: String?
    }

    /// `token`'s options, checked.
    struct Options: Equatable, Sendable {
        typealias Option = SharedCommandSpecs.TokenOption
        var minimumTimeToLive: Double
        var force: Bool
        var format: Format
        var proofRequest: ProofRequest?
        var target: TokenTarget

        init(_ parsed: ParsedOptions) throws(UsageError) {
            minimumTimeToLive = try parsed.seconds(
                Option.minimumTimeToLive, command: "token", default: AccessTokenLifetime.defaultMinimumTimeToLive)
            force = parsed.has(Option.force)
            format = try parsed.choice(Option.format, command: "token", default: .raw)
            proofRequest = try TokenCommand.proofRequest(
                method: parsed.value(Option.method), url: parsed.value(Option.url), nonce: parsed.value(Option.nonce),
                format: format)
            target = try parsed.target(command: "token")
        }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = try Options(context.options)
        let now = context.clock.now()
        let tokenSet: TokenSet
        let proof: String?
        if let served = try forwarded(options, context: context, now: now) {
            (tokenSet, proof) = served
        } else {
            (tokenSet, proof) = try await local(options, context: context, now: now)
        }
        context.io.standardOutput(
            render(
                tokenSet, proof: proof, options: options, now: now,
                execInfo: context.variables["KUBERNETES_EXEC_INFO"]))
        return .success
    }

    /// The token (and the DPoP proof asked for) of a forwarded session: the serving side
    /// refreshes and signs; nothing is local. Nil without a forward socket that serves.
    static func forwarded(_ options: Options, context: CommandContext, now: Double) throws -> (TokenSet, String?)? {
        let (target, proofRequest) = (options.target, options.proofRequest)
        guard
            let (served, socket) = try context.forwardedToken(
                target: target, minimumTimeToLive: options.minimumTimeToLive, force: options.force,
                proof: proofRequest.map { .init(method: $0.method, url: $0.url, nonce: $0.nonce) }, command: "token")
        else { return nil }
        context.verboseLog(
            "access token for '\(context.profile)'\(target.isSession ? "" : " (\(target))") "
                + (served.fromHotCache
                    ? "from the hot cache" : "forwarded from \(served.servedBy ?? "the serving side")")
                + " over \(socket), \(Output.validity(served.tokenSet.timeLeft(at: now)))")
        if proofRequest != nil, served.dpopProof == nil {
            throw TokenctlError(.protocolError, "the serving side answered without the DPoP proof asked for")
        }
        return (served.tokenSet, served.dpopProof)
    }

    /// The token of the local session (refreshed when needed) and the DPoP proof asked for,
    /// signed here.
    static func local(_ options: Options, context: CommandContext, now: Double) async throws -> (TokenSet, String?) {
        let (target, format) = (options.target, options.format)
        // The front serves raw, header and json hits itself; exec-credential comes here first.
        let served = try await context.service().token(
            context.profile, target: target, minimumTimeToLive: options.minimumTimeToLive, force: options.force,
            consultHotCache: format == .execCredential)
        let tokenSet = served.tokenSet
        if served.fromAnotherProcessRefresh {
            context.verboseLog(
                "waited for another process's refresh of '\(context.profile)'; serving the token it cached")
        }
        context.verboseLog(
            "access token for '\(context.profile)'\(target.isSession ? "" : " (\(target))") \(Output.validity(tokenSet.timeLeft(at: now)))"
        )
        let proof = try signProof(options.proofRequest, tokenSet: tokenSet, format: format, context: context, now: now)
        return (tokenSet, proof)
    }

    /// What `token` prints on stdout in `options.format`.
    static func render(_ tokenSet: TokenSet, proof: String?, options: Options, now: Double, execInfo: String?)
        -> String
    {
        switch options.format {
        case .dpop:
            return "Authorization: \(tokenSet.tokenType) \(tokenSet.accessToken)\nDPoP: \(proof!)\n"
        case .header:
            return "Authorization: \(tokenSet.tokenType) \(tokenSet.accessToken)\n"
        case .json:
            var fields: [(String, JSONText.Value)] = [
                ("access_token", .string(tokenSet.accessToken)), ("token_type", .string(tokenSet.tokenType)),
            ]
            if let expiry = tokenSet.expiresAt {
                fields.append(("expires_at", .string(Output.timestamp(expiry))))
                fields.append(("expires_in", .number(max(0, Int(saturating: expiry - now)))))
            }
            if let proof { fields.append(("dpop_proof", .string(proof))) }
            return JSONText.object(fields) + "\n"
        case .execCredential:
            return execCredential(tokenSet, minimumTimeToLive: options.minimumTimeToLive, execInfo: execInfo) + "\n"
        case .raw:
            return tokenSet.accessToken + "\n"
        }
    }

    /// The proof for `proofRequest`, signed with the session's DPoP key; nil when none is asked
    /// for (then a DPoP session's note, once).
    static func signProof(
        _ proofRequest: ProofRequest?, tokenSet: TokenSet, format: Format, context: CommandContext, now: Double
    ) throws -> String? {
        // A DPoP session's token is useless without a proof: sign one when asked, else say so (once a session).
        let dpopKey = try tokenSet.dpopSigningKey(of: context.profile, checked: false)
        if let proofRequest {
            guard let dpopKey else {
                throw TokenctlError(
                    .configuration,
                    "profile '\(context.profile)' is not bound to a DPoP key: its tokens are Bearer tokens",
                    hint:
                        "Use '\(CommandHint.tokenctl(context.profile, "token --format header"))', or sign in with DPoP: '\(CommandHint.tokenctl(context.profile, "login --dpop"))'."
                )
            }
            do {
                return try DPoPProof.make(
                    key: dpopKey, method: proofRequest.method, url: proofRequest.url,
                    issuedAt: Int(saturating: (now + (tokenSet.serverClockOffset ?? 0)).rounded(.down)),
                    accessToken: tokenSet.accessToken,
                    nonce: proofRequest.nonce)
            } catch {
                throw TokenctlError(.unexpected, "cannot sign a DPoP proof: \(error)")
            }
        } else if let dpopKey, format != .json {
            DPoPNotice.once(
                profile: context.profile, thumbprint: dpopKey.thumbprint, paths: context.paths, io: context.io)
        }
        return nil
    }

    /// The request a DPoP proof is for, checked; nil when none is asked for.
    static func proofRequest(method: String?, url: String?, nonce: String?, format: Format) throws(UsageError)
        -> ProofRequest?
    {
        guard method != nil || url != nil || nonce != nil || format == .dpop else { return nil }
        guard format == .dpop || format == .json else {
            throw UsageError("--method, --url and --nonce go with --format dpop or --format json.", command: "token")
        }
        guard let method, let url else {
            throw UsageError(
                "A DPoP proof needs both '--method <method>' and '--url <url>' (the request it is for).",
                command: "token")
        }
        // RFC 9110 §9.1: a method is a token; tokenctl signs the usual ones' shape (letters).
        guard !method.isEmpty, method.utf8.count <= 32,
            method.utf8.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
        else {
            throw UsageError(
                "Invalid value '\(Output.printable(method))' for '--method': expected an HTTP method such as GET or POST.",
                command: "token")
        }
        guard url.utf8.count <= 8192, url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), DPoPProof.htu(url) != nil else {
            throw UsageError(
                "Invalid value for '--url': expected an absolute http:// or https:// URL without spaces.",
                command: "token")
        }
        if let nonce, DPoPHTTPClient.usableNonce(nonce) == nil {
            throw UsageError(
                "Invalid value for '--nonce': expected the DPoP-Nonce header's value (printable ASCII, no quotes or backslashes).",
                command: "token")
        }
        return ProofRequest(method: method.uppercased(), url: url, nonce: nonce)
    }

    /// A kubectl exec credential (client.authentication.k8s.io, v1 or the v1beta1 that
    /// KUBERNETES_EXEC_INFO asks for). It expires when tokenctl would refresh (the token's
    /// expiry minus the min-ttl margin), so kubectl asks again in time.
    static func execCredential(_ tokenSet: TokenSet, minimumTimeToLive: Double, execInfo: String?) -> String {
        let group = "client.authentication.k8s.io/"
        var apiVersion = group + "v1"
        if let info = execInfo,
            let requested = try? FlatJSONObject(parsing: Array(info.utf8)).string("apiVersion"),
            requested == group + "v1beta1"
        {
            apiVersion = requested
        }
        var status = [("token", JSONText.Value.string(tokenSet.accessToken))]
        if let expiry = tokenSet.expiresAt {
            let margin = tokenSet.refreshMargin(minimumTimeToLive: minimumTimeToLive)
            status.append(("expirationTimestamp", .string(Timestamp.iso8601((expiry - margin).rounded(.down)))))
        }
        return JSONText.object([
            ("apiVersion", .string(apiVersion)), ("kind", .string("ExecCredential")),
            ("status", JSONText.Value(raw: JSONText.object(status))),
        ])
    }
}

/// The note a plain `token` on a DPoP session prints on stderr, once a session: scripts that
/// send the token as Bearer see why the resource server refuses it. Remembered in the state
/// directory (the key's thumbprint, not a secret), so a new login notes again.
enum DPoPNotice {
    static func once(profile: ProfileName, thumbprint: String, paths: Paths, io: IOStreams) {
        let directory = paths.stateDirectory + "/dpop-noted"
        let path = directory + "/" + profile.rawValue
        if (try? FileIO.readFile(path, limit: 256)) == thumbprint { return }
        io.standardError(
            "tokenctl: note: profile '\(profile)' has a DPoP-bound token: a resource server accepts it only with a DPoP proof for each request, which 'token --format dpop --method M --url U' prints with it ('tokenctl help token'). (Shown once a session.)\n"
        )
        try? FileIO.ensurePrivateDirectory(directory)
        try? FileIO.writeAtomically(thumbprint, to: path)
    }
}
