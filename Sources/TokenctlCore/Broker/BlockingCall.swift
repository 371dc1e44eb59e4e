import Dispatch

/// Blocking calls (libsecret's synchronous D-Bus round trips, a few milliseconds to seconds
/// each) on Dispatch's threads, so that an actor awaiting one is free meanwhile and Swift's
/// cooperative pool (one thread per core) is never blocked: `refresh --all` over many profiles
/// overlaps their keyring calls instead of queueing them on the broker's executor.
enum BlockingCall {
    static func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                continuation.resume(returning: Result { () throws(E) -> T in try body() })
            }
        }
        return try result.get()
    }
}
