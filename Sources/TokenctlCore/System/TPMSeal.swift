import TokenctlEssentials

/// The keyring password sealed to a TPM 2.0 with tpm2-tools, as an object that the TPM's
/// dictionary-attack protection skips: `PREFIX.pub` and `PREFIX.priv` (tpm2_create's public and
/// encrypted private parts, 0600), under a primary key of the owner hierarchy that the TPM
/// derives again from its owner seed at every use, so that nothing about the primary is stored.
///
/// Both the primary and the sealed object have the `noda` attribute (TPM 2.0 Part 1, "Dictionary
/// Attack Protection"): TPM2_Load authorizes with the primary, so a primary without it would
/// count every restart without TPM2_Shutdown (a power loss) as a failure, and the third locks
/// the seal out (Scripts/lib/unattended.sh measured it: 0x921). No PCR policy: a firmware,
/// kernel or Secure Boot update changes nothing; another TPM, or this one cleared, has another
/// owner seed and cannot load the blob. The TPM is always named (`-T`): without one, tpm2-tss'
/// TCTI loader would also try 127.0.0.1's swtpm and mssim ports.
struct TPMSeal: Sendable {
    /// The TCTI of the TPM (`device:/dev/tpmrm0`, `swtpm:path=SOCKET`, ...).
    var tcti: String
    /// `PREFIX.pub` and `PREFIX.priv` are the seal.
    var prefix: String
    /// A private directory for the TPM's context files while a seal or unseal runs (removed).
    var workDirectory: String
    var tool: @Sendable (_ tool: String, _ arguments: [String], _ input: String?) -> Subprocess.Result

    var publicPath: String { prefix + ".pub" }
    var privatePath: String { prefix + ".priv" }

    /// The primary's attributes: tpm2_createprimary's default ones and `noda`.
    static let primaryAttributes = "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|decrypt|noda"
    /// The sealed object's: bound to this TPM and parent, outside dictionary-attack protection,
    /// its (empty) auth value enough to unseal.
    static let objectAttributes = "fixedtpm|fixedparent|noda|userwithauth"

    /// tpm2_createprimary's arguments after `-T TCTI` (the same template every time, the same key).
    static func primaryArguments(context: String) -> [String] {
        ["-Q", "-C", "o", "-g", "sha256", "-G", "ecc", "-a", primaryAttributes, "-c", context]
    }

    /// The commands of the unit's unseal, for bash in a systemd unit, run in the directory of
    /// the context files (the TCTI comes from TPM2TOOLS_TCTI): the secret on standard output.
    static func unsealScript(prefix: String) -> String {
        "tpm2_createprimary \(primaryArguments(context: "primary.ctx").map { $0.contains("|") ? "\"\($0)\"" : $0 }.joined(separator: " "))"
            + " && tpm2_flushcontext -t && tpm2_load -Q -C primary.ctx -u \(prefix).pub -r \(prefix).priv -c seal.ctx"
            + " && tpm2_flushcontext -t && tpm2_unseal -c seal.ctx"
    }

    /// What went wrong: the tool and the last lines it printed.
    struct Failure: Error, Sendable, Equatable {
        var tool: String
        var output: String
    }

    /// Seal `secret` (on tpm2_create's standard input only) into the two files.
    func seal(_ secret: String) throws(Failure) {
        try withWorkDirectory { () throws(Failure) in
            let primary = workDirectory + "/primary.ctx"
            try run("createprimary", Self.primaryArguments(context: primary))
            try run("flushcontext", ["-t"])
            try run(
                "create",
                ["-Q", "-C", primary, "-a", Self.objectAttributes, "-i", "-", "-u", publicPath, "-r", privatePath],
                input: secret)
            // tpm2_create makes them 0660 whatever the umask (measured: tpm2-tools 5.4).
            for path in [publicPath, privatePath] {
                do { try FileIO.setMode(path, 0o600) } catch {
                    throw Failure(tool: "chmod", output: "\(error)")
                }
            }
        }
    }

    /// Unseal into /dev/null: whether this TPM can (the secret never reaches this process).
    func check() throws(Failure) {
        try withWorkDirectory { () throws(Failure) in
            let primary = workDirectory + "/primary.ctx"
            let object = workDirectory + "/seal.ctx"
            try run("createprimary", Self.primaryArguments(context: primary))
            try run("flushcontext", ["-t"])
            try run("load", ["-Q", "-C", primary, "-u", publicPath, "-r", privatePath, "-c", object])
            try run("flushcontext", ["-t"])
            try run("unseal", ["-c", object, "-o", "/dev/null"])
        }
    }

    private func run(_ name: String, _ arguments: [String], input: String? = nil) throws(Failure) {
        let result = tool(name, ["-T", tcti] + arguments, input)
        guard result.status == 0 else {
            throw Failure(
                tool: "tpm2_" + name,
                output: result.output.split(separator: "\n").suffix(2).joined(separator: "; "))
        }
    }

    /// `body` with the work directory made (0700), then the TPM's transient objects flushed (a
    /// TPM without a resource manager keeps what each tool loaded; through /dev/tpmrm0 only
    /// ours are seen) and the directory removed, whatever happened.
    private func withWorkDirectory(_ body: () throws(Failure) -> Void) throws(Failure) {
        do { try FileIO.ensurePrivateDirectory(workDirectory) } catch {
            throw Failure(tool: "mkdir", output: "\(error)")
        }
        defer {
            _ = tool("flushcontext", ["-T", tcti, "-t"], nil)
            for name in ["primary.ctx", "seal.ctx"] { try? FileIO.removeFile(workDirectory + "/" + name) }
            try? FileIO.removeEmptyDirectory(workDirectory)
        }
        try body()
    }
}
