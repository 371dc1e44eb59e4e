import TokenctlEssentials

/// The Secret Service answers, and its default collection is unlocked (the `keyring` line),
/// by the answer the run asked for (`DoctorContext.storeAvailability`).
struct SecretServiceCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        let store = context.service.store.secretServiceSide
        let secretService =
            (store as? JournaledSessionStore)?.inner as? SecretServiceStore ?? store as? SecretServiceStore
        // After the check: naming the provider connects first, and the check must get the time.
        var providerName: String { secretService.map { " (provider: \($0.keyringProgram().name))" } ?? "" }
        guard case .failure(let error) = context.storeAvailability else {
            return [
                DoctorFinding("secret service", ok: true, "reachable" + providerName),
                DoctorFinding("keyring", ok: true, "default collection unlocked"),
            ]
        }
        if SessionStoreRouter.isAbsent(error), context.secretServiceUnneeded {
            return [DoctorFinding("secret service", ok: true, "absent; " + DoctorContext.secretServiceUnneededDetail)]
        }
        switch error.reason {
        case .locked, .noDefaultCollection:
            return [
                DoctorFinding("secret service", ok: true, "reachable" + providerName),
                DoctorFinding("keyring", ok: false, error.message, hint: error.hint),
            ]
        default:
            return [DoctorFinding("secret service", ok: false, error.message, hint: error.hint)]
        }
    }
}
