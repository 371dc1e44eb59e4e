import TokenctlEssentials

/// Unattended refresh: a systemd timer or a crontab entry, and whether it works.
struct RefreshScheduleCheck: DoctorCheck {
    let schedule: RefreshSchedule

    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        let installed = schedule.status().filter(\.installed)
        if installed.isEmpty {
            return [
                DoctorFinding(
                    "refresh schedule", level: .warn, "no systemd timer or crontab entry",
                    hint: "Run '\(tokenctl: .default, .schedule(.install, []))' to keep sessions alive unattended.")
            ]
        }
        return installed.map { entry in
            DoctorFinding(
                "refresh schedule", ok: entry.working, "\(entry.backend.rawValue): \(entry.detail)",
                hint: entry.working
                    ? nil : "Run '\(tokenctl: .default, .schedule(.install, []))' again from a login session.")
        }
    }
}
