import CSecret
import Testing

@testable import TokenctlCore

/// Secret Service errors are classified by GError domain and code (and the untranslated remote
/// D-Bus error name), never by their message: GLib translates messages, and a German or
/// Japanese session must be diagnosed the same. Every message below is deliberately foreign.
@Suite("Secret Service error classification")
struct StoreErrorClassificationTests {
    private func classify(_ domain: GQuark, _ code: UInt32, remote: String = "", mayPrompt: Bool = false) -> StoreError
        .Reason?
    {
        SecretServiceStore.classify(
            domain: domain, code: Int32(bitPattern: code), remoteName: remote, mayPrompt: mayPrompt)
    }

    @Test("D-Bus errors by code")
    func dbus() {
        let dbus = g_dbus_error_quark()
        #expect(classify(dbus, G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue) == .noSecretService)
        #expect(classify(dbus, G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue) == .noSecretService)
        #expect(classify(dbus, G_DBUS_ERROR_SPAWN_CHILD_EXITED.rawValue) == .noSecretService)
        #expect(classify(dbus, G_DBUS_ERROR_NO_REPLY.rawValue) == .timeout)
        #expect(classify(dbus, G_DBUS_ERROR_TIMED_OUT.rawValue) == .timeout)
        #expect(classify(dbus, G_DBUS_ERROR_DISCONNECTED.rawValue) == .serviceGone)
        #expect(classify(dbus, G_DBUS_ERROR_UNKNOWN_OBJECT.rawValue) == .serviceGone)
        #expect(classify(dbus, G_DBUS_ERROR_ACCESS_DENIED.rawValue) == nil)
    }

    @Test("the Secret Service's IsLocked, by its remote name or libsecret's code")
    func locked() {
        #expect(
            classify(
                g_dbus_error_quark(), G_DBUS_ERROR_FAILED.rawValue, remote: "org.freedesktop.Secret.Error.IsLocked")
                == .locked)
        #expect(classify(secret_error_get_quark(), SECRET_ERROR_IS_LOCKED.rawValue) == .locked)
        #expect(classify(secret_error_get_quark(), SECRET_ERROR_PROTOCOL.rawValue) == nil)
    }

    @Test("GIO errors: a watchdog cancellation is an unanswered prompt only where a prompt can come")
    func io() {
        let io = g_io_error_quark()
        #expect(classify(io, G_IO_ERROR_TIMED_OUT.rawValue) == .timeout)
        #expect(classify(io, G_IO_ERROR_CANCELLED.rawValue) == .timeout)
        #expect(classify(io, G_IO_ERROR_CANCELLED.rawValue, mayPrompt: true) == .promptPending)
        #expect(classify(io, G_IO_ERROR_CONNECTION_CLOSED.rawValue) == .serviceGone)
    }

    @Test("a real GError with a translated message is classified by its code")
    func translatedMessage() {
        let error = g_error_new_literal(
            g_dbus_error_quark(), Int32(G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue),
            "Der Name org.freedesktop.secrets wurde von keiner .service-Datei bereitgestellt")!
        defer { g_error_free(error) }
        #expect(
            SecretServiceStore.classify(
                domain: error.pointee.domain, code: error.pointee.code, remoteName: "", mayPrompt: false)
                == .noSecretService)
    }
}
