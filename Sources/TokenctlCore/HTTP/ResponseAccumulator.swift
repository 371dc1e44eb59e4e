import CCurl

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

// libcurl's CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION (their data: the accumulator).
let curlWriteBody: tokenctl_curl_data_callback = { data, size, count, context in
    let accumulator = Unmanaged<ResponseAccumulator>.fromOpaque(context!).takeUnretainedValue()
    let length = size * count
    guard accumulator.body.count + length <= accumulator.limit else {
        accumulator.exceeded = true
        return 0 // makes libcurl stop with CURLE_WRITE_ERROR
    }
    data!.withMemoryRebound(to: UInt8.self, capacity: length) {
        accumulator.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
    }
    return length
}

let curlWriteHeader: tokenctl_curl_data_callback = { data, size, count, context in
    let accumulator = Unmanaged<ResponseAccumulator>.fromOpaque(context!).takeUnretainedValue()
    let length = size * count
    data!.withMemoryRebound(to: UInt8.self, capacity: length) {
        accumulator.appendHeaderLine(UnsafeBufferPointer(start: $0, count: length))
    }
    return length
}
