import CKernelKeyring

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The static front's `token` hit, at the level of bytes: argv as C strings, the environment
/// through `getenv`, the profile file and the hot-cache payload as raw bytes, the output written
/// with `write(2)`. No String, Array, Dictionary, Double parsing or printing, and nothing generic
/// that is not specialized here: each of those pages in parts of the Swift runtime (metadata
/// instantiation, the demangler, Unicode tables, strtod), which cost a hit more than the work.
///
/// It recognizes only the common shapes and says "not mine" (`nil`/`false`) on any doubt; the
/// front then execs the engine, whose full parser and readers decide exactly as they always do.
/// So everything this accepts is a subset of what `CommandLineParser`, `ProfileConfiguration`,
/// `EndpointURL` and `HotCacheEntry.decode` accept, with the same meaning (tests check both).
///
/// Accepted argv (after argv[0]): `token` once; before or after it `--profile NAME`,
/// `--profile=NAME` (once) and `-v`/`--verbose`; after it `--format raw|header|json` and
/// `--min-ttl N` (decimal digits, at most 31536000), and `--scope S`, `--audience A`,
/// `--resource R` (a target, see `TokenTarget`), each once, also as `--opt=value`.
/// Anything else (`--force`, `--timeout`, `--`, `-h`, `help`, other values) is the engine's.
///
/// Its main steps (`serve`, `recognize`, `profileIdentity`, `cachedToken`, `render`) are long
/// functions on purpose: each is one pass over its bytes with its state in locals, with no
/// closure, helper type or generic call between them that the compiler might not inline into
/// the static front (every function it keeps is code a hit pages in); their tests (HotPathTests,
/// the differential fuzz target) read them as units.
///
/// By concern: this file (the types and the whole hit), `HotPath+Arguments` (argv),
/// `HotPath+Profile` (profile name, paths, the profile file), `HotPath+Payload` (the hot-cache
/// key and payload) and `HotPath+Output` (freshness, rendering, byte helpers).
public enum HotPath {
    public typealias Bytes = UnsafeBufferPointer<UInt8>

    public enum Format: Sendable, Equatable {
        case raw, header, json
    }

    /// What a recognized `token` invocation asks for.
    public struct Request {
        /// `--profile`'s value as given (a C string in argv), else `nil`.
        public var profile: UnsafePointer<CChar>?
        public var format: Format = .raw
        /// Whole seconds.
        public var minimumTimeToLive = Int64(AccessTokenLifetime.defaultMinimumTimeToLive)
        public var verbose = false
        /// `--scope`, `--audience` and `--resource` as given (C strings in argv), else `nil`.
        public var scope: UnsafePointer<CChar>?
        public var audience: UnsafePointer<CChar>?
        public var resource: UnsafePointer<CChar>?

        public init() {}

        /// Whether a target other than the session's own is asked for.
        public var hasTarget: Bool { scope != nil || audience != nil || resource != nil }
    }

    /// A wall-clock time, as `clock_gettime` gives it.
    public struct Instant: Sendable {
        public var seconds: Int64
        public var nanoseconds: Int64

        public init(seconds: Int64, nanoseconds: Int64) {
            self.seconds = seconds
            self.nanoseconds = nanoseconds
        }

        public static func now() -> Instant {
            var spec = timespec()
            clock_gettime(CLOCK_REALTIME, &spec)
            return Instant(seconds: Int64(spec.tv_sec), nanoseconds: Int64(spec.tv_nsec))
        }
    }

    /// A payload time: whole seconds and milliseconds (the encoder writes at most 3 decimals).
    public struct Time: Sendable, Equatable {
        public var seconds: Int64
        public var milliseconds: Int64
    }

    /// The parts of a profile file a hit needs (slices of the file's bytes).
    public struct ProfileIdentity {
        public var issuer: Bytes
        public var clientID: Bytes
    }

    /// The parts of a hot-cache payload a hit needs (slices of the payload's bytes).
    public struct CachedToken {
        public var accessToken: Bytes
        public var tokenType: Bytes
        public var obtainedAt: Time
        public var expiresAt: Time?
        public var issuedLifetime: Time?
        /// `expires_at=never`: no stated expiry (`HotCacheEntry.statesNoExpiry`).
        public var statesNoExpiry = false
    }

    /// Where a hit's output was rendered: the `--verbose` line (maybe empty), then standard
    /// output, back to back from the start of the output buffer.
    public struct Rendered: Equatable {
        public var logCount: Int
        public var outputCount: Int
    }

    // MARK: The whole hit

    static let fileCapacity = 16 * 1024
    static let pathCapacity = Int(PATH_MAX) + 1
    static let descriptionCapacity = 128
    static let payloadCapacity = HotCacheEntry.maximumPayloadSize
    static let outputCapacity = 2 * HotCacheEntry.maximumPayloadSize + 512

    /// Serve `token` from the hot cache if this invocation is a plain hit: write the token (and
    /// the `--verbose` line) and return true. False means nothing was written: run the engine.
    ///
    /// - Parameter forwardSocket: the forward socket this process gets its tokens from
    ///   (`forwardSocket(environment:)`): then the hot-cache entry is that socket's as it is
    ///   bound now (`ForwardClient.cacheIssuer`), not a local profile file's, and a hit needs
    ///   something serving it (`ForwardClient.liveness`).
    // One function on purpose: one pass over the bytes, its state in locals, no allocation and no
    // helper the static front might not inline (see HotPath); a hit's cost is Scripts/bench's (a).
    public static func serve(
        argc: Int32, argv: UnsafePointer<UnsafeMutablePointer<CChar>?>, now: Instant,
        environment: (UnsafePointer<CChar>) -> UnsafePointer<CChar>?, forwardSocket: UnsafePointer<CChar>? = nil
    ) -> Bool {
        guard let request = recognize(argc: argc, argv: argv) else { return false }
        // One block for every buffer, filled front to back with only what each step produced:
        // a hit's path, file, key name, payload and output usually share one or two pages,
        // and only the pages touched are ever faulted in.
        let total = pathCapacity + fileCapacity + descriptionCapacity + payloadCapacity + outputCapacity
        guard let block = malloc(total)?.assumingMemoryBound(to: UInt8.self) else { return false }
        var payload = block
        var payloadCount = 0
        var output = block
        var rendered: Rendered?
        defer {
            // The token was in these bytes.
            explicit_bzero(payload, payloadCount)
            if let rendered { explicit_bzero(output, rendered.logCount + rendered.outputCount) }
            free(block)
        }

        let path = block
        guard environment(cString(disableVariable)).map({ !isEqual(cString: $0, "1") }) ?? true,
            let profile = profileName(request, environment: environment)
        else { return false }
        let identity: ProfileIdentity
        let description: UnsafeMutablePointer<UInt8>
        if let forwardSocket {
            // A forwarded session's entry: keyed by the socket as it is bound now (each `ssh -R`
            // and each listener binds a file of its own), no local profile file; and served only
            // while something serves the socket (a probe that connects to nothing there).
            var writer = Writer(block, capacity: pathCapacity + fileCapacity)
            writer.append("forward:")
            writer.append(cString: forwardSocket)
            writer.append("#")
            guard ForwardClient.socketFileIdentity(forwardSocket, into: &writer),
                ForwardClient.liveness(forwardSocket) == .served
            else { return false }
            let issuerCount = writer.count
            writer.append("tokenctl-forward")
            guard !writer.overflowed else { return false }
            identity = ProfileIdentity(
                issuer: Bytes(start: block, count: issuerCount),
                clientID: Bytes(start: block + issuerCount, count: writer.count - issuerCount))
            description = block + writer.count
        } else {
            guard
                let pathCount = profileFilePath(
                    profile: profile, environment: environment, into: path, capacity: pathCapacity)
            else { return false }
            let file = path + pathCount + 1
            guard let fileCount = readFile(path, into: file, capacity: fileCapacity),
                let found = profileIdentity(Bytes(start: file, count: fileCount))
            else { return false }
            identity = found
            description = file + fileCount
        }
        let target = requestedTarget(request)
        guard
            let descriptionCount = keyDescription(
                profile: profile, issuer: identity.issuer, clientID: identity.clientID,
                targetDigest: request.hasTarget
                    ? TokenTargetSyntax.digest(
                        scope: target.scope, audience: target.audience, resource: target.resource) : nil,
                into: description, capacity: descriptionCapacity)
        else { return false }
        description[descriptionCount] = 0

        let key = description.withMemoryRebound(to: CChar.self, capacity: descriptionCount + 1) {
            tokenctl_keyctl_search(tokenctl_key_spec_user_keyring(), "user", $0)
        }
        guard key >= 0 else { return false }
        payload = description + descriptionCount + 1
        let size = tokenctl_keyctl_read(key, payload, payloadCapacity)
        guard size > 0 else { return false }
        payloadCount = min(Int(size), payloadCapacity)
        guard Int(size) <= payloadCapacity else { return false }
        output = payload + payloadCount

        guard
            let token = cachedToken(
                Bytes(start: payload, count: payloadCount), profile: profile, issuer: identity.issuer,
                clientID: identity.clientID,
                scope: target.scope, audience: target.audience, resource: target.resource)
        else { return false }
        rendered = render(
            token, profile: profile, request: request, now: now,
            into: UnsafeMutableBufferPointer(start: output, count: outputCapacity))
        guard let rendered else { return false }

        // Scripts read our stdout through pipes that may close early: never die of SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        writeAll(2, output, rendered.logCount)
        writeAll(1, output + rendered.logCount, rendered.outputCount)
        return true
    }
}
