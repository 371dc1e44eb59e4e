// swift-tools-version:6.0
// tokenctl: an OAuth 2.0 / OpenID Connect credential manager for Linux shells, scripts and cron.
import PackageDescription

let package = Package(
    name: "tokenctl",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "tokenctl", targets: ["tokenctl"]),
    ],
    targets: [
        // C libraries from Debian, reached through system-library targets.
        .systemLibrary(
            name: "CSecret",
            pkgConfig: "libsecret-1",
            providers: [.apt(["libsecret-1-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CQRencode",
            pkgConfig: "libqrencode",
            providers: [.apt(["libqrencode-dev"])]
        ),

        // No Foundation and no C library but Glibc: argv parsing, profile configuration,
        // paths and exit codes. A future static hot-path front reuses this module as is.
        .target(name: "TokenctlEssentials"),

        // The token logic: token sets, the refresh broker, Secret Service storage, HTTP.
        // No argv, no printing.
        .target(
            name: "TokenctlCore",
            dependencies: ["TokenctlEssentials", "CSecret", "CCurl", "CCrypto", "CQRencode"]
        ),

        // The thin executable: commands, output, exit codes.
        .executableTarget(
            name: "tokenctl",
            dependencies: ["TokenctlEssentials", "TokenctlCore"]
        ),

        .testTarget(name: "TokenctlEssentialsTests", dependencies: ["TokenctlEssentials"]),
        .testTarget(name: "TokenctlCoreTests", dependencies: ["TokenctlCore"]),
        .testTarget(name: "TokenctlEndToEndTests", dependencies: ["TokenctlEssentials"]),
    ],
    swiftLanguageModes: [.v6]
)
