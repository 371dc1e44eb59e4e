/// The words for what the C target `Sources/CLazyLoader` reports about a library it opens with
/// `dlopen` on first use. The calls into each library stay in that library's own file.
enum LazyLibrary {
    /// What a library's `tokenctl_*_open` (`opener`: given a message buffer and its size) says
    /// about loading it: nil when it has every function tokenctl calls.
    static func loadProblem(_ opener: (UnsafeMutablePointer<CChar>, Int) -> UnsafePointer<CChar>?) -> String? {
        var message = [CChar](repeating: 0, count: 256)
        return message.withUnsafeMutableBufferPointer { buffer in
            opener(buffer.baseAddress!, buffer.count).map { String(cString: $0) }
        }
    }

    /// Why `library` (`soname`) cannot be used, with the package that provides it.
    static func unavailableMessage(_ library: String, soname: String, failure: String, package: String) -> String {
        "cannot load \(library) (\(soname)): \(failure); install \(package)"
    }
}
