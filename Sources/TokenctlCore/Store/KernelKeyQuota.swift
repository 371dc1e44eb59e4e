import TokenctlEssentials

/// This user's kernel key quota (keyrings(7)): the bytes and keys its keys may take, shared by
/// every program of the uid. The rotation journal and the hot cache live in it; another program
/// that fills it leaves no room for a journal entry. 20,000 bytes and 200 keys by default for
/// users other than root (`/proc/sys/kernel/keys/maxbytes`, `maxkeys`); root's are far larger.
public struct KernelKeyQuota: Sendable, Equatable {
    public var usedBytes: Int
    public var maximumBytes: Int
    public var usedKeys: Int
    public var maximumKeys: Int

    public var bytesLeft: Int { max(0, maximumBytes - usedBytes) }
    public var keysLeft: Int { max(0, maximumKeys - usedKeys) }

    /// "U of M bytes and K of N keys used".
    public var summary: String {
        "\(usedBytes) of \(maximumBytes) bytes and \(usedKeys) of \(maximumKeys) keys used"
    }

    /// This uid's quota now, from `/proc/key-users`; when the uid has no line there yet (no
    /// key so far), nothing is used of the limits in `/proc/sys/kernel/keys`. Nil when neither
    /// can be read or understood.
    public static func current() -> KernelKeyQuota? {
        let uid = Int(system_getuid())
        let users = (try? FileIO.readFile("/proc/key-users", limit: 1 << 20)) ?? nil
        if let users, let quota = parse(keyUsers: users, uid: uid) { return quota }
        let prefix = uid == 0 ? "root_" : ""
        func limit(_ name: String) -> Int? {
            guard let text = (try? FileIO.readFile("/proc/sys/kernel/keys/" + prefix + name, limit: 64)) ?? nil else {
                return nil
            }
            let fields = text.split(whereSeparator: \.isWhitespace)
            guard fields.count == 1, let value = Int(fields[0]), value > 0 else { return nil }
            return value
        }
        guard users != nil, let bytes = limit("maxbytes"), let keys = limit("maxkeys") else { return nil }
        return KernelKeyQuota(usedBytes: 0, maximumBytes: bytes, usedKeys: 0, maximumKeys: keys)
    }

    /// The line of `uid` in `/proc/key-users` ("  UID:  USAGE NKEYS/NIKEYS QNKEYS/MAXKEYS
    /// QNBYTES/MAXBYTES"). Nil when there is no such line or it is not in that form: a line
    /// with other fields, or negative, overflowing or zero-limit numbers is not believed. Use
    /// may exceed a limit lowered after the keys were made.
    public static func parse(keyUsers text: String, uid: Int) -> KernelKeyQuota? {
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count == 5, fields[0].last == ":", Int(fields[0].dropLast()) == uid else { continue }
            func pair(_ field: Substring) -> (Int, Int)? {
                let parts = field.split(separator: "/", omittingEmptySubsequences: false)
                guard parts.count == 2, let used = Int(parts[0]), let maximum = Int(parts[1]),
                    used >= 0, maximum > 0
                else { return nil }
                return (used, maximum)
            }
            guard let (usedKeys, maximumKeys) = pair(fields[3]), let (usedBytes, maximumBytes) = pair(fields[4]) else {
                return nil
            }
            return KernelKeyQuota(
                usedBytes: usedBytes, maximumBytes: maximumBytes, usedKeys: usedKeys, maximumKeys: maximumKeys)
        }
        return nil
    }
}
