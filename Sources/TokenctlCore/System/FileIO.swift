import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Small POSIX file helpers without Foundation: read a file, write one atomically and privately.
public enum FileIO {
    /// Read a whole file as UTF-8.
    ///
    /// - Returns: `nil` when the file does not exist.
    /// - Throws: `SystemError` for any other failure.
    /// - Throws: `SystemError` for any other failure, also when `path` is not a regular file:
    ///   opened without blocking, so a FIFO or a device in its place never hangs a command.
    public static func readFile(_ path: String, limit: Int = 1 << 20) throws(SystemError) -> String? {
        try readBytes(path, limit: limit).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Read a whole file as bytes (a PKCS#12 bundle, a DER certificate), as `readFile` does.
    public static func readBytes(_ path: String, limit: Int = 1 << 20) throws(SystemError) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        if descriptor < 0 {
            if errno == ENOENT { return nil }
            throw SystemError(errno: errno, operation: "open", path: path)
        }
        defer { close(descriptor) }
        try requireRegularFile(descriptor, path: path)
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = Descriptor.retryingInterrupted {
                buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            }
            if count < 0 { throw SystemError(errno: errno, operation: "read", path: path) }
            if count == 0 { break }
            bytes.append(contentsOf: buffer[0..<count])
            if bytes.count > limit { throw SystemError(errno: EFBIG, operation: "read", path: path) }
        }
        return bytes
    }

    /// Throws unless `descriptor` is a regular file (a FIFO, device, socket or directory in place
    /// of one of tokenctl's files is refused, never read or written).
    public static func requireRegularFile(_ descriptor: Int32, path: String) throws(SystemError) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw SystemError(errno: errno, operation: "stat", path: path) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw SystemError(errno: EINVAL, operation: "open (not a regular file)", path: path)
        }
    }

    /// Create `path` and its missing parents with `mode` (0700 by default).
    ///
    /// An existing final directory is left as it is; callers that need a private directory
    /// check its mode with `ensurePrivateDirectory`.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o700) throws(SystemError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, mode) != 0 && errno != EEXIST {
                throw SystemError(errno: errno, operation: "mkdir", path: prefix)
            }
        }
    }

    /// Create `path` (and parents) and make sure it is a directory owned by us with mode 0700.
    ///
    /// - Parameter createParents: `false` creates only the last component: for directories
    ///   under a place tokenctl does not own (`/run/user/<uid>`, `/tmp`), whose parents must exist.
    public static func ensurePrivateDirectory(_ path: String, createParents: Bool = true) throws(SystemError) {
        if createParents {
            try makeDirectories(path)
        } else if mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw SystemError(errno: errno, operation: "mkdir", path: path)
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { throw SystemError(errno: errno, operation: "stat", path: path) }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw SystemError(errno: ENOTDIR, operation: "mkdir", path: path)
        }
        guard info.st_uid == userID else { throw SystemError(errno: EPERM, operation: "owner check", path: path) }
        if info.st_mode & 0o077 != 0, chmod(path, 0o700) != 0 {
            throw SystemError(errno: errno, operation: "chmod", path: path)
        }
    }

    /// Replace `path` with `contents` atomically: a private temporary file in the same
    /// directory, fsync, rename. Readers see the old file or the new one, never a mix.
    public static func writeAtomically(_ contents: String, to path: String, mode: mode_t = 0o600) throws(SystemError) {
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        try makeDirectories(directory)
        var template = Array((path + ".tmp.XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw SystemError(errno: errno, operation: "create", path: path) }
        let temporary = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var committed = false
        defer {
            if !committed { unlink(temporary) }
        }
        do {
            defer { close(descriptor) }
            guard fchmod(descriptor, mode) == 0 else {
                throw SystemError(errno: errno, operation: "chmod", path: temporary)
            }
            let failed = Descriptor.writeAll(descriptor, contents)
            guard failed == 0 else { throw SystemError(errno: failed, operation: "write", path: temporary) }
            guard fsync(descriptor) == 0 else { throw SystemError(errno: errno, operation: "fsync", path: temporary) }
        }
        guard rename(temporary, path) == 0 else { throw SystemError(errno: errno, operation: "rename", path: path) }
        committed = true
    }

    /// Throws unless a private file can be created in `directory` now: a probe file (mode 0600,
    /// a few bytes and no secret) is written, synced and removed, as `writeAtomically` would
    /// create its temporary file there.
    public static func probeWritable(directory: String) throws(SystemError) {
        var template = Array((directory + "/.tokenctl-probe.XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            throw SystemError(errno: errno, operation: "create", path: directory + "/.tokenctl-probe.*")
        }
        let probe = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { unlink(probe) }
        defer { close(descriptor) }
        guard fchmod(descriptor, 0o600) == 0 else { throw SystemError(errno: errno, operation: "chmod", path: probe) }
        let bytes = Array("tokenctl write probe\n".utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count else {
            throw SystemError(errno: written < 0 ? errno : ENOSPC, operation: "write", path: probe)
        }
        guard fsync(descriptor) == 0 else { throw SystemError(errno: errno, operation: "fsync", path: probe) }
    }

    /// Throws when a directory is at `path`: `writeAtomically` cannot rename over it (anything
    /// else in its place is replaced, as a symbolic link is).
    public static func requireReplaceable(_ path: String) throws(SystemError) {
        var info = stat()
        if lstat(path, &info) != 0 {
            if errno == ENOENT { return }
            throw SystemError(errno: errno, operation: "stat", path: path)
        }
        guard (info.st_mode & S_IFMT) != S_IFDIR else {
            throw SystemError(errno: EISDIR, operation: "replace", path: path)
        }
    }

    /// Whether `path` is a directory (through symbolic links) owned by `owner` with mode 0700.
    public static func isPrivateDirectory(_ path: String, ownedBy owner: uid_t) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR && info.st_uid == owner
            && info.st_mode & 0o777 == 0o700
    }

    /// Whether this process may open `path` for reading and writing (access(2) with R_OK|W_OK): a
    /// device node such as the TPM's.
    public static func isReadableAndWritable(_ path: String) -> Bool { access(path, R_OK | W_OK) == 0 }

    /// Whether something is at `path` (access(2) with F_OK, through symbolic links).
    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// `body` with the file mode creation mask at 077 (umask(2)), then the mask as it was: files
    /// another program creates meanwhile (systemd-creds honours the mask) are private.
    public static func withPrivateUmask<Result>(_ body: () -> Result) -> Result {
        let previous = umask(0o077)
        defer { umask(previous) }
        return body()
    }

    /// Whether this process may read `path` (access(2) with R_OK).
    public static func isReadable(_ path: String) -> Bool { access(path, R_OK) == 0 }

    /// This process's user: who tokenctl's files and directories must belong to.
    public static var userID: uid_t { getuid() }

    /// Remove a file; a missing file is not an error.
    public static func removeFile(_ path: String) throws(SystemError) {
        if unlink(path) != 0 && errno != ENOENT {
            throw SystemError(errno: errno, operation: "unlink", path: path)
        }
    }

    /// Set a file's mode (chmod(2)): for files another program created with a mode of its own.
    public static func setMode(_ path: String, _ mode: mode_t) throws(SystemError) {
        guard chmod(path, mode) == 0 else { throw SystemError(errno: errno, operation: "chmod", path: path) }
    }

    /// Remove an empty directory (rmdir(2)); a missing one is not an error.
    public static func removeEmptyDirectory(_ path: String) throws(SystemError) {
        if rmdir(path) != 0 && errno != ENOENT {
            throw SystemError(errno: errno, operation: "rmdir", path: path)
        }
    }

    /// Remove a file if there is one. Returns whether there was.
    @discardableResult
    public static func removeFileIfPresent(_ path: String) throws(SystemError) -> Bool {
        if unlink(path) == 0 { return true }
        if errno == ENOENT { return false }
        throw SystemError(errno: errno, operation: "unlink", path: path)
    }

    /// The names in a directory (no `.`/`..`); an absent directory has none.
    public static func listDirectory(_ path: String) throws(SystemError) -> [String] {
        guard let directory = opendir(path) else {
            if errno == ENOENT { return [] }
            throw SystemError(errno: errno, operation: "opendir", path: path)
        }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }
}

/// A failed system call, with the operation and path for the message.
public struct SystemError: Error, Equatable, CustomStringConvertible {
    public let errno: Int32
    public let operation: String
    public let path: String

    public var description: String {
        "\(operation) \(path): \(Errno.current.description)"
    }
}
