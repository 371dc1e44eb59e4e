import Testing
import TokenctlCore
import TokenctlEssentials

private func route(
    _ url: String, _ variables: [String: String] = [:], profile: NetworkSettings = NetworkSettings()
) -> NetworkRoute {
    NetworkRoute.resolve(url: url, settings: profile, environment: .fixed(variables))
}

@Suite("NetworkRoute: which proxy and CA bundle a request uses")
struct NetworkRouteTests {
    let idp = "https://idp.tokenctl.test:8443/token"

    @Test("the environment's variables, by the URL's scheme, as libcurl 7.88.1 reads them")
    func environmentVariables() {
        #expect(route(idp, ["https_proxy": "http://p:1"]).proxy?.url == "http://p:1")
        #expect(route(idp, ["https_proxy": "http://p:1"]).proxySource == "https_proxy")
        #expect(route(idp, ["HTTPS_PROXY": "http://p:2"]).proxySource == "HTTPS_PROXY")
        // https_proxy first, then HTTPS_PROXY, then all_proxy, ALL_PROXY.
        #expect(route(idp, ["https_proxy": "p:1", "HTTPS_PROXY": "p:2"]).proxy?.url == "http://p:1")
        #expect(route(idp, ["all_proxy": "p:3", "ALL_PROXY": "p:4"]).proxySource == "all_proxy")
        #expect(route(idp, ["ALL_PROXY": "p:4"]).proxySource == "ALL_PROXY")
        // http_proxy is for http:// URLs only, and only in lower case (HTTP_PROXY is ignored).
        #expect(route(idp, ["http_proxy": "p:5"]).proxy == nil)
        #expect(route("http://idp.example:80/", ["http_proxy": "p:5"]).proxy?.url == "http://p:5")
        #expect(route("http://idp.example:80/", ["HTTP_PROXY": "p:5"]).proxy == nil)
        // An empty variable is unset; no scheme means http://.
        #expect(route(idp, ["https_proxy": "", "all_proxy": "p:6"]).proxySource == "all_proxy")
        #expect(route(idp, ["https_proxy": "https://p:7"]).proxy?.isHTTPS == true)
        #expect(route(idp).proxy == nil)
    }

    @Test("the profile's keys replace the environment's")
    func profileKeys() {
        let profile = NetworkSettings(proxy: "http://corp:3128", noProxy: "internal.example")
        let chosen = route(idp, ["https_proxy": "http://env:1", "no_proxy": "idp.tokenctl.test"], profile: profile)
        #expect(chosen.proxy?.url == "http://corp:3128")
        #expect(chosen.proxySource == "profile key 'proxy'")
        let skipped = route("https://a.internal.example/", ["https_proxy": "http://env:1"], profile: profile)
        #expect(skipped.proxy == nil)
        #expect(skipped.proxySource == "profile key 'no_proxy' entry 'internal.example'")
        // The profile's no_proxy applies to the environment's proxy too.
        let envProxy = route(idp, ["https_proxy": "http://env:1"], profile: NetworkSettings(noProxy: ".tokenctl.test"))
        #expect(envProxy.proxy == nil)
        #expect(route(idp, ["https_proxy": "http://env:1"], profile: NetworkSettings(noProxy: "other")).proxy != nil)
    }

    @Test("loopback never goes through the environment's proxy, but through the profile's when it says so")
    func loopback() {
        let variables = ["http_proxy": "http://p:1", "https_proxy": "http://p:1", "all_proxy": "http://p:1"]
        for url in [
            "http://127.0.0.1:8080/token", "http://127.3.4.5/", "http://localhost:9/", "https://LOCALHOST./x",
            "http://[::1]:8080/", "http://a.localhost/",
        ] {
            #expect(route(url, variables).proxy == nil, "\(url)")
            #expect(route(url, variables).proxySource?.hasPrefix("loopback") == true, "\(url)")
            #expect(route(url, variables, profile: NetworkSettings(proxy: "http://p:2")).proxy?.url == "http://p:2")
        }
        #expect(route("http://128.0.0.1/", variables).proxy != nil)
        #expect(route("http://localhost.example/", variables).proxy != nil)
    }

    @Test("NO_PROXY entries as libcurl 7.88.1 matches them (measured through squid)")
    func noProxyForms() {
        func skips(_ url: String, _ list: String) -> Bool {
            route(url, ["https_proxy": "http://p:1", "http_proxy": "http://p:1", "no_proxy": list]).proxy == nil
        }
        // Names: the host, a domain suffix with or without the dot, any case; "*" alone.
        for list in [
            "idp.tokenctl.test", ".tokenctl.test", "tokenctl.test", "test", "*", "IDP.tokenctl.TEST",
            "a.example, idp.tokenctl.test", "a.example idp.tokenctl.test", " other ,, tokenctl.test. ",
        ] {
            #expect(skips(idp, list), "\(list)")
        }
        // No wildcards, no ports, no address entries for a name, no partial labels.
        for list in ["*.tokenctl.test", "idp.tokenctl.test:8443", "127.0.0.1", "127.0.0.0/8", "okenctl.test", "a, *"] {
            #expect(!skips(idp, list), "\(list)")
        }
        // IPv4 literals: the address, CIDR ranges (libcurl reads the bits with atoi).
        let ip = "http://10.1.2.3:8080/"
        for list in ["10.1.2.3", "10.0.0.0/8", "10.1.2.0/24", "10.1.2.3/32", "*"] {
            #expect(skips(ip, list), "\(list)")
        }
        for list in ["10.1.2.4", "11.0.0.0/8", "10.1.3.0/24", "10.1.2.3/33", "10.1", "10.1.2.03"] {
            #expect(!skips(ip, list), "\(list)")
        }
        // IPv6 literals: the address itself only.
        #expect(skips("http://[fd00::1]:80/", "fd00::1"))
        #expect(!skips("http://[fd00::1]:80/", "[fd00::1]"))
        #expect(!skips("http://[fd00::1]:80/", "fd00::1/128"))
        #expect(NetworkRoute.noProxyMatch(host: "idp.tokenctl.test", list: ".tokenctl.test") == ".tokenctl.test")
    }

    @Test("a proxy URL's credentials go apart and show nowhere")
    func credentials() {
        let chosen = route(idp, ["https_proxy": "http://alice:s%33cr%2Ft@proxy.example:3128/"])
        #expect(chosen.proxy?.url == "http://proxy.example:3128")
        #expect(chosen.proxy?.username == "alice")
        #expect(chosen.proxy?.password == "s3cr/t")
        #expect(!chosen.description.contains("s3cr") && !chosen.description.contains("s%33cr"))
        #expect(!chosen.description.contains("alice"))
        #expect("\(chosen.proxy!)" == "http://proxy.example:3128")
        #expect(ProxyEndpoint("user@p:1")?.username == "user")
        #expect(ProxyEndpoint("user@p:1")?.password == nil)
        #expect(ProxyEndpoint("") == nil)
    }

    @Test("the CA bundle: the profile's, else SSL_CERT_FILE and SSL_CERT_DIR, else libcurl's")
    func caBundle() {
        let variables = ["SSL_CERT_FILE": "/env/ca.pem", "SSL_CERT_DIR": "/env/certs"]
        let profile = route(idp, variables, profile: NetworkSettings(caBundle: "/p/ca.pem"))
        #expect(profile.caFile == "/p/ca.pem" && profile.caDirectory == nil)
        #expect(profile.caSource == "profile key 'cacert'")
        let environment = route(idp, variables)
        #expect(environment.caFile == "/env/ca.pem" && environment.caDirectory == "/env/certs")
        #expect(environment.caSource == "SSL_CERT_FILE, SSL_CERT_DIR")
        #expect(route(idp, ["SSL_CERT_DIR": "/d"]).caFile == nil)
        let none = route(idp)
        #expect(none.caFile == nil && none.caDirectory == nil && none.caSource == nil)
        // An https:// proxy's own certificate: proxy_cacert, else the profile's cacert.
        #expect(route(idp, profile: NetworkSettings(caBundle: "/p/ca.pem")).proxyCAFile == "/p/ca.pem")
        #expect(
            route(idp, profile: NetworkSettings(caBundle: "/p/ca.pem", proxyCABundle: "/p/proxy.pem")).proxyCAFile
                == "/p/proxy.pem")
        #expect(
            route(idp, ["https_proxy": "https://p:1"], profile: NetworkSettings(caBundle: "/c"))
                .description == "proxy https://p:1 (https_proxy), CA file /c (profile key 'cacert'), proxy CA file /c")
    }

    @Test("profile keys proxy, no_proxy, proxy_cacert: parsed, kept, and no credentials in the file")
    func profileFile() throws {
        let base = "issuer = https://a.example\nclient_id = c\n"
        let parsed = try ProfileConfiguration.parse(
            base + "proxy = http://corp:3128\nno_proxy = .corp, 10.0.0.0/8\nproxy_cacert = /etc/p.pem\n", path: "p")
        #expect(
            parsed.network
                == NetworkSettings(proxy: "http://corp:3128", noProxy: ".corp, 10.0.0.0/8", proxyCABundle: "/etc/p.pem")
        )
        let name = ProfileName(rawValue: "work")!
        #expect(try ProfileConfiguration.parse(parsed.serialized(profile: name), path: "p") == parsed)
        do {
            _ = try ProfileConfiguration.parse(base + "proxy = http://u:hunter2@corp:3128\n", path: "p")
            Issue.record("credentials in the profile's proxy were accepted")
        } catch {
            #expect(!error.description.contains("hunter2"))
            #expect(error.line == 3)
        }
    }

    @Test(
        "errors: 407 and certificates need a change of configuration (78), an unreadable Secret Service is 69, the rest may pass (75)"
    )
    func errorKinds() {
        let refused = HTTPTransportError(.proxyAuthentication, "the proxy refused", advice: "Set it.")
        #expect(refused.tokenctlError("x", hint: nil).kind == .configuration)
        #expect(refused.description == "the proxy refused")
        #expect(refused.tokenctlError("x", hint: nil).hint == "Set it.")
        #expect(HTTPTransportError(.certificate, "bad").tokenctlError("x", hint: nil).kind == .configuration)
        #expect(HTTPTransportError(.connect, "no").tokenctlError("x", hint: nil).kind == .transient)
        #expect(HTTPTransportError(.secretService, "locked").tokenctlError("x", hint: nil).kind == .storeUnavailable)
        #expect(HTTPTransportError.Kind.secretService.isSettled)
        #expect(!HTTPTransportError.Kind.other.isSettled)
    }
}
