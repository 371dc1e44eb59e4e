/// The members of a token or device endpoint's answer, whatever its encoding, so that the body
/// decides what happened (RFC 6749 §5.2; GitHub sends its errors with HTTP 200): a JSON object, or a form-encoded
/// body (`application/x-www-form-urlencoded`, which GitHub sends unless the request asked for
/// JSON; tokenctl always asks, and still reads one), whose values are strings.
public enum EndpointAnswer {
    /// The answer's members; nil when the body is neither a JSON object nor form-encoded.
    public static func object(_ response: HTTPResponse) -> [String: JSONValue]? {
        object(body: response.body, contentType: response.header("content-type"))
    }

    /// - Parameter contentType: the `Content-Type` header; a form body is read only when it says
    ///   so (by media type, as gh's cli/oauth does), a JSON object whatever it says.
    public static func object(body: [UInt8], contentType: String?) -> [String: JSONValue]? {
        if let object = JSONValue.parseObject(body) { return object }
        guard isFormEncoded(contentType), !body.isEmpty, body.count <= 64 * 1024 else { return nil }
        // Valid UTF-8 only: a replacement character must not slip into a token unnoticed.
        let text = String(decoding: body, as: UTF8.self)
        guard text.utf8.elementsEqual(body) else { return nil }
        let fields = FormEncoding.decode(text.hasSuffix("\n") ? String(text.dropLast()) : text)
        guard !fields.isEmpty, !fields.keys.contains("") else { return nil }
        return fields.mapValues { JSONValue.string($0) }
    }

    /// Whether a `Content-Type` names `application/x-www-form-urlencoded` (parameters ignored).
    static func isFormEncoded(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first.map {
            $0.trimmingCharacters(in: " \t").lowercased()
        }
        return mediaType == "application/x-www-form-urlencoded"
    }

    /// The OAuth error an answer carries (RFC 6749 §5.2, RFC 8628 §3.5), whatever its status:
    /// GitHub sends its errors with HTTP 200.
    public static func error(in object: [String: JSONValue]?) -> (code: String, description: String?)? {
        guard let code = object?["error"]?.stringValue, !code.isEmpty else { return nil }
        return (code, object?["error_description"]?.stringValue)
    }

    /// A member in seconds, given as a number or as a string of digits (GitHub's early answers
    /// quoted them); nil when absent, negative, not finite or not a number.
    public static func seconds(_ value: JSONValue?) -> Double? {
        let seconds: Double? =
            switch value {
            case .number(let number)?: number
            case .string(let text)?: Double(text.trimmingCharacters(in: " \t"))
            default: nil
            }
        guard let seconds, seconds.isFinite, seconds >= 0 else { return nil }
        return seconds
    }
}

/// Granted or requested scopes as words: split on spaces and on commas (GitHub answers
/// `"scope":"repo,gist"`, RFC 6749 §3.3 says spaces), empty words dropped.
public enum ScopeWords {
    public static func words(_ scope: String) -> [String] {
        scope.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\t" }).map(String.init)
    }

    /// The scope as RFC 6749 writes it (space-separated), order kept, duplicates dropped; nil
    /// when it has no words (GitHub App tokens answer `"scope":""`: no scope information).
    public static func normalized(_ scope: String?) -> String? {
        guard let scope else { return nil }
        var seen = Set<String>()
        let words = words(scope).filter { seen.insert($0).inserted }
        return words.isEmpty ? nil : words.joined(separator: " ")
    }
}
