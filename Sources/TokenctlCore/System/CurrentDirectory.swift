#if canImport(Glibc)
import Glibc
#endif

/// `path` made absolute against the current directory (getcwd(3)); `path` itself when it is
/// absolute already or the current directory cannot be found.
public func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
    guard system_getcwd(&buffer, buffer.count) != nil else { return path }
    return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } + "/" + path
}
