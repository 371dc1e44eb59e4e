import TokenctlCommands
import TokenctlEssentials

// tokenctl-engine: every command but the front's cache hits, in the TokenctlCommands library.
#if canImport(Glibc)
import Glibc
#endif

// Scripts read our stdout through pipes that may close early: never die of SIGPIPE.
signal(SIGPIPE, SIG_IGN)
let status = await Engine.run(Array(CommandLine.arguments.dropFirst()))
exit(status.rawValue)
