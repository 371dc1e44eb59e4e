import TokenctlEssentials

/// The profiles: there are some, and each one loads.
struct ConfigurationCheck: DoctorCheck {
    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        let directory = context.service.profiles.paths.profilesDirectory
        let names: [ProfileName]
        switch context.profiles.names {
        case .failure(let error): return [DoctorFinding("configuration", ok: false, error.message)]
        case .success(let listed): names = listed
        }
        var findings: [DoctorFinding] = []
        if names.isEmpty {
            findings.append(
                DoctorFinding(
                    "configuration", ok: false, "no profiles in \(directory)",
                    hint:
                        "Sign a profile in: '\(tokenctl: .default, .login([.issuer(.placeholder), .clientID(.placeholder)]))'."
                ))
        }
        findings += context.profiles.failures.map { DoctorFinding("configuration", ok: false, $0.message) }
        if !context.configured.isEmpty && context.configured.count == names.count {
            findings.append(DoctorFinding("configuration", ok: true, "\(names.count) profile(s) in \(directory)"))
        }
        return findings
    }
}
