import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

private func metadataError(_ body: String, issuer: String = "https://issuer.example") throws -> TokenctlError? {
    let expected = try EndpointURL(issuer)
    do {
        _ = try ServerMetadata.parse(
            bytes(body), expectedIssuer: expected, url: "https://issuer.example/.well-known/openid-configuration")
        return nil
    } catch {
        return error
    }
}

@Suite("Discovery")
struct DiscoveryTests {
    @Test("issuer without a path: OIDC location, then RFC 8414 §3 location")
    func urlsWithoutPath() throws {
        #expect(
            ServerMetadata.discoveryURLs(for: try EndpointURL("https://issuer.example")) == [
                "https://issuer.example/.well-known/openid-configuration",
                "https://issuer.example/.well-known/oauth-authorization-server",
            ])
        #expect(
            ServerMetadata.discoveryURLs(for: try EndpointURL("https://issuer.example/")) == [
                "https://issuer.example/.well-known/openid-configuration",
                "https://issuer.example/.well-known/oauth-authorization-server",
            ])
    }

    @Test("issuer with a path: OIDC appends, RFC 8414 inserts the well-known segment before the path")
    func urlsWithPath() throws {
        #expect(
            ServerMetadata.discoveryURLs(for: try EndpointURL("https://login.example:8443/tenant/v2.0")) == [
                "https://login.example:8443/tenant/v2.0/.well-known/openid-configuration",
                "https://login.example:8443/.well-known/oauth-authorization-server/tenant/v2.0",
            ])
        #expect(
            ServerMetadata.discoveryURLs(for: try EndpointURL("http://127.0.0.1:9000/realms/dev/")) == [
                "http://127.0.0.1:9000/realms/dev/.well-known/openid-configuration",
                "http://127.0.0.1:9000/.well-known/oauth-authorization-server/realms/dev",
            ])
    }

    @Test("a valid document")
    func valid() throws {
        let metadata = try ServerMetadata.parse(
            bytes(
                #"{"issuer": "https://issuer.example", "token_endpoint": "https://issuer.example/token", "revocation_endpoint": "https://issuer.example/revoke", "userinfo_endpoint": 5}"#
            ),
            expectedIssuer: try EndpointURL("https://issuer.example"), url: "u")
        #expect(metadata.issuer == "https://issuer.example")
        #expect(metadata.tokenEndpoint.string == "https://issuer.example/token")
        #expect(metadata.revocationEndpoint?.string == "https://issuer.example/revoke")
    }

    @Test("a trailing slash difference in the issuer is tolerated")
    func trailingSlash() throws {
        #expect(
            try metadataError(#"{"issuer": "https://issuer.example/", "token_endpoint": "https://issuer.example/t"}"#)
                == nil)
        #expect(
            try metadataError(
                #"{"issuer": "https://issuer.example", "token_endpoint": "https://issuer.example/t"}"#,
                issuer: "https://issuer.example/") == nil)
    }

    @Test(
        "issuer mismatch is a configuration error",
        arguments: [
            "https://evil.example", "https://issuer.example/other", "http://issuer.example",
            "https://issuer.example.evil",
        ])
    func issuerMismatch(named: String) throws {
        let error = try metadataError(#"{"issuer": "\#(named)", "token_endpoint": "https://issuer.example/t"}"#)
        #expect(error?.kind == .configuration)
        #expect(error?.message.contains("names issuer '\(named)'") == true)
    }

    @Test("missing issuer")
    func missingIssuer() throws {
        let error = try metadataError(#"{"token_endpoint": "https://issuer.example/t"}"#)
        #expect(error?.kind == .configuration)
        #expect(error?.message.hasSuffix("has no issuer") == true)
    }

    @Test("missing token_endpoint")
    func missingTokenEndpoint() throws {
        let error = try metadataError(#"{"issuer": "https://issuer.example"}"#)
        #expect(error?.kind == .configuration)
        #expect(error?.message.hasSuffix("has no token_endpoint") == true)
    }

    @Test("unusable endpoints")
    func badEndpoints() throws {
        #expect(
            try metadataError(#"{"issuer": "https://issuer.example", "token_endpoint": 7}"#)?.message.hasSuffix(
                "has an invalid token_endpoint") == true)
        #expect(
            try metadataError(#"{"issuer": "https://issuer.example", "token_endpoint": "http://issuer.example/t"}"#)?
                .message.contains("unusable token_endpoint") == true)
        #expect(
            try metadataError(
                #"{"issuer": "https://issuer.example", "token_endpoint": "https://issuer.example/t", "revocation_endpoint": "ftp://x"}"#
            )?.message.contains("unusable revocation_endpoint") == true)
    }

    @Test("not JSON, or not an object", arguments: ["", "<html>Not Found</html>", "[]", #""https://issuer.example""#])
    func notJSON(body: String) throws {
        let error = try metadataError(body)
        #expect(error?.kind == .configuration)
        #expect(error?.message.hasSuffix("is not a JSON object") == true)
    }

    @Test("fake server: OIDC location 404, RFC 8414 location answers")
    func discoverFallsBack() async throws {
        let http = FakeHTTPClient { request, _ in
            if request.url.contains("oauth-authorization-server") {
                return .success(
                    .json(
                        200,
                        #"{"issuer": "https://issuer.example/t1", "token_endpoint": "https://issuer.example/t1/token"}"#
                    ))
            }
            return .success(.text(404, "not found"))
        }
        let metadata = try await ServerMetadata.discover(
            try EndpointURL("https://issuer.example/t1"), http: http, timeout: 5)
        #expect(metadata.tokenEndpoint.string == "https://issuer.example/t1/token")
        #expect(
            http.requests.map(\.url) == [
                "https://issuer.example/t1/.well-known/openid-configuration",
                "https://issuer.example/.well-known/oauth-authorization-server/t1",
            ])
        #expect(http.requests.allSatisfy { $0.method == .get })
    }

    @Test("fake server: no document anywhere → configuration error naming both statuses")
    func discoverNothing() async throws {
        let http = FakeHTTPClient(script: [.success(.text(404, "")), .success(.text(500, ""))])
        let issuer = try EndpointURL("https://issuer.example")
        do {
            _ = try await ServerMetadata.discover(issuer, http: http, timeout: 5)
            Issue.record("expected an error")
        } catch {
            #expect(error.kind == .configuration)
            #expect(error.message.contains("HTTP 404"))
            #expect(error.message.contains("HTTP 500"))
        }
    }

    @Test("fake server: unreachable issuer → transient")
    func discoverUnreachable() async throws {
        let http = FakeHTTPClient(script: [.failure(HTTPTransportError(.resolve, "could not resolve host"))])
        let issuer = try EndpointURL("https://issuer.example")
        do {
            _ = try await ServerMetadata.discover(issuer, http: http, timeout: 5)
            Issue.record("expected an error")
        } catch {
            #expect(error.kind == .transient)
            #expect(error.exitStatus == .temporaryFailure)
        }
    }
}
