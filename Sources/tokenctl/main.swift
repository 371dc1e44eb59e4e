import CProcessStartup
import TokenctlEssentials

// tokenctl's front: a fully static executable (Swift stdlib and glibc only, no Foundation, no
// shared library, no D-Bus, no network) that serves `tokenctl token` from the kernel keyring
// hot cache and hands everything else to the engine, `tokenctl-engine`, installed beside it.
//
// A hit costs about as much as starting a process: the measured alternatives (one dynamic
// binary loading its libraries with dlopen, or linking them) pay the dynamic loader and the
// Swift runtime's start-up on every call (hyperfine on the development machine: a fully static
// binary starts in about 0.6 ms, one with --static-swift-stdlib and a dynamic glibc in 2.4 ms,
// a dynamic one in 5.4 ms; Scripts/bench measures the hit against the second on every run).
// The hit itself is `HotPath`: bytes, C strings and system calls only, so that it pages in as
// little of the Swift runtime as possible; any invocation it does not recognize as a plain hit
// goes to the engine.
#if canImport(Glibc)
import Glibc
#endif

/// `tokenctl-engine` in the directory of this executable (Scripts/install, the tarball), else
/// in `../libexec/tokenctl/` from it (the Debian package: /usr/bin/tokenctl runs
/// /usr/libexec/tokenctl/tokenctl-engine). The directory is found through /proc/self/exe, so a
/// symlink to tokenctl on PATH still finds the engine of the real file. Without /proc, an
/// absolute argv[0] locates it; never the current directory, where anyone could plant one.
func enginePath() -> String? {
    let executable = currentExecutable() ?? tokenctl_front_argv()[0].map { String(cString: $0) } ?? ""
    guard executable.hasPrefix("/") else { return nil }
    let directory = String(executable[...executable.lastIndex(of: "/")!])
    let beside = directory + "tokenctl-engine"
    let packaged = directory + "../libexec/tokenctl/tokenctl-engine"
    return access(beside, X_OK) != 0 && access(packaged, X_OK) == 0 ? packaged : beside
}

/// Replace this process with the engine, passing the original argv (argv[0] included) and
/// environment. Only returns on failure: then a clear error naming the engine, exit 69
/// (EX_UNAVAILABLE: "a support program does not exist").
func runEngine() -> Never {
    guard let path = enginePath() else {
        Descriptor.writeAll(
            2,
            "Error: cannot locate tokenctl's engine: /proc/self/exe cannot be read (is /proc mounted?) and tokenctl was not started by an absolute path.\nRun it by its absolute path, e.g. /usr/local/bin/tokenctl, or mount /proc.\n"
        )
        exit(ExitStatus.unavailable.rawValue)
    }
    // The argv captured at start-up (CProcessStartup), not CommandLine's lazy globals.
    execv(path, tokenctl_front_argv())
    let reason = Errno.current.description
    Descriptor.writeAll(
        2,
        "Error: cannot run tokenctl's engine '\(path)': \(reason).\ntokenctl-engine must be installed in the same directory as tokenctl (Scripts/install installs both), or in ../libexec/tokenctl/ from it (the Debian package).\n"
    )
    exit(ExitStatus.unavailable.rawValue)
}

/// The whole front, in a function: top-level variables of main.swift would be main-actor
/// globals, and their first use links the Swift concurrency runtime into the front (about
/// 680 KB, measured as 0.1 ms and 0.4 MB more on every hit).
func front() -> Never {
    // argv from CProcessStartup, not CommandLine: a hit then needs none of CommandLine's lazy globals.
    let environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>? = { UnsafePointer(getenv($0)) }
    // A forwarded session (TOKENCTL_FORWARD_SOCKET, or the well-known remote socket): hits come
    // from this machine's hot cache under the socket's identity, misses from the socket.
    let forwardSocket = HotPath.forwardSocket(environment: environment)
    if HotPath.serve(
        argc: tokenctl_front_argc(), argv: tokenctl_front_argv(), now: .now(), environment: environment,
        forwardSocket: forwardSocket)
    {
        exit(ExitStatus.success.rawValue)
    }
    // A forwarded miss: the front asks the socket itself (and keeps the answer in the hot cache);
    // starting the engine would cost more than the exchange. A container given only this static
    // binary and the socket works the same way.
    if let forwardSocket,
        let status = HotPath.serveForwarded(
            argc: tokenctl_front_argc(), argv: tokenctl_front_argv(), now: .now(), environment: environment,
            socket: forwardSocket, engineInstalled: enginePath().map { access($0, X_OK) == 0 } ?? false)
    {
        exit(status)
    }
    runEngine()
}

front()
