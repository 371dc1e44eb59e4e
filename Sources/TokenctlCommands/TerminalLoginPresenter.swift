import Synchronization
import TokenctlCore
import TokenctlEssentials

/// Shows an interactive login on stderr: the device code (with a QR code and a live countdown
/// on a terminal, plain lines otherwise) or the authorization URL, and opens the browser.
final class TerminalLoginPresenter: LoginPresenter, Sendable {
    private let io: IOStreams
    private let isTerminal: Bool
    private let clock: Clock
    private let programs: ProgramRunner
    private let countdown = Mutex<Task<Void, Never>?>(nil)

    /// - Parameters: io: the command's streams (a countdown and a QR code when stderr is a
    ///   terminal); clock and programs: the command's (the browser is started with `programs`).
    init(io: IOStreams, clock: Clock, programs: ProgramRunner) {
        self.io = io
        isTerminal = io.errorIsTerminal
        self.clock = clock
        self.programs = programs
    }

    func showDeviceAuthorization(_ authorization: DeviceAuthorization, expiresAt: Double) {
        var text = "To sign in, open \(authorization.verificationURI)\nand enter the code: \(authorization.userCode)\n"
        // The server's own words (Entra's localized instructions), after tokenctl's.
        if let message = authorization.message { text += "The server says: \(Output.printable(message))\n" }
        if let complete = authorization.verificationURIComplete {
            text += "Or open this link, which includes the code:\n  \(complete)\n"
            if isTerminal, let code = QRCode(complete) {
                text += "Or scan it:\n" + code.terminalLines().map { "  " + $0 }.joined(separator: "\n") + "\n"
            }
        }
        if !isTerminal {
            text += "Waiting for approval (the code expires in \(Output.duration(authorization.expiresIn)))...\n"
        }
        io.standardError(text)
        guard isTerminal else { return }
        // A live countdown on one line, redrawn every second until polling ends.
        let (clock, io) = (self.clock, self.io)
        let task = Task.detached {
            while !Task.isCancelled {
                let left = max(0, Int(saturating: expiresAt - clock.now()))
                io.standardError(
                    "\r\u{1B}[KWaiting for approval... code expires in \(left / 60):\(left % 60 < 10 ? "0" : "")\(left % 60)"
                )
                try? await Task.sleep(nanoseconds: 1_000_000_000)
            }
        }
        countdown.withLock { $0 = task }
    }

    func deviceFlowEnded() {
        let task = countdown.withLock { current in
            defer { current = nil }
            return current
        }
        if let task {
            task.cancel()
            io.standardError("\r\u{1B}[K")
        }
    }

    func deviceFlowSlowedDown(interval: Double) {
        if !isTerminal {
            io.standardError("The server asked to poll more slowly (every \(Int(saturating: interval)) s).\n")
        }
    }

    func showAuthorizationURL(_ url: String, openBrowser: Bool) -> Bool {
        // The browser outlives tokenctl: Subprocess.launch gives it no connection of ours.
        if openBrowser, programs.launch(["xdg-open", url]) {
            io.standardError(
                "Opened your browser to sign in. If it did not open, visit:\n  \(url)\nWaiting for the browser...\n")
            return true
        }
        io.standardError(
            "Open this URL in a browser on this machine to sign in:\n  \(url)\nWaiting for the browser...\n")
        return false
    }
}
