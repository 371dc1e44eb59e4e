// GError classification: the StoreError for what libsecret and GDBus report.
import CSecret
import CSecretShim
import TokenctlEssentials

extension SecretServiceStore {
    static func isUnknownObject(_ error: UnsafeMutablePointer<GError>) -> Bool {
        let domain = error.pointee.domain
        let code = error.pointee.code
        if domain == g_dbus_error_quark() {
            return code == Int32(G_DBUS_ERROR_UNKNOWN_OBJECT.rawValue)
                || code == Int32(G_DBUS_ERROR_UNKNOWN_METHOD.rawValue)
                || code == Int32(G_DBUS_ERROR_UNKNOWN_INTERFACE.rawValue)
        }
        if domain == secret_error_get_quark() { return code == Int32(SECRET_ERROR_NO_SUCH_OBJECT.rawValue) }
        return false
    }

    /// The daemon a call was addressed to by its unique name has exited (restarted since).
    static func isGoneDaemon(_ error: UnsafeMutablePointer<GError>) -> Bool {
        let code = error.pointee.code
        return error.pointee.domain == g_dbus_error_quark()
            && (code == Int32(G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue)
                || code == Int32(G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue))
    }

    func lockedError() -> StoreError {
        let program = keyringProgram()
        return StoreError(
            .locked, "the keyring is locked" + program.label,
            hint: UnattendedKeyring.isInstalled(.process)
                ? Suggestion.sentences(Self.unattendedLockedHint, "The session is kept.")
                : Suggestion.sentences(program.unlockHint, "The session is kept."))
    }

    /// A locked keyring where `tokenctl keyring setup --unattended` unlocks it at each start.
    static let unattendedLockedHint: Suggestion =
        "tokenctl-keyring.service unlocks it whenever the user manager starts: run '\(tokenctl: .default, .keyring(.status, []))' to see why it did not. If this machine's TPM was cleared or replaced, the sessions here need a new login ('\(tokenctl: .default, .login([]))') or the original TPM"

    func perItemLockedError() -> StoreError {
        let program = keyringProgram()
        return StoreError(
            .itemLocked, "\(program.name) keeps tokenctl's item locked until you allow this program to access it",
            hint: Suggestion.sentences(program.perItemUnlockHint, "The session is kept."))
    }

    /// A GError's class by its domain and code, and the remote D-Bus error name (which is
    /// never translated): never by its message, which GLib translates.
    ///
    /// - Parameter mayPrompt: the call could have been waiting for a keyring program's prompt (create,
    ///   delete, unlock), so a cancellation by the watchdog may mean an unanswered prompt.
    /// - Returns: nil for an error of no known class.
    static func classify(domain: GQuark, code: Int32, remoteName: String, mayPrompt: Bool) -> StoreError.Reason? {
        if remoteName == "org.freedesktop.Secret.Error.IsLocked" { return .locked }
        let code = UInt32(bitPattern: code)
        if domain == g_dbus_error_quark() {
            switch code {
            case G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue, G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue,
                G_DBUS_ERROR_SPAWN_EXEC_FAILED.rawValue, G_DBUS_ERROR_SPAWN_FORK_FAILED.rawValue,
                G_DBUS_ERROR_SPAWN_CHILD_EXITED.rawValue, G_DBUS_ERROR_SPAWN_CHILD_SIGNALED.rawValue,
                G_DBUS_ERROR_SPAWN_FAILED.rawValue, G_DBUS_ERROR_SPAWN_SETUP_FAILED.rawValue,
                G_DBUS_ERROR_SPAWN_CONFIG_INVALID.rawValue, G_DBUS_ERROR_SPAWN_SERVICE_INVALID.rawValue,
                G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND.rawValue, G_DBUS_ERROR_SPAWN_PERMISSIONS_INVALID.rawValue,
                G_DBUS_ERROR_SPAWN_FILE_INVALID.rawValue, G_DBUS_ERROR_SPAWN_NO_MEMORY.rawValue:
                return .noSecretService
            case G_DBUS_ERROR_NO_REPLY.rawValue, G_DBUS_ERROR_TIMEOUT.rawValue, G_DBUS_ERROR_TIMED_OUT.rawValue:
                return .timeout
            case G_DBUS_ERROR_DISCONNECTED.rawValue, G_DBUS_ERROR_UNKNOWN_OBJECT.rawValue,
                G_DBUS_ERROR_UNKNOWN_METHOD.rawValue,
                G_DBUS_ERROR_UNKNOWN_INTERFACE.rawValue:
                return .serviceGone
            default:
                return nil
            }
        }
        if domain == secret_error_get_quark() {
            return code == SECRET_ERROR_IS_LOCKED.rawValue ? .locked : nil
        }
        if domain == g_io_error_quark() {
            switch code {
            case G_IO_ERROR_TIMED_OUT.rawValue: return .timeout
            // Only tokenctl's watchdog cancels: the call (or a prompt it waits for) ran out of time.
            case G_IO_ERROR_CANCELLED.rawValue: return mayPrompt ? .promptPending : .timeout
            case G_IO_ERROR_CLOSED.rawValue, G_IO_ERROR_BROKEN_PIPE.rawValue, G_IO_ERROR_CONNECTION_CLOSED.rawValue:
                return .serviceGone
            default: return nil
            }
        }
        return nil
    }

    /// The StoreError for a GError (consumed) from libsecret/GDBus, classified by `classify`.
    func storeError(_ error: UnsafeMutablePointer<GError>?, operation: String, mayPrompt: Bool = false) -> StoreError {
        guard let error else { return StoreError(.other, "could not \(operation)") }
        defer { g_error_free(error) }
        let message = TerminalText.short(error.pointee.message.map { String(cString: $0) } ?? "unknown error")
        var remoteName = ""
        if let remote = tokenctl_error_remote_name(error) {
            remoteName = String(cString: remote)
            g_free(remote)
        }
        let kept: Suggestion = "Restart your Secret Service provider and try again; the session is kept."
        switch Self.classify(
            domain: error.pointee.domain, code: error.pointee.code, remoteName: remoteName, mayPrompt: mayPrompt)
        {
        case .noSecretService:
            return StoreError(
                .noSecretService,
                "no Secret Service on the session bus (\(remoteName.isEmpty ? "no owner" : remoteName))",
                hint: KeyringProgram.startAnyHint)
        case .timeout:
            return StoreError(
                .timeout, "the Secret Service\(keyringProgram().label) did not answer in time (\(operation))",
                hint: "Check that it is running and not waiting for a prompt; the session is kept.")
        case .serviceGone:
            return StoreError(
                .serviceGone, "the Secret Service went away during the operation (\(operation)): \(message)", hint: kept
            )
        case .locked:
            return lockedError()
        case .promptPending:
            let program = keyringProgram()
            return StoreError(
                .promptPending,
                "the Secret Service\(program.label) did not finish in time (\(operation)); it may be waiting for a confirmation prompt",
                hint: options.interactive
                    ? "Approve the request in \(program.name) and try again; the session is kept."
                    : "Run the command again in a terminal of your desktop session and approve the request \(program.name) shows; the session is kept."
            )
        default:
            return StoreError(.other, "could not \(operation): \(message)")
        }
    }
}
