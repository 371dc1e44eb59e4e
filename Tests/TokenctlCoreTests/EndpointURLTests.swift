import Testing
import TokenctlCore
import TokenctlEssentials

@Suite("EndpointURL")
struct EndpointURLTests {
    @Test(
        "https URLs are accepted",
        arguments: [
            "https://example.com",
            "https://example.com/",
            "https://login.example.com/tenant/v2.0",
            "https://example.com:8443/path?x=1&y=2",
            "https://example.com?x=1",
            "https://10.0.0.1/oauth",
            "https://[2001:db8::1]:443/",
            "https://example.com/path@with-at",
        ])
    func httpsAccepted(url: String) throws {
        let parsed = try EndpointURL(url)
        #expect(parsed.scheme == "https")
        #expect(parsed.string == url)
        #expect(parsed.description == url)
    }

    @Test("scheme and host are lower-cased, the string is kept as given")
    func caseFolding() throws {
        let url = try EndpointURL("HTTPS://Example.COM:443/Path")
        #expect(url.scheme == "https")
        #expect(url.host == "example.com")
        #expect(url.string == "HTTPS://Example.COM:443/Path")
    }

    @Test("host excludes port, path and query")
    func host() throws {
        #expect(try EndpointURL("https://example.com:8443/a/b").host == "example.com")
        #expect(try EndpointURL("https://example.com?q").host == "example.com")
        #expect(try EndpointURL("http://[::1]:8080/x").host == "[::1]")
    }

    @Test(
        "plain http is allowed to loopback hosts",
        arguments: [
            "http://localhost",
            "http://localhost:8080/token",
            "http://LOCALHOST:1/",
            "http://127.0.0.1",
            "http://127.0.0.1:9999/issuer",
            "http://127.45.6.7",
            "http://127.255.255.255:80",
            "http://[::1]",
            "http://[::1]:8080/x?y",
        ])
    func loopbackHTTP(url: String) throws {
        #expect(try EndpointURL(url).scheme == "http")
    }

    @Test(
        "plain http to anything else is rejected",
        arguments: [
            "http://example.com",
            "http://example.com:80/token",
            "http://128.0.0.1",
            "http://10.0.0.1",
            "http://127.0.0.256",
            "http://127.1",
            "http://127.0.0.1.example.com",
            "http://127.0.0.09",
            "http://localhost.example.com",
            "http://[::2]",
            "http://[0:0:0:0:0:0:0:2]",
        ])
    func remoteHTTPRejected(url: String) {
        #expect(throws: EndpointURLError.plainHTTPToRemoteHost(url)) { try EndpointURL(url) }
    }

    @Test(
        "isLoopback",
        arguments: [
            ("localhost", true), ("[::1]", true), ("127.0.0.1", true), ("127.1.2.3", true),
            ("127.0.0", false), ("127.0.0.1.1", false), ("127.0.0.x", false), ("128.0.0.1", false),
            ("127..0.1", false), ("::1", false), ("example.com", false),
            // Not canonical decimal: octal to the resolver, or (with an 8 or 9) a name for DNS.
            ("127.0.0.010", false), ("127.0.0.09", false), ("127.00.0.1", false), ("0127.0.0.1", false),
            ("127.0.0.0", true),
        ])
    func isLoopback(host: String, expected: Bool) {
        #expect(EndpointURL.isLoopback(host) == expected)
    }

    @Test(
        "isLoopbackAuthority: git's host attribute, with or without a port",
        arguments: [
            ("127.0.0.1", true), ("127.0.0.1:8080", true), ("127.9.9.9:1", true), ("LOCALHOST", true),
            ("localhost:65535", true),
            ("[::1]", true), ("[::1]:8080", true),
            // Look-alikes: other hosts that only start like the loopback.
            ("127.0.0.1.evil.example", false), ("127.0.0.1.evil.example:8080", false),
            ("127.9.9.9.attacker.example", false),
            ("127.evil.example", false), ("[::1].evil.example", false), ("[::1].evil.example:80", false),
            ("[::1]evil", false),
            ("localhost.evil.example", false), ("evil-localhost", false), ("127.0.0.1:", false),
            ("127.0.0.1:80x", false),
            ("127.0.0.1:65536", false), ("127.0.0.1:80:80", false), ("::1", false), ("[::2]", false), ("[::1", false),
            ("", false), (":80", false), ("127.0.0", false), ("127.0.0.256", false),
        ])
    func isLoopbackAuthority(authority: String, expected: Bool) {
        #expect(EndpointURL.isLoopbackAuthority(authority) == expected)
    }

    @Test(
        "schemes other than http(s) are rejected",
        arguments: ["ftp://example.com", "file:///etc/passwd", "ws://localhost", "://example.com"])
    func unsupportedScheme(url: String) {
        #expect(throws: EndpointURLError.unsupportedScheme(url)) { try EndpointURL(url) }
    }

    @Test(
        "URLs without a scheme or host are not absolute",
        arguments: [
            "example.com", "example.com/path", "/relative", "https:example.com", "https:/example.com",
            "https://", "https:///path", "https://:443", "https://[::1", "https://?q",
        ])
    func notAbsolute(url: String) {
        #expect(throws: EndpointURLError.notAbsolute(url)) { try EndpointURL(url) }
    }

    @Test("the empty string")
    func empty() {
        #expect(throws: EndpointURLError.empty) { try EndpointURL("") }
    }

    @Test(
        "fragments are rejected",
        arguments: ["https://example.com/#frag", "https://example.com#", "https://example.com/a?b#c"])
    func fragment(url: String) {
        #expect(throws: EndpointURLError.hasFragment(url)) { try EndpointURL(url) }
    }

    @Test(
        "user information is rejected",
        arguments: ["https://user@example.com", "https://user:pw@example.com/x", "http://evil@localhost"])
    func userInfo(url: String) {
        #expect(throws: EndpointURLError.hasUserInfo(url)) { try EndpointURL(url) }
    }

    @Test(
        "bad ports are rejected",
        arguments: [
            "https://example.com:", "https://example.com:abc", "https://example.com:99999", "https://example.com:65536",
            "https://example.com:-1", "https://example.com:8080:9090", "https://example.com:+80",
            "https://[::1]x", "https://[::1]:", "https://example.com:99999999999999999999999",
        ])
    func badPort(url: String) {
        #expect(throws: EndpointURLError.invalidPort(url)) { try EndpointURL(url) }
    }

    @Test("the largest port is accepted")
    func maximumPort() throws {
        _ = try EndpointURL("https://example.com:65535/")
    }

    @Test(
        "spaces, control characters and non-ASCII are rejected",
        arguments: [
            "https://example.com/a b", " https://example.com", "https://example.com ", "https://example.com/\n",
            "https://example.com/\t", "https://example.com/\u{7F}", "https://exämple.com", "https://example.com/\0",
        ])
    func invalidCharacters(url: String) {
        #expect(throws: EndpointURLError.invalidCharacters(url)) { try EndpointURL(url) }
    }

    @Test("withoutTrailingSlash drops one trailing slash")
    func trailingSlash() throws {
        #expect(try EndpointURL("https://example.com/").withoutTrailingSlash == "https://example.com")
        #expect(try EndpointURL("https://example.com/tenant/").withoutTrailingSlash == "https://example.com/tenant")
        #expect(try EndpointURL("https://example.com/tenant").withoutTrailingSlash == "https://example.com/tenant")
    }

    @Test("error descriptions name the URL")
    func descriptions() {
        #expect(EndpointURLError.plainHTTPToRemoteHost("http://x").description.contains("'http://x'"))
        #expect(EndpointURLError.empty.description == "the URL is empty")
        #expect(EndpointURLError.invalidPort("https://x:0x").description.contains("port"))
    }
}

@Suite("ProfileName")
struct ProfileNameTests {
    @Test(
        "valid names",
        arguments: [
            "default", "work", "Work-1", "a.b_c", "a", "0", "_private", "my.profile-2",
            String(repeating: "x", count: 64),
        ])
    func valid(name: String) {
        #expect(ProfileName.isValid(name))
        #expect(ProfileName(rawValue: name)?.rawValue == name)
        #expect(ProfileName(rawValue: name)?.description == name)
    }

    @Test(
        "invalid names",
        arguments: [
            "", ".hidden", "-dash", "a/b", "../x", "a b", "tab\t", "é", "a:b", "a*", "new\nline",
            String(repeating: "x", count: 65), "a\0b",
        ])
    func invalid(name: String) {
        #expect(!ProfileName.isValid(name))
        #expect(ProfileName(rawValue: name) == nil)
    }

    @Test("the default profile is called 'default'")
    func defaultName() {
        #expect(ProfileName.default.rawValue == "default")
    }

    @Test("names order by their raw value")
    func ordering() {
        let names = ["b", "a", "c"].compactMap(ProfileName.init(rawValue:)).sorted()
        #expect(names.map(\.rawValue) == ["a", "b", "c"])
    }
}

@Suite("ExitStatus")
struct ExitStatusTests {
    @Test("codes follow sysexits.h")
    func codes() {
        #expect(ExitStatus.success.rawValue == 0)
        #expect(ExitStatus.failure.rawValue == 1)
        #expect(ExitStatus.usage.rawValue == 64)
        #expect(ExitStatus.unavailable.rawValue == 69)
        #expect(ExitStatus.temporaryFailure.rawValue == 75)
        #expect(ExitStatus.loginRequired.rawValue == 77)
        #expect(ExitStatus.configuration.rawValue == 78)
        #expect(ExitStatus.temporaryFailure.name == "EX_TEMPFAIL")
        #expect(Set(ExitStatus.allCases.map(\.name)).count == ExitStatus.allCases.count)
    }
}
