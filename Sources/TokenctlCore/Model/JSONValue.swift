// Which JSON reader or writer to use where:
//
// - Documents from servers (token and device answers, discovery, JWKS, JWT headers and claims):
//   `JSONValue.parseObject`, because servers differ in the types they give a field (a number as
//   a string, a scope as an array) and each reader decides what it accepts.
// - The stored token set and anything else the fallback path reads: `FlatJSONObject`
//   (TokenctlEssentials), strict and Foundation-free, which avoids `JSONDecoder`'s first-use
//   cost on every `tokenctl token` that reaches the Secret Service.
// - Caches tokenctl writes and reads itself (discovery, JWKS): `Codable` with `JSONEncoder`
//   and `JSONDecoder`; a cache that does not decode is a miss.
// - Output whose field order is documented (`token --format json`, `status --json`, the event
//   log, DPoP proofs): `JSONText` (TokenctlEssentials), written by hand in a fixed order.

/// A JSON value for reading documents whose fields vary in type between servers.
public enum JSONValue: Decodable, Equatable, Sendable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case object([String: JSONValue])
    case array([JSONValue])
    case null

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public static func parseObject(_ bytes: [UInt8]) -> [String: JSONValue]? {
        guard case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)) else {
            return nil
        }
        return object
    }
}
