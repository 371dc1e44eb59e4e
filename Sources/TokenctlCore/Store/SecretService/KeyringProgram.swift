// The keyring program: the program that provides the Secret Service, so that messages and hints fit it.
import TokenctlEssentials

/// The program that provides the Secret Service, so that hints fit it.
public enum KeyringProgram: Sendable, Equatable {
    case gnomeKeyring, keePassXC, kWallet
    case other(String)
    case unknown

    /// From the owner's `/proc/PID/comm`.
    public init(processName: String) {
        switch processName {
        case "gnome-keyring-d", "gnome-keyring-daemon": self = .gnomeKeyring
        case let name where name.lowercased().hasPrefix("keepassxc"): self = .keePassXC
        case "kwalletd5", "kwalletd6", "ksecretd": self = .kWallet
        default: self = .other(TerminalText.short(processName))
        }
    }

    /// " (KeePassXC)" after "the Secret Service" in messages; nothing when unknown.
    var label: String { self == .unknown ? "" : " (\(name))" }

    public var name: String {
        switch self {
        case .gnomeKeyring: "gnome-keyring"
        case .keePassXC: "KeePassXC"
        case .kWallet: "KWallet"
        case .other(let name): name
        case .unknown: "the Secret Service provider"
        }
    }

    /// How to start one when none owns the name (the user's provider is unknown then).
    public static let startAnyHint: Suggestion =
        "Start your Secret Service provider: gnome-keyring ('\(program: "gnome-keyring-daemon --start --components=secrets")'), KeePassXC (Settings > Secret Service Integration, with a database open), or KWallet (apiEnabled=true under [org.freedesktop.secrets] in kwalletrc)."

    /// What unlocks this program's keyring, and what gives it a default collection.
    private var advice: (unlock: Suggestion, noDefaultCollection: Suggestion) {
        switch self {
        case .gnomeKeyring:
            (
                "Unlock it (log in to the desktop, or run '\(program: Self.gnomeKeyringUnlock)') and try again.",
                "Create one, e.g. by unlocking gnome-keyring once: '\(program: Self.gnomeKeyringUnlock)'."
            )
        case .keePassXC:
            (
                "Unlock the database in KeePassXC (the one exposed under Settings > Secret Service Integration) and try again.",
                "Expose a database group under Settings > Secret Service Integration in KeePassXC, and unlock that database."
            )
        case .kWallet:
            (
                "Open the wallet (log in to Plasma, or open 'kdewallet' in KWalletManager) and try again.",
                "Create the wallet 'kdewallet' in KWalletManager."
            )
        case .other, .unknown:
            ("Unlock it in \(name) and try again.", "Set a default collection in \(name).")
        }
    }

    /// gnome-keyring-daemon(1) unlocking the login keyring with a password on standard input.
    static let gnomeKeyringUnlock =
        #"printf %s "$PASSWORD" | gnome-keyring-daemon --replace --unlock --components=secrets"#

    var unlockHint: Suggestion { advice.unlock }

    var perItemUnlockHint: Suggestion {
        switch self {
        case .keePassXC:
            "Run '\(tokenctl: .default, .status([.all]))' in a terminal of your desktop session and allow the access request KeePassXC shows (or turn off 'Confirm when passwords are retrieved by clients' in its Secret Service settings)."
        default:
            "Run '\(tokenctl: .default, .status([.all]))' in a terminal of your desktop session and allow the access request \(name) shows."
        }
    }

    var noDefaultCollectionHint: Suggestion { advice.noDefaultCollection }
}
