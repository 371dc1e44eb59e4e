import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// A held cross-process lock; released when dropped (and by the kernel if the process dies).
public protocol HeldLock: AnyObject, Sendable {}

/// Hands out per-profile refresh locks.
public protocol ProfileLocking: Sendable {
    /// Take the profile's lock, waiting at most until `deadline` (on `Clock.system`: other
    /// processes hold the lock in real time).
    /// - Throws: a transient `TokenctlError` when the wait runs out.
    func acquire(_ profile: ProfileName, until deadline: Deadline) async throws(TokenctlError) -> any HeldLock

    /// Wait, without taking the lock, while another process holds it (a refresh in flight),
    /// at most until `deadline`.
    /// - Returns: whether it had to wait.
    /// - Throws: the transient lock-timeout error of `acquire` when the wait runs out.
    func waitWhileHeld(_ profile: ProfileName, until deadline: Deadline) async throws(TokenctlError) -> Bool
}

extension ProfileLocking {
    /// Providers without cross-process locks never wait.
    public func waitWhileHeld(_ profile: ProfileName, until deadline: Deadline) async throws(TokenctlError) -> Bool {
        false
    }
}

/// flock(2) on `<runtime>/tokenctl/<profile>.lock` (`Paths.runtimeLockDirectory`: derived from
/// the uid, the same for every process of the user): dies with its process, so a killed
/// refresher never leaves a stale lock.
public struct FileProfileLocks: ProfileLocking {
    public let directory: String
    public let clock: Clock

    public init(directory: String, clock: Clock = .system) {
        self.directory = directory
        self.clock = clock
    }

    public func acquire(_ profile: ProfileName, until deadline: Deadline) async throws(TokenctlError) -> any HeldLock {
        let timeout = waitAllowed(until: deadline)
        do { try FileIO.ensurePrivateDirectory(directory, createParents: false) } catch {
            throw Self.unusable("cannot use the lock directory: \(error)")
        }
        let path = lockPath(profile)
        let descriptor = system_open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600)
        guard descriptor >= 0 else {
            throw Self.unusable("cannot open the lock \(path): \(system_strerror(system_errno))")
        }
        let lock = FileLock(descriptor: descriptor)
        var wait = 0.002
        while system_flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard system_errno == EWOULDBLOCK || system_errno == EINTR else {
                throw TokenctlError(.unexpected, "cannot lock \(path): \(system_strerror(system_errno))")
            }
            guard clock.now() < deadline.time else { throw Self.timedOut(waiting: timeout, for: path) }
            try await pause(&wait)
        }
        return lock
    }

    /// Polls with a shared lock, so any number of waiters can watch one refresher at once; the
    /// shared lock is dropped at once (closing the descriptor). No lock file: nobody refreshes.
    public func waitWhileHeld(_ profile: ProfileName, until deadline: Deadline) async throws(TokenctlError) -> Bool {
        let timeout = waitAllowed(until: deadline)
        let path = lockPath(profile)
        let descriptor = system_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else { return false }
        defer { system_close(descriptor) }
        var wait = 0.002
        var waited = false
        while system_flock(descriptor, LOCK_SH | LOCK_NB) != 0 {
            // Anything but "held" (an odd file system, say) is left to acquire() to report.
            guard system_errno == EWOULDBLOCK || system_errno == EINTR else { return waited }
            guard clock.now() < deadline.time else { throw Self.timedOut(waiting: timeout, for: path) }
            waited = true
            try await pause(&wait)
        }
        return waited
    }

    /// The seconds a wait that starts now may take, as the caller set them (to the millisecond:
    /// the caller's deadline was made a moment ago), for the message when it runs out.
    private func waitAllowed(until deadline: Deadline) -> Double {
        max(0, (deadline.remaining(clock: clock) * 1000).rounded() / 1000)
    }

    /// A lock directory or file tokenctl must not use (another user's, a symlink, not a directory).
    private static func unusable(_ message: String) -> TokenctlError {
        TokenctlError(
            .configuration, message,
            hint:
                "tokenctl keeps its refresh locks in /run/user/$(id -u)/tokenctl, or /tmp/tokenctl-$(id -u) without one; it must be a directory of yours with mode 0700."
        )
    }

    /// The profile's lock file (as `Paths.lockFile` names it).
    private func lockPath(_ profile: ProfileName) -> String { directory + "/" + profile.rawValue + ".lock" }

    private static func timedOut(waiting timeout: Double, for path: String) -> TokenctlError {
        TokenctlError(
            .transient, TransientReason.lockHeldTooLong.description + " (waited \(Int(timeout)) s for \(path))",
            hint: "Try again later; if it persists, check for a hung tokenctl process.")
    }

    /// Jittered polling keeps 256 waiters from waking in lockstep.
    private func pause(_ wait: inout Double) async throws(TokenctlError) {
        do { try await clock.sleep(wait * (0.5 + Double.random(in: 0..<1))) } catch {
            throw TokenctlError(.transient, "cancelled while waiting for the refresh lock")
        }
        wait = min(wait * 2, 0.05)
    }
}

final class FileLock: HeldLock {
    let descriptor: Int32
    init(descriptor: Int32) { self.descriptor = descriptor }
    deinit { system_close(descriptor) }
}
