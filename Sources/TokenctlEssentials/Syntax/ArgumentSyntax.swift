#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// argv, at the level of C strings: which argument is an operand, an option (with the value
/// written after `=`, or the next argument when the option takes one) or `--`. The one reader
/// the front's `token` hit (`HotPath.recognize`) and the engine's parser
/// (`CommandLineParser`) share; each gives the words their meaning.
///
/// - An argument that does not start with `-`, and `-` itself, is an operand.
/// - `--` ends the options: every later argument is an operand.
/// - `--name=value` is the option `--name` with the value `value`; a short option (`-v`) never
///   carries one.
/// - An option that `takesValue` (asked with its name) and has no `=value` takes the next
///   argument as its value, whatever it looks like; at the end of argv it has none.
public enum ArgumentSyntax {
    public typealias Bytes = UnsafeBufferPointer<UInt8>

    public enum Item {
        /// An operand: a command, an argument.
        case operand(UnsafePointer<CChar>)
        /// An option's name (up to `=`), and its value: the part after `=` (`inline`), the next
        /// argument, or nil when it takes none or argv ended.
        case option(name: Bytes, value: UnsafePointer<CChar>?, inline: Bool)
        /// `--`.
        case endOfOptions
    }

    /// What the reader does after an item.
    public enum Next {
        case proceed
        /// Every later argument is an operand (`exec -- COMMAND`: the command's own argv).
        case operandsOnly
        case stop
    }

    /// `arguments` as the NUL-terminated C strings of an argv, for `body` only: how the
    /// engine's parser reads Swift strings with the reader the front's hit uses on its own argv.
    public static func withArgumentVector<Result, Failure: Error>(
        _ arguments: [String],
        _ body: (UnsafeBufferPointer<UnsafeMutablePointer<CChar>?>) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        var pointers = arguments.map { strdup($0) }
        defer { for pointer in pointers { free(pointer) } }
        return try pointers.withUnsafeMutableBufferPointer { buffer throws(Failure) -> Result in
            try body(UnsafeBufferPointer(buffer))
        }
    }

    /// Read `arguments` (argv without argv[0]) in order. `index` is each item's position in
    /// `arguments`. A nil pointer (never in a real argv) ends the reading.
    public static func scan(
        _ arguments: UnsafeBufferPointer<UnsafeMutablePointer<CChar>?>, takesValue: (Bytes) -> Bool,
        _ body: (_ index: Int, _ item: Item) -> Next
    ) {
        var index = 0
        var operandsOnly = false
        while index < arguments.count {
            guard let mutable = arguments[index] else { return }
            let argument = UnsafePointer(mutable)
            let item: Item
            let first = UInt8(bitPattern: argument[0])
            if operandsOnly || first != UInt8(ascii: "-") || argument[1] == 0 {
                item = .operand(argument)
            } else if argument[1] == CChar(UInt8(ascii: "-")) && argument[2] == 0 {
                item = .endOfOptions
            } else {
                let length = strlen(argument)
                var nameLength = length
                var inlineValue: UnsafePointer<CChar>?
                if argument[1] == CChar(UInt8(ascii: "-")), let equals = strchr(argument, Int32(UInt8(ascii: "="))) {
                    nameLength = UnsafePointer(equals) - argument
                    inlineValue = UnsafePointer(equals) + 1
                }
                let name = Bytes(
                    start: UnsafeRawPointer(argument).assumingMemoryBound(to: UInt8.self), count: nameLength)
                if let inlineValue {
                    item = .option(name: name, value: inlineValue, inline: true)
                } else if takesValue(name) {
                    index += 1
                    let next = index < arguments.count ? arguments[index].map { UnsafePointer($0) } : nil
                    item = .option(name: name, value: next, inline: false)
                } else {
                    item = .option(name: name, value: nil, inline: false)
                }
            }
            if case .endOfOptions = item { operandsOnly = true }
            switch body(index, item) {
            case .proceed: break
            case .operandsOnly: operandsOnly = true
            case .stop: return
            }
            index += 1
        }
    }

    /// Whether `name` is exactly `literal`.
    public static func isName(_ name: Bytes, _ literal: StaticString) -> Bool {
        name.count == literal.utf8CodeUnitCount
            && (name.count == 0 || memcmp(name.baseAddress!, literal.utf8Start, name.count) == 0)
    }
}
