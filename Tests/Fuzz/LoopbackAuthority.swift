// Fuzz target: the loopback check that decides whether a token may go over plain http (git's
// credential `host` attribute, and every issuer or endpoint URL through EndpointURL), against a
// reference built on glibc's inet_pton: `EndpointURL.isLoopbackAuthority` must say yes exactly
// for `localhost` (any case), `[::1]` and an IPv4 address in 127.0.0.0/8 that inet_pton reads,
// each with an optional decimal port up to 65535; and EndpointURL must accept `http://` to it.
//
// Input: the authority text (host, optional :port).
// fuzz-extra-sources:
import Glibc
import TokenctlCore
import TokenctlEssentials

/// The reference: split host and port the way git writes them, then ask the C library.
func referenceIsLoopback(_ authority: String) -> Bool {
    var host = Substring(authority)
    var port: Substring?
    if host.hasPrefix("[") {
        guard let close = host.firstIndex(of: "]") else { return false }
        port = host[host.index(after: close)...]
        host = host[...close]
    } else if let colon = host.firstIndex(of: ":") {
        port = host[colon...]
        host = host[..<colon]
    }
    if let port, !port.isEmpty {
        let digits = port.dropFirst()
        guard port.first == ":", !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return false }
        let significant = digits.drop { $0 == "0" } // "00080" is port 80
        guard significant.count <= 5, (Int(significant) ?? 0) <= 65535 else { return false }
    }
    return referenceHost(host)
}

func referenceHost(_ host: Substring) -> Bool {
    if host.lowercased() == "localhost" || host == "[::1]" { return true }
    var address = in_addr()
    guard !host.utf8.contains(0), inet_pton(AF_INET, String(host), &address) == 1 else { return false }
    return UInt32(bigEndian: address.s_addr) >> 24 == 127
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLoopbackAuthority(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = String(decoding: FuzzSupport.bytes(data, size), as: UTF8.self)
    let answer = EndpointURL.isLoopbackAuthority(text)
    check(
        answer == referenceIsLoopback(text),
        "isLoopbackAuthority(\(text.debugDescription)) is \(answer), inet_pton says otherwise")
    if answer, text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
        do {
            let url = try EndpointURL("http://" + text + "/")
            check(EndpointURL.isLoopback(url.host), "EndpointURL's host of a loopback authority is not loopback")
        } catch {
            fail("EndpointURL refuses http:// to the loopback authority \(text.debugDescription): \(error)")
        }
    }
    return 0
}
