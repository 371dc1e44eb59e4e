// swift-format-ignore-file: AlwaysUseLowerCamelCase

// Every libc function TokenctlCore calls, and only here (as swift-system keeps all of its libc
// calls in its Internals/Syscalls.swift): each as `system_<cname>` with the C signature, so the
// rest of Core reads as Swift and a call to the C library is easy to find. Types and constants (`stat`,
// `sockaddr_in`, `O_RDONLY`, `EINTR`) come from Glibc where they are used. libsecret, libcurl,
// libcrypto, libgcrypt and libqrencode have their own files (Core's README), the kernel keyring
// and the monotonic clock theirs in TokenctlEssentials. `Tests/TokenctlCoreTests/SyscallConfinementTests.swift`
// keeps it so.
import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

// MARK: Errors

/// The calling thread's `errno`.
var system_errno: Int32 { errno }

/// strerror(3), as a String.
func system_strerror(_ code: Int32) -> String { Errno(code).description }

// MARK: Files

@inline(__always) func system_open(_ path: UnsafePointer<CChar>, _ flags: Int32, _ mode: mode_t) -> Int32 {
    open(path, flags, mode)
}
@inline(__always) func system_open(_ path: UnsafePointer<CChar>, _ flags: Int32) -> Int32 { open(path, flags) }
@discardableResult @inline(__always) func system_close(_ descriptor: Int32) -> Int32 { close(descriptor) }
@discardableResult @inline(__always) func system_flock(_ descriptor: Int32, _ operation: Int32) -> Int32 {
    flock(descriptor, operation)
}
@inline(__always) func system_fstat(_ descriptor: Int32, _ info: UnsafeMutablePointer<stat>) -> Int32 {
    fstat(descriptor, info)
}
@discardableResult @inline(__always) func system_stat(_ path: UnsafePointer<CChar>, _ info: UnsafeMutablePointer<stat>)
    -> Int32
{ stat(path, info) }
@discardableResult @inline(__always) func system_rename(_ from: UnsafePointer<CChar>, _ to: UnsafePointer<CChar>)
    -> Int32
{ rename(from, to) }
@inline(__always) func system_read(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}
@inline(__always) func system_write(_ descriptor: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    write(descriptor, buffer, count)
}
@inline(__always) func system_access(_ path: UnsafePointer<CChar>, _ mode: Int32) -> Int32 { access(path, mode) }
@inline(__always) func system_readlink(_ path: UnsafePointer<CChar>, _ buffer: UnsafeMutablePointer<CChar>, _ size: Int)
    -> Int
{ readlink(path, buffer, size) }
@inline(__always) func system_pipe(_ descriptors: UnsafeMutablePointer<Int32>) -> Int32 { pipe(descriptors) }
@inline(__always) func system_getcwd(_ buffer: UnsafeMutablePointer<CChar>, _ size: Int) -> UnsafeMutablePointer<CChar>?
{ getcwd(buffer, size) }
@inline(__always) func system_fcntl(_ descriptor: Int32, _ command: Int32, _ value: Int32) -> Int32 {
    fcntl(descriptor, command, value)
}

// MARK: Terminals

@inline(__always) func system_isatty(_ descriptor: Int32) -> Int32 { isatty(descriptor) }
@discardableResult @inline(__always) func system_tcgetattr(
    _ descriptor: Int32, _ attributes: UnsafeMutablePointer<termios>
) -> Int32 { tcgetattr(descriptor, attributes) }
@discardableResult @inline(__always) func system_tcsetattr(
    _ descriptor: Int32, _ action: Int32, _ attributes: UnsafePointer<termios>
) -> Int32 { tcsetattr(descriptor, action, attributes) }

// MARK: Sockets and polling (the login's loopback listener)

@inline(__always) func system_socket(_ domain: Int32, _ type: Int32, _ proto: Int32) -> Int32 {
    socket(domain, type, proto)
}
@inline(__always) func system_bind(_ descriptor: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t)
    -> Int32
{ bind(descriptor, address, length) }
@inline(__always) func system_listen(_ descriptor: Int32, _ backlog: Int32) -> Int32 { listen(descriptor, backlog) }
@inline(__always) func system_accept(
    _ descriptor: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: UnsafeMutablePointer<socklen_t>?
) -> Int32 { accept(descriptor, address, length) }
@inline(__always) func system_getsockname(
    _ descriptor: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: UnsafeMutablePointer<socklen_t>
) -> Int32 { getsockname(descriptor, address, length) }
@inline(__always) func system_poll(_ descriptors: UnsafeMutablePointer<pollfd>, _ count: nfds_t, _ timeout: Int32)
    -> Int32
{ poll(descriptors, count, timeout) }
/// socketpair(2); with `SOCK_CLOEXEC` in `type`, both ends are close-on-exec from the start
/// (pipe2(2) is a GNU extension Swift's Glibc module does not import).
@inline(__always) func system_socketpair(
    _ domain: Int32, _ type: Int32, _ proto: Int32, _ descriptors: UnsafeMutablePointer<Int32>
) -> Int32 { socketpair(domain, type, proto, descriptors) }
@discardableResult @inline(__always) func system_shutdown(_ descriptor: Int32, _ how: Int32) -> Int32 {
    shutdown(descriptor, how)
}
@inline(__always) func system_recv(
    _ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int, _ flags: Int32
) -> Int { recv(descriptor, buffer, count, flags) }
@inline(__always) func system_send(_ descriptor: Int32, _ buffer: UnsafeRawPointer?, _ count: Int, _ flags: Int32)
    -> Int
{ send(descriptor, buffer, count, flags) }

// MARK: Processes and signals

@inline(__always) func system_getuid() -> uid_t { getuid() }
@inline(__always) func system_getpid() -> pid_t { getpid() }
@discardableResult @inline(__always) func system_kill(_ pid: pid_t, _ signal: Int32) -> Int32 { kill(pid, signal) }
@discardableResult @inline(__always) func system_usleep(_ microseconds: useconds_t) -> Int32 { usleep(microseconds) }
@discardableResult @inline(__always) func system_sigaction(
    _ signal: Int32, _ action: UnsafePointer<sigaction>?, _ old: UnsafeMutablePointer<sigaction>?
) -> Int32 { sigaction(signal, action, old) }
@discardableResult @inline(__always) func system_signal(_ signal: Int32, _ handler: sighandler_t?) -> sighandler_t? {
    Glibc.signal(signal, handler)
}
@discardableResult @inline(__always) func system_sigemptyset(_ set: UnsafeMutablePointer<sigset_t>) -> Int32 {
    sigemptyset(set)
}
@inline(__always) func system_getenv(_ name: UnsafePointer<CChar>) -> UnsafeMutablePointer<CChar>? { getenv(name) }
@inline(__always) func system_waitpid(_ pid: pid_t, _ status: UnsafeMutablePointer<Int32>?, _ options: Int32) -> pid_t {
    waitpid(pid, status, options)
}
/// The process's environment, for posix_spawn.
var system_environ: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>! { environ }
/// posix_spawnp(3) when `searchingPath` (`program` is looked up in PATH), else posix_spawn(3)
/// (`program` is a path).
@inline(__always) func system_posix_spawn(
    _ pid: UnsafeMutablePointer<pid_t>, _ program: UnsafePointer<CChar>, searchingPath: Bool,
    _ actions: UnsafePointer<posix_spawn_file_actions_t>?,
    _ attributes: UnsafePointer<posix_spawnattr_t>?, _ argv: UnsafePointer<UnsafeMutablePointer<CChar>?>,
    _ environment: UnsafePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    searchingPath
        ? posix_spawnp(pid, program, actions, attributes, argv, environment)
        : posix_spawn(pid, program, actions, attributes, argv, environment)
}
@discardableResult @inline(__always) func system_execvp(
    _ file: UnsafePointer<CChar>, _ argv: UnsafePointer<UnsafeMutablePointer<CChar>?>
) -> Int32 { execvp(file, argv) }
/// `body` with file actions that posix_spawn_file_actions_init(3) set up, destroyed after.
@inline(__always) func system_with_posix_spawn_file_actions<Result>(
    _ body: (UnsafeMutablePointer<posix_spawn_file_actions_t>) -> Result
) -> Result {
    system_with_spawn_object(
        posix_spawn_file_actions_t(), posix_spawn_file_actions_init, posix_spawn_file_actions_destroy, body)
}
@discardableResult @inline(__always) func system_posix_spawn_file_actions_addclose(
    _ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ descriptor: Int32
) -> Int32 { posix_spawn_file_actions_addclose(actions, descriptor) }
@discardableResult @inline(__always) func system_posix_spawn_file_actions_addopen(
    _ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ descriptor: Int32, _ path: UnsafePointer<CChar>,
    _ flags: Int32, _ mode: mode_t
) -> Int32 { posix_spawn_file_actions_addopen(actions, descriptor, path, flags, mode) }
@discardableResult @inline(__always) func system_posix_spawn_file_actions_adddup2(
    _ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ descriptor: Int32, _ target: Int32
) -> Int32 { posix_spawn_file_actions_adddup2(actions, descriptor, target) }

/// `body` with spawn attributes that posix_spawnattr_init(3) set up, destroyed after.
@inline(__always) func system_with_posix_spawnattr<Result>(
    _ body: (UnsafeMutablePointer<posix_spawnattr_t>) -> Result
) -> Result {
    system_with_spawn_object(posix_spawnattr_t(), posix_spawnattr_init, posix_spawnattr_destroy, body)
}
/// `body` with `object` set up by `initialize` and freed by `destroy` after: posix_spawn's
/// attributes and file actions, whose init and destroy functions have the one shape.
@inline(__always) private func system_with_spawn_object<Object, Result>(
    _ object: Object, _ initialize: (UnsafeMutablePointer<Object>) -> Int32,
    _ destroy: (UnsafeMutablePointer<Object>) -> Int32, _ body: (UnsafeMutablePointer<Object>) -> Result
) -> Result {
    var object = object
    _ = initialize(&object)
    defer { _ = destroy(&object) }
    return body(&object)
}
@discardableResult @inline(__always) func system_posix_spawnattr_setflags(
    _ attributes: UnsafeMutablePointer<posix_spawnattr_t>, _ flags: Int16
) -> Int32 { posix_spawnattr_setflags(attributes, flags) }
@discardableResult @inline(__always) func system_posix_spawnattr_setsigmask(
    _ attributes: UnsafeMutablePointer<posix_spawnattr_t>, _ mask: UnsafePointer<sigset_t>
) -> Int32 { posix_spawnattr_setsigmask(attributes, mask) }
/// glibc's POSIX_SPAWN_SETSID (spawn.h, a GNU extension Swift does not import): the child
/// calls setsid(2) before exec.
let system_POSIX_SPAWN_SETSID: Int32 = 0x80

// MARK: Time

@discardableResult @inline(__always) func system_clock_gettime(
    _ clock: clockid_t, _ time: UnsafeMutablePointer<timespec>
) -> Int32 { clock_gettime(clock, time) }
@inline(__always) func system_timegm(_ parts: UnsafeMutablePointer<tm>) -> time_t { timegm(parts) }
@discardableResult @inline(__always) func system_gmtime_r(
    _ time: UnsafePointer<time_t>, _ parts: UnsafeMutablePointer<tm>
) -> UnsafeMutablePointer<tm>? { gmtime_r(time, parts) }

// MARK: Memory (C strings handed to C)

@inline(__always) func system_strdup(_ text: UnsafePointer<CChar>) -> UnsafeMutablePointer<CChar>? { strdup(text) }
@inline(__always) func system_free(_ pointer: UnsafeMutableRawPointer?) { free(pointer) }
