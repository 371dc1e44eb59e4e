// swift-tools-version:6.0
// tokenctl: an OAuth 2.0 / OpenID Connect credential manager for Linux shells, scripts and cron.
import PackageDescription

/// The package's directory, for the one linker flag that needs an absolute path.
let packageDirectory = String(#filePath.dropLast("Package.swift".count))

let package = Package(
    name: "tokenctl",
    platforms: [.macOS(.v13)],
    products: [
        // The command users run: a fully static front serving `token` from the kernel keyring
        // hot cache, exec-ing the engine (installed beside it) for everything else.
        .executable(name: "tokenctl", targets: ["tokenctl"]),
        .executable(name: "tokenctl-engine", targets: ["tokenctl-engine"]),
    ],
    targets: [
        // C libraries from Debian, reached through system-library targets.
        .systemLibrary(
            name: "CSecret",
            pkgConfig: "libsecret-1",
            providers: [.apt(["libsecret-1-dev"])]
        ),
        // tokenctl's C over libsecret (the item schema, the lean Service proxy, the calls Swift
        // cannot make), with its bodies in a .c file, which a system-library target cannot hold.
        .target(name: "CSecretShim", dependencies: ["CSecret"]),
        // tokenctl's C over the libraries it loads with dlopen on first use, one C target each:
        // the header (Sources/CName/include/CName.h) declares, the .c file holds the bodies and
        // the library's one loader state. Only the libraries' headers are used at build time
        // (Debian packages in parentheses); nothing links the libraries themselves.
        // The loader they share (dlopen, dlsym, the declare/define macros).
        .target(name: "CLazyLoader"),
        // libcurl, dlopen-ed when tokenctl first speaks HTTP (libcurl4-openssl-dev).
        .target(name: "CCurl", dependencies: ["CLazyLoader"]),
        // OpenSSL's libcrypto, dlopen-ed on first use (PKCE, ID-token signatures at login and in
        // `status`); linked, it cost ~1.7 ms of every engine start (libssl-dev).
        .target(name: "CCrypto", dependencies: ["CLazyLoader"]),
        // libgcrypt (DPoP's ES256 keys and proofs; libsecret has already loaded it when a proof is
        // signed), dlopen-ed on first use (libgcrypt20-dev).
        .target(name: "CGcrypt", dependencies: ["CLazyLoader"]),
        // libqrencode, dlopen-ed when the device flow draws its QR code (libqrencode-dev).
        .target(name: "CQRencode", dependencies: ["CLazyLoader"]),

        // add_key(2)/keyctl(2) as raw system calls: no library (the static front links it).
        .target(name: "CKernelKeyring"),

        // What the static front's hit needs, and nothing else: no Foundation, no C library but
        // Glibc and the kernel keyring calls (the rule and the folders: its README.md).
        .target(name: "TokenctlEssentials", dependencies: ["CKernelKeyring"], exclude: ["README.md"]),

        // The token logic: token sets, the refresh broker, Secret Service storage, HTTP.
        // No argv, no printing.
        .target(
            name: "TokenctlCore",
            dependencies: [
                "TokenctlEssentials", "CKernelKeyring", "CSecret", "CSecretShim", "CCurl", "CCrypto", "CGcrypt",
                "CQRencode",
            ],
            exclude: ["README.md"]
        ),

        // Every command, its options, output and exit status (thin over the core), as a library
        // that tests run in-process and the fuzz targets import.
        .target(name: "TokenctlCommands", dependencies: ["TokenctlEssentials", "TokenctlCore"]),

        // The engine: `main` over TokenctlCommands. Runs as `tokenctl-engine`, started by the
        // front with the user's argv.
        .executableTarget(
            name: "tokenctl-engine",
            dependencies: ["TokenctlEssentials", "TokenctlCommands", "CProcessStartup"],
            path: "Sources/tokenctl-engine",
            exclude: ["StaticLibstdcxx"],
            // The Swift runtime and FoundationEssentials linked in: ~12 fewer shared libraries to
            // map on every call that reaches the engine (cache misses, the fallback, refresh waves);
            // libstdc++ too, through the linker script in StaticLibstdcxx (see its comment).
            linkerSettings: [
                .unsafeFlags([
                    "-static-stdlib", "-l_FoundationCollections", "-l_FoundationCShims",
                    "-L\(packageDirectory)Sources/tokenctl-engine/StaticLibstdcxx",
                ])
            ]
        ),

        // Process start-up for both executables: the Swift runtime's argv lookup (which reads
        // /proc/self/maps in every process) replaced by argv captured before main; the front also
        // reads that argv directly on its hit path.
        .target(name: "CProcessStartup"),

        // The front, `tokenctl`: fully static (stdlib + glibc), serves hot-cache hits, execs the
        // engine otherwise. Nothing a hit does not use is mapped (no dynamic loader at all).
        .executableTarget(
            name: "tokenctl",
            dependencies: ["TokenctlEssentials", "CProcessStartup"],
            path: "Sources/tokenctl",
            swiftSettings: [.unsafeFlags(["-static-executable"])],
            linkerSettings: [.unsafeFlags(["-static-executable"])]
        ),

        // What every test target shares, one copy (swift-argument-parser's ArgumentParserTestHelpers):
        // the core's doubles and fixtures (an in-memory store, a scripted HTTP client, a virtual
        // clock), the harness of the services Scripts/test starts (child processes, the test
        // authorization server), and commands run in-process through `Engine.run` with a test
        // `EngineEnvironment`.
        .target(
            name: "TokenctlTestSupport",
            dependencies: ["TokenctlEssentials", "TokenctlCore", "TokenctlCommands"],
            path: "Tests/TokenctlTestSupport"
        ),

        .testTarget(name: "TokenctlEssentialsTests", dependencies: ["TokenctlEssentials"]),
        .testTarget(name: "TokenctlCoreTests", dependencies: ["TokenctlCore", "TokenctlTestSupport"]),
        .testTarget(
            name: "TokenctlCommandsTests",
            dependencies: ["TokenctlCommands", "TokenctlCore", "TokenctlEssentials", "TokenctlTestSupport"]
        ),
        .testTarget(
            name: "TokenctlEndToEndTests", dependencies: ["TokenctlEssentials", "TokenctlCore", "TokenctlTestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
