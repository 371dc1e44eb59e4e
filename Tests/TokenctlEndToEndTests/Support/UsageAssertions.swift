import Foundation
import Testing
import TokenctlTestSupport

/// Checks shared by the command-line and bad-input tests.

/// A usage error as DESIGN §2 describes it: exit 64, nothing on stdout, and on stderr
/// `Error: …`, the usage line and `See 'tokenctl [<command>] --help'`.
///
/// - Parameters:
///   - command: the command whose usage must be shown, or `nil` for the top level.
///   - mentioning: fragments the error message must contain.
func expectUsageErrorOutput(
    _ result: RunResult, command: String?, mentioning fragments: [String] = [],
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(result.status == 64, "\(result)", sourceLocation: sourceLocation)
    #expect(result.stdout.isEmpty, "stdout must be empty: \(result)", sourceLocation: sourceLocation)
    #expect(result.stderr.hasPrefix("Error: "), "\(result)", sourceLocation: sourceLocation)
    if let command {
        #expect(
            result.stderr.contains("USAGE: tokenctl [--profile <name>] \(command)"), "\(result)",
            sourceLocation: sourceLocation)
        #expect(result.stderr.contains("See 'tokenctl \(command) --help'"), "\(result)", sourceLocation: sourceLocation)
    } else {
        #expect(result.stderr.contains("USAGE: tokenctl"), "\(result)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains("See 'tokenctl --help'"), "\(result)", sourceLocation: sourceLocation)
    }
    for fragment in fragments {
        #expect(
            result.stderr.contains(fragment), "stderr should mention \(fragment): \(result)",
            sourceLocation: sourceLocation)
    }
}

extension Sandbox {
    /// Run `tokenctl` with an array of arguments.
    @discardableResult
    func runTokenctl(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws
        -> RunResult
    {
        try start(arguments, stdin: stdin, extraEnvironment: environment).wait()
    }

    /// Whether the profile's configuration file exists.
    func profileFileExists(_ profile: String = "default") -> Bool {
        FileManager.default.fileExists(atPath: profileFile(profile))
    }

    /// Nothing of a failed login was kept: no profile file and no keyring item.
    func expectNoProfileAndNoSession(
        profile: String = "default", issuer: String, clientID: String = "cli",
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(!profileFileExists(profile), "no profile file may be created", sourceLocation: sourceLocation)
        #expect(
            try storedTokenSet(profile: profile, issuer: issuer, clientID: clientID) == nil,
            "nothing may be stored in the keyring", sourceLocation: sourceLocation)
    }
}

/// Two token sets read back from the keyring, compared as JSON values.
func sameTokenSet(_ a: [String: Any]?, _ b: [String: Any]?) -> Bool {
    switch (a, b) {
    case (nil, nil): true
    case (let a?, let b?): NSDictionary(dictionary: a).isEqual(to: b)
    default: false
    }
}
