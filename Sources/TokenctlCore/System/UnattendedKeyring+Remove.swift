// `tokenctl keyring remove`: the setup undone, the keyring and its sealed password kept.

extension UnattendedKeyring {
    /// `tokenctl keyring remove`: the unit (disabled and stopped), the drop-in and the
    /// credential go, the stock units are unmasked; the keyring and its sessions stay.
    /// Returns a line for each thing removed.
    /// Undo the setup: the unit, its drop-in, the masks. Never the keyring, nor the sealed
    /// password (`installedSealPath`), without which nothing could open the keyring again.
    public func remove() throws(TokenctlError) -> [String] {
        var removed: [String] = []
        if isInstalled {
            units.disable(Self.unitName)
            removed.append("\(Self.unitName) (stopped and disabled)")
        }
        if let unitPath, SystemdUserUnits.isOurs(unitPath, marker: Self.marker) {
            try removeFile(unitPath)
            removed.append(unitPath)
        }
        if let dropInPath, SystemdUserUnits.isOurs(dropInPath, marker: Self.marker) {
            try removeFile(dropInPath)
            removed.append(dropInPath)
        }
        // The sealed password stays: it is the only copy of the keyring's password, and a
        // setup run again uses it (the keyring it unlocks holds the sessions).
        if !removed.isEmpty {
            _ = units.systemctl(["unmask"] + Self.stockUnits)
            units.daemonReload()
            removed.append("the mask of \(Self.stockUnits.joined(separator: " and "))")
        }
        return removed
    }

    func removeFile(_ path: String) throws(TokenctlError) {
        do { try FileIO.removeFile(path) } catch { throw TokenctlError(.unexpected, "cannot remove \(path): \(error)") }
    }
}
