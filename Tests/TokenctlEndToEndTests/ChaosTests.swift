import Foundation
import Testing
import TokenctlTestSupport

/// Scripts/chaos at a size CI can afford: random waves of concurrent `token`/`refresh` processes
/// in mixed environments, server faults, keyring freezes and SIGKILLs of a process or of its
/// process group, two CPU-bound processes beside them, against a server with one-use refresh
/// tokens and no grace period. `TOKENCTL_CHAOS_SCHEDULES` (default 30) and `TOKENCTL_CHAOS_SEED` (default: random,
/// printed) set the size and replay a run; by hand: `Scripts/chaos --schedules 1000`.
@Suite("End to end: chaos schedules with kills")
struct ChaosTests {
    @Test("no refresh token reused and no session lost, kills of callers and of their process groups included")
    func chaosSchedules() throws {
        let environment = try TestEnvironment.require()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..")
            .standardized.path
        let variables = ProcessInfo.processInfo.environment
        // Other suites run beside this one: the harness's CPU-bound processes yield to them
        // (a 2-second token of another suite expired between two of its commands otherwise).
        var arguments = [
            root + "/Scripts/chaos", "--schedules", variables["TOKENCTL_CHAOS_SCHEDULES"] ?? "30", "--load-nice", "19",
            // Half the waves kill a process (the default is one in four): 30 schedules should see kills.
            "--kill-rate", "0.5",
        ]
        if let seed = variables["TOKENCTL_CHAOS_SEED"] { arguments += ["--seed", seed] }
        var childEnvironment = variables
        childEnvironment["TOKENCTL_BINARY"] = environment.binary
        let result = try runProgram("/bin/bash", arguments, environment: childEnvironment)
        print(result.stdout)
        #expect(result.status == 0, "a chaos schedule broke an invariant (replay with the seed printed): \(result)")
        #expect(result.stdout.contains("chaos figures:"), "\(result)")
    }
}
