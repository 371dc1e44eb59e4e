/// Reading a JWT's claims without verifying it: used only to learn `sub` and `exp` for
/// display and expiry decisions, never to grant anything.
public enum UnverifiedJWT {
    public static func claims(of token: String) -> [String: JSONValue]? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = base64URLDecode(String(parts[1])) else { return nil }
        return JSONValue.parseObject(payload)
    }

    public static func base64URLDecode(_ text: String) -> [UInt8]? {
        var base64 = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map(Array.init)
    }
}
