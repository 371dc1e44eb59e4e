// tokenctl's front: a fully static executable (Swift stdlib and glibc only, no Foundation, no
// shared library, no D-Bus, no network) that serves `tokenctl token` from the kernel keyring
// hot cache and hands everything else to the engine, `tokenctl-engine`, installed beside it.
//
// A hit costs about as much as starting a process: the measured alternatives (one dynamic
// binary loading its libraries with dlopen, or linking them) pay the dynamic loader and the
// Swift runtime's start-up on every call (DESIGN.md §4, Scripts/bench).
#if canImport(Glibc)
import Glibc
#endif
import TokenctlEssentials

/// What a hit prints.
struct Hit {
    var standardOutput: String
    var verboseLog: String?
}

/// The hit path: `token` without `--force`, a configured profile, a cached entry for exactly its
/// issuer and client that is fresh for the requested `--min-ttl`. Anything else (another
/// command, help, a usage error, a miss, the test switch) returns `nil` and the engine runs,
/// with the same argv, and decides and reports exactly as it always does.
func cacheHit(_ arguments: [String], environment: Environment, now: Double) -> Hit? {
    let parser = CommandLineParser(toolName: "tokenctl", commands: [SharedCommandSpecs.token])
    guard let invocation = try? parser.parse(arguments), invocation.action == .run("token") else { return nil }
    let options = invocation.options
    guard !options.has("--force") else { return nil }

    // The engine's validation, so that anything it would reject reaches it.
    var minimumTimeToLive = AccessTokenLifetime.defaultMinimumTimeToLive
    if let text = options.value("--min-ttl") {
        guard let value = Double(text), value.isFinite, value >= 0, value <= 31_536_000 else { return nil }
        minimumTimeToLive = value
    }
    if let text = options.value("--timeout") {
        guard let value = Double(text), value.isFinite, value > 0, value <= 3600 else { return nil }
    }
    let format = options.value("--format") ?? "raw"
    guard ["raw", "header", "json"].contains(format) else { return nil }

    let cache = HotCache(environment: environment)
    guard !cache.isDisabled,
          let profile = ProfileName(rawValue: invocation.profileName ?? environment["TOKENCTL_PROFILE"] ?? ProfileName.default.rawValue),
          let paths = try? Paths.resolve(environment),
          let text = try? FileIO.readFile(paths.profileFile(profile)),
          let configuration = try? ProfileConfiguration.parse(text, path: paths.profileFile(profile)),
          configuration.tokenEndpoint != nil,  // the engine refuses such a profile (exit 78)
          let entry = cache.lookup(profile: profile, issuer: configuration.issuer.string, clientID: configuration.clientID),
          entry.isFresh(at: now, minimumTimeToLive: minimumTimeToLive)
    else { return nil }

    let output: String
    switch format {
    case "header":
        output = "Authorization: \(entry.tokenType) \(entry.accessToken)\n"
    case "json":
        var fields = ["\"access_token\":\(jsonString(entry.accessToken))", "\"token_type\":\(jsonString(entry.tokenType))"]
        if let expiry = entry.expiresAt {
            fields.append("\"expires_at\":\(jsonString(Timestamp.iso8601(expiry)))")
            fields.append("\"expires_in\":\(max(0, Int(expiry - now)))")
        }
        output = "{" + fields.joined(separator: ",") + "}\n"
    default:
        output = entry.accessToken + "\n"
    }
    let log = invocation.verbose
        ? "tokenctl: access token for '\(profile)' valid for \(duration(entry.effectiveExpiry - now)) (kernel keyring cache)\n" : nil
    return Hit(standardOutput: output, verboseLog: log)
}

/// Tokens and token types are visible ASCII (checked when cached): only `"` and `\` need escaping.
func jsonString(_ text: String) -> String {
    var result = "\""
    for character in text {
        if character == "\"" || character == "\\" { result.append("\\") }
        result.append(character)
    }
    return result + "\""
}

/// The engine's duration wording ("59 min", "2 h 5 min", "45 s").
func duration(_ seconds: Double) -> String {
    let total = Int(seconds.rounded(.down))
    if total < 120 { return "\(total) s" }
    if total < 7200 { return "\(total / 60) min" }
    return "\(total / 3600) h \(total % 3600 / 60) min"
}

func writeAll(_ descriptor: Int32, _ text: String) {
    var bytes = Array(text.utf8)
    defer { KernelKeyring.scrub(&bytes) }
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
        if written < 0 {
            if errno == EINTR { continue }
            return
        }
        offset += written
    }
}

func wallClock() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

/// `tokenctl-engine` in the directory of this executable (found through /proc/self/exe, so a
/// symlink to tokenctl on PATH still finds the engine beside the real file).
func enginePath() -> String {
    var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
    let length = buffer.withUnsafeMutableBytes { readlink("/proc/self/exe", $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count - 1) }
    var executable = length > 0 ? String(decoding: buffer[0..<length], as: UTF8.self) : (CommandLine.arguments.first ?? "")
    if !executable.contains("/") { executable = "./" + executable }
    return String(executable[...executable.lastIndex(of: "/")!]) + "tokenctl-engine"
}

/// Replace this process with the engine, passing the original argv (argv[0] included) and
/// environment. Only returns on failure: then a clear error naming the engine, exit 69
/// (EX_UNAVAILABLE: "a support program does not exist").
func runEngine() -> Never {
    let path = enginePath()
    execv(path, CommandLine.unsafeArgv)
    let reason = String(cString: strerror(errno))
    writeAll(2, "Error: cannot run tokenctl's engine '\(path)': \(reason).\ntokenctl-engine must be installed in the same directory as tokenctl (Scripts/install installs both).\n")
    exit(ExitStatus.unavailable.rawValue)
}

if let hit = cacheHit(Array(CommandLine.arguments.dropFirst()), environment: .process, now: wallClock()) {
    // Scripts read our stdout through pipes that may close early: never die of SIGPIPE.
    signal(SIGPIPE, SIG_IGN)
    if let log = hit.verboseLog { writeAll(2, log) }
    writeAll(1, hit.standardOutput)
    exit(ExitStatus.success.rawValue)
}
runEngine()
