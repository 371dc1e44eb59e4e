import TokenctlCore
import TokenctlEssentials

enum LoginCommand: EngineCommand {
    /// Every option of `login`, by name.
    enum Option {
        static let provider = OptionSpec(
            "--provider", value: "name",
            help:
                "A provider preset: \(Provider.names.dropLast().joined(separator: ", ")) or \(Provider.names.last ?? "") ('tokenctl help providers'). Saved in the profile."
        )
        static let host = OptionSpec(
            "--host", value: "host",
            help:
                "With --provider: the instance's host (GitHub Enterprise Server, self-managed GitLab, Gitea, Forgejo, an Entra national cloud)."
        )
        static let tenant = OptionSpec(
            "--tenant", value: "tenant",
            help: "With --provider entra: the tenant ID (or a domain), common, organizations or consumers.")
        static let issuer = OptionSpec(
            "--issuer", value: "url",
            help:
                "The authorization server's issuer URL (https://, or http:// to loopback). Default: the profile's saved one."
        )
        static let clientID = OptionSpec(
            "--client-id", value: "id", help: "The OAuth client ID. Default: the profile's saved one.")
        static let device = OptionSpec(
            "--device",
            help:
                "Device authorization grant (RFC 8628): show a code to enter on any device. The default without a display or terminal."
        )
        static let browser = OptionSpec(
            "--browser", help: "Authorization code with PKCE in the system browser, redirected to 127.0.0.1 (RFC 8252)."
        )
        static let port = OptionSpec(
            "--port", value: "port", help: "With --browser: listen on this loopback port instead of a free one.")
        static let noOpen = OptionSpec("--no-open", help: "With --browser: print the URL instead of starting xdg-open.")
        static let loginTimeout = OptionSpec(
            "--login-timeout", value: "seconds",
            help: "With --browser: how long to wait for the browser (default: 300).")
        static let grant = OptionSpec(
            "--grant", value: "grant", choices: MachineGrant.allCases.map(\.rawValue),
            help:
                "A machine profile, with no person and no refresh token; 'token' gets a new access token when the cached one is due: client-credentials (RFC 6749 §4.4), token-exchange of --subject-token-file (RFC 8693), jwt-bearer with --assertion-file (RFC 7523)."
        )
        static let subjectTokenFile = OptionSpec(
            "--subject-token-file", value: "file", valueKind: .file,
            help:
                "With --grant token-exchange: the file of the token to exchange (a platform's, which it rotates): read again for every exchange, never copied. Saved."
        )
        static let subjectTokenType = OptionSpec(
            "--subject-token-type", value: "urn",
            help: "With --grant token-exchange: its type (default: urn:ietf:params:oauth:token-type:jwt). Saved.")
        static let requestedTokenType = OptionSpec(
            "--requested-token-type", value: "urn",
            help: "With --grant token-exchange: the requested_token_type to send (default: none). Saved.")
        static let assertionFile = OptionSpec(
            "--assertion-file", value: "file", valueKind: .file,
            help: "With --grant jwt-bearer: the file of the JWT to present as the grant, read for every request. Saved."
        )
        static let clientAssertionFile = OptionSpec(
            "--client-assertion-file", value: "file", valueKind: .file,
            help:
                "With --grant: the client authenticates with the JWT in this file (a federated client assertion, RFC 7521), read for every request. Saved."
        )
        static let clientAuth = OptionSpec(
            "--client-auth", value: "method", choices: ClientAuthenticationMethod.names,
            help:
                "How the client authenticates: \(ClientAuthenticationMethod.names.joined(separator: ", ")) (none: a public client, with --grant jwt-bearer or token-exchange only). Default: the best the server advertises that the client has the means for, keys before secrets; none for those two grants with no secret, key or certificate."
        )
        static let refreshTokenStdin = OptionSpec(
            "--refresh-token-stdin", help: "Import a refresh token read from standard input (one line).")
        static let clientSecretStdin = OptionSpec(
            "--client-secret-stdin",
            help: "A confidential client: read its secret from standard input and keep it in the Secret Service.")
        static let scope = OptionSpec(
            "--scope", value: "scope",
            help: "Scopes to request (default: openid offline_access, as far as the server supports them).")
        static let audience = OptionSpec(
            "--audience", value: "audience", help: "Pass an 'audience' parameter (e.g. Auth0 APIs).")
        static let resource = OptionSpec(
            "--resource", value: "uri", help: "Resource indicator(s) (RFC 8707), space-separated.")
        static let tokenEndpoint = OptionSpec(
            "--token-endpoint", value: "url", help: "Token endpoint, for servers without (complete) discovery.")
        static let revocationEndpoint = OptionSpec(
            "--revocation-endpoint", value: "url", help: "Revocation endpoint (RFC 7009).")
        static let deviceAuthorizationEndpoint = OptionSpec(
            "--device-authorization-endpoint", value: "url", help: "Device authorization endpoint (RFC 8628).")
        static let authorizationEndpoint = OptionSpec(
            "--authorization-endpoint", value: "url", help: "Authorization endpoint, for --browser.")
        static let jwksURI = OptionSpec(
            "--jwks-uri", value: "url", help: "The issuer's JSON Web Key Set, to verify ID token signatures.")
        static let caBundle = OptionSpec(
            "--cacert", value: "file", valueKind: .file,
            help: "CA certificates (PEM) to trust for this issuer instead of the system bundle.")
        static let dpop = OptionSpec(
            "--dpop",
            help:
                "Bind the session to a new DPoP key (RFC 9449): a copied token is useless without it. The server must advertise ES256."
        )
        static let noDPoP = OptionSpec(
            "--no-dpop", help: "Sign in with bearer tokens, although the profile saved 'dpop = true'.")
        static let timeout = OptionSpec(
            "--timeout", value: "seconds",
            help:
                "Bound the keyring and profile checks before the flow, the writes after it, each request to the server and reading standard input, each by this long (default: 30, at least 1); not your wait to approve (see --login-timeout)."
        )
    }

    static let spec = CommandSpec(
        name: "login",
        abstract: "Sign in a profile: device code, browser, or an imported refresh token.",
        usage:
            "[--provider <name>] [--issuer <url> --client-id <id>] [--device | --browser | --refresh-token-stdin] [--grant <grant>] [<options>]",
        options: [
            Option.provider,
            Option.host,
            Option.tenant,
            Option.issuer,
            Option.clientID,
            Option.device,
            Option.browser,
            Option.port,
            Option.noOpen,
            Option.loginTimeout,
            Option.grant,
            Option.subjectTokenFile,
            Option.subjectTokenType,
            Option.requestedTokenType,
            Option.assertionFile,
            Option.clientAssertionFile,
            Option.clientAuth,
            Option.refreshTokenStdin,
            Option.clientSecretStdin,
            Option.scope,
            Option.audience,
            Option.resource,
            Option.tokenEndpoint,
            Option.revocationEndpoint,
            Option.deviceAuthorizationEndpoint,
            Option.authorizationEndpoint,
            Option.jwksURI,
            Option.caBundle,
            Option.dpop,
            Option.noDPoP,
            Option.timeout,
        ],
        discussion: """
            A profile that logged in before signs in again with a plain 'tokenctl login' (with
            --profile for another profile): the issuer, client id, scope, audience, resources,
            endpoints, CA bundle and client authentication it saved apply; options given replace
            them and are saved. Endpoints come from the issuer's discovery document (OpenID
            Connect, then RFC 8414), cached for a day under $XDG_CACHE_HOME/tokenctl/; options
            given now win, then the profile's saved endpoints. Without
            --device, --browser or --refresh-token-stdin, tokenctl uses the browser when a display
            (DISPLAY or WAYLAND_DISPLAY) and a terminal are present, and the device flow otherwise.
            An ID token is checked (issuer, audience, expiry; the nonce after a browser login; its
            RS256, PS256, ES256 or EdDSA signature when the issuer's JWKS is known) before anything
            is stored. The token set (and a client secret) go to the Secret Service; the
            profile is written to $XDG_CONFIG_HOME/tokenctl/profiles/<name>.conf. Before anything
            is sent to the token endpoint or shown to you to approve, login proves it can write
            both: the profile directory (a probe file is written and removed), the Secret Service
            (a search in the collection it writes to, within --timeout), and the lock; the
            rotation journal in the kernel keyring is probed too, but login goes on without it.
            Nothing is stored if anything fails before the server issues the tokens; once it has,
            nothing that holds them is undone: a write that still fails leaves the session in the
            Secret Service or the rotation journal, and the message says which and what to run.
            Exit status: 77 denied, expired or rejected; 75 server unreachable; 78 discovery or
            endpoint problems, or the profile cannot be written; 69 the keyring cannot be used;
            64 bad options or a --port already in use.
            With --dpop, a new EC P-256 key is made for the session and kept with its tokens in
            the Secret Service; every request to the token and revocation endpoints carries a
            proof signed with it, and the server must answer with DPoP tokens (see DPOP in
            tokenctl-login(1)). The choice is saved ('dpop = true') and applies to later logins.
            A profile with a session and a stored client secret takes a new secret (one the server
            rotated, or that expired) with 'tokenctl login --client-secret-stdin' and no other login
            option: the secret is replaced and the session kept, with nothing sent to the server
            and no new sign-in; the next refresh uses it. Without a session, or with any other
            option, --client-secret-stdin signs in as usual and stores the secret with the session.
            With --provider, the preset fills in what the provider needs beyond the standards
            (endpoints where it has no discovery, default scopes, Google's access_type=offline,
            how its issuer is matched, how logout revokes): give only the client id (and
            --client-secret-stdin where the provider requires a secret). 'tokenctl help
            providers' says what to register at each provider.
            With --grant client-credentials, the profile is a machine's: no person signs in, the
            client authenticates itself (--client-auth; a secret only from --client-secret-stdin,
            kept in the Secret Service) and the login gets a first token to prove the
            configuration; 'token' then asks for a new one whenever the cached one is due, under
            the same lock and cache as a session. The server refusing the client is exit 78,
            naming what to register where.
            With --grant token-exchange or jwt-bearer, the token is the exchange of a file's token
            that the platform gives the job (--subject-token-file, --assertion-file); with
            --client-assertion-file, the client authenticates with a file's JWT. The paths are
            saved, and each file is read again for every request (platforms rotate them), at most
            64 KiB, never copied; a file missing, empty, not a JWT or past its exp is refused
            before anything is sent (78), naming the file, never its content.
            """)

    /// Waits for a person: --timeout bounds each request, the store checks before the flow and
    /// the writes after it (`TokenctlService.login`), not the whole login.
    static func hasDeadline(_ options: ParsedOptions) -> Bool { false }

    /// How the first token set is obtained.
    enum Flow: Equatable, Sendable {
        case device, browser, refreshTokenImport
        /// A machine profile (`--grant client-credentials`).
        case clientCredentials
        /// The browser with a display and a terminal, else the device flow.
        case automatic
    }

    /// `login`'s options, checked (the issuer and client id may come from the saved profile).
    struct Options: Equatable, Sendable {
        var issuer: EndpointURL?
        var clientID: String?
        var flow: Flow
        var readsClientSecret: Bool
        var scope: String?
        var audience: String?
        var resources: [String]
        var caBundle: String?
        var port: UInt16?
        var opensBrowser: Bool
        var browserTimeout: Double
        var endpoints: ExplicitEndpoints
        /// true `--dpop`, false `--no-dpop`, nil what the profile saved.
        var dpop: Bool?
        /// `--provider` (with the issuer it implies in `issuer`); nil: what the profile saved.
        var provider: Provider?
        /// `--client-auth`; nil: the saved one, or chosen from discovery.
        var clientAuth: ClientAuthenticationMethod?
        /// `--client-secret-stdin` with no other login option (`--timeout` aside): a profile
        /// with a session gets the new secret and keeps its session (no new sign-in).
        var replacesSecretOnly: Bool
        /// `--grant` and the files of a platform's tokens (paths made absolute).
        var machine: MachineExchange

        init(_ parsed: ParsedOptions) throws(UsageError) {
            try Options.checkOneFlow(parsed)
            clientAuth = try Options.clientAuth(parsed)
            if (parsed.value(Option.grant) != nil) && parsed.has(Option.dpop) {
                throw UsageError("--dpop applies to a person's session, not to --grant.", command: "login")
            }
            machine = try Options.machine(parsed)
            readsClientSecret = parsed.has(Option.clientSecretStdin)
            replacesSecretOnly = readsClientSecret && Options.givesOnlyClientSecret(parsed)
            if parsed.has(Option.refreshTokenStdin) && readsClientSecret {
                throw UsageError(
                    "--refresh-token-stdin and --client-secret-stdin both read standard input; store the secret in a separate login first.",
                    command: "login")
            }
            (provider, issuer) = try Options.provider(parsed, issuer: Options.url(parsed, Option.issuer))
            clientID = try Options.clientID(parsed)
            // The checks `token --scope/--audience/--resource` makes (TokenTarget's, the same
            // rules the front applies to a hit), so a value login accepts is one that `token`
            // accepts too. The request keeps the words in the order given.
            _ = try parsed.target(command: "login")
            scope = parsed.value(Option.scope).map { $0.split(separator: " ").joined(separator: " ") }
            audience = parsed.value(Option.audience)
            resources = parsed.value(Option.resource).map { $0.split(separator: " ").map(String.init) } ?? []
            caBundle = parsed.value(Option.caBundle)
            if let caBundle, !FileIO.isReadable(caBundle) {
                throw UsageError("Cannot read the CA bundle '\(caBundle)'.", command: "login")
            }
            port = try Options.port(parsed)
            opensBrowser = !parsed.has(Option.noOpen)
            if (port != nil || !opensBrowser)
                && (parsed.has(Option.device) || parsed.has(Option.refreshTokenStdin)
                    || (parsed.value(Option.grant) != nil))
            {
                throw UsageError("--port and --no-open apply to --browser only.", command: "login")
            }
            if parsed.has(Option.dpop) && parsed.has(Option.noDPoP) {
                throw UsageError("Choose one of --dpop and --no-dpop.", command: "login")
            }
            dpop = parsed.has(Option.dpop) ? true : parsed.has(Option.noDPoP) ? false : nil
            browserTimeout = try parsed.seconds(Option.loginTimeout, command: "login", default: 300, allowZero: false)
            flow = Options.flow(parsed, port: port, opensBrowser: opensBrowser, provider: provider)
            endpoints = try Options.endpoints(parsed)
        }

        /// At most one of the flow options, and `--grant` with a grant tokenctl knows.
        static func checkOneFlow(_ parsed: ParsedOptions) throws(UsageError) {
            let chosen =
                [Option.device, Option.browser, Option.refreshTokenStdin].filter(parsed.has)
                + [Option.grant].filter { parsed.value($0) != nil }
            guard chosen.count <= 1 else {
                throw UsageError(
                    "Choose one of --device, --browser, --refresh-token-stdin and --grant, not \(chosen.map(\.key).joined(separator: " and ")).",
                    command: "login")
            }
            if let grant = parsed.value(Option.grant), MachineGrant(rawValue: grant) == nil {
                throw UsageError(
                    "Invalid value '\(Output.printable(String(grant.prefix(40))))' for '--grant': expected \(MachineGrant.allCases.map(\.rawValue).joined(separator: " or ")).",
                    command: "login")
            }
        }

        /// `--client-auth`, checked.
        static func clientAuth(_ parsed: ParsedOptions) throws(UsageError) -> ClientAuthenticationMethod? {
            try parsed.value(Option.clientAuth).map { (name) throws(UsageError) in
                guard let method = ClientAuthenticationMethod(rawValue: name) else {
                    let hint =
                        closestMatch(to: name, in: ClientAuthenticationMethod.names).map { " (did you mean '\($0)'?)" }
                        ?? ""
                    throw UsageError(
                        "Invalid value '\(Output.printable(String(name.prefix(40))))' for '--client-auth'\(hint): expected one of \(ClientAuthenticationMethod.names.joined(separator: ", ")).",
                        command: "login")
                }
                return method
            }
        }

        /// Whether no login option but `--client-secret-stdin` (and `--timeout`) is given.
        static func givesOnlyClientSecret(_ parsed: ParsedOptions) -> Bool {
            let given = Set(parsed.valueList.map(\.key) + parsed.flagList)
            return LoginCommand.spec.options.allSatisfy {
                [Option.clientSecretStdin, Option.timeout].contains($0) || !given.contains($0.key)
            }
        }

        /// How the first token set is obtained: as chosen, or the browser when `--port` or
        /// `--no-open` says so or the provider has no device flow, else whatever fits.
        static func flow(_ parsed: ParsedOptions, port: UInt16?, opensBrowser: Bool, provider: Provider?) -> Flow {
            (parsed.value(Option.grant) != nil)
                ? .clientCredentials
                : parsed.has(Option.refreshTokenStdin)
                    ? .refreshTokenImport
                    : parsed.has(Option.browser) || port != nil || !opensBrowser
                        ? .browser
                        : parsed.has(Option.device)
                            ? .device : provider?.offersDeviceFlow == false ? .browser : .automatic
        }

        /// The endpoints given as options, checked.
        static func endpoints(_ parsed: ParsedOptions) throws(UsageError) -> ExplicitEndpoints {
            func url(_ option: OptionSpec) throws(UsageError) -> EndpointURL? { try Options.url(parsed, option) }
            return ExplicitEndpoints(
                token: try url(Option.tokenEndpoint), revocation: try url(Option.revocationEndpoint),
                deviceAuthorization: try url(Option.deviceAuthorizationEndpoint),
                authorization: try url(Option.authorizationEndpoint),
                jwks: try url(Option.jwksURI))
        }

        /// `--grant` and the platform files' options, each checked against the grant named.
        static func machine(_ parsed: ParsedOptions) throws(UsageError) -> MachineExchange {
            let grant = parsed.value(Option.grant).flatMap(MachineGrant.init(rawValue:))
            try checkFiles(parsed, grant: grant)
            for option in [Option.subjectTokenFile, Option.assertionFile, Option.clientAssertionFile]
            where parsed.value(option) != nil {
                if parsed.has(Option.device) || parsed.has(Option.browser) || parsed.has(Option.refreshTokenStdin) {
                    throw UsageError("\(option.key) applies to a machine profile (--grant) only.", command: "login")
                }
            }
            if parsed.value(Option.clientAssertionFile) != nil, parsed.has(Option.clientSecretStdin) {
                throw UsageError(
                    "Choose one of --client-assertion-file and --client-secret-stdin: the client authenticates with one.",
                    command: "login")
            }
            // A federated assertion is private_key_jwt (RFC 7521 §4.2): another method cannot go with it.
            if parsed.value(Option.clientAssertionFile) != nil, let method = parsed.value(Option.clientAuth),
                method != ClientAuthenticationMethod.privateKeyJWT.rawValue
            {
                throw UsageError(
                    "--client-assertion-file authenticates the client with private_key_jwt, not \(method).",
                    command: "login")
            }
            try checkPublicClient(parsed, grant: grant)
            var machine = MachineExchange()
            machine.grant = grant
            machine.subjectTokenFile = parsed.value(Option.subjectTokenFile).map(absolutePath(_:))
            machine.subjectTokenType = parsed.value(Option.subjectTokenType)
            machine.requestedTokenType = parsed.value(Option.requestedTokenType)
            machine.assertionFile = parsed.value(Option.assertionFile).map(absolutePath(_:))
            machine.clientAssertionFile = parsed.value(Option.clientAssertionFile).map(absolutePath(_:))
            return machine
        }

        /// `--client-auth none`, a public client (RFC 7591 §2): no secret, and not with the client
        /// credentials grant, a confidential client's only (RFC 6749 §4.4).
        static func checkPublicClient(_ parsed: ParsedOptions, grant: MachineGrant?) throws(UsageError) {
            guard parsed.value(Option.clientAuth) == ClientAuthenticationMethod.publicClient.rawValue else { return }
            if parsed.has(Option.clientSecretStdin) {
                throw UsageError(
                    "--client-auth none is a public client, which sends no secret: leave out --client-secret-stdin.",
                    command: "login")
            }
            if let grant, !grant.allowsPublicClient {
                throw UsageError(
                    "--grant \(grant.rawValue) is for confidential clients only (RFC 6749 §4.4): --client-auth none applies with --grant jwt-bearer or token-exchange.",
                    command: "login")
            }
        }

        /// The platform files' options given agree with `grant` (given now, or saved).
        static func checkFiles(_ parsed: ParsedOptions, grant: MachineGrant?) throws(UsageError) {
            let rules: [(OptionSpec, MachineGrant)] = [
                (Option.subjectTokenFile, .tokenExchange), (Option.subjectTokenType, .tokenExchange),
                (Option.requestedTokenType, .tokenExchange), (Option.assertionFile, .jwtBearer),
            ]
            for (option, needed) in rules where parsed.value(option) != nil {
                if let grant, grant != needed {
                    throw UsageError("\(option.key) applies with --grant \(needed.rawValue) only.", command: "login")
                }
            }
        }

        /// The URL `option` gives, checked.
        static func url(_ parsed: ParsedOptions, _ option: OptionSpec) throws(UsageError) -> EndpointURL? {
            guard let text = parsed.value(option) else { return nil }
            do { return try EndpointURL(text) } catch {
                throw UsageError("Invalid value for '\(option.key)': \(error).", command: "login")
            }
        }

        /// `--provider` and the issuer it implies (with `--host`, `--tenant` or `--issuer`);
        /// without it, `issuer` as given.
        static func provider(_ parsed: ParsedOptions, issuer: EndpointURL?) throws(UsageError) -> (
            Provider?, EndpointURL?
        ) {
            guard let name = parsed.value(Option.provider) else {
                if let given = [Option.host, Option.tenant].first(where: { parsed.value($0) != nil }) {
                    throw UsageError("\(given.key) applies with --provider only.", command: "login")
                }
                return (nil, issuer)
            }
            guard let named = Provider.named(name) else {
                let hint =
                    closestMatch(to: name.lowercased(), in: Provider.names).map { " (did you mean '\($0)'?)" } ?? ""
                throw UsageError(
                    "Unknown provider '\(Output.printable(String(name.prefix(40))))'\(hint); known: \(Provider.names.joined(separator: ", ")).",
                    command: "login")
            }
            let implied: EndpointURL
            do {
                implied = try ProviderPreset.issuer(
                    for: named, host: parsed.value(Option.host), tenant: parsed.value(Option.tenant), issuer: issuer)
            } catch {
                throw UsageError(error.message, command: "login")
            }
            if !named.offersDeviceFlow, parsed.has(Option.device) {
                throw UsageError(
                    "\(named.displayName) has no device flow: sign in with --browser (add --no-open to print the URL).",
                    command: "login")
            }
            return (named, implied)
        }

        /// `--client-id`, checked: non-empty, no spaces or control characters.
        static func clientID(_ parsed: ParsedOptions) throws(UsageError) -> String? {
            let clientID = parsed.value(Option.clientID)
            if let clientID,
                clientID.isEmpty || !clientID.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F })
            {
                throw UsageError(
                    "Invalid value for '--client-id': it must be non-empty, without spaces or control characters.",
                    command: "login")
            }
            return clientID
        }

        /// `--port`, checked.
        static func port(_ parsed: ParsedOptions) throws(UsageError) -> UInt16? {
            guard let text = parsed.value(Option.port) else { return nil }
            guard let number = UInt16(text), number > 0 else {
                throw UsageError(
                    "Invalid value '\(Output.printable(String(text.prefix(40))))' for '--port': expected a port number between 1 and 65535.",
                    command: "login")
            }
            return number
        }
    }

    static func run(_ context: CommandContext) async throws -> ExitStatus {
        var options = try Options(context.options)
        // Signing a profile in again needs no options: what it saved (issuer, client id, scope,
        // audience, resources, endpoints, client authentication, CA bundle) applies; options
        // given now replace it and are saved.
        let saved =
            options.issuer == nil || options.clientID == nil
            ? try ProfileRepository(paths: context.paths).load(context.profile) : nil
        // A machine profile signs in again as a machine, unless another flow is named.
        let savedProfile = saved ?? (try? ProfileRepository(paths: context.paths).load(context.profile))
        if options.flow == .automatic, savedProfile?.isMachine == true { options.flow = .clientCredentials }
        try checkMachineOptions(options, saved: savedProfile, context)
        let profileOption = context.profile == .default ? "" : " --profile \(context.profile)"
        guard let issuer = options.issuer ?? saved?.issuer else {
            throw UsageError(
                "Missing '--issuer <url>': profile '\(context.profile)' has none saved (tokenctl\(profileOption) login --issuer URL --client-id ID).",
                command: "login")
        }
        guard let clientID = options.clientID ?? saved?.clientID else {
            throw UsageError(
                "Missing '--client-id <id>': profile '\(context.profile)' has none saved.", command: "login")
        }
        let method = try loginMethod(options, context)
        let clientSecret =
            options.readsClientSecret
            ? try StandardInput.line(
                from: context.io, what: "client secret", prompt: "Client secret (input hidden): ",
                timeout: context.timeout) : nil

        if options.replacesSecretOnly, let clientSecret,
            try await context.service().replaceClientSecret(clientSecret, of: context.profile)
        {
            context.io.standardError(
                "Stored the new client secret of profile '\(context.profile)'; its session is kept, and the next refresh uses the new secret (nothing was sent to the server).\n"
            )
            return .success
        }
        var request = TokenctlService.LoginRequest(
            profile: context.profile, issuer: issuer, clientID: clientID, scope: options.scope, method: method,
            endpoints: options.endpoints,
            caBundle: options.caBundle.map(absolutePath(_:)), clientSecret: clientSecret, audience: options.audience,
            resources: options.resources,
            dpop: options.dpop, provider: options.provider)
        request.clientAuth = options.clientAuth
        request.machine = options.machine
        let presenter = TerminalLoginPresenter(
            io: context.environment.io, clock: context.clock, programs: context.environment.programs)
        let result = try await context.service().login(request, presenter: presenter)
        context.io.standardError(summary(result, issuer: issuer, context))
        return .success
    }

    /// The platform files' options agree with the grant given now or saved, and go with a
    /// machine's login only.
    static func checkMachineOptions(_ options: Options, saved: ProfileConfiguration?, _ context: CommandContext)
        throws(UsageError)
    {
        if options.machine.grant == nil, options.flow == .clientCredentials, let grant = saved?.grant {
            try Options.checkFiles(context.options, grant: grant)
            try Options.checkPublicClient(context.options, grant: grant)
        }
        if options.flow != .clientCredentials, options.machine != MachineExchange() {
            throw UsageError(
                "The platform's token files apply to a machine profile: add --grant (profile '\(context.profile)' is not one).",
                command: "login")
        }
    }

    /// How the first token set is obtained: `options.flow`, the automatic one decided.
    static func loginMethod(_ options: Options, _ context: CommandContext) throws -> LoginMethod {
        switch options.flow {
        case .refreshTokenImport:
            return .refreshToken(
                try StandardInput.line(
                    from: context.io, what: "refresh token", prompt: "Refresh token (input hidden): ",
                    timeout: context.timeout))
        case .browser:
            return .browser(port: options.port, openBrowser: options.opensBrowser, timeout: options.browserTimeout)
        case .device:
            return .device
        case .clientCredentials:
            return .clientCredentials
        case .automatic:
            return hasDisplay(context.environment)
                ? .browser(port: nil, openBrowser: true, timeout: options.browserTimeout) : .device
        }
    }

    /// What a login that succeeded says on stderr: who signed in where, the access token's
    /// validity, the ID-token checks made, the DPoP binding, a missing refresh token.
    static func summary(_ result: LoginResult, issuer: EndpointURL, _ context: CommandContext) -> String {
        let tokenSet = result.tokenSet
        let who = tokenSet.subject.map { " as \(Output.printable($0))" } ?? ""
        let left = tokenSet.timeLeft(at: context.clock.now())
        let validity =
            left == .infinity
            ? "access token with no expiry stated (served until a server rejects it)"
            : left >= 1
                ? "access token valid for \(Output.duration(left))"
                : "the access token has already expired (the next 'token' refreshes it)"
        var summary = "Logged in profile '\(context.profile)' at \(issuer)\(who); \(validity).\n"
        if tokenSet.idToken != nil {
            // Name only the checks that were made: the device flow and an import send no nonce.
            var checks = ["issuer", "audience", "expiry"]
            if result.idTokenNonceChecked { checks.append("nonce") }
            if result.idTokenSignatureVerified { checks.append("signature") }
            summary += "ID token checked: " + checks.dropLast().joined(separator: ", ") + " and " + checks.last! + "."
            summary += result.idTokenSignatureVerified ? "\n" : " (No JWKS known, so not its signature.)\n"
        }
        if let stored = tokenSet.dpopKey, let key = try? DPoPKey(stored: stored) {
            summary +=
                tokenSet.tokenType == "DPoP"
                ? "The session is bound to a new DPoP key (jkt \(key.thumbprint)): each request needs a proof, which 'token --format dpop' prints with the token ('tokenctl help token').\n"
                : "The server issued Bearer tokens to this DPoP request (accepted: dpop_allow_bearer = true); they are not bound to the key.\n"
        }
        if result.isMachine {
            summary +=
                "A machine profile (\(result.grant?.rawValue ?? "client-credentials"), \(result.clientAuth?.rawValue ?? "no client authentication")): '\(CommandHint.tokenctl(context.profile, "token"))' gets a new access token whenever the cached one is due.\n"
        } else if !tokenSet.hasRefreshToken {
            summary +=
                "The server issued no refresh token: '\(CommandHint.tokenctl(context.profile, "token"))' works until the access token expires, then you must log in again.\n"
        }
        return summary
    }

    /// A graphical session can show a browser: DISPLAY or WAYLAND_DISPLAY set and stdin a terminal.
    static func hasDisplay(_ environment: EngineEnvironment) -> Bool {
        let variables = environment.variables
        let display = !(variables["DISPLAY"] ?? "").isEmpty || !(variables["WAYLAND_DISPLAY"] ?? "").isEmpty
        return display && environment.io.inputIsTerminal
    }
}
