import TokenctlEssentials

extension TokenctlService.LoginRequest {
    /// This login as one that signs in by browser instead of the device flow, for a hint that
    /// must run as printed: the preset, issuer, client and everything given or saved that still
    /// applies (scope, audience, resources, endpoints other than the device endpoint, the CA
    /// bundle, DPoP). Nil when it cannot be printed so: a client secret (read from standard
    /// input, which a copied command cannot carry) or a value a shell would change. A provider
    /// whose code exchange needs the secret (`Provider.codeExchangeNeedsSecret`) gets the secret
    /// from standard input when none is stored (`secretStored`): without it the browser login is
    /// refused before it starts.
    public func browserLogin(secretStored: Bool = false) -> SuggestedCommand? {
        guard clientSecret == nil else { return nil }
        var options: [TokenctlCommand.LoginOption] = [.browser]
        // The preset, whose issuer is given as it resolved (the issuer works for every preset).
        if let provider { options.append(.provider(.word(provider.rawValue))) }
        let values: [(String?, (SuggestedValue) -> TokenctlCommand.LoginOption)] = [
            (issuer.string, { .issuer($0) }), (clientID, { .clientID($0) }), (scope, { .scope($0) }),
            (audience, { .audience($0) }),
            (resources.isEmpty ? nil : resources.joined(separator: " "), { .resource($0) }),
            (endpoints.token?.string, { .tokenEndpoint($0) }),
            (endpoints.revocation?.string, { .revocationEndpoint($0) }),
            (endpoints.authorization?.string, { .authorizationEndpoint($0) }),
            (endpoints.jwks?.string, { .jwksURI($0) }), (caBundle, { .caBundle($0) }),
        ]
        for (value, option) in values {
            guard let value else { continue }
            guard let word = Self.shellWord(value) else { return nil }
            options.append(option(word))
        }
        if dpop == true { options.append(.dpop) }
        if provider?.codeExchangeNeedsSecret == true && !secretStored { options.append(.clientSecretStdin) }
        return SuggestedCommand(profile, .login(options))
    }

    /// `value` as one shell word: as it is when it holds only characters no shell treats
    /// specially, in double quotes when it also holds spaces; nil otherwise.
    static func shellWord(_ value: String) -> SuggestedValue? {
        guard !value.isEmpty, value.utf8.count <= 512 else { return nil }
        func plain(_ scalar: Unicode.Scalar) -> Bool {
            (scalar >= "a" && scalar <= "z") || (scalar >= "A" && scalar <= "Z") || (scalar >= "0" && scalar <= "9")
                || "_./:%@=+,-".unicodeScalars.contains(scalar)
        }
        if value.unicodeScalars.allSatisfy(plain) { return .word(value) }
        let spaced = value.unicodeScalars.allSatisfy { $0 == " " || plain($0) }
        // ". " would end the hint's sentence inside its command.
        return spaced && !value.contains(". ") && value.first != " " && value.last != " " ? .quoted(value) : nil
    }
}
