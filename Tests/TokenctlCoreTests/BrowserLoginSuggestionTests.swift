import Testing
import TokenctlEssentials
import TokenctlTestSupport

@testable import TokenctlCore

/// The browser login a device-flow refusal offers ("offers --browser", the hint runs
/// as printed): the same issuer, client and options, or no command when one cannot be printed.
@Suite("The browser login command in device-flow hints")
struct BrowserLoginSuggestionTests {
    func request(_ profile: String = "default") throws -> TokenctlService.LoginRequest {
        TokenctlService.LoginRequest(
            profile: ProfileName(rawValue: profile)!, issuer: try EndpointURL("https://gitlab.example.com"),
            clientID: "app-id", scope: "openid read_repository", method: .device,
            endpoints: ExplicitEndpoints(
                token: try EndpointURL("https://gitlab.example.com/oauth/token"),
                deviceAuthorization: try EndpointURL("https://gitlab.example.com/oauth/authorize_device")),
            audience: nil, dpop: true)
    }

    @Test("the device login's options but the device endpoint, spaces quoted, --profile when not default; a valid hint")
    func command() throws {
        let command = try #require(try request("work").browserLogin()?.rendered)
        #expect(
            command
                == "tokenctl --profile work login --browser --issuer https://gitlab.example.com --client-id app-id --scope \"openid read_repository\" --token-endpoint https://gitlab.example.com/oauth/token --dpop"
        )
        #expect(Hint.problems(in: "Sign in by browser instead: '\(command)'.").isEmpty)
        var preset = try request()
        preset.provider = .gitlab
        #expect(
            preset.browserLogin()?.rendered.hasPrefix(
                "tokenctl login --browser --provider gitlab --issuer https://gitlab.example.com ") == true)
    }

    @Test(
        "GitHub's code exchange needs the app's secret: its browser login carries --client-secret-stdin unless one is stored"
    )
    func gitHubNeedsTheSecret() throws {
        for provider in [Provider.github, .githubApp] {
            let request = TokenctlService.LoginRequest(
                profile: .default, issuer: try EndpointURL("https://ghe.example.com"), clientID: "Ov23li", scope: nil,
                method: .device, provider: provider)
            #expect(
                request.browserLogin()?.rendered
                    == "tokenctl login --browser --provider \(provider.rawValue) --issuer https://ghe.example.com --client-id Ov23li --client-secret-stdin"
            )
            #expect(request.browserLogin(secretStored: true)?.rendered.hasSuffix("--client-secret-stdin") == false)
        }
        var gitlab = try request()
        gitlab.provider = .gitlab
        #expect(gitlab.browserLogin()?.rendered.contains("--client-secret-stdin") == false)
    }

    @Test("no command with a client secret (stdin cannot be copied) or a value a shell would change")
    func none() throws {
        var withSecret = try request()
        withSecret.clientSecret = "s"
        #expect(withSecret.browserLogin() == nil)
        var quoted = try request()
        quoted.scope = "it's"
        #expect(quoted.browserLogin() == nil)
        quoted.scope = "a $HOME"
        #expect(quoted.browserLogin() == nil)
    }
}
