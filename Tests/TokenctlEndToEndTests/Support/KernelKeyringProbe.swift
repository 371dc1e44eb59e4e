import Foundation
import TokenctlEssentials
import TokenctlTestSupport

/// Looks at the kernel user keyring from outside tokenctl, with keyutils' `keyctl`, as a user
/// or an attacker would.
struct KernelKeyringProbe {
    let keyctl = "/usr/bin/keyctl"

    static func description(profile: String = "default", issuer: String, clientID: String = "cli") -> String {
        HotCacheEntry.keyDescription(profile: ProfileName(rawValue: profile)!, issuer: issuer, clientID: clientID)
    }

    /// The id of the hot-cache key of this identity in @u, or nil.
    func key(profile: String = "default", issuer: String, clientID: String = "cli") throws -> String? {
        let result = try runProgram(
            keyctl, ["search", "@u", "user", Self.description(profile: profile, issuer: issuer, clientID: clientID)])
        return result.status == 0 ? result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) : nil
    }

    /// Every description directly in @u.
    func userKeyringDescriptions() throws -> [String] {
        let list = try runProgram(keyctl, ["rlist", "@u"])
        guard list.status == 0 else { throw HarnessError("keyctl rlist @u: \(list)") }
        return try list.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { id in
            let described = try runProgram(keyctl, ["rdescribe", String(id)])
            guard described.status == 0 else { return nil } // expired or invalidated meanwhile
            return described.stdout.split(separator: ";", maxSplits: 4).last.map {
                $0.trimmingCharacters(in: .whitespacesAndNewlines)
            }
        }
    }

    /// `keyctl rdescribe`: type;uid;gid;perm;description.
    func rawDescription(_ id: String) throws -> [String] {
        let result = try runProgram(keyctl, ["rdescribe", id])
        guard result.status == 0 else { throw HarnessError("keyctl rdescribe: \(result)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ";", maxSplits: 4).map(
            String.init)
    }

    func payload(_ id: String) throws -> String {
        let result = try runProgram(keyctl, ["pipe", id])
        guard result.status == 0 else { throw HarnessError("keyctl pipe: \(result)") }
        return result.stdout
    }

    /// The key's line in /proc/keys (its timeout column says "perm" when it never expires).
    func procKeysLine(_ id: String) throws -> String? {
        let hex = String(Int(id)!, radix: 16)
        let padded = String(repeating: "0", count: max(0, 8 - hex.count)) + hex
        // /proc/keys is read in pages by the kernel while other tests add and drop keys: a key
        // can be skipped by one read. Read a few times before concluding it is not there.
        for _ in 0..<5 {
            // Not String(contentsOfFile:): for a procfs file (size 0) it returns only the first
            // page (~4 KB), and with enough keys on the machine the line is beyond it.
            guard let handle = FileHandle(forReadingAtPath: "/proc/keys") else {
                throw HarnessError("cannot open /proc/keys")
            }
            let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
            try? handle.close()
            if let line = text.split(separator: "\n").first(where: {
                $0.split(separator: " ").first.map { String($0) == padded } ?? false
            }) {
                return String(line)
            }
            usleep(50_000)
        }
        return nil
    }

    /// Put a `user` key with this payload in @u under tokenctl's description, as any process of
    /// the user could.
    @discardableResult
    func plant(_ payload: String, profile: String = "default", issuer: String, clientID: String = "cli") throws
        -> String
    {
        let result = try runProgram(
            keyctl, ["padd", "user", Self.description(profile: profile, issuer: issuer, clientID: clientID), "@u"],
            stdin: payload)
        guard result.status == 0 else { throw HarnessError("keyctl padd: \(result)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
