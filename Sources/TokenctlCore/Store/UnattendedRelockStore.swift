import Synchronization
import TokenctlEssentials

/// The Secret Service of an unattended keyring (`tokenctl keyring setup --unattended`), which
/// unlocks the login collection again when someone locked it since tokenctl-keyring.service
/// started (`secret-tool lock`, org.freedesktop.Secret.Service.Lock): a call that fails with
/// `StoreError.Reason.locked` restarts the unit, which unseals the password and hands it to
/// gnome-keyring-daemon again, and is made once more. One restart per command, bounded by its
/// deadline; if the collection stays locked, the call's own error stands (its hint names
/// `keyring status`). Only where nobody can answer an unlock prompt and the unit is installed
/// (`wrapping`): a desktop's keyring is never restarted.
public final class UnattendedRelockStore: WrappingSessionStore, Sendable {
    /// Restart the keyring unit within `timeout` seconds; whether it started again.
    public typealias Restart = @Sendable (_ timeout: Double) -> Bool

    let inner: any SessionStore
    let restart: Restart
    /// Make the wrapped store's next call connect to the restarted daemon.
    let reconnect: @Sendable () -> Void
    let deadline: Deadline?
    let narrate: TokenBroker.Narrator?
    /// Whether the unit was restarted, shared with the bounded copies: once per command.
    let restarted: Shared

    final class Shared: Sendable {
        let done = Mutex(false)
    }

    /// The longest a restart waits when the command has no deadline (`login`): the unit is
    /// `Type=dbus`, so `systemctl restart` returns once the new daemon owns its bus name.
    static let restartBound = 30.0

    init(
        _ inner: any SessionStore, deadline: Deadline?, narrate: TokenBroker.Narrator?, restart: @escaping Restart,
        reconnect: @escaping @Sendable () -> Void, restarted: Shared = Shared()
    ) {
        self.inner = inner
        self.reconnect = reconnect
        self.deadline = deadline
        self.narrate = narrate
        self.restart = restart
        self.restarted = restarted
    }

    /// `store` itself unless the unattended keyring is installed and nobody can answer an
    /// unlock prompt (`SecretServiceStore.Options.interactive`); else `store` behind this one.
    public static func wrapping(
        _ store: any SessionStore, installed: Bool, interactive: Bool, deadline: Deadline?,
        narrate: TokenBroker.Narrator?, restart: @escaping Restart = restartUnit,
        reconnect: @escaping @Sendable () -> Void
    ) -> any SessionStore {
        guard installed, !interactive else { return store }
        return UnattendedRelockStore(
            store, deadline: deadline, narrate: narrate, restart: restart, reconnect: reconnect)
    }

    /// `systemctl --user restart tokenctl-keyring.service`, ended by coreutils' timeout(1) after
    /// `timeout` seconds.
    public static let restartUnit: Restart = { timeout in
        let seconds = String(max(1, Int(timeout.rounded(.up))))
        return Subprocess.run(
            ["timeout", "--kill-after=1", seconds, "systemctl", "--user", "restart", UnattendedKeyring.unitName]
        ).status == 0
    }

    /// `body`, and when it failed because the collection is locked, the unit restarted (once per
    /// command) and `body` again.
    func recovering<Value>(_ body: () throws(StoreError) -> Value) throws(StoreError) -> Value {
        do {
            return try body()
        } catch {
            guard error.reason == .locked, claimRestart() else { throw error }
            let timeout = deadline.map { min($0.remaining(), Self.restartBound) } ?? Self.restartBound
            guard timeout > 0, restart(timeout) else { throw error }
            reconnect()
            let value = try body()
            narrate?("the login keyring was locked: restarted \(UnattendedKeyring.unitName), which unlocked it")
            return value
        }
    }

    private func claimRestart() -> Bool {
        restarted.done.withLock { done in
            defer { done = true }
            return !done
        }
    }

    public func read(_ identity: SessionIdentity) throws(StoreError) -> TokenSet? {
        try recovering { () throws(StoreError) in try inner.read(identity) }
    }
    public func write(_ tokenSet: TokenSet, for identity: SessionIdentity) throws(StoreError) {
        try recovering { () throws(StoreError) in try inner.write(tokenSet, for: identity) }
    }
    public func delete(_ identity: SessionIdentity) throws(StoreError) -> Bool {
        try recovering { () throws(StoreError) in try inner.delete(identity) }
    }
    public func delete(_ identity: SessionIdentity, ifRefreshTokenIs refreshToken: String) throws(StoreError) -> Bool {
        try recovering { () throws(StoreError) in try inner.delete(identity, ifRefreshTokenIs: refreshToken) }
    }
    public func storedIdentities() throws(StoreError) -> [SessionIdentity] {
        try recovering { () throws(StoreError) in try inner.storedIdentities() }
    }
    public var secrets: any SessionStore { inner }
    public func forwarding<Value>(_ call: (any SessionStore) throws(StoreError) -> Value) throws(StoreError)
        -> Value
    {
        try recovering { () throws(StoreError) in try call(inner) }
    }
    public func checkAvailable() throws(StoreError) {
        try recovering { () throws(StoreError) in try inner.checkAvailable() }
    }
    public func checkWritable(_ identity: SessionIdentity) throws(StoreError) {
        try recovering { () throws(StoreError) in try inner.checkWritable(identity) }
    }
    public func bounded(until deadline: Deadline) -> any SessionStore {
        UnattendedRelockStore(
            inner.bounded(until: deadline), deadline: deadline.earlier(self.deadline), narrate: narrate,
            restart: restart, reconnect: reconnect, restarted: restarted)
    }
}
