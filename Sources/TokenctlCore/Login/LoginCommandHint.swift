import TokenctlEssentials

extension TokenctlService.LoginRequest {
    /// This login as a command line that signs in by browser instead of the device flow, for a
    /// hint that must run as printed: the preset, issuer, client and everything given or saved that
    /// still applies (scope, audience, resources, endpoints other than the device endpoint,
    /// the CA bundle, DPoP). Nil when it cannot be printed so: a client secret (read from
    /// standard input, which a copied command cannot carry) or a value a shell would change.
    /// A provider whose code exchange needs the secret (`Provider.codeExchangeNeedsSecret`) gets
    /// `--client-secret-stdin` when none is stored (`secretStored`): without it the browser
    /// login is refused before it starts.
    public func browserLoginCommand(secretStored: Bool = false) -> String? {
        guard clientSecret == nil else { return nil }
        var words = ["login", "--browser"]
        // The preset, whose issuer is given as it resolved (`--issuer` works for every preset).
        if let provider { words += ["--provider", provider.rawValue] }
        func add(_ option: String, _ value: String?) -> Bool {
            guard let value else { return true }
            guard let word = Self.shellWord(value) else { return false }
            words += [option, word]
            return true
        }
        let parts: [(String, String?)] = [
            ("--issuer", issuer.string), ("--client-id", clientID), ("--scope", scope), ("--audience", audience),
            ("--resource", resources.isEmpty ? nil : resources.joined(separator: " ")),
            ("--token-endpoint", endpoints.token?.string), ("--revocation-endpoint", endpoints.revocation?.string),
            ("--authorization-endpoint", endpoints.authorization?.string), ("--jwks-uri", endpoints.jwks?.string),
            ("--cacert", caBundle),
        ]
        for (option, value) in parts where !add(option, value) { return nil }
        if dpop == true { words.append("--dpop") }
        if provider?.codeExchangeNeedsSecret == true && !secretStored { words.append("--client-secret-stdin") }
        return CommandHint.tokenctl(profile, words.joined(separator: " "))
    }

    /// `value` as one shell word: as it is when it holds only characters no shell treats
    /// specially, in double quotes when it also holds spaces; nil otherwise.
    static func shellWord(_ value: String) -> String? {
        guard !value.isEmpty, value.utf8.count <= 512 else { return nil }
        func plain(_ scalar: Unicode.Scalar) -> Bool {
            (scalar >= "a" && scalar <= "z") || (scalar >= "A" && scalar <= "Z") || (scalar >= "0" && scalar <= "9")
                || "_./:%@=+,-".unicodeScalars.contains(scalar)
        }
        if value.unicodeScalars.allSatisfy(plain) { return value }
        let spaced = value.unicodeScalars.allSatisfy { $0 == " " || plain($0) }
        // ". " would end the hint's sentence inside its command.
        return spaced && !value.contains(". ") && value.first != " " && value.last != " " ? "\"\(value)\"" : nil
    }
}
