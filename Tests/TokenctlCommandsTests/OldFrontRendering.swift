// The front's rendering of a hit before HotPath, through the general readers' values
// (Double time, String formatting): the reference HotPath.render is held to, by HotPathTests and
// by the HotPathDifferential fuzz target, which compiles this file too (its fuzz-extra-sources
// line), so both compare with one reference.
import TokenctlEssentials

enum OldFrontRendering {
    /// What the old front printed for `entry` (`log` on stderr with --verbose, `output` on stdout).
    static func render(_ entry: HotCacheEntry, profile: String, format: HotPath.Format, verbose: Bool, now: Double) -> (
        log: String, output: String
    ) {
        func jsonString(_ text: String) -> String {
            var result = "\""
            for character in text {
                if character == "\"" || character == "\\" { result.append("\\") }
                result.append(character)
            }
            return result + "\""
        }
        func duration(_ seconds: Double) -> String {
            let total = Int(seconds.rounded(.down))
            if total < 120 { return "\(total) s" }
            if total < 7200 { return "\(total / 60) min" }
            return "\(total / 3600) h \(total % 3600 / 60) min"
        }
        let output: String
        switch format {
        case .header:
            output = "Authorization: \(entry.tokenType) \(entry.accessToken)\n"
        case .json:
            var fields = [
                "\"access_token\":\(jsonString(entry.accessToken))", "\"token_type\":\(jsonString(entry.tokenType))",
            ]
            if let expiry = entry.expiresAt {
                fields.append("\"expires_at\":\(jsonString(Timestamp.iso8601(expiry)))")
                fields.append("\"expires_in\":\(max(0, Int(expiry - now)))")
            }
            output = "{" + fields.joined(separator: ",") + "}\n"
        case .raw:
            output = entry.accessToken + "\n"
        }
        // (A token with no stated expiry says so.)
        let validity =
            entry.statesNoExpiry ? "with no expiry stated" : "valid for \(duration(entry.effectiveExpiry - now))"
        let log = verbose ? "tokenctl: access token for '\(profile)' \(validity) (kernel keyring cache)\n" : ""
        return (log, output)
    }
}
