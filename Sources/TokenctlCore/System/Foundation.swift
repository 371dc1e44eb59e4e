// The core needs JSON coding, Data and Date only: FoundationEssentials starts several
// milliseconds faster than full Foundation, and `tokenctl token` is on every script's hot path.
#if canImport(FoundationEssentials)
@_exported import FoundationEssentials
#else
@_exported import Foundation
#endif
