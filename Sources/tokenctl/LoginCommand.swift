#if canImport(Glibc)
import Glibc
#endif
import TokenctlCore
import TokenctlEssentials

enum LoginCommand {
    static func run(_ context: CommandContext) async throws -> ExitStatus {
        let options = context.options
        if options.has("--device") || options.has("--browser") {
            throw UsageError("Interactive login is not available yet; use --refresh-token-stdin.", command: "login")
        }
        guard let issuerText = options.value("--issuer") else { throw UsageError("Missing '--issuer <url>'.", command: "login") }
        guard let clientID = options.value("--client-id") else { throw UsageError("Missing '--client-id <id>'.", command: "login") }
        guard options.has("--refresh-token-stdin") else {
            throw UsageError("Missing '--refresh-token-stdin' (interactive login is not available yet).", command: "login")
        }
        func url(_ key: String, _ text: String?) throws -> EndpointURL? {
            guard let text else { return nil }
            do { return try EndpointURL(text) } catch { throw UsageError("Invalid value for '\(key)': \(error).", command: "login") }
        }
        let issuer = try url("--issuer", issuerText)!
        guard !clientID.isEmpty, clientID.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }) else {
            throw UsageError("Invalid value for '--client-id': it must be non-empty, without spaces or control characters.", command: "login")
        }
        let scope = options.value("--scope").map { $0.split(separator: " ").joined(separator: " ") }
        if let scope, scope.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == "\"" || $0 == "\\" }) {
            throw UsageError("Invalid value for '--scope': scopes are space-separated printable characters.", command: "login")
        }
        let caBundle = options.value("--cacert")
        if let caBundle, access(caBundle, R_OK) != 0 {
            throw UsageError("Cannot read the CA bundle '\(caBundle)'.", command: "login")
        }
        let request = TokenctlService.LoginRequest(
            profile: context.profile, issuer: issuer, clientID: clientID, scope: scope?.isEmpty == true ? nil : scope,
            refreshToken: try readRefreshToken(),
            tokenEndpoint: try url("--token-endpoint", options.value("--token-endpoint")),
            revocationEndpoint: try url("--revocation-endpoint", options.value("--revocation-endpoint")),
            caBundle: caBundle.map(absolutePath))
        let tokenSet = try await context.service().login(request)
        let who = tokenSet.subject.map { " as \($0)" } ?? ""
        let refreshNote = tokenSet.hasRefreshToken ? "" : " The server returned no refresh token: 'token' works until the access token expires."
        Output.standardError("Logged in profile '\(context.profile)' at \(issuer)\(who); access token valid for \(Output.duration(tokenSet.timeLeft(at: Clock.system.now()))).\(refreshNote)\n")
        return .success
    }

    /// One line from stdin: a trailing newline is dropped; anything else must be the token.
    static func readRefreshToken() throws -> String {
        let interactive = isatty(0) == 1
        var saved = termios()
        if interactive {
            Output.standardError("Refresh token (input hidden): ")
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
        while bytes.count <= 65536 {
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
        guard !text.isEmpty else {
            throw TokenctlError(.invalidInput, "no refresh token on standard input", hint: "Pipe it in: printf %s \"$REFRESH_TOKEN\" | tokenctl login ... --refresh-token-stdin")
        }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw TokenctlError(.invalidInput, "the refresh token on standard input contains whitespace or control characters (only one line, with the token alone, is accepted)")
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
