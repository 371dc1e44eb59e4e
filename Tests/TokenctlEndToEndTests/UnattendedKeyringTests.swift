import Foundation
import Testing
import TokenctlTestSupport

/// `keyring setup --unattended` for a non-root user with a real systemd user manager (Debian's
/// systemd 252, started by Scripts/lib/usermanager.sh: PID 1 here is not systemd), Debian's
/// gnome-keyring and a software TPM (Scripts/lib/swtpm.sh, reached through its socket TCTI, which
/// setup writes into the unit): setup seals the password with tpm2-tools and installs the unit,
/// a login stores the session, then three simulated reboots (Scripts/lib/unattended.sh: the
/// manager, its bus and keyring stopped, the user's kernel keys cleared, the TPM shut down and
/// started again, the manager started as boot would) after each of which a cron-style `env -i`
/// `tokenctl token --force` refreshes with nobody typing anything, and after the last of which
/// the refresh timer `schedule install` enabled runs, ordered after the keyring, and succeeds.
/// A fresh TPM (another machine): `token` fails with the plain hint, `keyring status` says what
/// happened, the keyring is untouched, and with the first TPM back the session works again.
/// Neither the keyring password nor the refresh token is in the user's home, runtime directory,
/// /tmp or any process's argv or environment. Power losses (the TPM restarted without
/// TPM2_Shutdown, which a dictionary-attack-protected seal counts as failures) have a test of
/// their own, the same script in its `power` mode; a collection locked over D-Bus after the unit
/// unlocked it (org.freedesktop.Secret.Service.Lock) in its `relock` mode.
@Suite("End to end: an unattended keyring under a systemd user manager, with a software TPM")
struct UnattendedKeyringTests {
    static let script = #"""
        set -euo pipefail
        lib=$1 work=$2 bin=$3 mode=${4:-full}
        # The refresh token comes on stdin: never in an argv or environment (the scan below
        # looks at every process's).
        IFS= read -r refresh_token
        source "$lib/services.sh"; source "$lib/swtpm.sh"; source "$lib/usermanager.sh"; source "$lib/unattended.sh"
        user=tokenctl-unattended
        # One user, one run at a time (its kernel keys and processes are shared with the self-test).
        exec 9>/tmp/tokenctl-unattended-selftest.lock
        flock -w 600 9
        since=$(date +%s)
        chmod 0711 "$work"
        tk_services_init "$work/svc"
        cleanup() {
          tk_stop_user_manager "$user" || true
          tk_services_stop_all || true
          rm -f "/var/lib/systemd/linger/$user"
        }
        trap cleanup EXIT
        tk_unattended_user "$user"
        # What 'loginctl enable-linger' records (no logind here: the manager is started by hand).
        [[ -d /var/lib/systemd/linger ]] || install -d -m 0755 /var/lib/systemd/linger
        touch "/var/lib/systemd/linger/$user"
        runuser -u "$user" -- keyctl clear @u >/dev/null 2>&1 || true
        tk_start_swtpm
        tcti=$TK_SWTPM_TCTI
        tk_unattended_grant_swtpm "$user"
        mkdir -p "$work/bin"
        cp "$bin/tokenctl" "$bin/tokenctl-engine" "$work/bin/"
        chmod 0755 "$work/bin" "$work/bin/tokenctl" "$work/bin/tokenctl-engine"
        um=$work/um
        tk_start_user_manager "$user" "$um"
        home=$TK_USER_MANAGER_HOME rt=$TK_USER_MANAGER_RUNTIME
        tc=$work/bin/tokenctl
        as_user() { tk_unattended_as "$user" "$@"; }
        # What cron gives a job (HOME, LOGNAME, SHELL, a short PATH), with XDG_RUNTIME_DIR as the
        # line 'tokenctl schedule install --cron' writes sets it.
        cron() {
          runuser -u "$user" -- env -i HOME="$home" LOGNAME="$user" SHELL=/bin/sh PATH=/usr/bin:/bin \
            XDG_RUNTIME_DIR="$rt" "$tc" "$@"
        }
        keyring_active() { [[ $(tk_user_systemctl "$user" is-active tokenctl-keyring.service 2>/dev/null) == active ]]; }
        wait_keyring() {
          for _ in $(seq 300); do keyring_active && return 0; sleep 0.1; done
          echo "WAIT:tokenctl-keyring.service not active: $(tk_user_systemctl "$user" status tokenctl-keyring.service 2>&1 | tail -n 5 | tr '\n' '|')"
        }
        # run NAME CMD...: CMD's exit status and its output on one line, prefixed with NAME.
        run() {
          local name=$1 out rc=0
          shift
          out=$("$@" 2>&1) || rc=$?
          printf '%s:%s %s\n' "$name" "$rc" "$(printf %s "$out" | tr '\n' '|')"
        }

        run SETUP as_user env TPM2TOOLS_TCTI="$tcti" "$tc" keyring setup --unattended
        echo "SEAL:$(stat -c '%a %U' "$home/.config/tokenctl/keyring-seal.pub" "$home/.config/tokenctl/keyring-seal.priv" | sort -u)"
        grep -h '^Environment=\|^Type=\|^BusName=' "$home/.config/systemd/user/tokenctl-keyring.service" | sed 's/^/UNIT:/'
        # printf is a builtin: the token goes through a pipe only.
        login() { printf %s "$refresh_token" | as_user "$tc" login --issuer "$ISSUER" --client-id cli --refresh-token-stdin; }
        run LOGIN login
        run TOKEN0 cron token
        lockout_counter() { tpm2_getcap properties-variable | sed -n 's/^TPM2_PT_LOCKOUT_COUNTER: //p'; }
        if [[ $mode == power ]]; then
          # Power losses: the TPM restarted without TPM2_Shutdown, the manager started as boot would.
          for boot in 1 2 3 4; do
            tk_unattended_reboot "$user" "$um" unclean
            wait_keyring
            run "POWER$boot" cron token --force
            echo "COUNTER$boot:$(lockout_counter)"
          done
          run POWER_STATUS as_user "$tc" keyring status
          echo "DONE"
          exit 0
        fi
        if [[ $mode == relock ]]; then
          # Someone locks the login collection over D-Bus (org.freedesktop.Secret.Service.Lock; Debian's
          # 'secret-tool lock' crashes here): the next cron-style command restarts the unit, which
          # unlocks it again.
          lock() {
            as_user busctl --user call org.freedesktop.secrets /org/freedesktop/secrets \
              org.freedesktop.Secret.Service Lock ao 1 /org/freedesktop/secrets/collection/login >/dev/null
          }
          locked() {
            as_user busctl --user get-property org.freedesktop.secrets /org/freedesktop/secrets/collection/login \
              org.freedesktop.Secret.Collection Locked 2>&1
          }
          lock
          echo "LOCKED:$(locked)"
          run RELOCK cron token --force -v
          echo "RELOCK_AFTER:$(locked)"
          # The unit cannot unlock (the sealed half unreadable): the locked error stands.
          lock
          seal=$home/.config/tokenctl/keyring-seal.priv
          sum=$(sha256sum <"$home/.local/share/keyrings/login.keyring" | cut -d' ' -f1)
          chmod 0000 "$seal"
          run RELOCK_FAIL cron token --force
          echo "RELOCK_FAIL_AFTER:$(locked)"
          echo "RELOCK_KEYRING:$([[ $(sha256sum <"$home/.local/share/keyrings/login.keyring" | cut -d' ' -f1) == "$sum" ]] && echo same || echo changed)"
          chmod 0600 "$seal"
          tk_swtpm_flush
          run RELOCK_BACK cron token --force
          echo "DONE"
          exit 0
        fi
        run SCHEDULE as_user "$tc" schedule install --systemd

        for boot in 1 2 3; do
          tk_unattended_reboot "$user" "$um"
          wait_keyring
          run "BOOT$boot" cron token --force
        done
        # The refresh timer's first run after the last boot (OnActiveSec=1min, RandomizedDelaySec=30s),
        # ordered after the keyring unit by setup's drop-in.
        for _ in $(seq 1500); do
          [[ -n $(tk_user_systemctl "$user" show -p ExecMainExitTimestampMonotonic --value tokenctl-refresh.service | tr -d 0) ]] && break
          sleep 0.1
        done
        echo "TIMER:$(tk_user_systemctl "$user" show -p Result -p ExecMainStatus -p After tokenctl-refresh.service | tr '\n' ' ')"
        run STATUS as_user "$tc" keyring status
        tk_swtpm_flush
        keyring_sum=$(sha256sum <"$home/.local/share/keyrings/login.keyring" | cut -d' ' -f1)

        # Another machine: the same disk, a fresh TPM.
        tk_stop_user_manager "$user"
        tk_swtpm_flush && TPM2TOOLS_TCTI=$tcti tpm2_shutdown -c
        tk_stop_swtpm
        mv "$TK_SERVICES_DIR/swtpm/state" "$work/state.first"
        runuser -u "$user" -- keyctl clear @u >/dev/null 2>&1 || true
        tk_start_swtpm
        tk_unattended_grant_swtpm "$user"
        tk_start_user_manager "$user" "$um"
        wait_keyring
        run OTHER_TOKEN cron token
        run OTHER_STATUS as_user "$tc" keyring status
        tk_swtpm_flush
        run OTHER_DOCTOR as_user "$tc" doctor
        tk_swtpm_flush
        echo "OTHER_KEYRING:$([[ $(sha256sum <"$home/.local/share/keyrings/login.keyring" | cut -d' ' -f1) == "$keyring_sum" ]] && echo same || echo changed)"

        # The first TPM back: the session is still there and works.
        tk_stop_user_manager "$user"
        tk_swtpm_flush && TPM2TOOLS_TCTI=$tcti tpm2_shutdown -c
        tk_stop_swtpm
        rm -rf "$TK_SERVICES_DIR/swtpm/state"
        mv "$work/state.first" "$TK_SERVICES_DIR/swtpm/state"
        tk_start_swtpm
        tk_unattended_grant_swtpm "$user"
        tk_start_user_manager "$user" "$um"
        wait_keyring
        run BACK cron token --force

        # Neither secret anywhere: the password (decrypted here, held in this shell only) and the
        # refresh token, in what the user's files, runtime directory and /tmp changed during the
        # test, and in every process's argv and environment.
        pw=$(tk_unattended_tpm_unseal "$home/.config/tokenctl/keyring-seal" 2>/dev/null)
        echo "PASSWORD_LENGTH:${#pw}"
        mapfile -t user_tmp < <(find /tmp -mindepth 1 -maxdepth 1 -user "$user" 2>/dev/null)
        printf '%s\n%s\n' "$pw" "$refresh_token" | tk_unattended_scan "$since" "$home" "$rt" "$work/svc" "${user_tmp[@]}" \
          | sed 's/^/FOUND:/'
        run REMOVE as_user "$tc" keyring remove
        ls -A "$home/.config/systemd/user" | sed 's/^/LEFT:/'
        echo "KEPT:$([[ -f $home/.local/share/keyrings/login.keyring ]] && echo yes || echo no)"
        echo "SEAL_AFTER:$([[ -e $home/.config/tokenctl/keyring-seal.pub && -e $home/.config/tokenctl/keyring-seal.priv ]] && echo present || echo gone)"
        # No TPM named, none at /dev/tpmrm0, no per-user credentials (systemd 252): setup refuses and
        # prints root's command for the host key, which is run here as printed, against a
        # temporary key file (SYSTEMD_CREDENTIAL_SECRET: the machine's own is never made).
        mv "$home/.local/share/keyrings/login.keyring" "$home/.local/share/keyrings/login.keyring.old"
        hint=$(as_user "$tc" keyring setup --unattended 2>&1) && rc=0 || rc=$?
        echo "HOSTKEY_SETUP:$rc $(printf %s "$hint" | tr '\n' '|')"
        command=$(printf %s "$hint" | sed -n "s/.*'sudo sh -c \"\(.*\)\"', then .*/\1/p" | sed "s#/etc/credstore.encrypted#$work/credstore#g")
        echo "HOSTKEY_COMMAND:$command"
        SYSTEMD_CREDENTIAL_SECRET=$work/host.secret sh -c "$command" 2>/dev/null
        echo "HOSTKEY_CRED:$(stat -c %a "$work/credstore/tokenctl-keyring-$user.cred")"
        hostpw=$(SYSTEMD_CREDENTIAL_SECRET=$work/host.secret systemd-creds decrypt --name=tokenctl-keyring \
          "$work/credstore/tokenctl-keyring-$user.cred" - 2>/dev/null)
        echo "HOSTKEY_PASSWORD_LENGTH:${#hostpw}"
        echo "DONE"
        """#

    /// The script's output as (status, stdout), run as root in `mode`; nil where the machine
    /// lacks what it needs (root, systemd, swtpm, gnome-keyring).
    static func runScript(mode: String) throws -> (result: RunResult, values: (String) -> [String])? {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/lib/systemd/systemd"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/gnome-keyring-daemon")
        else { return nil }
        let environment = try TestEnvironment.require()
        let server = try AuthServer()
        let lib = URL(
            fileURLWithPath: ProcessInfo.processInfo.environment["TOKENCTL_UNATTENDED_SH"]
                ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                    "../../Scripts/lib/unattended.sh"
                ).standardized.path
        )
        .deletingLastPathComponent().path
        // Short: the swtpm's sockets must fit AF_UNIX's 108 bytes.
        let work = "/tmp/tokenctl-uk-" + String(UUID().uuidString.prefix(8))
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let bin = URL(fileURLWithPath: environment.binary).deletingLastPathComponent().path
        let result = try runProgram(
            "/bin/bash", ["-c", Self.script, "unattended-keyring-test", lib, work, bin, mode],
            environment: [
                "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": work, "ISSUER": server.url,
                "TK_PYTHON": "/usr/bin/python3",
            ], stdin: try server.issue() + "\n")
        let stdout = result.stdout
        return (
            result,
            { key in
                stdout.split(separator: "\n").filter { $0.hasPrefix(key + ":") }.map {
                    String($0.dropFirst(key.count + 1))
                }
            }
        )
    }

    @Test(
        "keyring setup --unattended with swtpm: three reboots, then a cron-style token with nobody there; another TPM fails plainly and deletes nothing; no secret anywhere"
    )
    func rebootsWithNobodyThere() throws {
        guard let (result, values) = try Self.runScript(mode: "full") else { return }
        func succeeded(_ key: String) -> Bool { values(key).first?.hasPrefix("0 ") == true }
        #expect(result.status == 0 && result.stdout.hasSuffix("DONE\n"), "\(result)")
        #expect(values("WAIT").isEmpty, "the keyring unit came up at every start: \(result)")
        #expect(succeeded("SETUP"), "\(result)")
        #expect(values("SETUP").first?.contains("The Secret Service answers, unlocked.") == true, "\(result)")
        #expect(values("SEAL") == ["600 tokenctl-unattended"], "both seal files 0600, the user's: \(result)")
        #expect(values("UNIT").contains("Type=dbus") && values("UNIT").contains("BusName=org.freedesktop.secrets"))
        #expect(values("UNIT").contains { $0.hasPrefix("Environment=TPM2TOOLS_TCTI=swtpm:path=") }, "\(result)")
        #expect(succeeded("LOGIN"), "\(result)")
        #expect(succeeded("TOKEN0"), "\(result)")
        for boot in 1...3 {
            #expect(succeeded("BOOT\(boot)"), "boot \(boot): a cron-style token --force, nobody there: \(result)")
        }
        #expect(succeeded("SCHEDULE") && values("SCHEDULE").first?.contains("warning") == false, "\(result)")
        let timer = values("TIMER").first ?? ""
        #expect(
            timer.contains("Result=success") && timer.contains("ExecMainStatus=0 ")
                && timer.contains("tokenctl-keyring.service"), "the timer's refresh after the last boot: \(result)")
        #expect(succeeded("STATUS"), "\(result)")
        #expect(
            values("STATUS").first?.contains("after a reboot: the keyring is unlocked again with nobody logged in")
                == true, "\(result)")

        let other = values("OTHER_TOKEN").first ?? ""
        #expect(other.hasPrefix("69 "), "another TPM: the keyring stays locked: \(result)")
        #expect(other.contains("tokenctl keyring status"), "\(result)")
        let otherStatus = values("OTHER_STATUS").first ?? ""
        #expect(otherStatus.hasPrefix("1 "), "\(result)")
        #expect(
            otherStatus.contains("Eys_Load(0x1DF) - tpm:parameter(1):integrity check failed"),
            "tpm2_load's own words: \(result)")
        #expect(otherStatus.contains("need a new login ('tokenctl login'), or the original TPM"), "\(result)")
        let doctor = values("OTHER_DOCTOR").first ?? ""
        #expect(doctor.hasPrefix("1 ") && doctor.contains("keyring seal: "), "\(result)")
        #expect(doctor.contains("need a new login ('tokenctl login'), or the original TPM"), "\(result)")
        #expect(values("OTHER_KEYRING") == ["same"], "the keyring untouched on another machine")
        #expect(succeeded("BACK"), "the first TPM back: the session still there: \(result)")

        #expect(values("PASSWORD_LENGTH") == ["43"], "\(result)")
        #expect(values("FOUND").isEmpty, "neither secret anywhere: \(values("FOUND"))")
        #expect(succeeded("REMOVE"), "\(result)")
        #expect(!values("LEFT").contains("tokenctl-keyring.service"), "\(result)")
        #expect(values("KEPT") == ["yes"] && values("SEAL_AFTER") == ["present"], "\(result)")
        let hostKey = values("HOSTKEY_SETUP").first ?? ""
        #expect(hostKey.hasPrefix("78 ") && hostKey.contains("only systemd's host key is left"), "\(result)")
        #expect(values("HOSTKEY_COMMAND").first?.contains("systemd-creds encrypt --with-key=host") == true, "\(result)")
        #expect(values("HOSTKEY_CRED") == ["600"], "\(result)")
        #expect(values("HOSTKEY_PASSWORD_LENGTH") == ["43"], "root's printed command seals, root decrypts: \(result)")
    }

    @Test(
        "keyring setup --unattended with swtpm: a collection locked over D-Bus is unlocked again by the next cron-style token; a unit that cannot unseal leaves the locked error and deletes nothing"
    )
    func relockedCollection() throws {
        guard let (result, values) = try Self.runScript(mode: "relock") else { return }
        #expect(result.status == 0 && result.stdout.hasSuffix("DONE\n"), "\(result)")
        #expect(values("LOGIN").first?.hasPrefix("0 ") == true, "\(result)")
        #expect(values("LOCKED") == ["b true"], "Service.Lock locked the collection: \(result)")
        let relock = values("RELOCK").first ?? ""
        #expect(relock.hasPrefix("0 "), "the locked collection unlocked by a restart: \(result)")
        #expect(
            relock.contains("the login keyring was locked: restarted tokenctl-keyring.service, which unlocked it"),
            "\(result)")
        #expect(values("RELOCK_AFTER") == ["b false"], "the collection is unlocked afterwards: \(result)")
        let failed = values("RELOCK_FAIL").first ?? ""
        #expect(failed.hasPrefix("69 ") && failed.contains("tokenctl keyring status"), "\(result)")
        #expect(values("RELOCK_FAIL_AFTER") == ["b true"], "\(result)")
        #expect(values("RELOCK_KEYRING") == ["same"], "nothing deleted: \(result)")
        #expect(values("RELOCK_BACK").first?.hasPrefix("0 ") == true, "the session kept, unlocked again: \(result)")
    }

    @Test(
        "keyring setup --unattended with swtpm: four power losses in a row (no TPM2_Shutdown), and after each the keyring unlocks and a cron-style token --force works"
    )
    func powerLosses() throws {
        guard let (result, values) = try Self.runScript(mode: "power") else { return }
        #expect(result.status == 0 && result.stdout.hasSuffix("DONE\n"), "\(result)")
        #expect(values("WAIT").isEmpty, "the keyring unit came up at every start: \(result)")
        #expect(values("SETUP").first?.hasPrefix("0 ") == true, "\(result)")
        for boot in 1...4 {
            #expect(
                values("POWER\(boot)").first?.hasPrefix("0 ") == true,
                "power loss \(boot): a cron-style token --force, nobody there: \(result)")
            #expect(
                values("COUNTER\(boot)") == ["0x0"],
                "power loss \(boot): the seal is outside dictionary-attack protection: \(result)")
        }
        #expect(
            values("POWER_STATUS").first?.contains(
                "after a reboot: the keyring is unlocked again with nobody logged in") == true, "\(result)")
    }
}
