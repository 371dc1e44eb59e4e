import Foundation
import Testing
import TokenctlTestSupport

/// What the static front's image holds: every part linked in costs every hit its start-up
/// (pages touched, measured in Scripts/bench), whether or not the hit runs it.
@Suite("End to end: the static front's image")
struct FrontImageTests {
    @Test(
        "the front links no Swift concurrency runtime (main.swift's top-level variables did: 0.1 ms and 0.5 MB a hit)")
    func noConcurrencyRuntime() throws {
        let environment = try TestEnvironment.require()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/nm") else { return }
        let symbols = try runProgram("/usr/bin/nm", [environment.binary])
        #expect(symbols.status == 0, "\(symbols.stderr)")
        #expect(symbols.stdout.contains("HotPath"), "the front's own symbols are there")
        for symbol in ["swift_task_getCurrent", "swift_task_create", "$sScM6sharedScMvgZ"] {
            #expect(!symbols.stdout.contains(" " + symbol + "\n"), "\(symbol) is linked into the front")
        }
    }
}
