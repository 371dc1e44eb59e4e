import Synchronization
import Testing
import TokenctlEssentials

@testable import TokenctlCore

/// The password of a profile's `proxy_user`, read from the Secret Service only when a request
/// goes through that proxy (`CurlHTTPClient.route(to:)`): a store that cannot give it ends the
/// command as every unreadable store does. CompanyNetworkTests shows the rest through squid.
@Suite("CurlHTTPClient: the proxy password's route")
struct ProxyPasswordRouteTests {
    func client(_ lookup: @escaping @Sendable (ProxyAccount) throws(StoreError) -> String?) -> CurlHTTPClient {
        var client = CurlHTTPClient(userAgent: "t")
        // Port 9 (discard) on loopback: were anything sent, the error would be a connection's.
        client.network = NetworkSettings(proxy: "http://127.0.0.1:9")
        client.network.proxyUser = "alice"
        client.environment = .fixed([:])
        client.proxyPasswords = ProxyPasswords(lookup: lookup)
        return client
    }

    @Test("a proxy password the Secret Service cannot give (locked): 69 with its hint, and nothing sent")
    func proxyPasswordFromALockedSecretService() async throws {
        let asked = Mutex(0)
        let client = client { _ throws(StoreError) in
            asked.withLock { $0 += 1 }
            throw StoreError(.locked, "the collection 'login' is locked", hint: "Unlock it.")
        }
        do throws(HTTPTransportError) {
            _ = try await client.send(
                .getJSON("https://idp.tokenctl.test/.well-known/openid-configuration"), timeout: 5)
            Issue.record("a request was sent without the proxy's password")
        } catch {
            #expect(error.kind == .secretService, "\(error)")
            #expect(error.message.contains("user alice at 127.0.0.1:9"), "\(error)")
            #expect(error.message.contains("is locked"), "\(error)")
            let failure = error.tokenctlError("could not reach the issuer", hint: nil)
            #expect(failure.kind == .storeUnavailable)
            #expect(failure.hint == "Unlock it.")
        }
        #expect(asked.withLock { $0 } == 1)
    }

    @Test("the password goes with the route through the profile's proxy, and is asked for once")
    func passwordOnTheRoute() throws {
        let asked = Mutex(0)
        let client = client { _ throws(StoreError) in
            asked.withLock { $0 += 1 }
            return "s3cret"
        }
        let first = try client.route(to: "https://idp.tokenctl.test/token")
        #expect(first.proxy?.password == "s3cret")
        #expect(try client.route(to: "https://idp.tokenctl.test/jwks").proxy?.password == "s3cret")
        #expect(asked.withLock { $0 } == 1)
    }

    @Test("none stored: 78 before anything is sent, with the command that stores one")
    func noneStored() {
        do {
            _ = try client { _ throws(StoreError) in nil }.route(to: "https://idp.tokenctl.test/token")
            Issue.record("a route without the proxy's password")
        } catch {
            #expect(error.kind == .proxyAuthentication)
            #expect(error.tokenctlError("x", hint: nil).kind == .configuration)
            #expect(error.advice?.rendered.contains("proxy-password set --password-stdin") == true, "\(error)")
        }
    }
}
