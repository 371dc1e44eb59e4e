import Foundation
import TokenctlTestSupport

/// Another process holding a profile's refresh lock (flock on
/// `$TOKENCTL_RUNTIME_DIR/tokenctl/<profile>.lock`) for `seconds`, as a stuck refresher would.
/// `marker` appears once the lock is held; the holder is killed when this value goes away.
final class ProfileLockHolder {
    let marker: String
    private let holder: RunningCommand

    init(_ sandbox: Sandbox, profile: String = "default", seconds: Int) throws {
        let lockPath = sandbox.variables["TOKENCTL_RUNTIME_DIR"]! + "/tokenctl/\(profile).lock"
        marker = sandbox.root + "/lock-held-\(profile)"
        holder = try RunningCommand(
            executable: sandbox.environment.python,
            arguments: [
                "-c",
                """
                import fcntl, os, sys, time
                fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX)
                open(sys.argv[2], "w").close()
                time.sleep(int(sys.argv[3]))
                """, lockPath, marker, String(seconds),
            ],
            environment: sandbox.variables, stdin: nil, directory: sandbox.root)
    }

    var isHolding: Bool { FileManager.default.fileExists(atPath: marker) }

    /// Wait (at most 10 s) until the lock is held.
    func waitUntilHolding() {
        for _ in 0..<400 where !isHolding { usleep(25_000) }
    }

    private var released = false

    /// Kill the holder (the lock goes with it); once.
    func release() {
        guard !released else { return }
        released = true
        holder.signal(SIGKILL)
        _ = holder.wait()
    }

    deinit { release() }
}
