import TokenctlEssentials

/// After a reboot with nobody logged in: whether the sealed keyring password still unseals on
/// this machine (another TPM, a cleared TPM, a lockout say so here). Only when set up.
struct KeyringSealCheck: DoctorCheck {
    let keyring: UnattendedKeyring

    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        guard keyring.isInstalled else { return [] }
        let fact = keyring.sealFact()
        return [DoctorFinding("keyring seal", ok: fact.holds, fact.detail, hint: fact.hint)]
    }
}

/// After a reboot with nobody logged in, where only systemd's host key can seal: whether root's
/// credential and its system unit are there, else the command for root (`hostKeyFact`).
struct HostKeySealCheck: DoctorCheck {
    let keyring: UnattendedKeyring

    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        guard let fact = keyring.hostKeyFact() else { return [] }
        return [DoctorFinding(fact.name, level: fact.holds ? .ok : .warn, fact.detail, hint: fact.hint)]
    }
}
