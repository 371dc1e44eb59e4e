// Fuzz target: a profile file ($XDG_CONFIG_HOME/tokenctl/profiles/NAME.conf, hand-editable) as
// the engine reads it: FileIO.readFile's UTF-8 decoding with repair, ProfileConfiguration.parse
// (EndpointURL for every URL), then the serialize/parse round trip a login's rewrite relies on.
//
// Input: the file bytes.
// fuzz-extra-sources:
import TokenctlCore
import TokenctlEssentials

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProfileConfiguration(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = String(decoding: FuzzSupport.bytes(data, size), as: UTF8.self)
    let configuration: ProfileConfiguration
    do { configuration = try ProfileConfiguration.parse(text, path: "/fuzz/default.conf") } catch {
        _ = error.description
        return 0
    }
    for url in [configuration.issuer, configuration.tokenEndpoint, configuration.jwksURI].compactMap({ $0 }) {
        check(url.scheme == "https" || EndpointURL.isLoopback(url.host), "plain http to a remote host accepted")
        _ = url.withoutTrailingSlash
    }
    let written = configuration.serialized(profile: .default)
    do {
        let back = try ProfileConfiguration.parse(written, path: "/fuzz/default.conf")
        check(back == configuration, "parse(serialized()) differs from the configuration written")
    } catch {
        fail("ProfileConfiguration.parse rejects what serialized() wrote: \(error)")
    }
    return 0
}
