import Testing
import TokenctlEssentials

#if canImport(Glibc)
import Glibc
#endif

@Suite("The forward protocol (v1): requests, answers, limits")
struct ForwardProtocolTests {
    @Test("a request round-trips with every field; the wire form is the documented one")
    func requestRoundTrip() throws {
        var request = ForwardRequest(profile: "work")
        request.scope = "read write"
        request.audience = "https://api.example.com"
        request.resource = "https://a.example.com https://b.example.com"
        request.minimumTimeToLive = 120
        request.force = true
        request.proofMethod = "POST"
        request.proofURL = "https://api.example.com/x?y=1"
        request.proofNonce = "n-1"
        request.command = "token"
        request.tokenFingerprint = ForwardProtocol.fingerprint(of: Array(repeating: 0xAB, count: 32))
        #expect(request.tokenFingerprint == String(repeating: "ab", count: 32))
        let bytes = request.encoded()
        #expect(
            String(decoding: bytes, as: UTF8.self).hasPrefix(
                "tokenctl-forward-v1 request\nprofile=work\nscope=read write\n"))
        #expect(bytes.suffix(2) == [0x0A, 0x0A])
        #expect(try ForwardRequest.decode(bytes) == request)
    }

    @Test(
        "requests the serving side refuses: unknown fields, duplicates, control bytes, no profile, absurd min_ttl, half a DPoP request, another version, no final empty line, too large",
        arguments: [
            "tokenctl-forward-v1 request\nprofile=p\nrefresh_token=x\n\n",
            "tokenctl-forward-v1 request\nprofile=p\nprofile=q\n\n",
            "tokenctl-forward-v1 request\nprofile=p\u{1b}[2J\n\n",
            "tokenctl-forward-v1 request\nscope=a\n\n",
            "tokenctl-forward-v1 request\nprofile=\n\n",
            "tokenctl-forward-v1 request\nprofile=p\nmin_ttl=99999999999\n\n",
            "tokenctl-forward-v1 request\nprofile=p\nmin_ttl=-1\n\n",
            "tokenctl-forward-v1 request\nprofile=p\ndpop_method=GET\n\n",
            "tokenctl-forward-v1 request\nprofile=p\nforce=yes\n\n",
            "tokenctl-forward-v1 request\nprofile=p\ntoken_fingerprint=ABAB\n\n",
            "tokenctl-forward-v1 request\nprofile=p\ntoken_fingerprint=\(String(repeating: "AB", count: 32))\n\n",
            "tokenctl-forward-v2 request\nprofile=p\n\n",
            "tokenctl-forward-v1 request\nprofile=p\n",
            "tokenctl-forward-v1 request\nprofile p\n\n",
            "GET / HTTP/1.1\r\n\r\n\n\n",
            "",
        ])
    func refusedRequests(_ text: String) {
        #expect(throws: ForwardProtocolError.self) { try ForwardRequest.decode(Array(text.utf8)) }
    }

    @Test("serving_session round-trips when it is 16 hex digits and is dropped otherwise; it tells sessions apart")
    func servingSession() throws {
        var token = ForwardedToken(profile: "work", accessToken: "at", tokenType: "Bearer", obtainedAt: 1)
        let identity = ForwardedToken.sessionIdentity(
            host: "laptop", issuer: "https://as.example", clientID: "cli", profile: "work")
        #expect(identity.utf8.count == 16)
        #expect(
            identity
                != ForwardedToken.sessionIdentity(
                    host: "desktop", issuer: "https://as.example", clientID: "cli", profile: "work"))
        token.servingSession = identity
        #expect(try ForwardAnswer.decode(ForwardAnswer.token(token).encoded()) == .token(token))
        let odd = Array(
            "tokenctl-forward-v1 token\nprofile=w\ntoken_type=Bearer\naccess_token=a\nobtained_at=1\nserving_session=not hex\n\n"
                .utf8)
        guard case .token(let decoded) = try ForwardAnswer.decode(odd) else {
            Issue.record("a token answer")
            return
        }
        #expect(decoded.servingSession == nil)
    }

    @Test("liveness: a socket something serves, a socket file nothing serves, no file")
    func liveness() throws {
        let directory = "/tmp/tokenctl-liveness-\(getpid())"
        mkdir(directory, 0o700)
        defer { rmdir(directory) }
        let path = directory + "/s.sock"
        #expect(ForwardClient.liveness(of: path) == .missing)
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0 && listen(listener, 4) == 0)
        #expect(ForwardClient.liveness(of: path) == .served)
        #expect(ForwardClient.socketFileIdentity(of: path) != nil)
        close(listener)
        #expect(ForwardClient.liveness(of: path) == .notServed)
        unlink(path)
    }

    @Test("a request over 16 KiB is refused whatever it holds")
    func oversized() {
        let text = "tokenctl-forward-v1 request\nprofile=p\nscope=" + String(repeating: "a ", count: 9000) + "\n\n"
        #expect(throws: ForwardProtocolError.self) { try ForwardRequest.decode(Array(text.utf8)) }
    }

    @Test("another version names what this one speaks")
    func versionMismatch() {
        #expect {
            try ForwardRequest.decode(Array("tokenctl-forward-v2 request\nprofile=p\n\n".utf8))
        } throws: { error in
            (error as? ForwardProtocolError)?.description.contains("speaks v1 only") == true
        }
    }

    @Test("a token answer round-trips (times with milliseconds, no expiry, a proof); unknown answer fields are ignored")
    func tokenAnswer() throws {
        var token = ForwardedToken(
            profile: "work", accessToken: "at.1", tokenType: "Bearer", obtainedAt: 1_764_771_234.5)
        token.expiresAt = 1_764_774_834.125
        token.issuedLifetime = 3600
        token.scope = "read"
        token.dpopProof = "a.b.c"
        token.servedBy = "laptop"
        let answer = ForwardAnswer.token(token)
        #expect(try ForwardAnswer.decode(answer.encoded()) == answer)
        var forever = ForwardedToken(profile: "p", accessToken: "x", tokenType: "Bearer", obtainedAt: 1)
        forever.statesNoExpiry = true
        #expect(try ForwardAnswer.decode(ForwardAnswer.token(forever).encoded()) == .token(forever))
        let newer =
            "tokenctl-forward-v1 token\nprofile=p\ntoken_type=Bearer\naccess_token=x\nobtained_at=1\nfuture_field=1\n\n"
        guard case .token(let decoded) = try ForwardAnswer.decode(Array(newer.utf8)) else {
            Issue.record("not a token")
            return
        }
        #expect(decoded.accessToken == "x")
    }

    @Test(
        "answers a client refuses: a token with a space, no access token, a bad time, an absurd status, a message with control bytes",
        arguments: [
            "tokenctl-forward-v1 token\nprofile=p\ntoken_type=Bearer\naccess_token=a b\nobtained_at=1\n\n",
            "tokenctl-forward-v1 token\nprofile=p\ntoken_type=Bearer\nobtained_at=1\n\n",
            "tokenctl-forward-v1 token\nprofile=p\ntoken_type=Bearer\naccess_token=x\nobtained_at=1e99\n\n",
            "tokenctl-forward-v1 token\nprofile=p\ntoken_type=Bearer\naccess_token=x\nobtained_at=1\nexpires_at=-5\n\n",
            "tokenctl-forward-v1 error\nstatus=0\nmessage=m\n\n",
            "tokenctl-forward-v1 error\nstatus=256\nmessage=m\n\n",
            "tokenctl-forward-v1 error\nstatus=77\nmessage=\u{07}\n\n",
            "tokenctl-forward-v1 error\nstatus=77\n\n",
            "tokenctl-forward-v9 token\n\n",
        ])
    func refusedAnswers(_ text: String) {
        #expect(throws: ForwardProtocolError.self) { try ForwardAnswer.decode(Array(text.utf8)) }
    }

    @Test("an error answer carries the status, a sanitized message and hint, and the host")
    func errorAnswer() throws {
        let failure = ForwardFailure(
            status: 77, message: "line one\nline two\u{1b}", hint: "do this", servedBy: "laptop")
        guard case .failure(let decoded) = try ForwardAnswer.decode(ForwardAnswer.failure(failure).encoded()) else {
            Issue.record("not a failure")
            return
        }
        #expect(decoded.status == 77 && decoded.message == "line one?line two?" && decoded.hint == "do this")
        #expect(decoded.servedBy == "laptop")
    }

    @Test("the client's socket: the variable wins, empty means none, else the well-known path only when it is a socket")
    func socketPath() {
        func environment(_ values: [String: String]) -> (UnsafePointer<CChar>) -> UnsafePointer<CChar>? {
            let copies = values.mapValues { value in UnsafePointer(strdup(value)!) }
            return { name in copies[String(cString: name)] }
        }
        #expect(
            ForwardClient.socketPath(environment: environment(["TOKENCTL_FORWARD_SOCKET": "/run/x.sock"]))
                == "/run/x.sock")
        #expect(ForwardClient.socketPath(environment: environment(["TOKENCTL_FORWARD_SOCKET": ""])) == nil)
        #expect(ForwardClient.socketPath(environment: environment(["XDG_RUNTIME_DIR": "/nonexistent"])) == nil)
        // The front's byte-level reading agrees.
        #expect(HotPath.forwardSocket(environment: environment(["TOKENCTL_FORWARD_SOCKET": ""])) == nil)
        #expect(HotPath.forwardSocket(environment: environment(["XDG_RUNTIME_DIR": "/nonexistent"])) == nil)
        let given = HotPath.forwardSocket(environment: environment(["TOKENCTL_FORWARD_SOCKET": "/run/x.sock"]))
        #expect(given.map { String(cString: $0) } == "/run/x.sock")
    }

    @Test("a client with no socket there: 69, naming the path, with a hint")
    func noSocket() {
        let result = ForwardClient.exchange(ForwardRequest(profile: "p"), socketPath: "/nonexistent/x.sock", timeout: 2)
        guard case .failure(let failure) = result else {
            Issue.record("answered")
            return
        }
        #expect(
            failure.status == .unavailable && failure.message.contains("/nonexistent/x.sock") && failure.hint != nil)
        guard
            case .failure(let relative) = ForwardClient.exchange(
                ForwardRequest(profile: "p"), socketPath: "x.sock", timeout: 2)
        else { return }
        #expect(relative.status == .configuration)
    }
}
