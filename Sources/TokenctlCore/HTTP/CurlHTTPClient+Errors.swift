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

    static func proxyRefused(_ proxy: ProxyEndpoint, source: String?) -> HTTPTransportError {
        let origin = source.map { " (from \($0))" } ?? ""
        return HTTPTransportError(
            .proxyAuthentication,
            "the proxy \(proxy)\(origin) refused the request: 407 Proxy Authentication Required"
                + (proxy.username == nil
                    ? " (no user name and password were given)" : " (the user name or password given was refused)"),
            advice: source?.hasPrefix("profile") == true
                ? "A proxy that asks for a password takes it from the environment's proxy URL (https_proxy=http://USER:PASSWORD@HOST:PORT): remove the profile's 'proxy' key and set the variable."
                : "Set the proxy's user name and password in the URL of \(source ?? "the proxy variable") (http://USER:PASSWORD@HOST:PORT; percent-encode special characters)."
        )
    }
}
