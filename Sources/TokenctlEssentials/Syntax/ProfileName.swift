/// A profile name: 1–64 characters of `A–Z a–z 0–9 . _ -`, not starting with a dot or dash.
///
/// Names become file names and Secret Service attributes, so the alphabet is kept small.
public struct ProfileName: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: String

    public init?(rawValue: String) {
        guard ProfileName.isValid(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    /// The profile used when neither `--profile` nor `TOKENCTL_PROFILE` names one.
    public static let `default` = ProfileName(rawValue: "default")!

    public static func isValid(_ name: String) -> Bool { isValid(utf8: name.utf8) }

    /// The one check of a name's bytes (the front's hit checks argv's bytes with it too).
    @inlinable
    public static func isValid<Name: Collection>(utf8 name: Name) -> Bool where Name.Element == UInt8 {
        guard (1...64).contains(name.count), let first = name.first, first != UInt8(ascii: "."),
            first != UInt8(ascii: "-")
        else { return false }
        return name.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }

    public var description: String { rawValue }

    public static func < (lhs: ProfileName, rhs: ProfileName) -> Bool { lhs.rawValue < rhs.rawValue }
}
