import CKernelKeyring

#if canImport(Glibc)
import Glibc
#endif

/// The kernel key-management calls of the hot cache and the rotation journal (the engine) and of
/// the front's forwarded miss, and nothing else (swift-system's one-file syscall layer); only the
/// front's hit makes its two reads (search, read) itself, in `HotPath`, to stay minimal. Raw
/// `add_key(2)`/`keyctl(2)`, so the static front needs no libkeyutils.
public enum KernelKeyring {
    /// A key's serial number.
    public typealias KeyID = Int32

    /// The user keyring (`@u`): shared by every process of this uid, kept while the user has one.
    public static var userKeyring: KeyID { tokenctl_key_spec_user_keyring() }
    /// The process keyring (`@p`): a private staging place, created on demand, gone with the process.
    public static let processKeyring: KeyID = -2

    /// Possessor and user: view, read, write, search, link, setattr. Group and others: nothing.
    public static let userOnlyPermissions: UInt32 = TOKENCTL_KEY_POS_ALL | TOKENCTL_KEY_USR_ALL

    /// Whether this process can use the user keyring at all (not blocked by seccomp, not
    /// missing from the kernel).
    public static func isAvailable() -> Bool {
        tokenctl_keyctl_get_keyring_id(userKeyring) >= 0
    }

    /// The `user` key with this description reachable from `keyring`, or `nil` when there is none
    /// (or it expired, was revoked, or is not searchable by us).
    public static func search(_ description: String, in keyring: KeyID = userKeyring) -> Result<KeyID?, KeyringError> {
        let id = tokenctl_keyctl_search(keyring, "user", description)
        if id >= 0 { return .success(id) }
        switch errno {
        case ENOKEY, EKEYEXPIRED, EKEYREVOKED, EACCES: return .success(nil)
        case let code: return .failure(KeyringError(errno: code, operation: "search"))
        }
    }

    /// The payload of a key, at most `limit` bytes (a larger payload is an error, never truncated).
    /// The caller should `scrub` the bytes once done.
    public static func read(_ key: KeyID, limit: Int) -> Result<[UInt8], KeyringError> {
        // One call for any ordinary token; KEYCTL_READ reports the real size when it is larger.
        var capacity = min(limit, 4096)
        while true {
            var buffer = [UInt8](repeating: 0, count: capacity)
            let size = buffer.withUnsafeMutableBytes { tokenctl_keyctl_read(key, $0.baseAddress, $0.count) }
            if size < 0 {
                scrub(&buffer)
                return .failure(KeyringError(errno: errno, operation: "read"))
            }
            if size <= capacity {
                buffer.removeLast(capacity - size)
                return .success(buffer)
            }
            scrub(&buffer)
            guard size <= limit else { return .failure(KeyringError(errno: EMSGSIZE, operation: "read")) }
            capacity = size
        }
    }

    /// The `user` keys linked in `keyring` whose description starts with `prefix` (for removing
    /// every key of a profile). Keys that cannot be described are skipped.
    public static func keys(withPrefix prefix: String, in keyring: KeyID = userKeyring) -> [KeyID] {
        guard case .success(let bytes) = read(keyring, limit: 64 * 1024) else { return [] }
        var result: [KeyID] = []
        for start in stride(from: 0, to: bytes.count - bytes.count % 4, by: 4) {
            let key = KeyID(
                bitPattern: UInt32(bytes[start]) | UInt32(bytes[start + 1]) << 8 | UInt32(bytes[start + 2]) << 16
                    | UInt32(bytes[start + 3]) << 24)
            var buffer = [CChar](repeating: 0, count: 512)
            let size = buffer.withUnsafeMutableBufferPointer { tokenctl_keyctl_describe(key, $0.baseAddress, $0.count) }
            guard size > 0, size <= buffer.count else { continue }
            let text = String(decoding: buffer.prefix(Int(size) - 1).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            // type;uid;gid;perm;description (the description may itself hold ';').
            let fields = text.split(separator: ";", maxSplits: 4, omittingEmptySubsequences: false)
            if fields.count == 5, fields[0] == "user", fields[4].hasPrefix(prefix) { result.append(key) }
        }
        return result
    }

    /// Create a `user` key with `payload`, permissions and timeout already set, then link it into
    /// `keyring`, displacing a key of the same description there in one step. It is staged in the
    /// process keyring, which this process always possesses: setting permissions on a key created
    /// straight in `@u` fails where the session keyring does not link `@u`, and readers never see
    /// a key without its permissions or its timeout.
    public static func replace(
        _ description: String, payload: [UInt8], permissions: UInt32, timeout: UInt32, in keyring: KeyID = userKeyring
    ) -> Result<KeyID, KeyringError> {
        let key = payload.withUnsafeBytes {
            tokenctl_add_key("user", description, $0.baseAddress, $0.count, processKeyring)
        }
        guard key >= 0 else { return .failure(KeyringError(errno: errno, operation: "add_key")) }
        defer { _ = tokenctl_keyctl_unlink(key, processKeyring) }
        guard tokenctl_keyctl_setperm(key, permissions) == 0 else { return failed(key, "setperm") }
        guard tokenctl_keyctl_set_timeout(key, timeout) == 0 else { return failed(key, "set_timeout") }
        guard tokenctl_keyctl_link(key, keyring) == 0 else { return failed(key, "link") }
        return .success(key)
    }

    /// Invalidate a key: the kernel removes it from every keyring at once. Falls back to unlinking
    /// it from `keyring` on kernels without KEYCTL_INVALIDATE.
    public static func invalidate(_ key: KeyID, from keyring: KeyID = userKeyring) -> Result<Void, KeyringError> {
        if tokenctl_keyctl_invalidate(key) == 0 { return .success(()) }
        let invalidateErrno = errno
        if tokenctl_keyctl_unlink(key, keyring) == 0 { return .success(()) }
        return .failure(KeyringError(errno: invalidateErrno, operation: "invalidate"))
    }

    /// Zero bytes that held a token.
    public static func scrub(_ bytes: inout [UInt8]) {
        for index in bytes.indices { bytes[index] = 0 }
    }

    private static func failed(_ key: KeyID, _ operation: String) -> Result<KeyID, KeyringError> {
        let code = errno
        _ = tokenctl_keyctl_invalidate(key)
        return .failure(KeyringError(errno: code, operation: operation))
    }
}

/// A failed key-management call. EPERM/ENOSYS (seccomp, no keyring support) and EDQUOT (quota)
/// are the expected ones; callers fall back to the Secret Service on any.
public struct KeyringError: Error, Equatable, CustomStringConvertible {
    public let errno: Int32
    public let operation: String

    public init(errno: Int32, operation: String) {
        self.errno = errno
        self.operation = operation
    }

    public var description: String { "keyctl \(operation): \(Errno(errno))" }

    /// EDQUOT: the user's kernel key quota (bytes or keys) has no room for it.
    public var isQuotaExceeded: Bool { errno == EDQUOT }
}
