// The connection to the Secret Service: the bus, the proxy and its session, and the bound of every call.
import CSecret
import CSecretShim
import Dispatch
import Synchronization
import TokenctlEssentials

extension SecretServiceStore {
    /// The connection, made on first use and kept: GIO's shared session-bus connection and the
    /// Secret Service proxy with its open session.
    struct Connection: @unchecked Sendable {
        var service: UnsafeMutablePointer<SecretService>?
        var bus: OpaquePointer?
        var keyringProgram: KeyringProgram?
        /// The daemon (unique bus name) this connection primed (`prime`): a restarted one
        /// must be primed again.
        var primedOwner: String?
        /// Where each item was last found (`readSecret`, `storeSecret`): a write after a read goes
        /// straight to it (`storeSecret`, `knownItem`).
        var knownItems: [ItemKey: KnownItem] = [:]
    }

    // MARK: Bounds

    /// The bound of the next call, in milliseconds: the per-call timeout or what is left of the
    /// command's deadline (`floor` past it, for the write of a rotated set).
    func boundMilliseconds(_ operation: String, floor: Double = 0) throws(StoreError) -> Int32 {
        var seconds = options.callTimeout
        if let deadline = options.deadline {
            let left = max(deadline.remaining(clock: .system), floor)
            guard left > 0.05 else {
                throw StoreError(
                    .deadline, "the command's time ran out (--timeout) before tokenctl could \(operation)",
                    hint: "Give it more time with \(options: .token([.timeout(.placeholder)])); the session is kept.")
            }
            seconds = min(seconds, left)
        }
        return Int32(max(50, min(seconds * 1000, Double(Int32.max))))
    }

    /// Run `body` with a GCancellable that a watchdog cancels after `milliseconds`: prompts
    /// (CreateItem, Delete, Unlock) and the bus connection have no D-Bus timeout of their own.
    /// When `prompt` is given and the call is still running after a second, `promptNotice`
    /// hears what to approve.
    func withWatchdog<T>(
        _ milliseconds: Int32, prompt: (@Sendable () -> String)? = nil,
        _ body: (UnsafeMutablePointer<GCancellable>) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        let cancellable = CancellableHandle()
        let finished = FinishedFlag()
        // A call that cannot prompt has the proxy's D-Bus timeout, whose error says more: the
        // watchdog is only its backstop (connecting to the bus has no timeout at all).
        let bound = Int(milliseconds) + (prompt == nil ? 500 : 0)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(bound)) { [cancellable, finished] in
            if !finished.isSet { g_cancellable_cancel(cancellable.pointer) }
        }
        if let prompt, let notice = options.promptNotice, milliseconds > 1000 {
            DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(1)) { [finished] in
                if !finished.isSet { notice(prompt()) }
            }
        }
        defer { finished.set() }
        return try body(cancellable.pointer)
    }

    // MARK: Connecting

    func connect() throws(StoreError) -> UnsafeMutablePointer<SecretService> {
        let milliseconds = try boundMilliseconds("connect to the Secret Service", floor: 0)
        let handle = try connection.state.withLock { (state) throws(StoreError) -> ServiceHandle in
            if let service = state.service {
                // A daemon restarted since (`status --watch`): prime it before anything else.
                if let owner = Self.nameOwner(service), owner != state.primedOwner {
                    try prime(service, milliseconds: milliseconds)
                    state.primedOwner = owner
                }
                return ServiceHandle(service)
            }
            let service = try openService(&state, milliseconds: milliseconds)
            state.service = service
            return ServiceHandle(service)
        }
        tokenctl_proxy_set_timeout(handle.pointer, milliseconds)
        return handle.pointer
    }

    /// A new connection: the session bus (kept in `state`), a lean proxy of the Secret Service,
    /// primed, with an open session; every step within `milliseconds`.
    private func openService(_ state: inout Connection, milliseconds: Int32) throws(StoreError)
        -> UnsafeMutablePointer<SecretService>
    {
        guard system_getenv("DBUS_SESSION_BUS_ADDRESS") != nil else {
            // GLib would try to autolaunch a bus through X11 and report that instead.
            throw StoreError(
                .noSessionBus,
                "no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is unset and there is no bus socket at $XDG_RUNTIME_DIR/bus or /run/user/\(system_getuid())/bus",
                hint: Self.noBusHint)
        }
        // GIO's shared session connection (the one the proxy below uses), kept referenced for
        // the life of the store so that it stays open between calls. Connecting has no
        // timeout of its own (a stopped bus daemon never answers the handshake).
        let bus = try withWatchdog(milliseconds) { (cancellable) throws(StoreError) -> OpaquePointer in
            var error: UnsafeMutablePointer<GError>?
            guard let bus = g_bus_get_sync(G_BUS_TYPE_SESSION, cancellable, &error) else {
                let message = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "unknown error"
                if let error { g_error_free(error) }
                throw StoreError(
                    .noSessionBus, "cannot connect to the D-Bus session bus: \(message)", hint: Self.noBusHint)
            }
            return bus
        }
        if let previous = state.bus { tokenctl_object_unref(UnsafeMutableRawPointer(previous)) }
        state.bus = bus
        var error: UnsafeMutablePointer<GError>?
        // A lean proxy: building it sends nothing to the Secret Service, so the first call
        // that reaches the daemon is OpenSession, already under our timeout (a stopped
        // daemon must not hang a cron job for D-Bus's default 25 s).
        guard let service = tokenctl_secret_service_open(milliseconds, &error) else {
            throw storeError(error, operation: "connect to the Secret Service")
        }
        do throws(StoreError) { try prime(service, milliseconds: milliseconds) } catch {
            tokenctl_object_unref(service)
            throw error
        }
        state.primedOwner = Self.nameOwner(service)
        var opened = try withWatchdog(milliseconds) { cancellable in
            secret_service_ensure_session_sync(service, cancellable, &error)
        }
        // kwalletd5 now and then fails to negotiate an encrypted session ("Client public key
        // size is invalid"): one more try, for an error of no known class only.
        if opened == 0, let failed = error,
            Self.classify(
                domain: failed.pointee.domain, code: failed.pointee.code, remoteName: "", mayPrompt: false) == nil
        {
            g_error_free(failed)
            error = nil
            opened = try withWatchdog(milliseconds) { cancellable in
                secret_service_ensure_session_sync(service, cancellable, &error)
            }
        }
        if opened == 0 {
            tokenctl_object_unref(service)
            throw storeError(error, operation: "open a session with the Secret Service")
        }
        return service
    }

    /// The first call of a connection to the Secret Service: see `tokenctl_secret_service_prime`
    /// (gnome-keyring 42 aborts when a connection's first call loses a race on a busy daemon).
    private func prime(_ service: UnsafeMutablePointer<SecretService>, milliseconds: Int32) throws(StoreError) {
        var error: UnsafeMutablePointer<GError>?
        let primed = try withWatchdog(milliseconds) { cancellable in
            tokenctl_secret_service_prime(service, milliseconds, cancellable, &error)
        }
        if primed == 0 { throw storeError(error, operation: "connect to the Secret Service") }
    }

    static func nameOwner(_ service: UnsafeMutablePointer<SecretService>) -> String? {
        guard let owner = tokenctl_proxy_name_owner(service) else { return nil }
        defer { g_free(owner) }
        return String(cString: owner)
    }

    /// The proxy pointer, handed out of the lock (it lives as long as the store).
    private struct ServiceHandle: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<SecretService>
        init(_ pointer: UnsafeMutablePointer<SecretService>) { self.pointer = pointer }
    }

    struct BusHandle: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    static let noBusHint: Suggestion =
        "Run tokenctl inside your login session, or set DBUS_SESSION_BUS_ADDRESS (e.g. unix:path=/run/user/$(id -u)/bus); for cron and timers without a login, enable lingering: '\(program: "loginctl enable-linger $USER")'."

    /// Forget the open session (and its proxy): the next call opens a new one.
    func dropSession() {
        connection.state.withLock { state in
            tokenctl_object_unref(state.service)
            state.service = nil
            state.primedOwner = nil
        }
    }

    /// Forget the daemon: its proxy and session, and where its items were. After the Secret
    /// Service was restarted (`UnattendedRelockStore`), the next call connects to the new one.
    public func reconnect() {
        dropSession()
        connection.state.withLock { $0.knownItems = [:] }
    }

    func requireUnlockedDefaultCollection(_ service: UnsafeMutablePointer<SecretService>) throws(StoreError) {
        let milliseconds = try boundMilliseconds("open the default keyring")
        var error: UnsafeMutablePointer<GError>?
        let collection = try withWatchdog(milliseconds) { cancellable in
            secret_collection_for_alias_sync(service, "default", SECRET_COLLECTION_NONE, cancellable, &error)
        }
        if let error { throw storeError(error, operation: "open the default keyring") }
        guard let collection else {
            let program = keyringProgram()
            throw StoreError(
                .noDefaultCollection, "the Secret Service\(program.label) has no default keyring (collection)",
                hint: program.noDefaultCollectionHint)
        }
        defer { tokenctl_object_unref(collection) }
        tokenctl_proxy_set_timeout(collection, milliseconds)
        if secret_collection_get_locked(collection) != 0 { throw lockedError() }
    }
}

/// A GCancellable shared with the watchdog, freed when both are done with it.
private final class CancellableHandle: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<GCancellable>
    init() { pointer = g_cancellable_new() }
    deinit { tokenctl_object_unref(pointer) }
}

/// Set once the guarded call has returned; the watchdog then does nothing.
private final class FinishedFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}
