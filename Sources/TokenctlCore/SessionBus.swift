#if canImport(Glibc)
import Glibc
#endif
import TokenctlEssentials

/// Finding the D-Bus session bus where scripts run (cron, systemd timers, SSH).
public enum SessionBus {
    /// When `DBUS_SESSION_BUS_ADDRESS` is unset, use `$XDG_RUNTIME_DIR/bus`, then
    /// `/run/user/$UID/bus`, if it is a socket owned by this user. Without this, GLib tries
    /// to autolaunch a bus through X11 and fails with "Cannot autolaunch D-Bus without X11 $DISPLAY".
    ///
    /// - Returns: the address now in use, and where it came from.
    @discardableResult
    public static func locateForUnattendedUse(verbose: Bool, environment: Environment = .process) -> (address: String, source: String)? {
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"] {
            return (address, "DBUS_SESSION_BUS_ADDRESS")
        }
        var candidates: [(String, String)] = []
        if let runtime = environment["XDG_RUNTIME_DIR"] { candidates.append((runtime + "/bus", "$XDG_RUNTIME_DIR/bus")) }
        candidates.append(("/run/user/\(getuid())/bus", "/run/user/\(getuid())/bus"))
        for (path, source) in candidates {
            var info = stat()
            guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK, info.st_uid == getuid() else { continue }
            let address = "unix:path=" + path
            setenv("DBUS_SESSION_BUS_ADDRESS", address, 1)
            if verbose { writeStandardError("tokenctl: DBUS_SESSION_BUS_ADDRESS was unset; using the session bus at \(path) (\(source))\n") }
            return (address, source)
        }
        if verbose { writeStandardError("tokenctl: no D-Bus session bus found (DBUS_SESSION_BUS_ADDRESS unset, no bus socket in the runtime directory)\n") }
        return nil
    }

    private static func writeStandardError(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }
}
