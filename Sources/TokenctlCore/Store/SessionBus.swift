import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Finding the D-Bus session bus where scripts run (cron, systemd timers, SSH).
public enum SessionBus {
    /// The session bus to use: `DBUS_SESSION_BUS_ADDRESS` when set, else `$XDG_RUNTIME_DIR/bus`,
    /// then `/run/user/$UID/bus`, if it is a socket owned by this user. Without this, GLib tries
    /// to autolaunch a bus through X11 and fails with "Cannot autolaunch D-Bus without X11 $DISPLAY".
    /// Changes nothing: the engine exports the address it returns (GLib reads the variable).
    ///
    /// - Returns: the address, where it came from (`DBUS_SESSION_BUS_ADDRESS`, `$XDG_RUNTIME_DIR`
    ///   or the user's runtime directory), and whether the variable was set already;
    ///   nil when there is no bus.
    public static func locate(environment: Environment = .process) -> (
        address: String, source: String, fromVariable: Bool
    )? {
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"] {
            return (address, "DBUS_SESSION_BUS_ADDRESS", true)
        }
        var candidates: [(String, String)] = []
        // The source says where the path came from, not the path again (it is in the address).
        if let runtime = environment["XDG_RUNTIME_DIR"] { candidates.append((runtime + "/bus", "$XDG_RUNTIME_DIR")) }
        candidates.append(("/run/user/\(system_getuid())/bus", "the user's runtime directory"))
        for (path, source) in candidates {
            var info = stat()
            guard system_stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK, info.st_uid == system_getuid()
            else { continue }
            return ("unix:path=" + path, source, false)
        }
        return nil
    }
}
