import Synchronization
import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

#if canImport(Glibc)
import Glibc
#endif

/// Records what the core asks the presenter to show.
final class RecordingPresenter: LoginPresenter {
    let shown = Mutex<[String]>([])
    func showDeviceAuthorization(_ authorization: DeviceAuthorization, expiresAt: Double) {
        shown.withLock { $0.append("device \(authorization.userCode)") }
    }
    func deviceFlowEnded() { shown.withLock { $0.append("ended") } }
    func deviceFlowSlowedDown(interval: Double) { shown.withLock { $0.append("slow \(Int(interval))") } }
    func showAuthorizationURL(_ url: String, openBrowser: Bool) -> Bool {
        shown.withLock { $0.append("url \(url)") }
        return false
    }
}

@Suite("Device authorization grant (RFC 8628)")
struct DeviceFlowTests {
    static let deviceResponse = HTTPResponse.json(
        200,
        #"{"device_code":"dc","user_code":"WDJB-MJHT","verification_uri":"https://issuer.example/device","verification_uri_complete":"https://issuer.example/device?user_code=WDJB-MJHT","expires_in":600,"interval":5}"#
    )

    func run(_ answers: [HTTPResponse]) async -> (
        Result<TokenResponse, TokenctlError>, FakeHTTPClient, VirtualClock, RecordingPresenter
    ) {
        let clock = VirtualClock()
        let http = FakeHTTPClient(script: ([Self.deviceResponse] + answers).map { .success($0) })
        let presenter = RecordingPresenter()
        let flow = DeviceFlow(
            http: http, clock: clock.clock, retry: RetryPolicy(), credentials: ClientCredentials(clientID: "cli"),
            presenter: presenter)
        do {
            let (response, _, _) = try await flow.run(
                deviceEndpoint: "https://issuer.example/device_authorization",
                tokenEndpoint: "https://issuer.example/token", scope: "openid", extra: [])
            return (.success(response), http, clock, presenter)
        } catch {
            return (.failure(error), http, clock, presenter)
        }
    }

    static func oauthError(_ code: String) -> HTTPResponse { .json(400, #"{"error":"\#(code)"}"#) }

    static func sleptAbout(_ sleeps: [Double], _ expected: [Double]) -> Bool {
        sleeps.count == expected.count && zip(sleeps, expected).allSatisfy { abs($0 - $1) < 1e-9 }
    }

    @Test(
        "pending, slow_down (+5 s), then tokens; every poll waits the current interval and a margin (20%, 40% after slow_down)"
    )
    func pollsThenSucceeds() async throws {
        let (result, http, clock, presenter) = await run([
            Self.oauthError("authorization_pending"), Self.oauthError("slow_down"),
            Self.oauthError("authorization_pending"), .tokens(),
        ])
        #expect(try result.get().accessToken == "access-2")
        #expect(Self.sleptAbout(clock.sleeps, [6, 6, 14, 14]), "\(clock.sleeps)")
        #expect(http.requestCount == 5)
        let poll = formFields(http.requests[1])
        #expect(poll["grant_type"] == "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code")
        #expect(poll["device_code"] == "dc")
        #expect(poll["client_id"] == "cli")
        #expect(presenter.shown.withLock { $0 } == ["device WDJB-MJHT", "slow 10", "ended"])
    }

    @Test(
        "access_denied and expired_token end with exit 77 and a clear message",
        arguments: [
            ("access_denied", "denied"), ("expired_token", "expired"),
        ])
    func terminal(code: String, words: String) async {
        let (result, _, _, presenter) = await run([Self.oauthError("authorization_pending"), Self.oauthError(code)])
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.exitStatus == .loginRequired)
        #expect(error.message.contains(words))
        #expect(presenter.shown.withLock { $0.last } == "ended")
    }

    @Test("polling stops when the code expires")
    func expiry() async {
        let (result, http, _, _) = await run([Self.oauthError("authorization_pending")])
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.message.contains("expired"))
        #expect(http.requestCount <= 1 + 600 / 5)
    }

    @Test("a server error while polling keeps polling with backoff")
    func transientWhilePolling() async throws {
        let (result, _, clock, _) = await run([.text(503, "busy"), .tokens()])
        #expect(try result.get().accessToken == "access-2")
        #expect(Self.sleptAbout(clock.sleeps, [6, 12]), "\(clock.sleeps)")
    }

    @Test(
        "device responses without user_code, verification_uri or with control characters are rejected",
        arguments: [
            #"{"device_code":"d","verification_uri":"https://i.example/d","expires_in":600}"#,
            #"{"device_code":"d","user_code":"A","expires_in":600}"#,
            #"{"user_code":"A","verification_uri":"https://i.example/d","expires_in":600}"#,
            #"{"device_code":"d","user_code":"A\u001b[31m","verification_uri":"https://i.example/d"}"#,
            #"{"device_code":"d","user_code":"A","verification_uri":"http://evil.example/d"}"#,
            "not json",
        ])
    func badDeviceResponse(body: String) {
        #expect(throws: TokenctlError.self) {
            try DeviceAuthorization.parse(Array(body.utf8), endpoint: "https://i.example/device")
        }
    }

    @Test(
        "user codes: any printable code is shown as given (spaces inside, as 'WDJB MJHT'); control, format and separator characters, edge spaces and over 64 characters are not",
        arguments: [
            ("WDJB MJHT", true), ("WDJB-MJHT", true), ("1234 5678 9012", true), ("ÄÖÜ-ß", true),
            ("WDJB\tMJHT", false), ("WDJB\u{202E}MJHT", false), ("WDJB\u{2028}MJHT", false),
            ("WDJB\u{00A0}MJHT", false),
            (" WDJB", false), ("WDJB ", false), ("", false), (String(repeating: "A", count: 65), false),
        ])
    func userCodes(code: String, accepted: Bool) throws {
        var body = #"{"device_code":"d","verification_uri":"https://i.example/d","user_code":""#
        // JSON escapes for everything but printable ASCII.
        for scalar in code.unicodeScalars {
            let hex = String(scalar.value, radix: 16)
            body +=
                scalar.isASCII && scalar.value >= 0x20
                ? String(scalar) : "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        }
        body += #""}"#
        if accepted {
            #expect(try DeviceAuthorization.parse(Array(body.utf8), endpoint: "e").userCode == code)
        } else {
            #expect(throws: TokenctlError.self) { try DeviceAuthorization.parse(Array(body.utf8), endpoint: "e") }
        }
    }

    @Test("defaults: interval 5 s; verification_url (old spelling) accepted")
    func defaults() throws {
        let parsed = try DeviceAuthorization.parse(
            Array(
                #"{"device_code":"d","user_code":"A","verification_url":"https://i.example/d","expires_in":"900"}"#.utf8
            ), endpoint: "e")
        #expect(parsed.interval == 5)
        #expect(parsed.expiresIn == 900)
        #expect(parsed.verificationURI == "https://i.example/d")
    }
}

@Suite("Client authentication and scopes")
struct ClientCredentialsTests {
    @Test("client_secret_basic: form-encoded id and secret in Basic; client_secret_post: in the body")
    func methods() throws {
        let basic = try ClientCredentials(clientID: "my client", secret: "s:e/c", method: .clientSecretBasic)
            .formRequest(
                "https://i/token", [("grant_type", "x")])
        let header = basic.headers.first { $0.name == "Authorization" }?.value
        #expect(header == "Basic " + Data("my+client:s%3Ae%2Fc".utf8).base64EncodedString())
        #expect(formFields(basic)["client_secret"] == nil)
        let post = try ClientCredentials(clientID: "cli", secret: "sec", method: .clientSecretPost).formRequest(
            "https://i/token", [("grant_type", "x")])
        #expect(formFields(post)["client_secret"] == "sec")
        #expect(post.headers.allSatisfy { $0.name != "Authorization" })
        let publicClient = try ClientCredentials(clientID: "cli").formRequest("https://i/token", [])
        #expect(formFields(publicClient) == ["client_id": "cli"])
    }

    @Test("the advertised method is chosen; none usable is a configuration error")
    func preferred() throws {
        #expect(try ClientCredentials.preferredMethod(supported: nil) == .clientSecretBasic)
        #expect(try ClientCredentials.preferredMethod(supported: ["client_secret_post", "none"]) == .clientSecretPost)
        #expect(throws: TokenctlError.self) { try ClientCredentials.preferredMethod(supported: ["private_key_jwt"]) }
    }

    @Test("default scope: openid offline_access as far as advertised")
    func defaultScope() {
        #expect(LoginPlan.defaultScope(supported: nil) == nil)
        #expect(
            LoginPlan.defaultScope(supported: ["openid", "profile", "offline_access"]) == "openid offline_access")
        #expect(LoginPlan.defaultScope(supported: ["openid", "read"]) == "openid")
        #expect(LoginPlan.defaultScope(supported: ["read"]) == nil)
    }

    @Test("the refresh request carries the client's authentication")
    func refreshCarriesSecret() async throws {
        let http = FakeHTTPClient(script: [.success(.tokens())])
        let client = TokenEndpointClient(http: http, clock: VirtualClock().clock, retry: RetryPolicy())
        _ = try await client.refresh(
            refreshToken: "r", endpoint: "https://i/token", clientID: "cli",
            credentials: ClientCredentials(clientID: "cli", secret: "sec", method: .clientSecretPost))
        #expect(formFields(http.requests[0])["client_secret"] == "sec")
    }
}

@Suite("Discovery metadata and cache")
struct DiscoveryMetadataTests {
    let issuer = try! EndpointURL("https://issuer.example")

    @Test("the login endpoints and capabilities are read")
    func fields() throws {
        let body =
            #"{"issuer":"https://issuer.example","token_endpoint":"https://issuer.example/token","device_authorization_endpoint":"https://issuer.example/device","authorization_endpoint":"https://issuer.example/authorize","jwks_uri":"https://issuer.example/jwks","token_endpoint_auth_methods_supported":["client_secret_post"],"code_challenge_methods_supported":["S256"],"scopes_supported":["openid"]}"#
        let metadata = try ServerMetadata.parse(Array(body.utf8), expectedIssuer: issuer, url: "u")
        #expect(metadata.deviceAuthorizationEndpoint?.string == "https://issuer.example/device")
        #expect(metadata.authorizationEndpoint?.string == "https://issuer.example/authorize")
        #expect(metadata.jwksURI?.string == "https://issuer.example/jwks")
        #expect(metadata.tokenEndpointAuthMethods == ["client_secret_post"])
        #expect(metadata.codeChallengeMethods == ["S256"])
        #expect(metadata.scopesSupported == ["openid"])
        #expect(throws: TokenctlError.self) {
            try ServerMetadata.parse(
                Array(
                    #"{"issuer":"https://issuer.example","token_endpoint":"https://issuer.example/t","scopes_supported":"openid"}"#
                        .utf8), expectedIssuer: issuer, url: "u")
        }
    }

    @Test("a fetched document is cached (0600) and served from the cache within its lifetime only")
    func cache() async throws {
        let directory = "/tmp/tokenctl-discovery-test-\(getpid())-\(Int.random(in: 0..<1_000_000))"
        defer {
            _ = try? FileIO.listDirectory(directory).forEach { try? FileIO.removeFile(directory + "/" + $0) }
            rmdir(directory)
        }
        let clock = VirtualClock()
        let cache = DiscoveryCache(directory: directory, lifetime: 86_400, clock: clock.clock)
        let http = FakeHTTPClient(script: [
            .success(
                .json(
                    200,
                    #"{"issuer":"https://issuer.example","token_endpoint":"https://issuer.example/token","revocation_endpoint":"https://issuer.example/revoke","device_authorization_endpoint":"https://issuer.example/device"}"#
                ))
        ])
        _ = try await ServerMetadata.discover(issuer, http: http, timeout: 5, cache: cache)
        _ = try await ServerMetadata.discover(issuer, http: http, timeout: 5, cache: cache)
        #expect(http.requestCount == 1)
        var info = stat()
        #expect(stat(cache.file(for: issuer), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        clock.advance(86_401)
        _ = try await ServerMetadata.discover(issuer, http: http, timeout: 5, cache: cache)
        #expect(http.requestCount == 2)
        #expect(cache.file(for: issuer) != cache.file(for: try EndpointURL("https://issuer.example/tenant")))
    }

    @Test("endpoints missing from the OIDC document are filled from the RFC 8414 one, also from the cache")
    func supplement() async throws {
        let directory = "/tmp/tokenctl-discovery-test-\(getpid())-\(Int.random(in: 0..<1_000_000))"
        defer {
            _ = try? FileIO.listDirectory(directory).forEach { try? FileIO.removeFile(directory + "/" + $0) }
            rmdir(directory)
        }
        let tenant = try EndpointURL("https://issuer.example/o")
        let http = FakeHTTPClient { request, _ in
            switch request.url {
            case "https://issuer.example/o/.well-known/openid-configuration":
                .success(
                    .json(
                        200, #"{"issuer":"https://issuer.example/o","token_endpoint":"https://issuer.example/o/token"}"#
                    ))
            case "https://issuer.example/.well-known/oauth-authorization-server/o":
                .success(
                    .json(
                        200,
                        #"{"issuer":"https://issuer.example/o","token_endpoint":"https://issuer.example/o/token","revocation_endpoint":"https://issuer.example/o/revoke"}"#
                    ))
            default: .success(.json(404, "{}"))
            }
        }
        let cache = DiscoveryCache(directory: directory, clock: VirtualClock().clock)
        let fetched = try await ServerMetadata.discover(tenant, http: http, timeout: 5, cache: cache)
        #expect(fetched.revocationEndpoint?.string == "https://issuer.example/o/revoke")
        let cached = try await ServerMetadata.discover(tenant, http: http, timeout: 5, cache: cache)
        #expect(cached == fetched)
        #expect(http.requestCount == 2)
    }
}

@Suite("TokenctlService.login (device flow, fakes)")
struct LoginServiceTests {
    static let discovery =
        #"{"issuer":"https://issuer.example","token_endpoint":"https://issuer.example/token","device_authorization_endpoint":"https://issuer.example/device","scopes_supported":["openid","offline_access"]}"#

    func service(_ store: InMemorySessionStore, _ http: FakeHTTPClient) -> (TokenctlService, String) {
        let root = "/tmp/tokenctl-login-test-\(getpid())-\(Int.random(in: 0..<1_000_000_000))"
        let paths = Paths(
            configDirectory: root + "/config", lockDirectory: root + "/locks", stateDirectory: root + "/state",
            cacheDirectory: root + "/cache")
        let service = TokenctlService(
            paths: paths, store: store, locks: NoProfileLocks(), clock: VirtualClock().clock, httpClient: { _ in http })
        return (service, root)
    }

    func request() throws -> TokenctlService.LoginRequest {
        TokenctlService.LoginRequest(
            profile: ProfileName(rawValue: "work")!, issuer: try EndpointURL("https://issuer.example"), clientID: "cli",
            scope: nil, method: .device)
    }

    @Test("success: the default scope is requested, the set and the profile are stored")
    func success() async throws {
        let http = FakeHTTPClient { request, _ in
            switch request.url {
            case let url where url.hasSuffix("/.well-known/openid-configuration"): .success(.json(200, Self.discovery))
            case "https://issuer.example/device": .success(DeviceFlowTests.deviceResponse)
            default: .success(.tokens(access: "at", refresh: "rt"))
            }
        }
        let store = InMemorySessionStore()
        let (service, root) = service(store, http)
        let result = try await service.login(try request(), presenter: RecordingPresenter())
        #expect(result.tokenSet.refreshToken == "rt")
        #expect(result.requestedScope == "openid offline_access")
        let deviceRequest = try #require(http.requests.first { $0.url == "https://issuer.example/device" })
        #expect(formFields(deviceRequest)["scope"] == "openid+offline_access")
        let identity = SessionIdentity(
            profile: ProfileName(rawValue: "work")!, issuer: "https://issuer.example", clientID: "cli")
        #expect(try store.read(identity)?.accessToken == "at")
        let profile = try #require(try FileIO.readFile(root + "/config/profiles/work.conf"))
        #expect(profile.contains("device_authorization_endpoint = https://issuer.example/device"))
    }

    @Test("a cached document without the device endpoint is refetched before the endpoint is reported missing")
    func staleCache() async throws {
        let http = FakeHTTPClient { request, _ in
            switch request.url {
            case let url where url.hasSuffix("/.well-known/openid-configuration"): .success(.json(200, Self.discovery))
            case "https://issuer.example/device": .success(DeviceFlowTests.deviceResponse)
            default: .success(.tokens(access: "at", refresh: "rt"))
            }
        }
        let store = InMemorySessionStore()
        let (service, root) = service(store, http)
        let issuer = try EndpointURL("https://issuer.example")
        DiscoveryCache(directory: root + "/cache/discovery", clock: service.clock).store(
            issuer, url: "https://issuer.example/.well-known/openid-configuration",
            document: #"{"issuer":"https://issuer.example","token_endpoint":"https://issuer.example/token"}"#)
        let result = try await service.login(try request(), presenter: RecordingPresenter())
        #expect(result.tokenSet.accessToken == "at")
        #expect(http.requests.filter { $0.url.hasSuffix("/.well-known/openid-configuration") }.count == 1)
    }

    @Test(
        "fake Secret Service whose write fails after the exchange: the session goes to the rotation journal, the profile is saved, the message says exactly that"
    )
    func writeFailsAfterExchange() async throws {
        let http = FakeHTTPClient { request, _ in
            switch request.url {
            case let url where url.hasSuffix("/.well-known/openid-configuration"): .success(.json(200, Self.discovery))
            case "https://issuer.example/device": .success(DeviceFlowTests.deviceResponse)
            default: .success(.tokens(access: "at", refresh: "rt"))
            }
        }
        let memory = InMemorySessionStore()
        let keyring = FailingWritesStore(memory)
        keyring.failure = StoreError(.timeout, "the Secret Service did not answer in time (store the session)")
        let journal = RotationJournal(environment: .fixed([:]))
        let store = JournaledSessionStore(keyring, journal: journal)
        let root = "/tmp/tokenctl-login-test-\(getpid())-\(Int.random(in: 0..<1_000_000_000))"
        let paths = Paths(
            configDirectory: root + "/config", lockDirectory: root + "/locks", stateDirectory: root + "/state",
            cacheDirectory: root + "/cache")
        let service = TokenctlService(
            paths: paths, store: store, locks: NoProfileLocks(), clock: VirtualClock().clock, httpClient: { _ in http })
        let profile = ProfileName(rawValue: "login-" + String(UInt32.random(in: 0...UInt32.max), radix: 16))!
        let identity = SessionIdentity(profile: profile, issuer: "https://issuer.example", clientID: "cli")
        defer { journal.clear(identity) }
        let request = TokenctlService.LoginRequest(
            profile: profile, issuer: try EndpointURL("https://issuer.example"), clientID: "cli", scope: nil,
            method: .device)
        do {
            _ = try await service.login(request, presenter: RecordingPresenter())
            Issue.record("the failed write was not reported")
        } catch {
            #expect(error.kind == .storeUnavailable)
            #expect(error.message.contains("signed in, but the Secret Service could not save the session"))
            #expect(error.hint?.rendered.contains("held in memory only") == true)
            #expect(error.hint?.rendered.contains("The session is kept") != true)
        }
        #expect(journal.pending(identity)?.tokenSet.refreshToken == "rt", "the journal holds the session")
        #expect(
            try service.profiles.load(profile) != nil,
            "the profile is saved, so the next command can complete the write")
        keyring.failure = nil
        await service.completePendingWrite(profile)
        #expect(try memory.read(identity)?.refreshToken == "rt")
        #expect(journal.pending(identity) == nil)
    }

    @Test(
        "a profile directory that cannot be written (a file in its place) is reported before the device or token endpoint is asked"
    )
    func unwritableProfileDirectory() async throws {
        let http = FakeHTTPClient { request, _ in
            switch request.url {
            case let url where url.hasSuffix("/.well-known/openid-configuration"): .success(.json(200, Self.discovery))
            case "https://issuer.example/device": .success(DeviceFlowTests.deviceResponse)
            default: .success(.tokens(access: "at", refresh: "rt"))
            }
        }
        let store = InMemorySessionStore()
        let (service, root) = service(store, http)
        try FileIO.makeDirectories(root + "/config")
        try FileIO.writeAtomically("not a directory\n", to: root + "/config/profiles")
        let login = try request()
        do {
            _ = try await service.login(login, presenter: RecordingPresenter())
            Issue.record("the unwritable profile directory was not reported")
        } catch {
            #expect(error.kind == .configuration)
            #expect(
                error.message.contains("cannot write the profile") && error.message.contains(root + "/config/profiles"),
                "\(error.message)")
            #expect(error.hint?.rendered.hasPrefix("Nothing was sent to the server.") == true)
        }
        #expect(
            http.requests.allSatisfy { !$0.url.hasSuffix("/device") && !$0.url.hasSuffix("/token") },
            "nothing was asked of the device or token endpoint")
    }

    @Test(
        "the profile write failing after the exchange keeps the stored set (nothing the server issued is undone) and says what to run"
    )
    func profileWriteFailsAfterExchange() async throws {
        let root = "/tmp/tokenctl-login-test-\(getpid())-\(Int.random(in: 0..<1_000_000_000))"
        let http = FakeHTTPClient { request, _ in
            switch request.url {
            case let url where url.hasSuffix("/.well-known/openid-configuration"):
                return .success(.json(200, Self.discovery))
            case "https://issuer.example/device": return .success(DeviceFlowTests.deviceResponse)
            case "https://issuer.example/token":
                // The directory was checked; it goes away while the server answers.
                rmdir(root + "/config/profiles")
                try? FileIO.writeAtomically("not a directory\n", to: root + "/config/profiles")
                return .success(.tokens(access: "at", refresh: "rt"))
            default: return .success(.json(404, "{}"))
            }
        }
        let store = InMemorySessionStore()
        let paths = Paths(
            configDirectory: root + "/config", lockDirectory: root + "/locks", stateDirectory: root + "/state",
            cacheDirectory: root + "/cache")
        let service = TokenctlService(
            paths: paths, store: store, locks: NoProfileLocks(), clock: VirtualClock().clock, httpClient: { _ in http })
        let login = try request()
        do {
            _ = try await service.login(login, presenter: RecordingPresenter())
            Issue.record("the failed profile write was not reported")
        } catch {
            #expect(error.kind == .configuration)
            #expect(error.message.hasPrefix("signed in, but cannot write the profile"), "\(error.message)")
            #expect(
                error.hint?.rendered.contains("The session is saved in the Secret Service") == true,
                "\(error.hint?.rendered ?? "")")
            #expect(
                error.hint?.rendered.contains(
                    "run 'tokenctl --profile work login --issuer https://issuer.example --client-id cli' again")
                    == true, "\(error.hint?.rendered ?? "")")
        }
        let identity = SessionIdentity(
            profile: ProfileName(rawValue: "work")!, issuer: "https://issuer.example", clientID: "cli")
        #expect(try store.read(identity)?.refreshToken == "rt", "the issued set is kept")
    }

    @Test("an unusable keyring is reported before the user is asked to approve anything")
    func preflight() async throws {
        let http = FakeHTTPClient { request, _ in
            request.url.hasSuffix("/.well-known/openid-configuration")
                ? .success(.json(200, Self.discovery)) : .success(DeviceFlowTests.deviceResponse)
        }
        let store = InMemorySessionStore()
        store.failure = StoreError(.locked, "the keyring is locked")
        let (service, _) = service(store, http)
        await #expect(throws: TokenctlError.self) {
            try await service.login(try request(), presenter: RecordingPresenter())
        }
        #expect(http.requests.allSatisfy { !$0.url.hasSuffix("/device") }, "no device code was requested")
    }
}
