import TokenctlEssentials

/// What a stored session belongs to. An item is used only when all three match the
/// profile's configuration: a profile re-pointed at another issuer or client starts signed out.
public struct SessionIdentity: Hashable, Sendable {
    public var profile: ProfileName
    public var issuer: String
    public var clientID: String

    public init(profile: ProfileName, issuer: String, clientID: String) {
        self.profile = profile
        self.issuer = issuer
        self.clientID = clientID
    }

    public init(profile: ProfileName, configuration: ProfileConfiguration) {
        self.init(profile: profile, issuer: configuration.issuer.string, clientID: configuration.clientID)
    }
}
