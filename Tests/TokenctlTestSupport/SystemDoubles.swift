import Foundation
import TokenctlCore

/// A systemd user manager for one test, in place of `systemctl --user`: it records every call
/// and keeps which units are enabled and active, as the real manager reports them
/// (systemctl(1): `is-enabled` and `is-active` exit 0 only when they are, `is-active` prints the
/// state). `stopManager()` makes every call fail as systemctl does without a user manager;
/// `fail(_:with:)` makes one verb fail. The unit files are the test's own: `SystemdUserUnits`
/// writes them into the directory the test engine's XDG_CONFIG_HOME names.
public final class SystemdDouble: Sendable {
    struct State {
        var calls: [[String]] = []
        var running = true
        var enabled: Set<String> = []
        var active: Set<String> = []
        var failures: [String: Subprocess.Result] = [:]
        var onStart: (@Sendable (String) -> Void)?
    }

    private let state = TestLock(State())
    /// Where "the package" keeps its units: a directory of the test's (empty unless it writes there).
    public let packagedUnitDirectory: String

    public init(packagedUnitDirectory: String) {
        self.packagedUnitDirectory = packagedUnitDirectory
    }

    /// What systemctl says when no user manager answers (a cron job, a container, `su`).
    public static let noManager = "Failed to connect to bus: No medium found"

    /// The manager's verbs, for `EngineEnvironment.userUnits`.
    public var units: SystemdUserUnits {
        SystemdUserUnits(packagedUnitDirectory: packagedUnitDirectory) { arguments in self.answer(arguments) }
    }

    /// Every `systemctl --user` call, its arguments in order.
    public var calls: [[String]] { state.withLock { $0.calls } }

    /// The units enabled now.
    public var enabledUnits: Set<String> { state.withLock { $0.enabled } }

    /// From now on no manager answers.
    public func stopManager() { state.withLock { $0.running = false } }

    /// The verb (`enable`, `daemon-reload` …) fails from now on with `output` and exit status 1.
    public func fail(_ verb: String, with output: String) {
        state.withLock { $0.failures[verb] = Subprocess.Result(status: 1, output: output + "\n") }
    }

    /// `body` runs whenever a unit is started (`start`, `restart`, `enable --now`), after the
    /// manager has recorded it: what the unit would do (a keyring daemon unlocking).
    public func onStart(_ body: @escaping @Sendable (String) -> Void) { state.withLock { $0.onStart = body } }

    /// `unit` is enabled and active, as if enabled before the test.
    public func enableBeforehand(_ unit: String) {
        state.withLock {
            $0.enabled.insert(unit)
            $0.active.insert(unit)
        }
    }

    private func answer(_ arguments: [String]) -> Subprocess.Result {
        let (result, started) = record(arguments)
        if let (unit, body) = started { body(unit) }
        return result
    }

    private func record(_ arguments: [String]) -> (Subprocess.Result, (String, @Sendable (String) -> Void)?) {
        let result = state.withLock { state in
            state.calls.append(arguments)
            guard state.running else { return Subprocess.Result(status: 1, output: Self.noManager + "\n") }
            guard let verb = arguments.first else { return Subprocess.Result(status: 1, output: "too few arguments\n") }
            if let failure = state.failures[verb] { return failure }
            let unit = arguments.last ?? ""
            switch verb {
            case "enable":
                state.enabled.insert(unit)
                if arguments.contains("--now") { state.active.insert(unit) }
            case "disable":
                state.enabled.remove(unit)
                if arguments.contains("--now") { state.active.remove(unit) }
            case "is-enabled":
                return state.enabled.contains(unit)
                    ? Subprocess.Result(status: 0, output: "enabled\n")
                    : Subprocess.Result(status: 1, output: "disabled\n")
            case "is-active":
                return state.active.contains(unit)
                    ? Subprocess.Result(status: 0, output: "active\n")
                    : Subprocess.Result(status: 3, output: "inactive\n")
            case "start", "restart": state.active.insert(unit)
            case "stop": state.active.remove(unit)
            default: break
            }
            return Subprocess.Result(status: 0, output: "")
        }
        let verb = arguments.first ?? ""
        let starts = verb == "start" || verb == "restart" || (verb == "enable" && arguments.contains("--now"))
        guard result.status == 0, starts, let body = state.withLock({ $0.onStart }) else { return (result, nil) }
        return (result, (arguments.last ?? "", body))
    }
}

/// The user's crontab for one test, in place of crontab(1): it keeps the table in memory and
/// answers `-l` and `-` as crontab does (`-l` without a table: "no crontab for USER", exit 1),
/// recording each call. `uninstall()` makes it a machine without crontab; `fail(_:with:)` makes
/// `-l` or `-` fail.
public final class CrontabDouble: Sendable {
    struct State {
        var table: String?
        var installed = true
        var calls: [[String]] = []
        var failures: [String: Subprocess.Result] = [:]
    }

    private let state = TestLock(State())

    public init(table: String? = nil) {
        state.withLock { $0.table = table }
    }

    /// crontab(1) for `EngineEnvironment.crontab`.
    public var crontab: Crontab {
        Crontab(isInstalled: { self.state.withLock { $0.installed } }) { arguments, input in
            self.answer(arguments, input)
        }
    }

    /// The table now (nil: the user has none).
    public var table: String? { state.withLock { $0.table } }

    /// Every call, its arguments in order.
    public var calls: [[String]] { state.withLock { $0.calls } }

    /// The user's table is `text` from now on (edited by hand, as `crontab -e` would).
    public func replaceTable(_ text: String?) { state.withLock { $0.table = text } }

    /// From now on crontab is not installed.
    public func uninstall() { state.withLock { $0.installed = false } }

    /// crontab `argument` (`-l`, `-`) fails from now on with `output` and exit status 1.
    public func fail(_ argument: String, with output: String) {
        state.withLock { $0.failures[argument] = Subprocess.Result(status: 1, output: output + "\n") }
    }

    private func answer(_ arguments: [String], _ input: String?) -> Subprocess.Result {
        state.withLock { state in
            state.calls.append(arguments)
            if let argument = arguments.first, let failure = state.failures[argument] { return failure }
            switch arguments {
            case ["-l"]:
                guard let table = state.table else {
                    return Subprocess.Result(status: 1, output: "no crontab for test\n")
                }
                return Subprocess.Result(status: 0, output: table)
            case ["-"]:
                state.table = input ?? ""
                return Subprocess.Result(status: 0, output: "")
            default:
                return Subprocess.Result(status: 1, output: "crontab: usage error\n")
            }
        }
    }
}

/// The machine an unattended keyring depends on, for one test, in place of tpm2-tools,
/// systemd-creds(1), the TPM's device node and systemd-logind's linger files: it records every
/// tpm2-tools and systemd-creds call (never its input: the password), writes stand-in files
/// where `tpm2_createprimary`, `tpm2_create` (0660, as tpm2-tools 5.4 does), `tpm2_load` and
/// systemd-creds' `encrypt` are told to (so that a test can see the files and their modes),
/// and answers `tpm2_load` and `decrypt` as told (`breakSeal(with:)` makes them fail as the
/// tools do, e.g. with another TPM). Linger is a file in the test's own directory, as in
/// /var/lib/systemd/linger.
public final class UnattendedDouble: Sendable {
    struct State {
        var calls: [[String]] = []
        var tpmCalls: [[String]] = []
        var inputs: [Int] = []
        var decrypted = "not-the-password"
        var tpmPresent = true
        var tpmAccessible = true
        var offersUser = false
        var decryptFailure: String?
        var encryptFailure: String?
    }

    private let state = TestLock(State())
    public let lingerDirectory: String
    public let tpmDevice: String
    public static let userName = "tester"

    public init(root: String) {
        lingerDirectory = root + "/linger"
        tpmDevice = root + "/tpmrm0"
    }

    /// The host for `EngineEnvironment.unattendedHost`.
    public var host: UnattendedHost {
        UnattendedHost(
            tpmDevice: tpmDevice, lingerDirectory: lingerDirectory,
            tpmPresent: { self.state.withLock { $0.tpmPresent } },
            tpmAccessible: { self.state.withLock { $0.tpmAccessible } }, userName: { Self.userName },
            programInstalled: { _ in true }, tpm2Tool: { tool, arguments, input in self.tpm(tool, arguments, input) }
        ) { arguments, input in self.answer(arguments, input) }
    }

    /// Every tpm2-tools call: the tool (without `tpm2_`), then its arguments.
    public var tpmCalls: [[String]] { state.withLock { $0.tpmCalls } }

    /// What `decrypt` prints on success (a password sealed by systemd-creds).
    public func decryptGives(_ output: String) { state.withLock { $0.decrypted = output } }

    /// Every systemd-creds call, its arguments in order.
    public var calls: [[String]] { state.withLock { $0.calls } }
    /// The length of each input given on standard input, in order (the password's, never itself).
    public var inputLengths: [Int] { state.withLock { $0.inputs } }

    /// Linger on (or off) for the test's user.
    public func setLinger(_ on: Bool) {
        let path = lingerDirectory + "/" + Self.userName
        if on {
            try? FileManager.default.createDirectory(atPath: lingerDirectory, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: path, contents: Data())
        } else {
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    /// The TPM: there or not, and whether this user may open it.
    public func setTPM(present: Bool, accessible: Bool) {
        state.withLock {
            $0.tpmPresent = present
            $0.tpmAccessible = accessible
        }
    }

    /// systemd-creds offers `--user` (systemd 256 and later).
    public func offerUserCredentials() { state.withLock { $0.offersUser = true } }

    /// `decrypt` fails from now on, saying `output` (exit status 1).
    public func breakSeal(with output: String) { state.withLock { $0.decryptFailure = output } }

    /// `encrypt` fails from now on, saying `output` (exit status 1).
    public func failEncrypt(with output: String) { state.withLock { $0.encryptFailure = output } }

    private func tpm(_ tool: String, _ arguments: [String], _ input: String?) -> Subprocess.Result {
        let failure = state.withLock { state in
            state.tpmCalls.append([tool] + arguments)
            if let input { state.inputs.append(input.utf8.count) }
            return state.decryptFailure
        }
        func value(_ option: String) -> String? {
            arguments.firstIndex(of: option).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
        }
        func write(_ path: String?, _ text: String) {
            if let path {
                _ = FileManager.default.createFile(
                    atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o660])
            }
        }
        switch tool {
        case "createprimary":
            write(value("-c"), "primary context")
        case "create":
            guard input != nil else { return Subprocess.Result(status: 1, output: "ERROR: no input\n") }
            write(value("-u"), "sealed public")
            write(value("-r"), "sealed private")
        case "load":
            if let failure {
                return Subprocess.Result(status: 1, output: failure + "\nERROR: Unable to run tpm2_load\n")
            }
            write(value("-c"), "object context")
        case "unseal", "flushcontext":
            break
        default:
            return Subprocess.Result(status: 1, output: "tpm2_\(tool): unknown\n")
        }
        return Subprocess.Result(status: 0, output: "")
    }

    private func answer(_ arguments: [String], _ input: String?) -> Subprocess.Result {
        let (failure, encryptFailure, offersUser, decrypted) = state.withLock { state in
            state.calls.append(arguments)
            if let input { state.inputs.append(input.utf8.count) }
            return (state.decryptFailure, state.encryptFailure, state.offersUser, state.decrypted)
        }
        if arguments == ["--help"] {
            return Subprocess.Result(
                status: 0,
                output: "systemd-creds [OPTIONS...]\n" + (offersUser ? "     --user  User credentials\n" : ""))
        }
        if arguments.contains("encrypt") {
            if let encryptFailure { return Subprocess.Result(status: 1, output: encryptFailure + "\n") }
            guard let path = arguments.last, input != nil else {
                return Subprocess.Result(status: 1, output: "no input\n")
            }
            _ = FileManager.default.createFile(atPath: path, contents: Data("sealed\n".utf8))
            return Subprocess.Result(status: 0, output: "")
        }
        if arguments.contains("decrypt") {
            if let failure { return Subprocess.Result(status: 1, output: failure + "\n") }
            return Subprocess.Result(status: 0, output: decrypted)
        }
        return Subprocess.Result(status: 1, output: "systemd-creds: unknown verb\n")
    }
}
