import CKernelKeyring

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The hit's argv: `token` and the options a hit may carry, read with ArgumentSyntax.
extension HotPath {
    // MARK: argv

    /// The `token` invocation in argv (argv[0] skipped), or `nil` for any other shape. Read with
    /// `ArgumentSyntax`, as the engine's parser reads it.
    // One function on purpose: one pass over the bytes, its state in locals, no allocation and no
    // helper the static front might not inline (see HotPath); a hit's cost is Scripts/bench's (a).
    public static func recognize(argc: Int32, argv: UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Request? {
        var request = Request()
        var sawToken = false
        var sawFormat = false
        var sawMinimumTimeToLive = false
        var accepted = true
        let isName = ArgumentSyntax.isName
        // The options a hit may carry that take a value (elsewhere, any option means "not mine").
        let takesValue = { (name: Bytes) -> Bool in
            isName(name, "--profile") || isName(name, "--format") || isName(name, "--min-ttl")
                || isName(name, "--scope") || isName(name, "--audience") || isName(name, "--resource")
        }
        let arguments = UnsafeBufferPointer(start: argv + 1, count: max(0, Int(argc) - 1))
        ArgumentSyntax.scan(arguments, takesValue: takesValue) { _, item in
            switch item {
            case .endOfOptions:
                accepted = false // `--`: the engine's
            case .operand(let argument):
                // A command or an argument: only the one `token`.
                if sawToken || !isEqual(cString: argument, "token") { accepted = false } else { sawToken = true }
            case .option(let name, let value, let inline):
                if isName(name, "-v") || isName(name, "--verbose") {
                    if inline { accepted = false }
                    request.verbose = true
                } else if isName(name, "--profile") {
                    if request.profile != nil || value == nil { accepted = false }
                    request.profile = value
                } else if !sawToken || value == nil {
                    accepted = false // anything else before `token`, and any flag (`--force`, `-h`)
                } else if isName(name, "--format") {
                    if sawFormat { accepted = false }
                    sawFormat = true
                    if isEqual(cString: value!, "raw") {
                        request.format = .raw
                    } else if isEqual(cString: value!, "header") {
                        request.format = .header
                    } else if isEqual(cString: value!, "json") {
                        request.format = .json
                    } else {
                        accepted = false
                    }
                } else if isName(name, "--min-ttl") {
                    if sawMinimumTimeToLive { accepted = false }
                    sawMinimumTimeToLive = true
                    if let seconds = wholeSeconds(value!) {
                        request.minimumTimeToLive = seconds
                    } else {
                        accepted = false
                    }
                } else if isName(name, "--scope") {
                    if request.scope != nil { accepted = false }
                    request.scope = value
                } else if isName(name, "--audience") {
                    if request.audience != nil { accepted = false }
                    request.audience = value
                } else if isName(name, "--resource") {
                    if request.resource != nil { accepted = false }
                    request.resource = value
                } else {
                    accepted = false
                }
            }
            return accepted ? .proceed : .stop
        }
        guard accepted, sawToken, isAcceptableTarget(request) else { return nil }
        return request
    }

    /// 1–9 decimal digits, at most a year (the engine's limit for `--min-ttl`).
    static func wholeSeconds(_ text: UnsafePointer<CChar>) -> Int64? {
        var value: Int64 = 0
        var index = 0
        while text[index] != 0 {
            let digit = UInt8(bitPattern: text[index])
            guard index < 9, digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(digit - UInt8(ascii: "0"))
            index += 1
        }
        guard index > 0, value <= 31_536_000 else { return nil }
        return value
    }

    /// The target's values as bytes (nil for a part not given).
    static func requestedTarget(_ request: Request) -> (scope: Bytes?, audience: Bytes?, resource: Bytes?) {
        func bytes(_ value: UnsafePointer<CChar>?) -> Bytes? {
            value.map { Bytes(start: UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self), count: strlen($0)) }
        }
        return (bytes(request.scope), bytes(request.audience), bytes(request.resource))
    }

    /// Whether every part given is one the engine's `TokenTarget` accepts (the same
    /// `TokenTargetSyntax.check`): `recognize` leaves the others to the engine, which says what
    /// is wrong. Checked once, here; `serve` only reads the bytes.
    static func isAcceptableTarget(_ request: Request) -> Bool {
        let target = requestedTarget(request)
        func acceptable(_ bytes: Bytes?, _ part: TokenTargetSyntax.Part) -> Bool {
            bytes.map { TokenTargetSyntax.check($0, part) == nil } ?? true
        }
        return acceptable(target.scope, .scope) && acceptable(target.audience, .audience)
            && acceptable(target.resource, .resource)
    }
}
