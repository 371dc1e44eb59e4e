import TokenctlEssentials

/// Each issuer: reachable, and our clock against its clock. Asked meanwhile, within the
/// command's deadline.
struct IssuerCheck: DoctorCheck {
    var runsMeanwhile: Bool { true }

    func findings(_ context: DoctorContext) async -> [DoctorFinding] {
        var findings: [DoctorFinding] = []
        var seen = Set<String>()
        for (_, configuration) in context.configured where seen.insert(configuration.issuer.string).inserted {
            findings += await Self.check(configuration, service: context.service)
        }
        return findings
    }

    private static func check(_ configuration: ProfileConfiguration, service: TokenctlService) async -> [DoctorFinding]
    {
        let clock = service.clock
        let http = service.httpClient(configuration.network)
        let url = ServerMetadata.discoveryURLs(for: configuration.issuer)[0]
        let left = service.deadline?.remaining(clock: clock) ?? 5
        guard left > 0.1 else {
            return [
                DoctorFinding(
                    "issuer \(configuration.issuer)", ok: false, "not checked: doctor's time ran out (--timeout)",
                    hint: "Run '\(tokenctl: .default, .doctor([.timeout(.word("30"))]))' to give the checks more time.")
            ]
        }
        do {
            let sentAt = clock.now()
            let response = try await http.send(.getJSON(url), timeout: min(5, left))
            let receivedAt = clock.now()
            return [
                DoctorFinding(
                    "issuer \(configuration.issuer)", ok: true, "reachable (discovery: HTTP \(response.status))")
            ] + clockFinding(response, at: (sentAt + receivedAt) / 2, issuer: configuration.issuer)
        } catch {
            return [
                DoctorFinding(
                    "issuer \(configuration.issuer)", ok: false, "unreachable: \(error.message)",
                    hint: error.advice ?? "Check the network, the proxy and the issuer URL.")
            ]
        }
    }

    /// Our clock against the issuer's, when its answer carried a Date.
    private static func clockFinding(_ response: HTTPResponse, at time: Double, issuer: EndpointURL) -> [DoctorFinding]
    {
        guard let offset = ClockSkew.offset(serverDate: response.serverDate, receivedAt: time) else { return [] }
        let trusted = ClockSkew.isTrusted(offset)
        return [
            DoctorFinding(
                "clock", level: trusted ? .ok : .warn,
                "\(offset >= 0 ? "+" : "")\(Int(saturating: offset)) s against \(issuer.host)",
                hint: trusted
                    ? nil
                    : "Beyond ±\(Int(ClockSkew.trustedBound)) s tokenctl refreshes online on every use; fix the system clock ('timedatectl')."
            )
        ]
    }
}
