import Foundation
import Testing

/// The rule of Sources/TokenctlEssentials/README.md: Essentials holds what the static front's hit
/// needs and nothing else, Foundation-free. Read from the sources: every file there must be
/// reached from the front's main.swift through the names it declares, and import nothing but
/// Glibc (Darwin) and CKernelKeyring.
@Suite("Essentials: only what the front needs")
struct EssentialsRuleTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources").standardized

    struct SourceFile {
        var path: String
        var text: String
        /// The top-level names the file declares, and the types it extends.
        var declared: Set<String>
    }

    static func essentials() throws -> [SourceFile] {
        let root = sources.appendingPathComponent("TokenctlEssentials")
        let files = try #require(FileManager.default.enumerator(atPath: root.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") }.sorted()
        let declaration = try NSRegularExpression(
            pattern: "^(?:public |@\\w+ )*(?:struct|enum|final class|class|protocol|typealias|func|let|var|extension)"
                + " +([A-Za-z_][A-Za-z0-9_]*)",
            options: .anchorsMatchLines)
        return try files.map { file in
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            let names = declaration.matches(in: text, range: NSRange(text.startIndex..., in: text)).map {
                (text as NSString).substring(with: $0.range(at: 1))
            }
            return SourceFile(path: file, text: text, declared: Set(names))
        }
    }

    static func identifiers(_ text: String) -> Set<String> {
        var words: Set<String> = []
        var current = ""
        for scalar in text.unicodeScalars {
            if scalar == "_" || (scalar.properties.isAlphabetic && scalar.isASCII) || ("0"..."9").contains(scalar) {
                current.unicodeScalars.append(scalar)
            } else if !current.isEmpty {
                words.insert(current)
                current = ""
            }
        }
        if !current.isEmpty { words.insert(current) }
        return words
    }

    /// The files reached from `start` (the front's main.swift text): a file is reached when a
    /// reached text names one of its declarations; its own text then counts too.
    static func reached(from start: String, in files: [SourceFile]) -> Set<String> {
        var names = identifiers(start)
        var reached: Set<String> = []
        var changed = true
        while changed {
            changed = false
            for file in files where !reached.contains(file.path) && !file.declared.isDisjoint(with: names) {
                reached.insert(file.path)
                names.formUnion(identifiers(file.text))
                changed = true
            }
        }
        return reached
    }

    @Test("every file in Essentials is reached from the static front's main.swift")
    func everyFileServesTheFront() throws {
        let files = try Self.essentials()
        #expect(files.count >= 15)
        let front = try String(
            contentsOf: Self.sources.appendingPathComponent("tokenctl/main.swift"), encoding: .utf8)
        let unused = files.map(\.path).filter { !Self.reached(from: front, in: files).contains($0) }
        #expect(
            unused.isEmpty,
            "not used by the front; move to TokenctlCore or TokenctlCommands: \(unused.joined(separator: ", "))")
    }

    @Test("the reachability check finds a file that nothing names")
    func unusedFileIsFound() throws {
        var files = try Self.essentials()
        files.append(SourceFile(path: "Orphan.swift", text: "public enum Orphan {}", declared: ["Orphan"]))
        let front = try String(
            contentsOf: Self.sources.appendingPathComponent("tokenctl/main.swift"), encoding: .utf8)
        let reached = Self.reached(from: front, in: files)
        #expect(!reached.contains("Orphan.swift"))
        #expect(reached.contains("HotPath/HotPath.swift"))
    }

    @Test("Essentials imports Glibc and CKernelKeyring only (no Foundation, no other module)")
    func importsOnly() throws {
        let allowed: Set<String> = ["Glibc", "Darwin", "CKernelKeyring"]
        let importLine = try NSRegularExpression(pattern: "^\\s*(?:@\\w+ )*import +(\\w+)", options: .anchorsMatchLines)
        var found: [String] = []
        for file in try Self.essentials() {
            for match in importLine.matches(in: file.text, range: NSRange(file.text.startIndex..., in: file.text)) {
                let module = (file.text as NSString).substring(with: match.range(at: 1))
                if !allowed.contains(module) { found.append("\(file.path): import \(module)") }
            }
        }
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
    }
}
