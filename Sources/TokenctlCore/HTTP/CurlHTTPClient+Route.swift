// A request's route with the proxy password it needs, made with no libcurl call.

import TokenctlEssentials

extension CurlHTTPClient {
    /// The route of a request to `url` (`NetworkRoute`), with the password of the profile's
    /// `proxy_user` from the Secret Service when it goes through the profile's proxy. None
    /// stored is a configuration error: nothing is sent.
    func route(to url: String) throws(HTTPTransportError) -> NetworkRoute {
        var route = NetworkRoute.resolve(url: url, settings: network, environment: environment)
        guard let account = route.proxyAccount, route.proxy != nil else { return route }
        let password: String?
        do { password = try proxyPasswords?.password(account) } catch {
            throw HTTPTransportError(
                .secretService,
                "cannot read the password of the proxy \(account) from the Secret Service: \(error.message)",
                advice: error.hint)
        }
        guard let password else {
            throw HTTPTransportError(
                .proxyAuthentication,
                "no password is stored for the proxy \(account) (the profile's 'proxy_user'); nothing was sent",
                advice: Self.proxyPasswordAdvice(network.profile, "Store it"))
        }
        route.proxy?.password = password
        return route
    }

    /// "Store it: 'printf %s "$PROXY_PASSWORD" | tokenctl --profile P proxy-password set …'."
    static func proxyPasswordAdvice(_ profile: ProfileName?, _ verb: String) -> Suggestion {
        "\(verb) on standard input: '\(program: #"printf %s "$PROXY_PASSWORD""#, into: SuggestedCommand(profile ?? .default, .proxyPassword(.set, [.passwordStdin])))'."
    }
}
