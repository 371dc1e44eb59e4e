import Foundation
import Testing

@testable import TokenctlCore

/// The checks a platform's token file passes before its token is sent (RFC 8693 §2.1, RFC 7523
/// §2.1, RFC 7521 §4.2), on its content and on the file itself.
@Suite("PlatformTokenFile: a platform's token file, checked before it is sent")
struct PlatformTokenFileTests {
    static func part(_ json: String) -> String {
        Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
    static let header = part(#"{"alg":"ES256","typ":"JWT"}"#)
    static let now = 1_800_000_000.0

    static func jwt(exp: Int?) -> String {
        header + "." + part(exp.map { #"{"sub":"job","exp":\#($0)}"# } ?? #"{"sub":"job"}"#) + ".c2ln"
    }

    func check(_ text: String, mustBeJWT: Bool = true) -> (String?, String?) {
        PlatformTokenFile(path: "/p", role: .subjectToken, mustBeJWT: mustBeJWT).check(text, now: Self.now)
    }

    @Test("a JWT with a later exp, or none, is sent as it is, a trailing newline dropped")
    func accepted() {
        let token = Self.jwt(exp: Int(Self.now) + 60)
        #expect(check(token + "\n") == (token, nil))
        #expect(check(Self.jwt(exp: nil)) == (Self.jwt(exp: nil), nil))
        // An opaque token where no JWT is required (an access_token subject type).
        #expect(check("opaque-token", mustBeJWT: false) == ("opaque-token", nil))
    }

    @Test(
        "refused: empty, blanks inside, not three base64url parts, a header or payload not JSON, an exp now or past",
        arguments: [
            ("", "is empty"), (" \n", "is empty"), ("a b", "does not hold one token"),
            ("abc", "does not hold a JWT"), ("a.b", "does not hold a JWT"), ("a.b.c.d", "does not hold a JWT"),
            ("e30.e30=.c2ln", "does not hold a JWT"), ("bm90.e30.c2ln", "does not hold a JWT"),
            ("e30.bm90.c2ln", "does not hold a JWT"), ("caf\u{E9}", "does not hold one token"),
        ])
    func refused(_ text: String, _ reason: String) {
        let (_, problem) = check(text)
        #expect(problem?.hasPrefix(reason) == true, "\(text): \(problem ?? "accepted")")
    }

    @Test("a token past its exp is refused, even where no JWT is required; exactly now counts as past")
    func expired() {
        #expect(check(Self.jwt(exp: Int(Self.now))).1?.hasPrefix("holds a token that expired at") == true)
        #expect(check(Self.jwt(exp: Int(Self.now) - 1), mustBeJWT: false).1 != nil)
        #expect(
            PlatformTokenFile(path: "/p", role: .assertion).inspect(now: Self.now)
                == PlatformTokenFile.Inspection(problem: "is missing", expiresAt: nil))
    }

    @Test("the subject token types that must be JWTs: jwt (the default) and id_token")
    func subjectTypes() {
        #expect(PlatformTokenFile.subjectToken("/p", tokenType: nil).mustBeJWT)
        #expect(PlatformTokenFile.subjectToken("/p", tokenType: "urn:ietf:params:oauth:token-type:id_token").mustBeJWT)
        #expect(
            !PlatformTokenFile.subjectToken("/p", tokenType: "urn:ietf:params:oauth:token-type:access_token").mustBeJWT)
    }

    @Test("read: the message names the file and its profile key, never the content; 78")
    func readRefusal() throws {
        let path = NSTemporaryDirectory() + "platform-token-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "not-a-jwt-secret".write(toFile: path, atomically: true, encoding: .utf8)
        let file = PlatformTokenFile(path: path, role: .clientAssertion)
        #expect(throws: TokenctlError.self) { try file.read(now: Self.now) }
        do { _ = try file.read(now: Self.now) } catch {
            #expect(error.exitStatus == .configuration)
            #expect(error.message.contains(path) && error.message.contains("client_assertion_file"))
            #expect(!error.message.contains("not-a-jwt-secret"))
        }
        try String(repeating: "a", count: ClientKeys.maximumFileBytes + 1).write(
            toFile: path, atomically: true, encoding: .utf8)
        #expect(file.inspect(now: Self.now).problem?.hasPrefix("cannot be read") == true)
    }
}
