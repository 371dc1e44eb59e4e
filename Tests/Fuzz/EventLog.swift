import TokenctlEssentials

@testable import TokenctlCommands
@testable import TokenctlCore

// Fuzz target: the event log file ($XDG_STATE_HOME/tokenctl/events.jsonl) as `tokenctl events`
// reads it: EventLog.records (complete lines of the rotated and the live file, EventRecord.parse
// of each, the filter), then each record printed as `events` prints it (EventsCommand.line:
// Output.timestamp, Output.padded, Output.printable, from TokenctlCommands) and as `events --json` prints it (EventRecord.jsonLine), whose line must parse back.
//
// Input: the live file's bytes (written to a private temporary directory each run).
// fuzz-extra-sources:
#if canImport(Glibc)
import Glibc
#endif

let stateDirectory: String = {
    var template = Array("/tmp/tokenctl-fuzz-events.XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    return String(cString: path!)
}()
let eventLog = EventLog(stateDirectory: stateDirectory)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEventLog(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzSupport.bytes(data, size)
    let descriptor = open(eventLog.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    check(descriptor >= 0, "cannot write \(eventLog.path)")
    _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    close(descriptor)

    for record in eventLog.records(since: nil, minimumSignificance: .low, profile: nil) {
        _ = EventLog.Filter(since: 1_764_425_000, minimumSignificance: .medium, profile: "default").matches(record)
        // Known crash (crash-unix-time-1e19): Timestamp.iso8601 traps converting a time beyond
        // Int64 seconds (Timestamp.swift:6); jsonLine's format3 traps converting time * 1000
        // beyond Int64 (EventLog.swift:76).
        if FuzzSupport.skipKnown
            && !(FuzzSupport.fitsInt64(record.time) && FuzzSupport.fitsInt64((record.time * 1000).rounded()))
        {
            continue
        }
        // `events` (EventsCommand.line, which needs the engine's CommandContext to compile).
        var text =
            "\(Output.timestamp(record.time))  \(Output.padded(record.event.significance.rawValue, to: 6))  \(Output.padded(record.event.rawValue, to: 16)) \(record.profile)"
        if let subject = record.subject { text += " " + Output.printable(subject) }
        if let reason = record.reason { text += " (\(Output.printable(reason)))" }
        if let issuer = record.issuer { text += "  \(Output.printable(issuer))" }
        _ = text
        let line = record.jsonLine() // `events --json`
        guard let back = EventRecord.parse(Substring(line.dropLast())) else {
            fail("EventRecord.parse rejects the line jsonLine() wrote")
        }
        check(back.event == record.event, "jsonLine/parse changed the event")
    }
    return 0
}
