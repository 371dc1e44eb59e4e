import Testing
import TokenctlEssentials

@testable import TokenctlCore

#if canImport(Glibc)
import Glibc
#endif

@Suite("Paths")
struct PathsTests {
    @Test("HOME alone: XDG defaults, locks in the uid's runtime directory")
    func homeDefaults() throws {
        let paths = try Paths.resolve(.fixed(["HOME": "/home/u"]))
        #expect(
            paths
                == Paths(
                    configDirectory: "/home/u/.config/tokenctl",
                    lockDirectory: Paths.runtimeLockDirectory(.fixed([:])),
                    stateDirectory: "/home/u/.local/state/tokenctl",
                    cacheDirectory: "/home/u/.cache/tokenctl"))
    }

    @Test("absolute XDG variables win over HOME")
    func xdgVariables() throws {
        let paths = try Paths.resolve(
            .fixed([
                "HOME": "/home/u", "XDG_CONFIG_HOME": "/cfg", "XDG_STATE_HOME": "/state",
                "XDG_RUNTIME_DIR": "/run/user/1000",
            ]))
        #expect(paths.configDirectory == "/cfg/tokenctl")
        #expect(paths.stateDirectory == "/state/tokenctl")
        #expect(
            paths.lockDirectory == Paths.runtimeLockDirectory(.fixed([:])), "XDG_RUNTIME_DIR does not move the lock")
    }

    @Test("relative XDG paths are ignored, as the specification requires")
    func relativeXDGIgnored() throws {
        let paths = try Paths.resolve(
            .fixed([
                "HOME": "/home/u", "XDG_CONFIG_HOME": "cfg", "XDG_STATE_HOME": "./state", "XDG_RUNTIME_DIR": "run",
            ]))
        #expect(paths.configDirectory == "/home/u/.config/tokenctl")
        #expect(paths.stateDirectory == "/home/u/.local/state/tokenctl")
        #expect(paths.lockDirectory == Paths.runtimeLockDirectory(.fixed([:])))
    }

    @Test("empty variables count as unset")
    func emptyVariables() throws {
        let paths = try Paths.resolve(.fixed(["HOME": "/h", "XDG_CONFIG_HOME": "", "XDG_RUNTIME_DIR": ""]))
        #expect(paths.configDirectory == "/h/.config/tokenctl")
        #expect(paths.lockDirectory == Paths.runtimeLockDirectory(.fixed([:])))
    }

    @Test(
        "one lock directory for every environment of one user: XDG_RUNTIME_DIR set, unset, another user's, bogus",
        arguments: [
            [:], ["XDG_RUNTIME_DIR": "/run/user/\(getuid())"], ["XDG_RUNTIME_DIR": "/run/user/4242"],
            ["XDG_RUNTIME_DIR": "/nonexistent/q"], ["XDG_RUNTIME_DIR": "/dev/null"], ["XDG_RUNTIME_DIR": "relative"],
        ] as [[String: String]])
    func oneLockDirectory(environment: [String: String]) throws {
        let paths = try Paths.resolve(.fixed(environment.merging(["HOME": "/home/u"]) { $1 }))
        let expected = Paths.runtimeLockDirectory(.fixed([:]))
        #expect(paths.lockDirectory == expected)
        let uid = getuid()
        #expect(expected == "/run/user/\(uid)/tokenctl" || expected == "/tmp/tokenctl-\(uid)")
    }

    @Test("the runtime directory is /run/user/<uid> only when it is the user's own, mode 0700")
    func runtimeDirectoryChecked() throws {
        // Another uid's /run/user entry (absent, or not ours): the /tmp fallback for that uid.
        #expect(Paths.runtimeLockDirectory(.fixed([:]), userID: 4242) == "/tmp/tokenctl-4242")
        #expect(Paths.runtimeLockDirectory(.fixed([Paths.runtimeDirectoryVariable: "/x/y"])) == "/x/y/tokenctl")
        #expect(
            Paths.runtimeLockDirectory(.fixed([Paths.runtimeDirectoryVariable: "rel"]))
                == Paths.runtimeLockDirectory(.fixed([:])))
    }

    @Test(
        "no HOME and no XDG variables is an error",
        arguments: [
            [:], ["HOME": ""], ["HOME": "relative/home"], ["XDG_RUNTIME_DIR": "/run/user/0"],
            ["XDG_CONFIG_HOME": "/cfg"], ["XDG_STATE_HOME": "/state"],
        ] as [[String: String]])
    func noHome(environment: [String: String]) {
        #expect(throws: PathsError.noHome) { try Paths.resolve(.fixed(environment)) }
    }

    @Test("without HOME, the XDG variables alone are enough")
    func xdgWithoutHome() throws {
        let paths = try Paths.resolve(.fixed(["XDG_CONFIG_HOME": "/cfg", "XDG_STATE_HOME": "/state"]))
        #expect(paths.configDirectory == "/cfg/tokenctl")
        #expect(paths.lockDirectory == Paths.runtimeLockDirectory(.fixed([:])))
    }

    @Test("profile and lock files")
    func files() throws {
        let paths = try Paths.resolve(.fixed(["HOME": "/h", Paths.runtimeDirectoryVariable: "/run/user/7"]))
        let work = ProfileName(rawValue: "work")!
        #expect(paths.profilesDirectory == "/h/.config/tokenctl/profiles")
        #expect(paths.profileFile(work) == "/h/.config/tokenctl/profiles/work.conf")
        #expect(paths.lockFile(work) == "/run/user/7/tokenctl/work.lock")
    }

    @Test("Environment.fixed looks up only its own values")
    func fixedEnvironment() {
        let environment = Environment.fixed(["A": "1", "B": ""])
        #expect(environment["A"] == "1")
        #expect(environment["B"] == nil)
        #expect(environment["PATH"] == nil)
    }
}

/// A fresh private directory under /tmp, removed by the caller.
private func temporaryDirectory() throws -> String {
    var template = Array("/tmp/tokenctl-test.XXXXXX".utf8CString)
    let result = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    try #require(result != nil)
    return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

private func removeTree(_ path: String) {
    for name in (try? FileIO.listDirectory(path)) ?? [] {
        let child = path + "/" + name
        var info = stat()
        if lstat(child, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            removeTree(child)
        } else {
            unlink(child)
        }
    }
    rmdir(path)
}

private func mode(of path: String) throws -> mode_t {
    var info = stat()
    try #require(lstat(path, &info) == 0)
    return info.st_mode
}

@Suite("FileIO")
struct FileIOTests {
    @Test("writeAtomically creates missing directories and a mode 0600 file")
    func writeCreatesPrivateFile() throws {
        let root = try temporaryDirectory()
        defer { removeTree(root) }
        let file = root + "/a/b/profile.conf"
        try FileIO.writeAtomically("issuer = https://x\n", to: file)
        #expect(try FileIO.readFile(file) == "issuer = https://x\n")
        #expect(try mode(of: file) & 0o777 == 0o600)
        #expect(try mode(of: file) & S_IFMT == S_IFREG)
        #expect(try mode(of: root + "/a/b") & S_IFMT == S_IFDIR)
        #expect(try mode(of: root + "/a/b") & 0o077 == 0)
    }

    @Test("writeAtomically replaces an existing file and leaves no temporary behind")
    func replaceExisting() throws {
        let root = try temporaryDirectory()
        defer { removeTree(root) }
        let file = root + "/f.conf"
        try FileIO.writeAtomically("old contents that are longer\n", to: file)
        try FileIO.writeAtomically("new\n", to: file)
        #expect(try FileIO.readFile(file) == "new\n")
        #expect(try FileIO.listDirectory(root) == ["f.conf"])
    }

    @Test("writeAtomically honours an explicit mode")
    func explicitMode() throws {
        let root = try temporaryDirectory()
        defer { removeTree(root) }
        try FileIO.writeAtomically("x", to: root + "/f", mode: 0o640)
        #expect(try mode(of: root + "/f") & 0o777 == 0o640)
    }

    @Test("writeAtomically into a path under a regular file fails with a SystemError")
    func writeFailure() throws {
        let root = try temporaryDirectory()
        defer { removeTree(root) }
        try FileIO.writeAtomically("x", to: root + "/file")
        #expect(throws: SystemError.self) { try FileIO.writeAtomically("y", to: root + "/file/child") }
    }

    @Test("readFile returns nil for a missing file")
    func readMissing() throws {
        let root = try temporaryDirectory()
        defer { removeTree(root) }
        #expect(try FileIO.readFile(root + "/absent") == nil)
        #expect(try FileIO.readFile(root + "/absent-dir/absent") == nil)
    }

    @Test("readFile of a directory fails rather than returning nil")
    func readDirectory() throws {
        let root = try temporaryDirectory()
        defer { removeTree(root) }
        #expect(throws: SystemError.self) { try FileIO.readFile(root) }
    }

    @Test("readFile refuses files above the limit")
    func readLimit() throws {
        let root = try temporaryDirectory()
        defer { removeTree(root) }
        try FileIO.writeAtomically(String(repeating: "x", count: 10_000), to: root + "/big")
        #expect(try FileIO.readFile(root + "/big")?.utf8.count == 10_000)
        #expect(throws: SystemError(errno: EFBIG, operation: "read", path: root + "/big")) {
            try FileIO.readFile(root + "/big", limit: 100)
        }
    }

    @Test("ensurePrivateDirectory creates a 0700 directory and tightens a loose one")
    func privateDirectory() throws {
        let root = try temporaryDirectory()
        defer { removeTree(root) }
        try FileIO.ensurePrivateDirectory(root + "/p/q")
        #expect(try mode(of: root + "/p/q") & 0o777 == 0o700)
        chmod(root + "/p/q", 0o755)
        try FileIO.ensurePrivateDirectory(root + "/p/q")
        #expect(try mode(of: root + "/p/q") & 0o777 == 0o700)
    }

    @Test("removeFile ignores a missing file; listDirectory of a missing directory is empty")
    func removeAndList() throws {
        let root = try temporaryDirectory()
        defer { removeTree(root) }
        try FileIO.writeAtomically("x", to: root + "/b")
        try FileIO.writeAtomically("x", to: root + "/a")
        #expect(try FileIO.listDirectory(root) == ["a", "b"])
        try FileIO.removeFile(root + "/a")
        try FileIO.removeFile(root + "/a")
        #expect(try FileIO.listDirectory(root) == ["b"])
        #expect(try FileIO.listDirectory(root + "/none") == [])
    }
}
