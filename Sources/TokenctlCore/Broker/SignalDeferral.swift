import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Holds off SIGINT, SIGTERM and SIGHUP while a rotated refresh token is in flight: from
/// sending the request until the new token set is safe (journaled, or written). A signal that
/// arrives meanwhile is recorded and delivered (default action) when the last deferral ends.
/// Every step inside is bounded, so SIGTERM always takes effect in the end.
///
/// A signal the process inherited as ignored (`nohup`, a background job of a shell ignoring
/// SIGINT) stays ignored: its disposition is left alone, and so it is never delivered later.
public enum SignalDeferral {
    private static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP]
    /// The previous action of each signal whose handler was replaced.
    private static let mutex = Mutex<(depth: Int, saved: [(Int32, sigaction)])>((0, []))

    public static func begin() {
        mutex.withLock { state in
            state.depth += 1
            guard state.depth == 1 else { return }
            pendingSignal.store(0, ordering: .sequentiallyConsistent)
            state.saved = signals.compactMap { signal in
                var current = sigaction()
                system_sigaction(signal, nil, &current)
                if isIgnored(current) { return nil }
                var action = sigaction()
                action.__sigaction_handler.sa_handler = recordSignal
                system_sigemptyset(&action.sa_mask)
                action.sa_flags = SA_RESTART
                var old = sigaction()
                system_sigaction(signal, &action, &old)
                return (signal, old)
            }
        }
    }

    /// SIG_IGN is `(__sighandler_t) 1` in C, a cast Swift does not import.
    private static func isIgnored(_ action: sigaction) -> Bool {
        guard action.sa_flags & SA_SIGINFO == 0, let handler = action.__sigaction_handler.sa_handler else {
            return false
        }
        return unsafeBitCast(handler, to: Int.self) == 1
    }

    public static func end() {
        let pending: Int32 = mutex.withLock { state in
            state.depth -= 1
            guard state.depth == 0 else { return 0 }
            for (signal, old) in state.saved {
                var previous = old
                system_sigaction(signal, &previous, nil)
            }
            state.saved = []
            return pendingSignal.exchange(0, ordering: .sequentiallyConsistent)
        }
        guard pending != 0 else { return }
        // Process-directed, not raise(): this may be a Dispatch worker thread, which blocks
        // signals, and a thread-directed signal would stay pending there forever. The default
        // action ends the process from whichever thread takes it; wait here until it does,
        // so nothing runs after the interruption (the fallback exit mirrors the shell's 128+n).
        system_kill(system_getpid(), pending)
        for _ in 0..<200 { system_usleep(5_000) }
        _exit(128 + pending)
    }
}

private let pendingSignal = Atomic<Int32>(0)

private let recordSignal: @convention(c) (Int32) -> Void = { signal in
    pendingSignal.store(signal, ordering: .sequentiallyConsistent)
}
