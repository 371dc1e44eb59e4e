import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

/// A machine profile whose grant is a platform's token (RFC 7523 §2.1, RFC 8693 §2.1) as a
/// public client: `token_endpoint_auth_method = none` (RFC 7591 §2), chosen or named; never for
/// the client credentials grant (RFC 6749 §4.4).
@Suite("Platform grants as a public client (none)")
struct PlatformGrantPublicClientTests {
    static let job = ProfileName(rawValue: "job")!
    static let endpoint = "https://issuer.example/token"

    static func plan(
        _ grant: MachineGrant?, clientAuth: ClientAuthenticationMethod? = nil, secret: String? = nil,
        previous: ProfileConfiguration? = nil
    ) throws -> LoginPlan {
        var request = TokenctlService.LoginRequest(
            profile: job, issuer: try EndpointURL("https://issuer.example"), clientID: "job", scope: nil,
            method: .clientCredentials, clientSecret: secret)
        request.clientAuth = clientAuth
        request.machine.grant = grant
        return try LoginPlan(request, previous: previous)
    }

    static func metadata(_ methods: [String]?) throws -> ServerMetadata {
        ServerMetadata(
            issuer: "https://issuer.example", tokenEndpoint: try EndpointURL(endpoint),
            tokenEndpointAuthMethods: methods)
    }

    static func method(_ plan: LoginPlan, advertised: [String]?, secret: String? = nil) throws
        -> ClientAuthenticationMethod?
    {
        try LoginClient.method(plan, metadata: try metadata(advertised), secret: secret, key: nil)
    }

    @Test("the means: none only with nothing else and a grant that allows it; listed or nothing listed")
    func preferredMethod() throws {
        typealias Means = ClientCredentials.Means
        let platform = Means(publicAllowed: true)
        #expect(platform.methods == [.publicClient])
        #expect(Means().methods.isEmpty)
        #expect(Means(secret: true, publicAllowed: true).methods.contains(.publicClient) == false)
        #expect(try ClientCredentials.preferredMethod(supported: nil, means: platform) == .publicClient)
        #expect(
            try ClientCredentials.preferredMethod(supported: ["client_secret_basic", "none"], means: platform)
                == .publicClient)
        let refusal = #expect(throws: TokenctlError.self) {
            try ClientCredentials.preferredMethod(supported: ["client_secret_basic"], means: platform)
        }
        #expect(refusal?.kind == .configuration)
        #expect(refusal?.message.contains("does not list none") == true, "\(refusal?.message ?? "")")
        // Keys before secrets before none: a client with means authenticates.
        #expect(
            try ClientCredentials.preferredMethod(
                supported: ClientAuthenticationMethod.names, means: Means(secret: true, publicAllowed: true))
                == .clientSecretBasic)
        #expect(
            try ClientCredentials.preferredMethod(
                supported: ClientAuthenticationMethod.names, means: Means(key: true, publicAllowed: true))
                == .privateKeyJWT)
    }

    @Test("a login's choice: none for jwt-bearer and token-exchange with no means, never for client-credentials")
    func loginChoice() throws {
        for grant in [MachineGrant.jwtBearer, .tokenExchange] {
            #expect(try Self.method(try Self.plan(grant), advertised: nil) == .publicClient, "\(grant)")
            #expect(try Self.method(try Self.plan(grant), advertised: ["none", "private_key_jwt"]) == .publicClient)
            #expect(throws: TokenctlError.self) {
                try Self.method(try Self.plan(grant), advertised: ["client_secret_basic", "private_key_jwt"])
            }
            // A secret given: the client authenticates with it, as before.
            #expect(
                try Self.method(try Self.plan(grant, secret: "s3cret"), advertised: nil, secret: "s3cret")
                    == .clientSecretBasic)
            #expect(try Self.method(try Self.plan(grant, clientAuth: .publicClient), advertised: []) == .publicClient)
        }
        for grant in [MachineGrant.clientCredentials, nil] {
            #expect(throws: TokenctlError.self) { try Self.method(try Self.plan(grant), advertised: nil) }
            let named = #expect(throws: TokenctlError.self) {
                try Self.method(try Self.plan(grant, clientAuth: .publicClient), advertised: ["none"])
            }
            #expect(named?.kind == .invalidInput)
            #expect(named?.message.contains("RFC 6749 §4.4") == true, "\(named?.message ?? "")")
        }
        // A secret with none is refused; a person's none is the public client it is anyway.
        #expect(throws: TokenctlError.self) {
            try Self.method(
                try Self.plan(.jwtBearer, clientAuth: .publicClient, secret: "s3cret"), advertised: nil,
                secret: "s3cret")
        }
        var person = TokenctlService.LoginRequest(
            profile: Self.job, issuer: try EndpointURL("https://issuer.example"), clientID: "job", scope: nil,
            method: .device)
        person.clientAuth = .publicClient
        #expect(try Self.method(try LoginPlan(person, previous: nil), advertised: ["none"]) == nil)
    }

    @Test("a saved none stays while the client stays public; a secret or client-credentials chooses again")
    func savedNone() throws {
        var saved = ProfileConfiguration(
            issuer: try EndpointURL("https://issuer.example"), clientID: "job", tokenEndpointAuthMethod: .publicClient)
        saved.grant = .jwtBearer
        saved.assertionFile = "/run/ci/assertion"
        #expect(try Self.plan(nil, previous: saved).request.clientAuth == .publicClient)
        #expect(try Self.plan(nil, previous: saved).request.machine.grant == .jwtBearer)
        #expect(try Self.plan(nil, secret: "s3cret", previous: saved).request.clientAuth == nil)
        #expect(try Self.plan(.clientCredentials, previous: saved).request.clientAuth == nil)
    }

    @Test("the request of a public client: client_id in the form; no Authorization, secret or assertion")
    func requestForm() throws {
        for credentials in [
            ClientCredentials(clientID: "job", method: .publicClient),
            // A secret handed in by mistake is not sent either.
            ClientCredentials(clientID: "job", secret: "s3cret", method: .publicClient),
        ] {
            #expect(credentials.method == .publicClient)
            let request = try credentials.formRequest(
                Self.endpoint, [("grant_type", MachineGrant.jwtBearer.grantType), ("assertion", "a.b.c")])
            let fields = formFields(request)
            #expect(fields["client_id"] == "job")
            #expect(fields["assertion"] == "a.b.c")
            #expect(fields["client_secret"] == nil && fields["client_assertion"] == nil)
            #expect(fields["client_assertion_type"] == nil)
            #expect(request.headers.allSatisfy { $0.name.lowercased() != "authorization" })
            #expect(request.clientCertificate == nil)
            #expect(!String(decoding: request.body ?? [], as: UTF8.self).contains("s3cret"))
        }
    }

    @Test("a saved none with the client credentials grant is refused before anything is sent (78)")
    func clientCredentialsRefusesNone() throws {
        var configuration = ProfileConfiguration(
            issuer: try EndpointURL("https://issuer.example"), clientID: "job", tokenEndpointAuthMethod: .publicClient)
        configuration.grant = .clientCredentials
        let refusal = try #require(ClientCredentialsGrant.publicClientRefusal(configuration, profile: Self.job))
        #expect(refusal.kind == .configuration)
        #expect(refusal.message.contains("none") && refusal.message.contains("client-credentials"))
        configuration.grant = nil
        #expect(ClientCredentialsGrant.publicClientRefusal(configuration, profile: Self.job) != nil)
        for grant in [MachineGrant.jwtBearer, .tokenExchange] {
            configuration.grant = grant
            #expect(ClientCredentialsGrant.publicClientRefusal(configuration, profile: Self.job) == nil)
        }
        configuration.grant = .clientCredentials
        configuration.tokenEndpointAuthMethod = .clientSecretBasic
        #expect(ClientCredentialsGrant.publicClientRefusal(configuration, profile: Self.job) == nil)
    }

    @Test("the profile file reads and writes token_endpoint_auth_method = none")
    func profileFile() throws {
        var configuration = ProfileConfiguration(
            issuer: try EndpointURL("https://issuer.example"), clientID: "job", tokenEndpointAuthMethod: .publicClient)
        configuration.grant = .jwtBearer
        configuration.assertionFile = "/run/ci/assertion"
        let text = configuration.serialized(profile: Self.job)
        #expect(text.contains("token_endpoint_auth_method = none\n"), "\(text)")
        #expect(try ProfileConfiguration.parse(text, path: "job.conf").tokenEndpointAuthMethod == .publicClient)
    }
}
