import TokenctlEssentials

// Fuzz target: an authorization server's metadata document (OpenID Connect Discovery 1.0 /
// RFC 8414) as ServerMetadata.parse reads it: once against a fixed configured issuer, and once
// against the issuer the document names (when that is a usable URL), so the endpoint checks are
// reached without the fuzzer having to guess the issuer; then the well-known URLs for that
// issuer and fillGaps between the two parses.
//
// Input: the document bytes.
// fuzz-extra-sources:
@testable import TokenctlCore

let configuredIssuer = try! EndpointURL("https://login.example.com")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDiscovery(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzSupport.bytes(data, size)
    let url = "https://login.example.com/.well-known/openid-configuration"
    var first: ServerMetadata?
    do { first = try ServerMetadata.parse(bytes, expectedIssuer: configuredIssuer, url: url) } catch {
        _ = error.description
    }

    guard let object = JSONValue.parseObject(bytes), let named = object["issuer"]?.stringValue,
        let issuer = try? EndpointURL(named)
    else { return 0 }
    let urls = ServerMetadata.discoveryURLs(for: issuer)
    // EndpointURL keeps the URL as written (the scheme may be "HtTpS"); `scheme` is lower-cased.
    check(
        urls.count == 2 && urls.allSatisfy { $0.lowercased().hasPrefix(issuer.scheme + "://") },
        "discovery URLs lost the issuer's scheme")
    do {
        var metadata = try ServerMetadata.parse(bytes, expectedIssuer: issuer, url: urls[0])
        check(EndpointURL.sameIssuer(metadata.issuer, issuer.string), "metadata accepted for another issuer")
        if let first { metadata.fillGaps(from: first) }
        _ = ServerMetadata.discoveryURLs(for: metadata.tokenEndpoint)
    } catch {
        _ = error.description
    }
    return 0
}
