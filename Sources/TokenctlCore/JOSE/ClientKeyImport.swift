/// What `key import` takes: PEM (a private key, PKCS#8 or traditional, and optionally its
/// certificate, in any order) or a PKCS#12 bundle (its password from standard input, never argv).
public enum ClientKeyImport {
    /// PEM text, or else a PKCS#12 bundle without a password.
    public static func standardInput(_ bytes: [UInt8], now: Date) throws(TokenctlError) -> ClientKey {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.contains("-----BEGIN ") else { return try pkcs12(bytes, password: nil, now: now) }
        let blocks = pemBlocks(text)
        guard let keyBlock = blocks.first(where: { $0.label.hasSuffix("PRIVATE KEY") }) else {
            throw TokenctlError(
                .invalidInput,
                "no private key on standard input (PEM blocks: \(blocks.map(\.label).joined(separator: ", ")))",
                hint:
                    "Pipe in the private key in PEM (PKCS#8, or traditional EC or RSA), optionally followed by its certificate."
            )
        }
        if keyBlock.label == "ENCRYPTED PRIVATE KEY" || keyBlock.text.contains("Proc-Type: 4,ENCRYPTED") {
            throw TokenctlError(
                .invalidInput, "the private key is encrypted",
                hint: "Decrypt it first, e.g. 'openssl pkey -in KEY.pem | tokenctl key import'.")
        }
        let certificate = blocks.first { $0.label == "CERTIFICATE" }
        return try ClientKey(
            privateKeyPEM: Array(keyBlock.text.utf8), location: .keyring,
            certificatePEM: certificate.map { Array($0.text.utf8) }, created: now)
    }

    /// A PKCS#12 bundle's key and certificate.
    public static func pkcs12(_ bytes: [UInt8], password: String?, now: Date) throws(TokenctlError) -> ClientKey {
        let parts: (keyPEM: [UInt8]?, certificatePEM: [UInt8]?)
        do { parts = try OpenSSL.pkcs12(bytes, password: password) } catch {
            throw TokenctlError(
                .invalidInput,
                "not a PEM key or a PKCS#12 file that opens\(password == nil ? " without a password" : " with this password"): \(error)",
                hint: password == nil
                    ? "For a PKCS#12 file with a password: '\(tokenctl: .default, .key(.import, [.bundle(.placeholder), .passwordStdin]))'."
                    : nil)
        }
        guard var keyPEM = parts.keyPEM else {
            throw TokenctlError(.invalidInput, "the PKCS#12 file holds no private key")
        }
        defer { for index in keyPEM.indices { keyPEM[index] = 0 } }
        return try ClientKey(
            privateKeyPEM: keyPEM, location: .keyring, certificatePEM: parts.certificatePEM, created: now)
    }

    /// The PEM blocks (RFC 7468) of `text`: each label and its whole text, BEGIN to END line.
    static func pemBlocks(_ text: String) -> [(label: String, text: String)] {
        var blocks: [(label: String, text: String)] = []
        var current: (label: String, lines: [String])?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map({
            $0.hasSuffix("\r") ? String($0.dropLast()) : String($0)
        }) {
            if current == nil, line.hasPrefix("-----BEGIN "), line.hasSuffix("-----") {
                current = (String(line.dropFirst(11).dropLast(5)), [line])
            } else if var block = current {
                block.lines.append(line)
                if line == "-----END \(block.label)-----" {
                    blocks.append((block.label, block.lines.joined(separator: "\n") + "\n"))
                    current = nil
                } else {
                    current = block
                }
            }
        }
        return blocks
    }
}
