// CurlHTTPClient's errors, made with no libcurl call: the kind of libcurl's code and the texts.
import CCurl

extension CurlHTTPClient {
    /// The kind of a failed transfer, from libcurl's code (libcurl-errors(3)).
    static func kind(of code: CURLcode) -> HTTPTransportError.Kind {
        switch code {
        case CURLE_OPERATION_TIMEDOUT: .timeout
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: .resolve
        case CURLE_COULDNT_CONNECT: .connect
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            .tls
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM:
            .connectionReset
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL: .invalidURL
        default: .other
        }
    }

    static func withoutQuery(_ url: String) -> String {
        url.firstIndex(of: "?").map { String(url[..<$0]) } ?? url
    }

    func proxyRefused(_ route: NetworkRoute) -> HTTPTransportError {
        guard let proxy = route.proxy else { return HTTPTransportError(.proxyAuthentication, "407") }
        let source = route.proxySource
        let origin = source.map { " (from \($0))" } ?? ""
        if let account = route.proxyAccount {
            return HTTPTransportError(
                .proxyAuthentication,
                "the proxy \(proxy)\(origin) refused the request: 407 Proxy Authentication Required (the password stored in the Secret Service for its \(account) was refused)",
                advice: Self.proxyPasswordAdvice(network.profile, "Replace it"))
        }
        return HTTPTransportError(
            .proxyAuthentication,
            "the proxy \(proxy)\(origin) refused the request: 407 Proxy Authentication Required"
                + (proxy.username == nil
                    ? " (no user name and password were given)" : " (the user name or password given was refused)"),
            advice: source?.hasPrefix("profile") == true
                ? "A proxy that asks for a password: name its user with 'proxy_user = NAME' in the profile file and store the password in the Secret Service (tokenctl.conf(5)), or give both in the environment's proxy URL (https_proxy=http://USER:PASSWORD@HOST:PORT) and remove the profile's 'proxy' key."
                : "Set the proxy's user name and password in the URL of \(source ?? "the proxy variable") (http://USER:PASSWORD@HOST:PORT; percent-encode special characters)."
        )
    }
}
