import TokenctlEssentials

/// After a reboot with nobody logged in: whether something starts the Secret Service and unlocks
/// it (tokenctl-keyring.service, `tokenctl keyring setup --unattended`). Not set up is advice
/// (a desktop's login unlocks the keyring); set up but not enabled breaks the next boot.
struct KeyringUnitCheck: DoctorCheck {
    let keyring: UnattendedKeyring

    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        let fact = keyring.unitFact()
        let level: DoctorFinding.Level = fact.holds ? .ok : keyring.isInstalled ? .fail : .warn
        return [DoctorFinding("keyring unit", level: level, fact.detail, hint: fact.hint)]
    }
}
