import TokenctlEssentials

/// A step of a login (`LoginProcedure`): what it reads of the service, by the service's names.
protocol LoginStep {
    var service: TokenctlService { get }
}

extension LoginStep {
    var profiles: ProfileRepository { service.profiles }
    var store: any SessionStore { service.store }
    var clock: Clock { service.clock }
    var retry: RetryPolicy { service.retry }
    var locks: any ProfileLocking { service.locks }
    /// When a wait for the profile lock ends (`TokenctlService.lockDeadline`).
    var lockDeadline: Deadline { service.lockDeadline }
    var events: EventLog? { service.events }
    var hotCache: HotCache? { service.hotCache }
}
