import Foundation
import TokenctlTestSupport

/// The open descriptors past stderr in an `ls -l /proc/…/fd` listing, as "N -> target", sorted.
func descriptorEntries(_ listing: String) -> [String] {
    listing.split(separator: "\n").compactMap { line -> String? in
        guard let arrow = line.range(of: " -> ") else { return nil }
        let number = line[..<arrow.lowerBound].split(separator: " ").last.map(String.init) ?? ""
        guard let fd = Int(number), fd > 2 else { return nil }
        return "\(fd) -> \(line[arrow.upperBound...])"
    }.sorted()
}

/// A stand-in for a program tokenctl starts (xdg-open, crontab): a script that notes the
/// descriptors it was given, then runs `then`. Started by the test with `--baseline` (stdin,
/// stdout and stderr on /dev/null, as tokenctl starts its helpers), it notes what it gets when
/// nothing of tokenctl's can leak, and exits.
struct DescriptorProbe {
    let program: String
    private let listing: String

    init(_ program: String, then body: String) throws {
        self.program = program
        listing = program + ".fds"
        try writeExecutable(
            program,
            """
            #!/bin/sh
            ls -l /proc/$$/fd > '\(listing)'.tmp 2>&1
            if [ "$1" = --baseline ]; then mv '\(listing)'.tmp '\(listing)'.baseline; exit 0; fi
            mv '\(listing)'.tmp '\(listing)'
            \(body)
            """)
    }

    /// What the probe is given when the test starts it (the test runner's own descriptors).
    func baseline(environment: [String: String]) throws -> [String] {
        _ = try runProgram(
            "/bin/sh", ["-c", "exec \"$0\" --baseline </dev/null >/dev/null 2>&1", program], environment: environment)
        return descriptorEntries((try? String(contentsOfFile: listing + ".baseline", encoding: .utf8)) ?? "")
    }

    /// Whether tokenctl started it.
    var ran: Bool { FileManager.default.fileExists(atPath: listing) }

    /// What it was given when tokenctl started it.
    var seen: [String] { descriptorEntries((try? String(contentsOfFile: listing, encoding: .utf8)) ?? "") }
}
