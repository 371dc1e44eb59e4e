import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Read access to the process environment, injectable for tests.
public struct Environment: Sendable {
    private let lookup: @Sendable (String) -> String?

    public init(_ lookup: @escaping @Sendable (String) -> String?) {
        self.lookup = lookup
    }

    /// The real process environment.
    public static let process = Environment { name in
        guard let value = getenv(name) else { return nil }
        return String(cString: value)
    }

    /// Set `name` to `value` in the process environment: what programs started later inherit.
    public static func setProcessVariable(_ name: String, _ value: String) {
        setenv(name, value, 1)
    }

    /// Remove `name` from the process environment.
    public static func unsetProcessVariable(_ name: String) {
        unsetenv(name)
    }

    /// A fixed environment (tests).
    public static func fixed(_ values: [String: String]) -> Environment {
        Environment { values[$0] }
    }

    /// The value of `name`, with an empty string treated as unset (as XDG requires).
    public subscript(name: String) -> String? {
        guard let value = lookup(name), !value.isEmpty else { return nil }
        return value
    }

    /// The value of `name` as it is: an empty string is a value (a variable set to nothing).
    public func value(_ name: String) -> String? { lookup(name) }
}
