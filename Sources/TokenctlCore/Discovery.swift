import TokenctlEssentials

/// Authorization server metadata: OpenID Connect Discovery 1.0, then RFC 8414.
public struct ServerMetadata: Equatable, Sendable {
    public var issuer: String
    public var tokenEndpoint: EndpointURL
    public var revocationEndpoint: EndpointURL?

    /// The well-known locations to try, in order: OIDC (`issuer + /.well-known/openid-configuration`),
    /// then RFC 8414 §3 (the well-known segment inserted between host and path).
    public static func discoveryURLs(for issuer: EndpointURL) -> [String] {
        let base = issuer.withoutTrailingSlash
        var urls = [base + "/.well-known/openid-configuration"]
        let afterScheme = base.firstRange(of: "://")!.upperBound
        let pathStart = base[afterScheme...].firstIndex(of: "/") ?? base.endIndex
        let origin = base[..<pathStart]
        let path = base[pathStart...]
        urls.append(origin + "/.well-known/oauth-authorization-server" + path)
        return urls
    }

    /// Fetch the metadata of `issuer`.
    ///
    /// - Throws: transient `TokenctlError` when the server cannot be reached; a configuration
    ///   error when no document is found, it is malformed, or its issuer differs.
    public static func discover(_ issuer: EndpointURL, http: any HTTPClient, timeout: Double) async throws(TokenctlError) -> ServerMetadata {
        var problems: [String] = []
        for url in discoveryURLs(for: issuer) {
            let response: HTTPResponse
            do {
                response = try await http.send(HTTPRequest(method: .get, url: url, headers: [("Accept", "application/json")]), timeout: timeout)
            } catch {
                throw TokenctlError(.transient, "cannot reach the issuer \(issuer): \(error)", hint: "Check the URL and the network, then try again.")
            }
            guard response.status == 200 else {
                problems.append("\(url): HTTP \(response.status)")
                continue
            }
            return try parse(response.body, expectedIssuer: issuer, url: url)
        }
        throw TokenctlError(
            .configuration, "no discovery document for \(issuer) (\(problems.joined(separator: "; ")))",
            hint: "Give the endpoints explicitly with --token-endpoint (and --revocation-endpoint).")
    }

    static func parse(_ body: [UInt8], expectedIssuer: EndpointURL, url: String) throws(TokenctlError) -> ServerMetadata {
        guard let object = JSONValue.parseObject(body) else {
            throw TokenctlError(.configuration, "the discovery document at \(url) is not a JSON object")
        }
        guard let issuer = object["issuer"]?.stringValue else {
            throw TokenctlError(.configuration, "the discovery document at \(url) has no issuer")
        }
        // OIDC Discovery §4.3 / RFC 8414 §3.3: the issuer must be exactly the one configured.
        guard issuer == expectedIssuer.string || (issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer) == expectedIssuer.withoutTrailingSlash else {
            throw TokenctlError(
                .configuration, "the discovery document at \(url) names issuer '\(RefreshOutcome.sanitized(issuer))', not '\(expectedIssuer)'",
                hint: "Use the issuer URL exactly as the server names it.")
        }
        func endpoint(_ key: String) throws(TokenctlError) -> EndpointURL? {
            guard let value = object[key] else { return nil }
            guard let string = value.stringValue else {
                throw TokenctlError(.configuration, "the discovery document at \(url) has an invalid \(key)")
            }
            do { return try EndpointURL(string) } catch {
                throw TokenctlError(.configuration, "the discovery document at \(url) has an unusable \(key): \(error)")
            }
        }
        guard let token = try endpoint("token_endpoint") else {
            throw TokenctlError(.configuration, "the discovery document at \(url) has no token_endpoint", hint: "Give it with --token-endpoint.")
        }
        return ServerMetadata(issuer: issuer, tokenEndpoint: token, revocationEndpoint: try endpoint("revocation_endpoint"))
    }
}
