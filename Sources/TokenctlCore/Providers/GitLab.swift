// GitLab (https://docs.gitlab.com/integration/openid_connect_provider/): gitlab.com or a
// self-managed instance.

extension Provider {
    public static let gitlab = Provider(
        "gitlab", displayName: "GitLab", defaultHost: "gitlab.com", takesHost: true,
        configurePreset: { preset in preset.defaultScope = "openid read_repository write_repository" },
        registrationHelp: """
            User Settings > Applications (self-managed: --host HOST): redirect URI
            http://127.0.0.1/callback, "Confidential" off, scopes openid read_repository
            write_repository. The device flow needs GitLab 17.2 or later.
            """)
}
