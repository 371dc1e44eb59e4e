import Foundation
import TokenctlTestSupport

/// dbus-monitor on a test's private bus: the method calls made to the Secret Service while it
/// runs (the bus daemon's own calls left out).
final class BusMonitor: @unchecked Sendable {
    struct Call: Equatable {
        let interface: String
        let member: String
        let path: String
        var name: String { interface.split(separator: ".").last.map(String.init).map { $0 + "." + member } ?? member }
    }

    private let command: RunningCommand

    init(busAddress: String) throws {
        command = try RunningCommand(
            executable: "/usr/bin/stdbuf", arguments: ["-oL", "/usr/bin/dbus-monitor", "--address", busAddress],
            environment: ["PATH": "/usr/bin:/bin"], stdin: nil,
            directory: String(NSTemporaryDirectory().trimmingSuffix("/")))
        // Monitoring once the bus daemon has taken its name back (BecomeMonitor drops it).
        let deadline = now() + 10
        while !command.currentStandardOutput.contains("member=NameLost") {
            guard now() < deadline else {
                command.signal(SIGTERM)
                throw HarnessError("dbus-monitor did not start: \(command.wait())")
            }
            sleep(seconds: 0.02)
        }
    }

    /// Stop monitoring; the calls to the Secret Service, in order.
    func stop() -> [Call] {
        sleep(seconds: 0.2) // the last lines through stdbuf
        command.signal(SIGTERM)
        let output = command.wait().stdout
        return output.split(separator: "\n").compactMap { line -> Call? in
            guard line.hasPrefix("method call "), !line.contains("destination=org.freedesktop.DBus ") else {
                return nil
            }
            func field(_ name: String) -> String? {
                guard let range = line.range(of: " \(name)=") else { return nil }
                return String(line[range.upperBound...].prefix { $0 != ";" && $0 != " " })
            }
            guard let interface = field("interface"), let member = field("member"), let path = field("path") else {
                return nil
            }
            return Call(interface: interface, member: member, path: path)
        }
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> Substring {
        hasSuffix(suffix) ? dropLast(suffix.count) : Substring(self)
    }
}
