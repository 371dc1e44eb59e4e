// Every libqrencode call of tokenctl lives in this file. libqrencode is loaded on first use
// (Sources/CQRencode), so only a device-flow login on a terminal maps it.
import CQRencode

/// A QR code of a URL, for the device flow on a terminal (libqrencode does the encoding).
public struct QRCode: Sendable, Equatable {
    /// Modules row by row; `true` is dark.
    public let modules: [[Bool]]

    /// Encode `text` (8-bit mode, error correction level L), or `nil` if it does not fit or
    /// libqrencode cannot be loaded (the QR code is a convenience: the caller shows the link alone).
    public init?(_ text: String) {
        guard QRCode.unavailableReason == nil else { return nil }
        guard let code = tokenctl_qrcode_encode_string(text, 0, QR_ECLEVEL_L, QR_MODE_8, 1) else { return nil }
        defer { tokenctl_qrcode_free(code) }
        let width = Int(code.pointee.width)
        var rows: [[Bool]] = []
        for row in 0..<width {
            // Bit 0 of each byte is the module's colour (1: dark); the other bits are libqrencode's bookkeeping.
            rows.append((0..<width).map { column in code.pointee.data[row * width + column] & 1 == 1 })
        }
        modules = rows
    }

    /// Why libqrencode cannot be used, or nil once it is loaded (on the first call; thread-safe).
    public static var unavailableReason: String? {
        guard let failure = tokenctl_qrencode_load() else { return nil }
        return LazyLibrary.unavailableMessage(
            "libqrencode", soname: TOKENCTL_QRENCODE_SONAME, failure: String(cString: failure), package: "libqrencode4")
    }

    /// What loading `soname` as libqrencode would say (nil: it has every function tokenctl calls),
    /// without touching the loaded table: for tests of the failure path.
    static func loadProblem(soname: String) -> String? {
        var api = tokenctl_qrencode_api()
        return LazyLibrary.loadProblem { tokenctl_qrencode_open(soname, &api, $0, $1) }
    }

    /// Terminal lines with half-block characters, two module rows per line, and a quiet zone of
    /// `margin` modules (QR readers need 4; terminals are dark or light, so both colours are drawn).
    public func terminalLines(margin: Int = 2) -> [String] {
        let width = modules.count + 2 * margin
        func dark(_ row: Int, _ column: Int) -> Bool {
            let r = row - margin
            let c = column - margin
            guard r >= 0, c >= 0, r < modules.count, c < modules.count else { return false }
            return modules[r][c]
        }
        var lines: [String] = []
        var row = 0
        while row < width {
            var line = ""
            for column in 0..<width {
                // Light modules are drawn as the block (foreground), dark as space: reads on dark terminals.
                switch (dark(row, column), row + 1 < width ? dark(row + 1, column) : true) {
                case (false, false): line += "█"
                case (false, true): line += "▀"
                case (true, false): line += "▄"
                case (true, true): line += " "
                }
            }
            lines.append(line)
            row += 2
        }
        return lines
    }
}
