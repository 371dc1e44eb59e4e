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
