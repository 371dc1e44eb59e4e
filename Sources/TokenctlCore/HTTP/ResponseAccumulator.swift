/// Collects one response; callbacks reach it through libcurl's user-data pointer. (Internal,
/// not private: the TokenResponse fuzz target feeds header lines through it, as libcurl does.)
final class ResponseAccumulator {
    let limit: Int
    var body: [UInt8] = []
    var headers: [String: String] = [:]
    var exceeded = false

    init(limit: Int) { self.limit = limit }

    func appendHeaderLine(_ bytes: UnsafeBufferPointer<UInt8>) {
        let line = String(decoding: bytes, as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            headers = [:] // a new response (after 100 Continue): start over
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let name = line[..<colon].lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t\r\n")
        headers[name] = value
    }
}

/// Trimming without Foundation: what libcurl hands over (header lines) and what programs print.
extension StringProtocol {
    func trimmingCharacters(in set: String) -> String {
        let characters = Set(set)
        guard let start = firstIndex(where: { !characters.contains($0) }) else { return "" }
        let end = lastIndex(where: { !characters.contains($0) })!
        return String(self[start...end])
    }
}
