import Testing
import TokenctlCore
import TokenctlEssentials

private let path = "/home/u/.config/tokenctl/profiles/work.conf"

private func configurationError(_ text: String) -> ConfigurationError? {
    do {
        _ = try ProfileConfiguration.parse(text, path: path)
        return nil
    } catch {
        return error
    }
}

@Suite("ProfileConfiguration")
struct ProfileConfigurationTests {
    let work = ProfileName(rawValue: "work")!

    @Test("a full configuration survives serialize → parse")
    func roundTripFull() throws {
        let configuration = ProfileConfiguration(
            issuer: try EndpointURL("https://login.example.com/tenant"),
            clientID: "cli-app",
            scope: "openid offline_access api://x/.default",
            tokenEndpoint: try EndpointURL("https://login.example.com/tenant/oauth2/token"),
            revocationEndpoint: try EndpointURL("https://login.example.com/tenant/oauth2/revoke"),
            caBundle: "/etc/ssl/private ca.pem")
        let text = configuration.serialized(profile: work)
        #expect(try ProfileConfiguration.parse(text, path: path) == configuration)
    }

    @Test("a minimal configuration survives serialize → parse")
    func roundTripMinimal() throws {
        let configuration = ProfileConfiguration(issuer: try EndpointURL("http://127.0.0.1:8080"), clientID: "c")
        let text = configuration.serialized(profile: work)
        #expect(try ProfileConfiguration.parse(text, path: path) == configuration)
    }

    @Test("serialized text: header comments, then keys in the documented order")
    func serializedLayout() throws {
        let configuration = ProfileConfiguration(
            issuer: try EndpointURL("https://a.example"), clientID: "id", scope: "s",
            tokenEndpoint: try EndpointURL("https://a.example/t"))
        let lines = configuration.serialized(profile: work).split(separator: "\n").map(String.init)
        #expect(lines[0].hasPrefix("# tokenctl profile 'work'"))
        #expect(lines[1].hasPrefix("#"))
        #expect(
            Array(lines.dropFirst(2)) == [
                "issuer = https://a.example", "client_id = id", "scope = s", "token_endpoint = https://a.example/t",
            ])
        #expect(configuration.serialized(profile: work).hasSuffix("\n"))
    }

    @Test("comments, blank lines, tabs and spacing around '=' are tolerated")
    func lenientParsing() throws {
        let text =
            "# comment\n\n  issuer=https://a.example/  \n\tclient_id\t=\tmy-client\n   # indented comment\nscope = openid profile\n"
        let configuration = try ProfileConfiguration.parse(text, path: path)
        #expect(configuration.issuer.string == "https://a.example/")
        #expect(configuration.clientID == "my-client")
        #expect(configuration.scope == "openid profile")
        #expect(configuration.tokenEndpoint == nil)
        #expect(configuration.revocationEndpoint == nil)
        #expect(configuration.caBundle == nil)
    }

    // Swift treats "\r\n" as ONE Character, so `split(separator: "\n")` never splits a CRLF
    // file: the whole file becomes line 1 (a comment if it starts with '#').
    @Test("CRLF line endings are tolerated")
    func crlfLineEndings() throws {
        let text = "# comment\r\n\r\nissuer = https://a.example\r\nclient_id = c\r\nscope = openid\r\n"
        let configuration = try ProfileConfiguration.parse(text, path: path)
        #expect(configuration.issuer.string == "https://a.example")
        #expect(configuration.clientID == "c")
        #expect(configuration.scope == "openid")
        #expect(configurationError("issuer = https://a.example\r\nclient-id = c\r\n")?.line == 2)
    }

    @Test("a lone trailing carriage return is trimmed")
    func trailingCarriageReturn() throws {
        let configuration = try ProfileConfiguration.parse("issuer = https://a.example\nclient_id = c \r", path: path)
        #expect(configuration.clientID == "c")
    }

    @Test("a value may contain '='")
    func equalsInValue() throws {
        let text = "issuer = https://a.example\nclient_id = a=b\ntoken_endpoint = https://a.example/t?x=1\n"
        let configuration = try ProfileConfiguration.parse(text, path: path)
        #expect(configuration.clientID == "a=b")
        #expect(configuration.tokenEndpoint?.string == "https://a.example/t?x=1")
    }

    @Test("empty scope and cacert mean unset")
    func emptyOptionalValues() throws {
        let configuration = try ProfileConfiguration.parse(
            "issuer = https://a.example\nclient_id = c\nscope =\ncacert = \n", path: path)
        #expect(configuration.scope == nil)
        #expect(configuration.caBundle == nil)
    }

    @Test("unknown key: line number and a suggestion")
    func unknownKeyWithSuggestion() {
        let error = configurationError("# header\nissuer = https://a.example\nclient-id = c\n")
        #expect(
            error
                == ConfigurationError(
                    path: path, line: 3, message: "unknown key 'client-id' (did you mean 'client_id'?)"))
        #expect(error?.description == "\(path):3: unknown key 'client-id' (did you mean 'client_id'?)")
    }

    @Test("unknown key far from every known key: no suggestion")
    func unknownKeyWithoutSuggestion() {
        let error = configurationError("issuer = https://a.example\nclient_id = c\n\ncolour = blue\n")
        #expect(error == ConfigurationError(path: path, line: 4, message: "unknown key 'colour'"))
    }

    @Test("a key set twice is reported on its second line")
    func duplicateKey() {
        let error = configurationError("issuer = https://a.example\nclient_id = a\n# again\nclient_id = b\n")
        #expect(error == ConfigurationError(path: path, line: 4, message: "'client_id' is set twice"))
    }

    @Test("missing issuer: no line")
    func missingIssuer() {
        let error = configurationError("client_id = c\n")
        #expect(error == ConfigurationError(path: path, line: nil, message: "'issuer' is missing"))
        #expect(error?.description == "\(path): 'issuer' is missing")
    }

    @Test("missing client_id: no line")
    func missingClientID() {
        #expect(
            configurationError("issuer = https://a.example\n")
                == ConfigurationError(path: path, line: nil, message: "'client_id' is missing"))
    }

    @Test("an empty file misses the issuer")
    func emptyFile() {
        #expect(configurationError("")?.message == "'issuer' is missing")
    }

    @Test("empty client_id is reported on its line")
    func emptyClientID() {
        #expect(
            configurationError("issuer = https://a.example\nclient_id =\n")
                == ConfigurationError(path: path, line: 2, message: "'client_id' is empty"))
    }

    @Test("a bad issuer URL is reported on its line with the URL problem")
    func badIssuer() {
        let error = configurationError("client_id = c\n\nissuer = http://example.com\n")
        #expect(error?.line == 3)
        #expect(error?.message == "issuer: \(EndpointURLError.plainHTTPToRemoteHost("http://example.com"))")
    }

    @Test(
        "bad endpoint URLs are reported on their lines",
        arguments: [
            ("token_endpoint", "ftp://a.example/token"),
            ("revocation_endpoint", "https://a.example/#x"),
            ("token_endpoint", "not a url"),
        ])
    func badEndpoint(key: String, value: String) {
        let error = configurationError("issuer = https://a.example\nclient_id = c\n\(key) = \(value)\n")
        #expect(error?.line == 3)
        #expect(error?.message.hasPrefix("\(key): ") == true)
    }

    @Test("a line without '=' is reported on its line")
    func missingEquals() {
        let error = configurationError("issuer = https://a.example\n\nclient_id c\n")
        #expect(error == ConfigurationError(path: path, line: 3, message: "expected 'key = value'"))
    }

    @Test("control characters inside a value are rejected on their line")
    func controlCharacters() {
        let error = configurationError("issuer = https://a.example\nclient_id = a\tb\n")
        #expect(error == ConfigurationError(path: path, line: 2, message: "'client_id' contains control characters"))
        #expect(configurationError("issuer = https://a.example\nclient_id = c\nscope = a\u{7F}b\n")?.line == 3)
    }

    @Test("proxy_user names the user of the profile's own proxy: no colon or blank, and never without 'proxy'")
    func proxyUser() throws {
        let base = "issuer = https://a.example\nclient_id = c\n"
        let configuration = try ProfileConfiguration.parse(
            base + "proxy = http://Proxy.example:3128\nproxy_user = alice\n", path: path)
        #expect(configuration.proxyUser == "alice")
        #expect(configuration.network.proxyAccount?.proxy == "proxy.example:3128")
        #expect(configuration.network.proxyAccount?.user == "alice")
        #expect(configurationError(base + "proxy_user = alice\n")?.message.contains("no 'proxy' key") == true)
        #expect(configurationError(base + "proxy = p:1\nproxy_user = a:b\n")?.line == 4)
        #expect(configurationError(base + "proxy = http://u:p@p:1\n")?.message.contains("proxy_user") == true)
    }

    @Test("every documented key is accepted")
    func allKeys() throws {
        #expect(
            ProfileConfiguration.keys == [
                "issuer", "client_id", "scope", "token_endpoint", "revocation_endpoint",
                "device_authorization_endpoint",
                "authorization_endpoint", "jwks_uri", "token_endpoint_auth_method", "cacert", "audience", "resource",
                "git_username",
                "dpop", "dpop_allow_bearer", "provider", "forward", "forward_scope", "forward_audience",
                "grant", "assertion_audience", "mtls_token_endpoint",
                "key_file", "certificate_file",
                "subject_token_file", "subject_token_type", "requested_token_type", "assertion_file",
                "client_assertion_file",
                "proxy", "proxy_user", "no_proxy", "proxy_cacert",
            ])
        let text = ProfileConfiguration.keys.map { key in
            switch key {
            case "issuer": "issuer = https://a.example"
            case "token_endpoint", "revocation_endpoint", "device_authorization_endpoint", "authorization_endpoint",
                "jwks_uri", "assertion_audience", "mtls_token_endpoint":
                "\(key) = https://a.example/\(key)"
            case "grant": "grant = client-credentials"
            case "token_endpoint_auth_method": "\(key) = client_secret_post"
            case "provider": "provider = gitlab"
            case "resource": "resource = https://api.example/ urn:example:ledger"
            case "dpop", "dpop_allow_bearer", "forward": "\(key) = true"
            case "forward_scope": "forward_scope = read  write"
            case "forward_audience": "forward_audience = https://api.example"
            case "proxy": "proxy = http://proxy.example:3128"
            case "proxy_user": "proxy_user = alice"
            default: "\(key) = v"
            }
        }.joined(separator: "\n")
        let configuration = try ProfileConfiguration.parse(text, path: path)
        #expect(configuration.revocationEndpoint?.string == "https://a.example/revocation_endpoint")
        #expect(configuration.caBundle == "v")
        #expect(configuration.deviceAuthorizationEndpoint?.string == "https://a.example/device_authorization_endpoint")
        #expect(configuration.authorizationEndpoint?.string == "https://a.example/authorization_endpoint")
        #expect(configuration.jwksURI?.string == "https://a.example/jwks_uri")
        #expect(configuration.tokenEndpointAuthMethod == .clientSecretPost)
        #expect(configuration.dpop && configuration.dpopAllowBearer)
        #expect(configuration.forward && configuration.forwardScope == ["read", "write"])
        #expect(configuration.forwardAudience == ["https://api.example"])
        // The file written back says the same.
        #expect(
            try ProfileConfiguration.parse(configuration.serialized(profile: .default), path: path) == configuration)
        #expect(configuration.audience == "v")
        #expect(configuration.resources == ["https://api.example/", "urn:example:ledger"])
        #expect(configuration.gitUsername == "v")
        #expect(configuration.grant == .clientCredentials && configuration.isMachine)
        #expect(configuration.assertionAudience == "https://a.example/assertion_audience")
        #expect(configuration.mtlsTokenEndpoint?.string == "https://a.example/mtls_token_endpoint")
        let again = try ProfileConfiguration.parse(
            configuration.serialized(profile: ProfileName(rawValue: "p")!), path: path)
        #expect(again == configuration)
    }

    @Test("an unknown client authentication method is rejected on its line")
    func unknownAuthMethod() {
        let error = configurationError(
            "issuer = https://a.example\nclient_id = c\ntoken_endpoint_auth_method = private_key_jwt_\n")
        #expect(error?.line == 3)
        #expect(error?.message.contains("self_signed_tls_client_auth") == true)
        #expect(
            configurationError("issuer = https://a.example\nclient_id = c\ngrant = password\n")?.message
                == "grant: expected client-credentials or token-exchange or jwt-bearer, not 'password'")
    }
}
