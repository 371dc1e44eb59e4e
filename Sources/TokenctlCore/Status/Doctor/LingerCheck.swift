import TokenctlEssentials

/// After a reboot with nobody logged in: whether the user manager starts at boot (systemd-logind's
/// linger), which runs the refresh timer and the keyring unit.
struct LingerCheck: DoctorCheck {
    let keyring: UnattendedKeyring

    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        let fact = keyring.lingerFact()
        return [DoctorFinding("linger", level: fact.holds ? .ok : .warn, fact.detail, hint: fact.hint)]
    }
}
