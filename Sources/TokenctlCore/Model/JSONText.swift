import TokenctlEssentials

/// Writing JSON text by hand, without Foundation: string escaping (RFC 8259 §7) and objects
/// whose fields keep their order (stable, documented output schemas).
public enum JSONText {
    /// `text` as a JSON string literal.
    public static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    let hex = String(scalar.value, radix: 16)
                    result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }

    /// A JSON value already rendered as text.
    public struct Value: Sendable, Equatable {
        public let text: String
        public init(raw text: String) { self.text = text }

        public static func string(_ value: String?) -> Value { Value(raw: value.map(quoted) ?? "null") }
        public static func number(_ value: Int?) -> Value { Value(raw: value.map { String($0) } ?? "null") }
        public static func bool(_ value: Bool?) -> Value { Value(raw: value.map { String($0) } ?? "null") }
        public static func array(_ values: [Value]) -> Value {
            Value(raw: "[" + values.map(\.text).joined(separator: ",") + "]")
        }
        public static let null = Value(raw: "null")
    }

    /// An object with fields in the given order.
    public static func object(_ fields: [(String, Value)]) -> String {
        "{" + fields.map { quoted($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
    }
}
