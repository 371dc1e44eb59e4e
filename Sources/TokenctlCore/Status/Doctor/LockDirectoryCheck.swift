import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The profile locks' directory: private (0700) and writable.
struct LockDirectoryCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        let lockDirectory = context.service.profiles.paths.lockDirectory
        do {
            try FileIO.ensurePrivateDirectory(lockDirectory, createParents: false)
            var info = stat()
            system_stat(lockDirectory, &info)
            let writable = system_access(lockDirectory, W_OK) == 0
            return [
                DoctorFinding(
                    "lock directory", ok: writable && info.st_mode & 0o777 == 0o700,
                    "\(lockDirectory) (mode \(String(info.st_mode & 0o777, radix: 8)), \(writable ? "writable" : "not writable"))"
                )
            ]
        } catch {
            return [DoctorFinding("lock directory", ok: false, "\(error)")]
        }
    }
}
