#if canImport(Glibc)
import Glibc
#endif
import TokenctlCore
import TokenctlEssentials

enum LoginCommand {
    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = context.options
        // Signing a profile in again needs no options: what it saved (issuer, client id, scope,
        // audience, resources, endpoints, client authentication, CA bundle) applies; options
        // given now replace it and are saved.
        let saved = options.value("--issuer") == nil || options.value("--client-id") == nil
            ? try ProfileRepository(paths: context.paths).load(context.profile) : nil
        let profileOption = context.profile == .default ? "" : " --profile \(context.profile)"
        guard let issuerText = options.value("--issuer") ?? saved?.issuer.string else {
            throw UsageError("Missing '--issuer <url>': profile '\(context.profile)' has none saved (tokenctl\(profileOption) login --issuer URL --client-id ID).", command: "login")
        }
        guard let clientID = options.value("--client-id") ?? saved?.clientID else {
            throw UsageError("Missing '--client-id <id>': profile '\(context.profile)' has none saved.", command: "login")
        }
        let chosen = ["--device", "--browser", "--refresh-token-stdin"].filter(options.has)
        guard chosen.count <= 1 else {
            throw UsageError("Choose one of --device, --browser and --refresh-token-stdin, not \(chosen.joined(separator: " and ")).", command: "login")
        }
        if options.has("--refresh-token-stdin") && options.has("--client-secret-stdin") {
            throw UsageError("--refresh-token-stdin and --client-secret-stdin both read standard input; store the secret in a separate login first.", command: "login")
        }
        func url(_ key: String) throws -> EndpointURL? {
            guard let text = options.value(key) else { return nil }
            do { return try EndpointURL(text) } catch { throw UsageError("Invalid value for '\(key)': \(error).", command: "login") }
        }
        let issuer: EndpointURL
        do { issuer = try EndpointURL(issuerText) } catch { throw UsageError("Invalid value for '--issuer': \(error).", command: "login") }
        guard !clientID.isEmpty, clientID.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }) else {
            throw UsageError("Invalid value for '--client-id': it must be non-empty, without spaces or control characters.", command: "login")
        }
        func words(_ key: String) throws -> String? {
            guard let text = options.value(key) else { return nil }
            let joined = text.split(separator: " ").joined(separator: " ")
            if joined.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == "\"" || $0 == "\\" }) {
                throw UsageError("Invalid value for '\(key)': expected space-separated printable values.", command: "login")
            }
            return joined.isEmpty ? nil : joined
        }
        let scope = try words("--scope")
        let audience = try words("--audience")
        let resources = try words("--resource").map { $0.split(separator: " ").map(String.init) } ?? []
        for resource in resources where (try? EndpointURL(resource)) == nil && !resource.hasPrefix("urn:") {
            throw UsageError("Invalid value for '--resource': '\(resource)' is not an absolute URI (RFC 8707).", command: "login")
        }
        let caBundle = options.value("--cacert")
        if let caBundle, access(caBundle, R_OK) != 0 {
            throw UsageError("Cannot read the CA bundle '\(caBundle)'.", command: "login")
        }
        var port: UInt16?
        if let text = options.value("--port") {
            guard let number = UInt16(text), number > 0 else {
                throw UsageError("Invalid value '\(text)' for '--port': expected a port number between 1 and 65535.", command: "login")
            }
            port = number
        }
        if (port != nil || options.has("--no-open")) && (options.has("--device") || options.has("--refresh-token-stdin")) {
            throw UsageError("--port and --no-open apply to --browser only.", command: "login")
        }
        let browserTimeout = try context.seconds("--login-timeout", command: "login", default: 300, allowZero: false)

        let method: LoginMethod
        if options.has("--refresh-token-stdin") {
            method = .refreshToken(try readLine(what: "refresh token", prompt: "Refresh token (input hidden): ", timeout: context.timeout))
        } else if options.has("--browser") || port != nil || options.has("--no-open") {
            method = .browser(port: port, openBrowser: !options.has("--no-open"), timeout: browserTimeout)
        } else if options.has("--device") || !hasDisplay() {
            method = .device
        } else {
            method = .browser(port: nil, openBrowser: true, timeout: browserTimeout)
        }
        let clientSecret = options.has("--client-secret-stdin") ? try readLine(what: "client secret", prompt: "Client secret (input hidden): ", timeout: context.timeout) : nil

        let request = TokenctlService.LoginRequest(
            profile: context.profile, issuer: issuer, clientID: clientID, scope: scope, method: method,
            endpoints: ExplicitEndpoints(
                token: try url("--token-endpoint"), revocation: try url("--revocation-endpoint"),
                deviceAuthorization: try url("--device-authorization-endpoint"), authorization: try url("--authorization-endpoint"),
                jwks: try url("--jwks-uri")),
            caBundle: caBundle.map(absolutePath), clientSecret: clientSecret, audience: audience, resources: resources)
        let presenter = TerminalLoginPresenter()
        let result = try await context.service().login(request, presenter: presenter)
        let tokenSet = result.tokenSet
        let who = tokenSet.subject.map { " as \(Output.printable($0))" } ?? ""
        let left = tokenSet.timeLeft(at: Clock.system.now())
        let validity = left >= 1 ? "access token valid for \(Output.duration(left))" : "the access token has already expired (the next 'token' refreshes it)"
        var summary = "Logged in profile '\(context.profile)' at \(issuer)\(who); \(validity).\n"
        if tokenSet.idToken != nil {
            // Name only the checks that were made: the device flow and an import send no nonce.
            var checks = ["issuer", "audience", "expiry"]
            if result.idTokenNonceChecked { checks.append("nonce") }
            if result.idTokenSignatureVerified { checks.append("signature") }
            summary += "ID token checked: " + checks.dropLast().joined(separator: ", ") + " and " + checks.last! + "."
            summary += result.idTokenSignatureVerified ? "\n" : " (No JWKS known, so not its signature.)\n"
        }
        if !tokenSet.hasRefreshToken {
            summary += "The server issued no refresh token: '\(CommandHint.tokenctl(context.profile, "token"))' works until the access token expires, then you must log in again.\n"
        }
        Output.standardError(summary)
        return .success
    }

    /// A graphical session can show a browser: DISPLAY or WAYLAND_DISPLAY set and stdin a terminal.
    static func hasDisplay() -> Bool {
        let environment = Environment.process
        let display = !(environment["DISPLAY"] ?? "").isEmpty || !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty
        return display && isatty(0) == 1
    }

    /// One line from stdin: a trailing newline is dropped; anything else must be the value.
    /// Input that does not end within `timeout` seconds (a pipe left open) is an error, never a
    /// hang; a person typing at a terminal is not hurried.
    static func readLine(what: String, prompt: String, timeout: Double) throws -> String {
        let interactive = isatty(0) == 1
        var saved = termios()
        if interactive {
            Output.standardError(prompt)
            tcgetattr(0, &saved)
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(0, TCSANOW, &quiet)
        }
        defer {
            if interactive {
                tcsetattr(0, TCSANOW, &saved)
                Output.standardError("\n")
            }
        }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = TokenctlCore.Clock.system.now() + timeout
        while bytes.count <= 65536 {
            if !interactive {
                var ready = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
                let left = deadline - TokenctlCore.Clock.system.now()
                let polled = left > 0 ? poll(&ready, 1, Int32(left * 1000)) : 0
                if polled < 0 && errno == EINTR { continue }
                if polled == 0 {
                    for index in bytes.indices { bytes[index] = 0 }
                    throw TokenctlError(
                        .invalidInput, "standard input did not end within \(Int(saturating: timeout)) s (reading the \(what))",
                        hint: "Close the input after the value, e.g. printf %s \"$VALUE\" | tokenctl login ...; or give more time with --timeout.")
                }
            }
            let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            bytes += buffer[0..<count]
            if interactive && bytes.contains(UInt8(ascii: "\n")) { break }
        }
        // Scrub our copies once the String exists.
        defer { for index in buffer.indices { buffer[index] = 0 } }
        var text = String(decoding: bytes, as: UTF8.self)
        for index in bytes.indices { bytes[index] = 0 }
        if text.hasSuffix("\r\n") { text.removeLast(1) } else if text.hasSuffix("\n") { text.removeLast() }
        if text.hasSuffix("\r") { text.removeLast() }
        let flag = what == "refresh token" ? "--refresh-token-stdin" : "--client-secret-stdin"
        guard !text.isEmpty else {
            throw TokenctlError(.invalidInput, "no \(what) on standard input", hint: "Pipe it in: printf %s \"$VALUE\" | tokenctl login ... \(flag)")
        }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw TokenctlError(.invalidInput, "the \(what) on standard input contains whitespace or control characters (only one line, with the \(what) alone, is accepted)")
        }
        return text
    }

    static func absolutePath(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } + "/" + path
    }
}
