import Synchronization

#if canImport(Glibc)
import Glibc
#endif

// The one place tokenctl catches signals (signal(7), sigaction(2)): SIGINT, SIGTERM and SIGHUP,
// the signals that end a command, either held off while a rotated refresh token is in flight
// (`SignalDeferral`) or turned into a flag a serving loop polls (`StopSignals`).

/// The signals that end a command.
let stopSignalNumbers: [Int32] = [SIGINT, SIGTERM, SIGHUP]

/// Install `handler` for `signal`; the action it replaces.
@discardableResult
func installHandler(_ signal: Int32, _ handler: @convention(c) (Int32) -> Void, restart: Bool) -> sigaction {
    var action = sigaction()
    action.__sigaction_handler.sa_handler = handler
    system_sigemptyset(&action.sa_mask)
    action.sa_flags = restart ? SA_RESTART : 0
    var old = sigaction()
    system_sigaction(signal, &action, &old)
    return old
}

/// Holds off SIGINT, SIGTERM and SIGHUP while a rotated refresh token is in flight: from
/// sending the request until the new token set is safe (journaled, or written). A signal that
/// arrives meanwhile is recorded and delivered (default action) when the last deferral ends.
/// Every step inside is bounded, so SIGTERM always takes effect in the end.
///
/// A signal the process inherited as ignored (`nohup`, a background job of a shell ignoring
/// SIGINT) stays ignored: its disposition is left alone, and so it is never delivered later.
public enum SignalDeferral {
    /// The previous action of each signal whose handler was replaced.
    private static let mutex = Mutex<(depth: Int, saved: [(Int32, sigaction)])>((0, []))

    public static func begin() {
        mutex.withLock { state in
            state.depth += 1
            guard state.depth == 1 else { return }
            pendingSignal.store(0, ordering: .sequentiallyConsistent)
            state.saved = stopSignalNumbers.compactMap { signal in
                var current = sigaction()
                system_sigaction(signal, nil, &current)
                if isIgnored(current) { return nil }
                return (signal, installHandler(signal, recordSignal, restart: true))
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

/// SIGINT, SIGTERM and SIGHUP set a flag instead of ending the process: a serving loop
/// (`ForwardListener`) polls it, finishes what it answers and exits.
public enum StopSignals {
    /// Catch them from now on (no SA_RESTART: a poll(2) returns at once), and ignore SIGPIPE.
    public static func catchThem() {
        for signal in stopSignalNumbers { installHandler(signal, recordStop, restart: false) }
        system_signal(SIGPIPE, SIG_IGN)
    }

    /// Whether one of them arrived.
    public static var requested: Bool { stopSignal.load(ordering: .sequentiallyConsistent) != 0 }
}

private let stopSignal = Atomic<Int32>(0)

private let recordStop: @convention(c) (Int32) -> Void = { signal in
    stopSignal.store(signal, ordering: .sequentiallyConsistent)
}
