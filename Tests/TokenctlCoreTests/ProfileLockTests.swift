import Foundation
import Testing
import TokenctlEssentials

@testable import TokenctlCore

#if canImport(Glibc)
import Glibc
#endif

/// `FileProfileLocks.waitWhileHeld`: watching another process's refresh lock without taking it.
/// flock(2) locks of two open file descriptions conflict even within one process, so a second
/// descriptor here plays the other process.
@Suite("Profile lock: waiting for another refresh")
struct ProfileLockTests {
    let profile = ProfileName(rawValue: "default")!

    func temporaryDirectory() -> String {
        var template = Array("/tmp/tokenctl-lock-test.XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    /// Hold the profile's lock as a refresher does; closing the descriptor lets go.
    func holdLock(in directory: String) throws -> Int32 {
        let descriptor = open(directory + "/default.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(descriptor >= 0)
        #expect(flock(descriptor, LOCK_EX) == 0)
        return descriptor
    }

    @Test("no lock file, or a free lock: no wait")
    func nothingToWaitFor() async throws {
        let directory = temporaryDirectory()
        let locks = FileProfileLocks(directory: directory)
        #expect(try await locks.waitWhileHeld(profile, until: .after(5)) == false)
        close(try holdLock(in: directory))
        #expect(try await locks.waitWhileHeld(profile, until: .after(5)) == false)
    }

    @Test("a held lock: waits until it is let go, and never takes it")
    func waitsUntilLetGo() async throws {
        let directory = temporaryDirectory()
        let locks = FileProfileLocks(directory: directory)
        let held = try holdLock(in: directory)
        // Let go from a thread of its own: the test run keeps the cooperative pool busy, and a
        // starved task would not let go in time. The generous timeout is for the same reason.
        let started = Clock.system.now()
        Thread.detachNewThread {
            usleep(300_000)
            close(held)
        }
        #expect(try await locks.waitWhileHeld(profile, until: .after(120)) == true)
        #expect(Clock.system.now() - started >= 0.25)
        // It did not keep the lock: a refresher can take it at once.
        let lock = try await locks.acquire(profile, until: .after(0.1))
        withExtendedLifetime(lock) {}
    }

    @Test("a lock never let go: the lock-timeout error of acquire, after the timeout")
    func timesOut() async throws {
        let directory = temporaryDirectory()
        let locks = FileProfileLocks(directory: directory)
        let held = try holdLock(in: directory)
        defer { close(held) }
        let started = Clock.system.now()
        await #expect(throws: TokenctlError.self) { _ = try await locks.waitWhileHeld(profile, until: .after(0.3)) }
        #expect(Clock.system.now() - started >= 0.3)
        do {
            _ = try await locks.waitWhileHeld(profile, until: .after(0.1))
            Issue.record("no timeout")
        } catch {
            #expect(error.kind == .transient)
            #expect(error.message.contains("refreshing this profile for too long"))
        }
    }
}
