import TokenctlEssentials

/// The session bus the Secret Service is reached over.
struct SessionBusCheck: DoctorCheck {
    /// The bus's address and where it was found; nil: none.
    let bus: (address: String, source: String)?

    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        if let bus {
            return [DoctorFinding("session bus", ok: true, "\(bus.address) (from \(bus.source))")]
        }
        if context.secretServiceUnneeded {
            return [DoctorFinding("session bus", ok: true, "none; " + DoctorContext.secretServiceUnneededDetail)]
        }
        return [
            DoctorFinding(
                "session bus", ok: false,
                "not found: DBUS_SESSION_BUS_ADDRESS is unset and there is no bus socket in the runtime directory",
                hint:
                    "Set DBUS_SESSION_BUS_ADDRESS, or enable lingering ('loginctl enable-linger $USER') so /run/user/$UID/bus exists."
            )
        ]
    }
}
