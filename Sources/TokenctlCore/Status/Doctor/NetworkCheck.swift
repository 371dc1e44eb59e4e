import TokenctlEssentials

/// Each issuer's route: the proxy (or none, and why) and the CA certificates its requests use,
/// each with where the setting comes from (`NetworkRoute`); `IssuerCheck` then asks the issuer
/// through them.
struct NetworkCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        var findings: [DoctorFinding] = []
        var seen = Set<String>()
        for (name, configuration) in context.configured {
            let url = ServerMetadata.discoveryURLs(for: configuration.issuer)[0]
            let route = NetworkRoute.resolve(
                url: url, settings: configuration.network, environment: context.service.networkEnvironment)
            guard seen.insert("\(configuration.issuer) \(route)").inserted else { continue }
            var problems: [String] = []
            for file in [route.caFile, route.proxy?.isHTTPS == true ? route.proxyCAFile : nil].compactMap({ $0 })
            where !FileIO.isReadable(file) {
                problems.append("cannot read \(file)")
            }
            var hint: Suggestion? =
                problems.isEmpty
                ? nil : "Fix the path of 'cacert' or 'proxy_cacert' in the profile file, or SSL_CERT_FILE."
            // The proxy user's password: stored, or every request through that proxy is refused.
            if let account = route.proxyAccount {
                do {
                    if try context.service.store.readProxyPassword(account) == nil {
                        problems.append("no password is stored for the proxy \(account)")
                        hint = Suggestion.sentences(hint, CurlHTTPClient.proxyPasswordAdvice(name, "Store it"))
                    }
                } catch {
                    problems.append("cannot read the password of the proxy \(account): \(error.message)")
                    hint = Suggestion.sentences(hint, error.hint)
                }
            }
            findings.append(
                DoctorFinding(
                    "network \(configuration.issuer)", ok: problems.isEmpty,
                    ([route.description] + problems).joined(separator: "; "), hint: hint))
        }
        return findings
    }
}
