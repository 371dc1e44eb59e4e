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
    var locks: any LockProvider { service.locks }
    /// How long a lock may be waited for now (`TokenctlService.lockTimeout`).
    var lockTimeout: Double { service.lockTimeout }
    var events: EventLog? { service.events }
    var hotCache: HotCache? { service.hotCache }
}
