import TokenctlCommands
import TokenctlCore

extension Suggestion {
    /// The text tokenctl prints for this hint: the command layer's renderer (`HintText`).
    public var rendered: String { HintText.render(self) }
}

extension SuggestedCommand {
    /// The command line tokenctl prints for this command (`HintText.commandLine`).
    public var rendered: String { HintText.commandLine(self) }
}

/// The command table the renderer spells hints from, for tests outside TokenctlCommands.
public enum CommandTable {
    /// Every long option of every command, global ones included.
    public static var longOptionNames: Set<String> { HintText.longOptionNames }
}
