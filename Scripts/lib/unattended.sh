# shellcheck shell=bash
# Scripts/lib/unattended.sh: the mechanism behind an unattended Secret Service for a user nobody
# logs in as (a server with `loginctl enable-linger`): a random keyring password sealed to the
# machine's TPM with tpm2-tools as an object with the noDA attribute under a noDA primary of the
# owner hierarchy (no PCR policy), and a user unit that, when the user manager starts (at boot,
# with linger), unseals it and feeds it on stdin to
# gnome-keyring-daemon, which creates (first run) or unlocks the login collection before anything
# ordered after it (the refresh timer's service) runs. Tested with a software TPM (swtpm.sh) and a
# real systemd user manager (usermanager.sh); unattended-selftest.sh checks every fact below.
# Needs root (the user manager). Source it after services.sh, swtpm.sh and usermanager.sh:
#
#   tk_require_packages "${TK_UNATTENDED_PACKAGES[@]}" "${TK_SWTPM_PACKAGES[@]}"
#   tk_unattended_user [NAME]            # a system user (default tokenctl-unattended), no login
#   tk_unattended_grant_swtpm USER       # the running swtpm's sockets become USER's (the swtpm
#                                        # stands for /dev/tpmrm0; see "Access" below)
#   pw=$(tk_unattended_password)         # 32 random bytes, base64url without padding: 43
#                                        # characters (text: gnome-keyring reads a C string)
#   printf %s "$pw" | tk_unattended_seal USER HOME [TCTI]
#                                        # HOME/.config/tokenctl/keyring-seal.pub and .priv
#                                        # (0600, dir 0700), sealed as USER (tk_unattended_tpm_seal);
#                                        # the password only ever on stdin
#   tk_unattended_tpm_seal PREFIX        # stdin sealed into PREFIX.pub and PREFIX.priv, with the
#                                        # TPM of TPM2TOOLS_TCTI (the caller's); context files in
#                                        # a private temporary directory, removed; flushed
#   tk_unattended_tpm_unseal PREFIX [OUT]
#                                        # the secret to OUT (default: stdout), as the unit does
#   tk_unattended_keyring_unit           # prints tokenctl-keyring.service (what setup installs)
#   tk_unattended_refresh_dropin         # prints tokenctl-refresh.service.d/keyring.conf
#   tk_unattended_install USER UNITS [TCTI]
#                                        # writes both into UNITS, masks the stock
#                                        # gnome-keyring-daemon.socket and .service, plus (with
#                                        # TCTI, tests only) a drop-in naming the swtpm and
#                                        # logging the daemon's stderr to
#                                        # %t/tokenctl-keyring.log; daemon-reload, enable
#   tk_unattended_remove USER UNITS HOME # what `keyring remove` undoes: stops and disables the
#                                        # unit, removes it, the drop-in and the seal,
#                                        # unmasks the stock units; the keyrings stay
#   tk_unattended_install_standin USER UNITS
#                                        # a stand-in tokenctl-refresh.service + .timer
#                                        # (OnStartupSec=1s): secret-tool lookup of the item
#                                        # service=tokenctl-test, appends "lookup ok SHA256" or
#                                        # "lookup failed STATUS" to %h/refresh.log (never the
#                                        # secret itself)
#   tk_unattended_as USER CMD...         # CMD as USER on its user bus (env -i: HOME,
#                                        # XDG_RUNTIME_DIR, DBUS_SESSION_BUS_ADDRESS, PATH)
#   tk_unattended_reboot USER DIR [unclean]
#                                        # stop USER's manager (its bus, keyring and timer with it),
#                                        # clear USER's kernel user keyring, flush the swtpm,
#                                        # TPM2_Shutdown(CLEAR) (tpm2_shutdown -c: what the kernel
#                                        # sends at an orderly reboot; skipped with "unclean": a
#                                        # power loss), restart the swtpm (same state), grant it,
#                                        # start the manager again as boot would with linger
#   tk_unattended_scan SINCE PATH...     # needles on stdin (one a line); prints "NEEDLE_INDEX
#                                        # WHERE" for each regular file under PATH changed at or
#                                        # after SINCE (epoch seconds; 0: all) and each
#                                        # /proc/PID/cmdline and environ that holds one
#
# The units (what `tokenctl keyring setup --unattended` installs in ~/.config/systemd/user):
#   tokenctl-keyring.service (tk_unattended_keyring_unit), enabled (default.target.wants):
#     Type=dbus, BusName=org.freedesktop.secrets: the manager calls it started once the daemon
#     owns the name, and gnome-keyring 42 unlocks the login collection before it takes the name
#     (the stand-in ordered after it always finds it unlocked). RuntimeDirectory=tokenctl-keyring
#     (%t/tokenctl-keyring, 0700, removed by the manager when the unit stops) holds the TPM's
#     context files for a moment; Environment=TPM2TOOLS_TCTI names the TPM (tokenctl always
#     writes one, device:/dev/tpmrm0 by default: without it the TCTI loader would also try the
#     swtpm and mssim TCP ports of 127.0.0.1, swtpm.sh). ExecStart is bash -c:
#       cd %t/tokenctl-keyring || exit 1
#       pw=$(tpm2_createprimary -Q -C o -g sha256 -G ecc -a PRIMARY_ATTRIBUTES -c primary.ctx &&
#            tpm2_flushcontext -t && tpm2_load -Q -C primary.ctx -u SEAL.pub -r SEAL.priv \
#            -c seal.ctx && tpm2_flushcontext -t && tpm2_unseal -c seal.ctx) && ok=1 || ok=0
#       tpm2_flushcontext -t 2>/dev/null; rm -f primary.ctx seal.ctx
#       if [ $ok = 1 ]; then exec gnome-keyring-daemon --replace --unlock --foreground \
#         --components=secrets < <(printf %s "$pw"); fi
#       exec gnome-keyring-daemon --replace --foreground --components=secrets
#     (the flushes: a TPM without a resource manager, as a swtpm socket, keeps what each tool
#     loaded; /dev/tpmrm0 flushes a client's objects itself, and there -t flushes only ours),
#     so the password travels through a pipe only (printf is a builtin: no argv; pw is not
#     exported: no environ), the shell is replaced by the daemon (MainPID is the daemon; the
#     process substitution's writer stays as a <defunct> child of it, holding nothing), and a
#     failed unseal (another TPM, a cleared TPM, no TPM) still starts the Secret Service, with
#     the collection locked: nothing is created with an empty password and nothing is deleted.
#     In the unit file `$` is written `$$` and `%` `%%` (systemd expands both in ExecStart).
#     bash, not sh: `< <(...)` is a pipe (/dev/fd/N), and bash exec's the daemon at once; a
#     here-string or here-document would add a newline to the password, and bash writes larger
#     ones to a temporary file.
#     Needs dbus-user-session: the user bus (%t/bus) that the manager joins; Type=dbus and the
#     clients' $DBUS_SESSION_BUS_ADDRESS (the manager sets it for its units) depend on it.
#     Not handled here: a login.keyring that exists already with another password (the unlock
#     fails, the collection stays locked); setup would have to change its password once, with
#     the old one from the user.
#     The stock gnome-keyring-daemon.socket (enabled for every user in /etc/systemd/user) holds
#     %t/keyring/control, the daemon's default control socket: with it listening, our daemon's
#     start reached it, the stock gnome-keyring-daemon.service started, and both ended (ours
#     "inactive (dead)", ExecMainStatus=15, SIGTERM). With --control-directory of our own the
#     unit runs, but --replace then replaces nothing on the bus: a daemon D-Bus-activated
#     earlier (any client asking for org.freedesktop.secrets runs the stock activation file's
#     `gnome-keyring-daemon --start --foreground --components=secrets`, which starts the stock
#     unit through the socket) keeps the name, ours logs "another secret service is running",
#     and Type=dbus fails after the 90 s start timeout. So setup masks the stock socket and
#     service for the user (`systemctl --user mask gnome-keyring-daemon.socket
#     gnome-keyring-daemon.service`: two links to /dev/null in ~/.config/systemd/user; `keyring
#     remove` unmasks) and the unit keeps the default control directory: an activated daemon
#     then lives there too, and (re)starting tokenctl-keyring.service replaces it ("Replacing
#     daemon, using directory: %t/keyring") and unlocks. Restart=on-failure: a killed daemon
#     comes back unlocked ~1 s later.
#     D-Bus activation of our unit instead (by hand): a file org.freedesktop.secrets.service with
#     SystemdService=tokenctl-keyring.service in ~/.local/share/dbus-1/services did NOT win over
#     /usr/share/dbus-1/services' (StartServiceByName still ran the stock Exec=); the same file in
#     $XDG_RUNTIME_DIR/dbus-1/services did (after ReloadConfig), but that directory is emptied
#     at every boot. Not used: the unit starts with the manager, before any client.
#     (The previous mechanism, systemd-creds, below, needed --name: without it systemd-creds
#     takes the file's name: "Embedded credential name 'tokenctl-keyring' does not match
#     filename 'keyring.cred', refusing.")
#   tokenctl-refresh.service.d/keyring.conf (tk_unattended_refresh_dropin):
#     Wants= and After=tokenctl-keyring.service, so the timer's first run waits for the unlock.
#   The seal: ~/.config/tokenctl/keyring-seal.pub (48 bytes) and keyring-seal.priv (171 bytes
#   for a 43-byte password), tpm2_create's TPM2B_PUBLIC and TPM2B_PRIVATE: the private part is
#   encrypted with a key of the primary, which only this TPM's owner seed derives, so the files
#   are useless elsewhere; neither holds the password (the self-test checks). tpm2_create makes
#   them 0660 whatever the umask (077 too): chmod 0600 after, in a 0700 directory.
#   The previous credential, ~/.config/tokenctl/keyring.cred: systemd-creds encrypt honours the umask
#   (0644 under 022): seal with umask 077. It is base64 text (600 bytes for a 43-byte password);
#   neither it nor its decoded bytes contain the password.
#
# Measured on this machine (Debian 12, systemd 252.39, gnome-keyring 42.1, swtpm 0.7.1,
# tpm2-tools 5.4), as the non-root user, unless said:
# - `systemd-creds encrypt --with-key=tpm2 --name=tokenctl-keyring - CRED` with
#   SYSTEMD_TPM2_DEVICE=swtpm:path=SOCK: status 0, ~0.1 s; stderr "TPM2 device supports SHA256
#   PCR bank but none of the selected PCRs are valid! ... PCR policy effectively unenforced!"
#   (a swtpm's PCR 7 is zeros; a real machine's holds the Secure Boot state). The default
#   policy is PCR 7; `--tpm2-pcrs=` (no PCR) encrypts (status 0) but its decrypt fails on 252:
#   "TPM2 PCR bank invalid or not supported" (and leaves 2 transient objects): keep PCR 7 on 252.
#   PCR 7 extended: decrypt fails, "Current policy digest does not match stored policy digest,
#   cancelling TPM2 authentication attempt." (a Secure Boot change, e.g. a dbx update, does this
#   on a real machine: the seal must be made again).
# - Decrypt errors (status 1 each), as tokenctl will see them in the unit's stderr / journal:
#     another (fresh) TPM:  "Failed to load HMAC key in TPM: tpm:parameter(1):integrity check
#                            failed" (after esys's "Esys Finish ErrorCode (0x000001df)")
#     no TPM reachable:     "Failed to initialize TCTI context: tcti:IO failure" (after "Failed
#                            to open specified TCTI device file /dev/tpmrm0: No such file or
#                            directory" for the default device, or "Cannot connect to swtpm TPM
#                            socket")
#     lockout (below):      "TPM2 device is in dictionary attack lockout mode." (0x00000921)
#     swtpm only:           "Failed to open session in TPM: tpm:warn(2.0): out of memory for
#                            session contexts" (0x903): each 252 decrypt leaves a loaded session
#                            (swtpm.sh); a reboot (TPM2_Startup) or tpm2_flushcontext -l clears
#                            them; /dev/tpmrm0 flushes them itself.
# - The tpm2-tools seal (what tokenctl makes, tk_unattended_tpm_seal): the primary from the
#   owner seed (tpm2_createprimary -C o -g sha256 -G ecc) with the attributes
#   fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|decrypt|noda (the
#   default's plus noda), derived again identically at every unseal, so nothing about it is
#   stored; the sealed object tpm2_create -a 'fixedtpm|fixedparent|noda|userwithauth' with an
#   empty auth value and no policy: no PCR, so a firmware, kernel or Secure Boot update changes
#   nothing; what makes the blob useless elsewhere is the owner seed (a copied disk or backup on
#   another machine, a cleared TPM). Seal ~0.1 s, unseal (createprimary, load, unseal) ~0.2 s.
#   After each tool, one transient object stays loaded on a swtpm (createprimary's primary,
#   load's, unseal's): flushed with tpm2_flushcontext -t; no session is left (password
#   authorization only). Errors (status 1; tpm2-tools spells Esys_Load "Eys_Load"):
#     another (fresh) TPM: "ERROR: Eys_Load(0x1DF) - tpm:parameter(1):integrity check failed"
#     no TPM reachable:    "ERROR: Could not load tcti, got: \"swtpm:path=SOCK\"" (after "Cannot
#                          connect to swtpm TPM socket"; for device:/dev/tpmrm0 after "Failed to
#                          open specified TCTI device file /dev/tpmrm0: No such file or directory")
#     lockout (a primary without noda, below): "ERROR: Eys_Load(0x921) - tpm:warn(2.0):
#                          authorizations for objects subject to DA protection are not allowed at
#                          this time because the TPM is in DA lockout mode"
# - Dictionary-attack lockout: systemd-creds 252 seals with no noDA attribute, and its decrypt
#   authorizes TPM2_Load with the parent's (empty) password, a DA-protected use. swtpm's defaults:
#   TPM2_PT_MAX_AUTH_FAIL 3, TPM2_PT_LOCKOUT_INTERVAL 1000 s, TPM2_PT_LOCKOUT_RECOVERY 1000 s.
#   Restarting the swtpm WITHOUT TPM2_Shutdown after a decrypt is a power loss with DA in use:
#   failedTries +1 per restart; the decrypt after the third such restart fails with the lockout
#   error above (inLockout 1). `tpm2_dictionarylockout -c` (lockout hierarchy, empty auth here;
#   root's job on a real machine) clears it. With tpm2_shutdown -c before each restart the
#   counter stays 0 across any number of reboots. So a seal used at every boot is NOT immune to
#   lockout with systemd-creds 252; what keeps it working is that an orderly Linux reboot or
#   poweroff sends TPM2_Shutdown(CLEAR) (Linux, drivers/char/tpm/tpm-chip.c,
#   tpm_class_shutdown: "Issues a TPM2_Shutdown command prior to loss of power, as required by
#   the TPM 2.0 spec"); only crashes and power cuts count. A real TPM's maxTries and
#   lockoutInterval are its firmware's or its owner's (tpm2_getcap properties-variable shows
#   them; one failure is forgotten per lockoutInterval). tokenctl's doctor should report the
#   lockout error text above with `tpm2_dictionarylockout -c` for root.
#   Not lockout-protected: the same secret sealed with tpm2-tools (the libtss2-esys calls)
#   with noDA on BOTH the primary (tpm2_createprimary -a
#   'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|decrypt|noda') and the
#   sealed object (tpm2_create -a 'fixedtpm|fixedparent|noda', PCR 7 policy) unseals while the
#   TPM is in lockout, and 5 unclean restarts leave the counter at 0 (the self-test checks
#   both). noDA on the object alone is not enough (the self-test checks it: refused at the 4th
#   unclean boot, counter 3, as with no noDA): TPM2_Load authorizes with the primary's
#   password, a DA-protected use. systemd-creds 252 has no option for noDA. So tokenctl seals
#   with tpm2-tools (above), and the unit's ExecStart unseals with them; with systemd-creds,
#   orderly reboots were fine and every power cut counted.
# - LoadCredentialEncrypted= in a user unit (252): with the unit's Environment= naming the TPM
#   the unit fails with status 243/CREDENTIALS (the self-test checks it; `systemctl --user
#   set-environment` did not help either); it worked (by hand) once the MANAGER itself was
#   started with SYSTEMD_TPM2_DEVICE: the decrypt goes by the manager's environment. The clear
#   text is then a plain file, $XDG_RUNTIME_DIR/credentials/UNIT/NAME (dir dr-x------, file
#   -r--------), on the runtime directory's own file system (nothing is mounted for it; here
#   ext4: on disk), and it stays there after a Type=oneshot unit has ended (the self-test shows
#   both with SetCredential=). Rejected: the pipe above keeps the password off any file.
# - Ordering and timing (this loaded 2-core VM, eight runs): seal 0.0-0.1 s; starting the
#   keyring unit by hand 0.1-0.2 s (to the name owned, unlocked); a simulated reboot 0.6-1.1 s;
#   the stand-in timer job (OnStartupSec=1s, ordered after the keyring) done 0.7-1.7 s after the
#   manager started, the item read every time (three reboots in a row, and again after the other
#   machine's TPM). A killed daemon back and unlocked 1.3-1.7 s later (Restart=on-failure,
#   RestartSec=1s). A locked collection is unlocked again either by restarting the unit or by
#   the unseal piped into gnome-keyring's UnlockWithMasterPassword (keyring_control.py
#   unlock --password-stdin), without a restart. The whole self-test: 31 s (eight reboots).
# - Another machine (a fresh swtpm state): the unit is active with a locked collection; the
#   stand-in's `secret-tool lookup` exits 1 (gnome-keyring tries a prompt: "couldn't create
#   system prompt"); login.keyring is untouched; unlocking it by hand with the old password
#   (UnlockWithMasterPassword, keyring_control.py) works and the item is there; the first TPM
#   put back, the next boot unlocks again.
# - The host key (--with-key=host), run only against a temporary key file: systemd 252 reads
#   $SYSTEMD_CREDENTIAL_SECRET (a path) instead of /var/lib/systemd/credential.secret, which it
#   otherwise creates (root) when missing. Root: encrypt and decrypt work (stderr "Credential
#   secret file '...' is not located on encrypted media, using anyway."); the key file is
#   created -r-------- root, 4112 bytes. A non-root user, key file root's: decrypt "Failed to
#   determine local credential key: Permission denied", encrypt "Failed to determine local
#   credential host secret: Permission denied"; with no key file on the machine (as here):
#   decrypt "Failed to determine local credential key: No such file or directory", encrypt
#   "... host secret: Permission denied" (it tries to create it in /var/lib/systemd; nothing is
#   created). So the host-key path needs root twice: once to encrypt (the printed command) and at
#   every boot to decrypt: a system unit (User=, LoadCredentialEncrypted=) run by PID 1, which
#   this machine does not have (PID 1 is not systemd): documented, not run.
# - Per-user credentials: `systemd-creds --user ...` on 252: "systemd-creds: unrecognized option
#   '--user'" (status 1); they came with systemd 256.
# - Access: on a real machine the user needs /dev/tpmrm0 (group tss: `usermod -aG tss USER`,
#   then a new login or manager start; swtpm.sh says why the raw /dev/tpm0 is tss only). Here
#   the swtpm runs as root and its two sockets are chowned to the user (directories 0711).

# shellcheck disable=SC2034 # used by callers
TK_UNATTENDED_PACKAGES=(systemd dbus-user-session gnome-keyring libsecret-tools python3-dbus
  keyutils tpm2-tools)
# The primary of the seal: the owner hierarchy's ECC key with noda added to the default
# attributes; the same template at every unseal derives the same key.
TK_UNATTENDED_PRIMARY=(tpm2_createprimary -Q -C o -g sha256 -G ecc
  -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|decrypt|noda')
TK_UNATTENDED_SEAL_ATTRIBUTES='fixedtpm|fixedparent|noda|userwithauth'

# tk_unattended_user [NAME]: a system user with no password login and no home of its own (the
# user manager gets one from usermanager.sh).
tk_unattended_user() {
  local user=${1:-tokenctl-unattended} out
  if id -u "$user" >/dev/null 2>&1; then return 0; fi
  # Two instances may race: "already exists" (status 9) is success.
  if ! out=$(useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
      --user-group "$user" 2>&1) && [[ $out != *"already exists"* ]]; then
    _tk_err "useradd $user failed: $out"
    return 1
  fi
}

# tk_unattended_grant_swtpm USER: let USER reach the running swtpm (TK_SWTPM_DIR).
tk_unattended_grant_swtpm() {
  local user=${1:?usage: tk_unattended_grant_swtpm USER}
  if [[ -z ${TK_SWTPM_DIR:-} || ! -S ${TK_SWTPM_DIR:-}/tpm.sock ]]; then _tk_err "no swtpm running"; return 1; fi
  chmod 0711 "$TK_SERVICES_DIR" "$TK_SWTPM_DIR" || return 1
  chown "$user:" "$TK_SWTPM_DIR/tpm.sock" "$TK_SWTPM_DIR/tpm.sock.ctrl" || return 1
}

# tk_unattended_password: a new keyring password on stdout.
tk_unattended_password() {
  head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '='
}

# tk_unattended_tpm_seal PREFIX: see the header.
tk_unattended_tpm_seal() {
  local prefix=${1:?usage: tk_unattended_tpm_seal PREFIX} dir rc=0
  dir=$(umask 077 && mktemp -d) || return 1
  (umask 077 && "${TK_UNATTENDED_PRIMARY[@]}" -c "$dir/primary.ctx" && tpm2_flushcontext -t \
    && tpm2_create -Q -C "$dir/primary.ctx" -a "$TK_UNATTENDED_SEAL_ATTRIBUTES" -i - \
      -u "$prefix.pub" -r "$prefix.priv" && chmod 0600 "$prefix.pub" "$prefix.priv") || rc=1
  tpm2_flushcontext -t 2>/dev/null || true
  rm -rf "$dir"
  return "$rc"
}

# tk_unattended_tpm_unseal PREFIX [OUT]: see the header.
tk_unattended_tpm_unseal() {
  local prefix=${1:?usage: tk_unattended_tpm_unseal PREFIX [OUT]} out=${2:-} dir rc=0
  dir=$(umask 077 && mktemp -d) || return 1
  "${TK_UNATTENDED_PRIMARY[@]}" -c "$dir/primary.ctx" && tpm2_flushcontext -t \
    && tpm2_load -Q -C "$dir/primary.ctx" -u "$prefix.pub" -r "$prefix.priv" -c "$dir/seal.ctx" \
    && tpm2_flushcontext -t && tpm2_unseal -c "$dir/seal.ctx" ${out:+-o "$out"} || rc=1
  tpm2_flushcontext -t 2>/dev/null || true
  rm -rf "$dir"
  return "$rc"
}

# tk_unattended_seal USER HOME [TCTI]: seal stdin (the password) for USER.
tk_unattended_seal() {
  local user=${1:?usage: tk_unattended_seal USER HOME [TCTI]} home=${2:?usage: tk_unattended_seal USER HOME [TCTI]}
  local tcti=${3:-${TPM2TOOLS_TCTI:-device:/dev/tpmrm0}}
  # shellcheck disable=SC2016 # expanded by the inner bash
  runuser -u "$user" -- env TPM2TOOLS_TCTI="$tcti" bash -c '
    source "$2"
    umask 077
    mkdir -p "$1/.config/tokenctl"
    chmod 0700 "$1/.config/tokenctl"
    tk_unattended_tpm_seal "$1/.config/tokenctl/keyring-seal"
  ' tk-seal "$home" "${BASH_SOURCE[0]}"
}

# tk_unattended_keyring_unit: tokenctl-keyring.service.
tk_unattended_keyring_unit() {
  cat <<'UNIT'
[Unit]
Description=Secret Service for tokenctl, unlocked with a password sealed to this machine
Before=tokenctl-refresh.service

[Service]
Type=dbus
BusName=org.freedesktop.secrets
RuntimeDirectory=tokenctl-keyring
RuntimeDirectoryMode=0700
Environment=TPM2TOOLS_TCTI=device:/dev/tpmrm0
ExecStart=/bin/bash -c 'cd %t/tokenctl-keyring || exit 1; pw=$$(tpm2_createprimary -Q -C o -g sha256 -G ecc -a "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|decrypt|noda" -c primary.ctx && tpm2_flushcontext -t && tpm2_load -Q -C primary.ctx -u %h/.config/tokenctl/keyring-seal.pub -r %h/.config/tokenctl/keyring-seal.priv -c seal.ctx && tpm2_flushcontext -t && tpm2_unseal -c seal.ctx) && ok=1 || ok=0; tpm2_flushcontext -t 2>/dev/null; rm -f primary.ctx seal.ctx; if [ $$ok = 1 ]; then exec gnome-keyring-daemon --replace --unlock --foreground --components=secrets < <(printf %%s "$$pw"); fi; exec gnome-keyring-daemon --replace --foreground --components=secrets'
Restart=on-failure
RestartSec=1s

[Install]
WantedBy=default.target
UNIT
}

# tk_unattended_refresh_dropin: tokenctl-refresh.service.d/keyring.conf.
tk_unattended_refresh_dropin() {
  cat <<'UNIT'
[Unit]
Wants=tokenctl-keyring.service
After=tokenctl-keyring.service
UNIT
}

# tk_unattended_install USER UNITS [TCTI]: see the header.
tk_unattended_install() {
  local user=${1:?usage: tk_unattended_install USER UNITS [TCTI]} units=${2:?usage: tk_unattended_install USER UNITS [TCTI]}
  local tcti=${3:-}
  mkdir -p "$units/tokenctl-refresh.service.d" || return 1
  tk_unattended_keyring_unit >"$units/tokenctl-keyring.service"
  tk_unattended_refresh_dropin >"$units/tokenctl-refresh.service.d/keyring.conf"
  if [[ -n $tcti ]]; then
    mkdir -p "$units/tokenctl-keyring.service.d"
    printf '[Service]\nEnvironment=TPM2TOOLS_TCTI=%s\nStandardError=append:%%t/tokenctl-keyring.log\n' \
      "$tcti" >"$units/tokenctl-keyring.service.d/test-tpm.conf"
  fi
  chown -R "$user:" "$units"
  tk_user_systemctl "$user" daemon-reload || return 1
  tk_user_systemctl "$user" mask gnome-keyring-daemon.socket gnome-keyring-daemon.service 2>/dev/null || return 1
  tk_user_systemctl "$user" enable tokenctl-keyring.service 2>/dev/null || return 1
}

# tk_unattended_remove USER UNITS HOME: see the header.
tk_unattended_remove() {
  local user=${1:?usage: tk_unattended_remove USER UNITS HOME} units=${2:?usage: tk_unattended_remove USER UNITS HOME}
  local home=${3:?usage: tk_unattended_remove USER UNITS HOME}
  tk_user_systemctl "$user" disable --now tokenctl-keyring.service 2>/dev/null || return 1
  tk_user_systemctl "$user" unmask gnome-keyring-daemon.socket gnome-keyring-daemon.service 2>/dev/null || return 1
  rm -rf "$units/tokenctl-keyring.service" "$units/tokenctl-keyring.service.d" \
    "$units/tokenctl-refresh.service.d/keyring.conf" "$home/.config/tokenctl/keyring-seal.pub" \
    "$home/.config/tokenctl/keyring-seal.priv"
  rmdir "$units/tokenctl-refresh.service.d" 2>/dev/null || true
  tk_user_systemctl "$user" daemon-reload
}

# tk_unattended_install_standin USER UNITS: see the header.
tk_unattended_install_standin() {
  local user=${1:?usage: tk_unattended_install_standin USER UNITS} units=${2:?usage: tk_unattended_install_standin USER UNITS}
  cat >"$units/tokenctl-refresh.service" <<'UNIT'
[Unit]
Description=Stand-in for tokenctl refresh: reads an item through the user's bus

[Service]
Type=oneshot
StandardOutput=append:%h/refresh.log
StandardError=append:%h/refresh.log
ExecStart=/bin/bash -c 'if digest=$$(set -o pipefail; timeout 20 secret-tool lookup service tokenctl-test | sha256sum); then echo "lookup ok $${digest:0:64}"; else echo "lookup failed $$?"; fi'
UNIT
  cat >"$units/tokenctl-refresh.timer" <<'UNIT'
[Unit]
Description=Stand-in for tokenctl's refresh timer, soon after the manager starts

[Timer]
OnStartupSec=1s
AccuracySec=1s

[Install]
WantedBy=timers.target
UNIT
  chown -R "$user:" "$units"
  tk_user_systemctl "$user" daemon-reload || return 1
  tk_user_systemctl "$user" enable tokenctl-refresh.timer 2>/dev/null || return 1
}

# tk_unattended_as USER CMD...: see the header.
tk_unattended_as() {
  local user=${1:?usage: tk_unattended_as USER CMD...} dir
  shift
  dir=$(cat "$TK_SERVICES_DIR/usermanager-$user.dir" 2>/dev/null || true)
  if [[ -z $dir ]]; then _tk_err "no user manager for $user"; return 1; fi
  setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --reset-env \
    /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$dir/home" XDG_RUNTIME_DIR="$dir/runtime" \
    DBUS_SESSION_BUS_ADDRESS="unix:path=$dir/runtime/bus" LANG=C.UTF-8 "$@"
}

# tk_unattended_reboot USER DIR [unclean]: see the header.
tk_unattended_reboot() {
  local user=${1:?usage: tk_unattended_reboot USER DIR [unclean]} dir=${2:?usage: tk_unattended_reboot USER DIR [unclean]}
  local how=${3:-clean} name=${TK_SWTPM_NAME:-swtpm}
  tk_stop_user_manager "$user" || return 1
  # The kernel's keys go with a real reboot; a session's tokenctl cache lives there.
  runuser -u "$user" -- keyctl clear @u >/dev/null 2>&1 || true
  tk_swtpm_flush "$name" || return 1
  if [[ $how != unclean ]]; then
    TPM2TOOLS_TCTI=$(tk_swtpm_tcti "$name") tpm2_shutdown -c || { _tk_err "tpm2_shutdown -c failed"; return 1; }
  fi
  tk_stop_swtpm "$name" || return 1
  tk_start_swtpm "$name" || return 1
  tk_unattended_grant_swtpm "$user" || return 1
  tk_start_user_manager "$user" "$dir"
}

# tk_unattended_scan SINCE PATH...: see the header. The needles come on stdin, so that they are
# never in an argv.
tk_unattended_scan() {
  local since=${1:?usage: tk_unattended_scan SINCE PATH...}
  shift
  # shellcheck disable=SC2016 # python
  "$TK_PYTHON" -c '
import os, sys
since = float(sys.argv[1])
needles = [n.encode() for n in sys.stdin.read().split("\n") if n]
def check(where, data):
    for i, n in enumerate(needles):
        if n in data:
            print(i, where)
def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""
for top in sys.argv[2:]:
    for root, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not os.path.isfile(path) or os.path.islink(path):
                continue
            if since and max(st.st_mtime, st.st_ctime) < since:
                continue
            check(path, read(path))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for part in ("cmdline", "environ"):
            check("/proc/%s/%s" % (pid, part), read("/proc/%s/%s" % (pid, part)))
' "$since" "$@"
}
