#!/usr/bin/env bash
# Self-check for Scripts/lib/unattended.sh (run as root): for a non-root user with a real systemd
# user manager (usermanager.sh) and a software TPM (swtpm.sh),
#  1. a random keyring password sealed with tpm2-tools (noDA primary and object, no PCR) into
#     ~/.config/tokenctl/keyring-seal.pub and .priv (0600), never in clear in them, nothing left
#     loaded in the TPM;
#  2. the user units: tokenctl-keyring.service creates and unlocks the login collection from the
#     sealed password when the manager starts, before a stand-in tokenctl-refresh.service (timer)
#     that stores and reads an item through the user's bus; a locked collection unlocked again
#     by restarting the unit; LoadCredentialEncrypted='s shortcomings for user units;
#  3. three simulated reboots (manager, bus, keyring and kernel keys gone, the TPM shut down and
#     started again), then five power losses (the TPM restarted without TPM2_Shutdown): the
#     stand-in reads the item stored before, with nobody there, the lockout counter stays 0;
#     and dictionary-attack lockout of systemd-creds' seal and of a noDA object under a primary
#     without noDA after three unclean TPM restarts, none after clean ones, and none ever for
#     the seal tokenctl makes (noDA on primary and object), which unseals even in lockout;
#  4. another machine (a fresh TPM): the unseal fails (its exact error), the collection stays
#     locked, the item is still there (unlocked by hand with the old password), and the first TPM
#     put back unlocks again;
#  5. the host key (only against a temporary key file, never the machine's) as root and as the
#     user, and that systemd-creds --user does not exist on this systemd;
#  6. neither the password nor the item's secret anywhere in the user's home and runtime dir,
#     /tmp (what changed during the test), the unit files, or any process's argv or environ.
# Everything stopped by PID. KEEP=1 keeps the temporary directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=services.sh
source "$here/services.sh"
# shellcheck source=swtpm.sh
source "$here/swtpm.sh"
# shellcheck source=usermanager.sh
source "$here/usermanager.sh"
# shellcheck source=unattended.sh
source "$here/unattended.sh"

if [[ $(id -u) != 0 ]]; then echo "unattended-selftest.sh: run it as root" >&2; exit 1; fi
tk_require_packages "${TK_UNATTENDED_PACKAGES[@]}" "${TK_SWTPM_PACKAGES[@]}" python3 util-linux

# Two runs at once would share the user (its kernel keys, its processes): one at a time.
exec 9>/tmp/tokenctl-unattended-selftest.lock
if ! flock -w 600 9; then echo "unattended-selftest.sh: another run holds the lock for 10 min" >&2; exit 1; fi
began=$SECONDS
since=$(date +%s)
user=tokenctl-unattended
# A short path: the swtpm's sockets must fit AF_UNIX's 108 bytes.
root=$(mktemp -d /tmp/tokenctl-ua.XXXXXX)
chmod 0711 "$root" # the user reaches its manager's directory and the swtpm below it
# The keyring control script, where the user can read it: a clone of the repository may be
# private (mktemp -d makes 0700 directories), and the checks run it as the user.
control=$root/keyring_control.py
install -m 0644 "$TK_SCRIPTS_LIB/keyring_control.py" "$control"
# So is unattended.sh, which the user's shells source to seal and unseal: sourced again from
# the copy, its functions hand the copy's path to them.
mechanism=$root/unattended.sh
install -m 0644 "$here/unattended.sh" "$mechanism"
# shellcheck source=unattended.sh
source "$mechanism"
cleanup() {
  local rc=$?
  if [[ -z ${finished:-} ]]; then echo "unattended-selftest.sh: stopped early (status $rc; $fails check(s) failed before): see above" >&2; fi
  tk_stop_user_manager "$user" 2>/dev/null || true
  tk_services_stop_all || true
  if [[ -n ${KEEP:-} ]]; then echo "kept $root" >&2; else rm -rf "$root"; fi
}
trap cleanup EXIT

# shellcheck source=selftest.sh
source "$here/selftest.sh"
contains() { if [[ $2 == *"$3"* ]]; then ok "$1"; else bad "$1: '$3' not in: $2"; fi; }
lacks() { if [[ $2 != *"$3"* ]]; then ok "$1"; else bad "$1: '$3' found in: $2"; fi; }
# fails_with NAME NEEDLE COMMAND...: COMMAND must fail, and say NEEDLE.
fails_with() {
  local name=$1 needle=$2 out
  shift 2
  if out=$("$@" 2>&1); then bad "$name: succeeded"; return; fi
  contains "$name" "$out" "$needle"
}
sha() { sha256sum | cut -d' ' -f1; }
# elapsed START: seconds since START (date +%s.%N), one decimal.
elapsed() { awk -v now="$(date +%s.%N)" -v start="$1" 'BEGIN { printf "%.1f", now - start }'; }
# wait_for NAME SECONDS COMMAND...: until COMMAND succeeds; prints the seconds it took.
wait_for() {
  local name=$1 limit=$2 start
  shift 2
  start=$(date +%s.%N)
  for _ in $(seq $((limit * 10))); do
    if "$@" >/dev/null 2>&1; then elapsed "$start"; echo; return 0; fi
    sleep 0.1
  done
  bad "$name: not within $limit s"
  return 1
}
locked() { tk_unattended_as "$user" "$TK_PYTHON" "$control" is-locked 2>&1; }
refresh_lines() { grep -c '^lookup' "$home/refresh.log" 2>/dev/null || true; }

tk_services_init "$root/svc"
tk_unattended_user "$user"
tk_start_swtpm
tk_unattended_grant_swtpm "$user"
tcti=$TK_SWTPM_TCTI
um=$root/um
tk_start_user_manager "$user" "$um"
home=$TK_USER_MANAGER_HOME units=$TK_USER_MANAGER_UNITS runtime=$TK_USER_MANAGER_RUNTIME
seal=$home/.config/tokenctl/keyring-seal
expect "systemd is 252 (the facts in unattended.sh are for it)" "$(systemctl --version | awk 'NR == 1 {print $2}')" 252

# --- 1. the sealed password ------------------------------------------------------------------
pw=$(tk_unattended_password)
expect "password: 43 base64url characters (32 random bytes)" "$(printf %s "$pw" | tr -cd 'A-Za-z0-9_-' | wc -c)" 43
t=$(date +%s.%N)
if printf %s "$pw" | tk_unattended_seal "$user" "$home" "$tcti" 2>"$root/seal.err"; then
  ok "sealed as $user with tpm2-tools ($(elapsed "$t") s)"
else bad "seal: $(cat "$root/seal.err")"; fi
expect "the seal: $user's, 0600 each" "$(stat -c '%U %a' "$seal.pub" "$seal.priv" | sort -u)" "$user 600"
expect "its directory 0700" "$(stat -c %a "$(dirname "$seal")")" 700
expect "the seal's sizes (TPM2B_PUBLIC, TPM2B_PRIVATE)" "$(stat -c %s "$seal.pub" "$seal.priv" | tr '\n' ' ')" "48 171 "
if cat "$seal.pub" "$seal.priv" | grep -qaF -f <(printf '%s\n' "$pw"); then
  bad "the password is in the seal in clear"
else ok "the seal holds no clear password"; fi
expect "nothing left loaded in the TPM after the seal" "$(tk_swtpm_transients | tr '\n' ' ')" ""
unseal_as_user() {
  # shellcheck disable=SC2016 # expanded by the inner bash
  tk_unattended_as "$user" env TPM2TOOLS_TCTI="$tcti" bash -c 'source "$1"; tk_unattended_tpm_unseal "$2"' \
    tk-unseal "$mechanism" "$seal"
}
t=$(date +%s.%N)
got=$(unseal_as_user 2>/dev/null | sha)
expect "$user unseals it by hand ($(elapsed "$t") s): the same password" "$got" "$(printf %s "$pw" | sha)"
expect "nothing left loaded in the TPM after the unseal" "$(tk_swtpm_transients | tr '\n' ' ')" ""

# --- 2. the units ----------------------------------------------------------------------------
tk_unattended_install "$user" "$units" "$tcti"
tk_unattended_install_standin "$user" "$units"
expect "the stock gnome-keyring socket masked for $user" \
  "$(tk_user_systemctl "$user" is-enabled gnome-keyring-daemon.socket 2>&1 || true)" masked
expect "enabled: default.target wants the keyring" "$(readlink "$units/default.target.wants/tokenctl-keyring.service")" \
  "$units/tokenctl-keyring.service"
contains "the refresh service is ordered after it" \
  "$(tk_user_systemctl "$user" show -p After -p Wants tokenctl-refresh.service)" tokenctl-keyring.service
t=$(date +%s.%N)
if tk_user_systemctl "$user" start tokenctl-keyring.service; then
  ok "tokenctl-keyring.service started ($(elapsed "$t") s; Type=dbus: the name is owned)"
else bad "start tokenctl-keyring.service: $(cat "$runtime/tokenctl-keyring.log" 2>/dev/null)"; fi
expect "first run: login collection created and unlocked" "$(locked)" false
expect "login.keyring made" "$(stat -c '%U %a' "$home/.local/share/keyrings/login.keyring" 2>&1)" "$user 600"
main=$(tk_user_systemctl "$user" show -p MainPID --value tokenctl-keyring.service)
expect "MainPID is the daemon (bash exec'd it)" "$(cat "/proc/$main/comm" 2>/dev/null)" gnome-keyring-d
contains "its argv" "$(tr '\0' ' ' <"/proc/$main/cmdline")" "--unlock --foreground --components=secrets"
expect "the unit's runtime directory: 0700, its context files removed" \
  "$(stat -c %a "$runtime/tokenctl-keyring") $(ls -A "$runtime/tokenctl-keyring" | wc -l)" "700 0"
expect "nothing left loaded in the TPM by the unit" "$(tk_swtpm_transients | tr '\n' ' ')" ""
expect "the stock gnome-keyring-daemon.service was not started" \
  "$(tk_user_systemctl "$user" show -p ActiveState --value gnome-keyring-daemon.service)" inactive
item=$(head -c 24 /dev/urandom | base64 -w0)
if printf %s "$item" | tk_unattended_as "$user" secret-tool store --label=tokenctl-test service tokenctl-test; then
  ok "an item stored through $user's bus"
else bad "secret-tool store"; fi
expect "and read back" "$(tk_unattended_as "$user" secret-tool lookup service tokenctl-test | sha)" "$(printf %s "$item" | sha)"

# A collection locked later: restarting the unit unlocks it again.
tk_unattended_as "$user" "$TK_PYTHON" "$control" lock
expect "locked by hand" "$(locked)" true
tk_user_systemctl "$user" restart tokenctl-keyring.service
expect "restarting tokenctl-keyring.service unlocks it again" "$(locked)" false
# Or without a restart: the unseal piped into gnome-keyring's UnlockWithMasterPassword.
tk_unattended_as "$user" "$TK_PYTHON" "$control" lock
# shellcheck disable=SC2016 # expanded by the inner bash
tk_unattended_as "$user" env TPM2TOOLS_TCTI="$tcti" bash -c 'set -o pipefail; source "$1"
  tk_unattended_tpm_unseal "$2" 2>/dev/null | "$3" "$4" unlock --password-stdin' \
  tk-unlock "$mechanism" "$seal" "$TK_PYTHON" "$control" || bad "unseal | unlock"
expect "or unseal | UnlockWithMasterPassword, no restart" "$(locked)" false

# A daemon killed: Restart=on-failure brings it back, unlocked.
main=$(tk_user_systemctl "$user" show -p MainPID --value tokenctl-keyring.service)
if [[ $main =~ ^[0-9]+$ ]] && ((main > 1)); then kill -KILL "$main"; fi
back() {
  local now
  now=$(tk_user_systemctl "$user" show -p MainPID --value tokenctl-keyring.service)
  [[ $now != 0 && $now != "$main" && $(locked) == false ]]
}
if took=$(wait_for "killed daemon back" 20 back); then ok "daemon killed: back and unlocked ${took} s later (Restart=on-failure)"; fi
# A daemon D-Bus-activated while ours is stopped (the stock activation file) owns the name,
# locked; restarting ours replaces it through the shared control directory and unlocks.
tk_user_systemctl "$user" stop tokenctl-keyring.service
owner_cmdline() {
  local pid
  pid=$(tk_unattended_as "$user" dbus-send --session --print-reply=literal --dest=org.freedesktop.DBus \
    /org/freedesktop/DBus org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets 2>/dev/null |
    awk '{print $NF}')
  [[ -n $pid ]] && tr '\0' ' ' <"/proc/$pid/cmdline"
}
if tk_unattended_as "$user" timeout 20 secret-tool lookup service tokenctl-test >/dev/null 2>&1; then
  bad "with ours stopped, a lookup succeeded"
else ok "with ours stopped, a lookup fails"; fi
contains "and D-Bus activation started the stock daemon" "$(owner_cmdline)" "gnome-keyring-daemon --start"
tk_user_systemctl "$user" restart tokenctl-keyring.service
contains "restarting ours replaces it" "$(owner_cmdline)" "gnome-keyring-daemon --replace --unlock"
expect "unlocked again" "$(locked)" false
expect "the item readable" "$(tk_unattended_as "$user" secret-tool lookup service tokenctl-test | sha)" "$(printf %s "$item" | sha)"

# LoadCredentialEncrypted= (measured, rejected): without the TPM in the manager's own
# environment it fails; and where a user manager puts credentials, SetCredential= shows.
# A systemd-creds credential of its own (not the keyring's password).
# shellcheck disable=SC2016 # expanded by the inner bash
printf probe | tk_unattended_as "$user" env SYSTEMD_TPM2_DEVICE="$tcti" bash -c 'umask 077
  exec systemd-creds encrypt --with-key=tpm2 --name=tokenctl-keyring - "$1"' tk-probe "$home/probe.cred" 2>/dev/null \
  || bad "systemd-creds encrypt (probe)"
cat >"$units/probe-encrypted.service" <<'UNIT'
[Service]
Type=oneshot
LoadCredentialEncrypted=tokenctl-keyring:%h/probe.cred
ExecStart=/bin/true
UNIT
cat >"$units/probe-plain.service" <<'UNIT'
[Service]
Type=oneshot
SetCredential=probe:not-a-secret
ExecStart=/bin/sh -c 'echo "$CREDENTIALS_DIRECTORY"; stat -f -c %%T "$CREDENTIALS_DIRECTORY"'
StandardOutput=truncate:%t/probe-plain.out
UNIT
printf '[Service]\nEnvironment=SYSTEMD_TPM2_DEVICE=%s\n' "$tcti" >"$root/probe.conf"
mkdir -p "$units/probe-encrypted.service.d" && cp "$root/probe.conf" "$units/probe-encrypted.service.d/"
chown -R "$user:" "$units"
tk_user_systemctl "$user" daemon-reload
tk_user_systemctl "$user" start probe-encrypted.service 2>/dev/null || true
expect "LoadCredentialEncrypted=: 243/CREDENTIALS though the unit's Environment= names the TPM" \
  "$(tk_user_systemctl "$user" show -p ExecMainStatus --value probe-encrypted.service)" 243
tk_user_systemctl "$user" start probe-plain.service
expect "a user unit's credentials: a plain directory in the runtime dir" \
  "$(head -n 1 "$runtime/probe-plain.out")" "$runtime/credentials/probe-plain.service"
expect "on the runtime dir's file system (here: ext4, a disk)" "$(sed -n 2p "$runtime/probe-plain.out")" \
  "$(stat -f -c %T "$runtime")"
expect "and still there after the oneshot ended" "$(cat "$runtime/credentials/probe-plain.service/probe" 2>&1)" not-a-secret
rm -rf "$units"/probe-* "$runtime/probe-plain.out" "$home/probe.cred"
tk_user_systemctl "$user" daemon-reload
tk_swtpm_flush

# --- 3. reboots --------------------------------------------------------------------------------
want=$(printf %s "$item" | sha)
# Three orderly reboots, then five power losses in a row (no TPM2_Shutdown before the TPM
# restarts: each counts as a failure for a DA-protected object in use).
for boot in 1 2 3 4 5 6 7 8; do
  how=clean
  ((boot > 3)) && how=unclean
  : >"$home/refresh.log"
  t=$(date +%s.%N)
  tk_unattended_reboot "$user" "$um" "$how"
  up=$(elapsed "$t")
  if took=$(wait_for "boot $boot ($how): the stand-in ran" 30 grep -q '^lookup' "$home/refresh.log"); then
    expect "boot $boot ($how; reboot ${up} s, timer job done ${took} s after): the item read with nobody there" \
      "$(cat "$home/refresh.log")" "lookup ok $want"
  fi
  expect "boot $boot ($how): unlocked" "$(locked)" false
  expect "boot $boot ($how): TPM lockout counter" "$(tpm2_getcap properties-variable | sed -n 's/^TPM2_PT_LOCKOUT_COUNTER: //p')" 0x0
done

# Dictionary-attack lockout, on a TPM of its own: three restarts without TPM2_Shutdown after a
# decrypt, and the next decrypt is refused; tpm2_dictionarylockout -c clears it; clean restarts
# never count.
tk_start_swtpm da
head -c 16 /dev/urandom | base64 >"$root/da.in"
systemd-creds encrypt --with-key=tpm2 --name=da "$root/da.in" "$root/da.cred" 2>/dev/null
da_decrypt() { systemd-creds decrypt --name=da "$root/da.cred" - >/dev/null; }
# The same secret sealed as tokenctl seals it (tk_unattended_tpm_seal: noDA on the primary and
# on the sealed object, no PCR policy): the TPM's dictionary-attack logic skips both.
(umask 077 && tk_unattended_tpm_seal "$root/noda" <"$root/da.in") >>"$root/noda.log" 2>&1 \
  || bad "noDA seal: $(tail -n 3 "$root/noda.log")"
noda_unseal() {
  rm -f "$root/noda.out"
  tk_unattended_tpm_unseal "$root/noda" "$root/noda.out" >>"$root/noda.log" 2>&1 && cmp -s "$root/da.in" "$root/noda.out"
}
for n in 1 2 3; do
  da_decrypt >/dev/null 2>&1 || bad "da: decrypt before unclean restart $n"
  tk_stop_swtpm da && tk_start_swtpm da
done
fails_with "after 3 unclean TPM restarts: decrypt refused" "TPM2 device is in dictionary attack lockout mode." da_decrypt
expect "the TPM says inLockout" "$(tpm2_getcap properties-variable | sed -n 's/^ *inLockout: *//p' | head -n 1)" 1
if noda_unseal; then ok "in lockout, the tpm2-tools seal with noDA (primary and object) still unseals"
else bad "noDA unseal in lockout: $(tail -n 3 "$root/noda.log")"; fi
tk_swtpm_flush da
tpm2_dictionarylockout -c && ok "tpm2_dictionarylockout -c (lockout hierarchy) clears it"
for n in 1 2 3 4 5; do
  noda_unseal || bad "noDA unseal before unclean restart $n: $(tail -n 3 "$root/noda.log")"
  tk_stop_swtpm da && tk_start_swtpm da
done
if noda_unseal; then ok "noDA seal: 5 unclean restarts, still unseals"; else bad "noDA after unclean restarts"; fi
expect "noDA seal: lockout counter after 5 unclean restarts" \
  "$(tpm2_getcap properties-variable | sed -n 's/^TPM2_PT_LOCKOUT_COUNTER: //p')" 0x0
expect "noDA seal: nothing left loaded in the TPM" "$(tk_swtpm_transients da | tr '\n' ' ')" ""
# noDA on the sealed object alone is not enough: its primary without noDA (tpm2_createprimary's
# default attributes) is authorized by every TPM2_Load, a DA-protected use.
plain_primary=(tpm2_createprimary -Q -C o -g sha256 -G ecc -c "$root/pp.ctx")
{ "${plain_primary[@]}" && tpm2_flushcontext -t \
  && tpm2_create -Q -C "$root/pp.ctx" -a "$TK_UNATTENDED_SEAL_ATTRIBUTES" -i "$root/da.in" \
    -u "$root/half.pub" -r "$root/half.priv" && tpm2_flushcontext -t; } >>"$root/noda.log" 2>&1 || bad "half-noDA seal"
half_unseal() {
  local rc=0
  { "${plain_primary[@]}" && tpm2_flushcontext -t \
    && tpm2_load -Q -C "$root/pp.ctx" -u "$root/half.pub" -r "$root/half.priv" -c "$root/hs.ctx" \
    && tpm2_flushcontext -t && tpm2_unseal -c "$root/hs.ctx" -o /dev/null; } || rc=1
  tpm2_flushcontext -t 2>/dev/null
  return "$rc"
}
for n in 1 2 3; do
  half_unseal >>"$root/noda.log" 2>&1 || bad "half-noDA unseal before unclean restart $n"
  tk_stop_swtpm da && tk_start_swtpm da
done
fails_with "noDA object under a primary without noDA: refused after 3 unclean restarts" \
  "Eys_Load(0x921) - tpm:warn(2.0): authorizations for objects subject to DA protection are not allowed at this time because the TPM is in DA lockout mode" \
  half_unseal
if noda_unseal; then ok "and tokenctl's seal (noDA primary) unseals in that lockout"; else bad "noDA in half-noDA lockout"; fi
tpm2_dictionarylockout -c || bad "tpm2_dictionarylockout -c"
for n in 1 2 3 4; do
  da_decrypt >/dev/null 2>&1 || bad "da: decrypt before clean restart $n"
  tk_swtpm_flush da && tpm2_shutdown -c && tk_stop_swtpm da && tk_start_swtpm da
done
if da_decrypt >/dev/null 2>&1; then ok "after 4 clean restarts (tpm2_shutdown -c): decrypt works"; else bad "decrypt after clean restarts"; fi
expect "lockout counter after clean restarts" "$(tpm2_getcap properties-variable | sed -n 's/^TPM2_PT_LOCKOUT_COUNTER: //p')" 0x0
tk_stop_swtpm da
unseal_da() { TPM2TOOLS_TCTI=$(tk_swtpm_tcti da) tk_unattended_tpm_unseal "$root/noda" /dev/null; }
fails_with "no TPM reachable: the unseal says" "ERROR: Could not load tcti, got: \"swtpm:path=" unseal_da
tk_swtpm_use swtpm

# --- 4. another machine ----------------------------------------------------------------------
keyring_sum=$(sha <"$home/.local/share/keyrings/login.keyring")
tk_stop_user_manager "$user"
tk_swtpm_flush && tpm2_shutdown -c
tk_stop_swtpm
mv "$TK_SERVICES_DIR/swtpm/state" "$root/state.first"
: >"$home/refresh.log"
: >"$runtime/tokenctl-keyring.log"
tk_start_swtpm
tk_unattended_grant_swtpm "$user"
tk_start_user_manager "$user" "$um"
wait_for "another TPM: the stand-in ran" 30 grep -q '^lookup' "$home/refresh.log" >/dev/null || true
expect "another TPM: the keyring unit still runs (Secret Service there)" \
  "$(tk_user_systemctl "$user" show -p ActiveState --value tokenctl-keyring.service)" active
expect "another TPM: the collection stays locked" "$(locked)" true
contains "another TPM: the timer job's lookup fails" "$(cat "$home/refresh.log")" "lookup failed"
contains "another TPM: tpm2_load says" "$(cat "$runtime/tokenctl-keyring.log")" \
  "ERROR: Eys_Load(0x1DF) - tpm:parameter(1):integrity check failed"
expect "another TPM: nothing left loaded in it" "$(tk_swtpm_transients | tr '\n' ' ')" ""
expect "another TPM: login.keyring untouched" "$(sha <"$home/.local/share/keyrings/login.keyring")" "$keyring_sum"
if printf %s "$pw" | tk_unattended_as "$user" "$TK_PYTHON" "$control" unlock --password-stdin; then
  ok "another TPM: unlocked by hand with the old password"
else bad "unlock by hand"; fi
expect "another TPM: the item is still there" "$(tk_unattended_as "$user" secret-tool lookup service tokenctl-test | sha)" "$want"
# The first TPM back: the next boot unlocks again.
tk_stop_user_manager "$user"
tk_stop_swtpm
rm -rf "$TK_SERVICES_DIR/swtpm/state"
mv "$root/state.first" "$TK_SERVICES_DIR/swtpm/state"
tk_start_swtpm
: >"$home/refresh.log"
tk_unattended_reboot "$user" "$um"
if wait_for "first TPM back: the stand-in ran" 30 grep -q '^lookup' "$home/refresh.log" >/dev/null; then
  expect "first TPM back: the item read at boot" "$(cat "$home/refresh.log")" "lookup ok $want"
fi

# --- 5. the host key and per-user credentials --------------------------------------------------
had_host_key=$([[ -e /var/lib/systemd/credential.secret ]] && echo yes || echo no)
hk=$root/hostkey
mkdir -m 0711 "$hk"
export SYSTEMD_CREDENTIAL_SECRET=$hk/credential.secret
if out=$(printf %s "$pw" | systemd-creds encrypt --with-key=host --name=tokenctl-keyring - "$hk/keyring.cred" 2>&1); then
  ok "root: systemd-creds encrypt --with-key=host"
else bad "root encrypt --with-key=host: $out"; fi
contains "root: the key file is not on encrypted media (a warning)" "$out" "is not located on encrypted media, using anyway"
expect "the host key file: root's, 0400" "$(stat -c '%U %a' "$hk/credential.secret")" "root 400"
expect "root: decrypt gives the password" \
  "$(systemd-creds decrypt --name=tokenctl-keyring "$hk/keyring.cred" - 2>/dev/null | sha)" "$(printf %s "$pw" | sha)"
cp "$hk/keyring.cred" "$hk/user.cred" && chown "$user:" "$hk/user.cred"
fails_with "$user: decrypt with root's host key" "Failed to determine local credential key: Permission denied" \
  runuser -u "$user" -- env SYSTEMD_CREDENTIAL_SECRET="$hk/credential.secret" systemd-creds decrypt \
  --name=tokenctl-keyring "$hk/user.cred" -
fails_with "$user: encrypt with root's host key" "Failed to determine local credential host secret: Permission denied" \
  runuser -u "$user" -- env SYSTEMD_CREDENTIAL_SECRET="$hk/credential.secret" systemd-creds encrypt \
  --with-key=host --name=x - "$hk/x.cred" </dev/null
unset SYSTEMD_CREDENTIAL_SECRET
if [[ $had_host_key == no ]]; then
  fails_with "$user: decrypt, this machine has no host key" "Failed to determine local credential key: No such file or directory" \
    runuser -u "$user" -- systemd-creds decrypt --name=tokenctl-keyring "$hk/user.cred" -
  fails_with "$user: encrypt, cannot make the host key" "Failed to determine local credential host secret: Permission denied" \
    runuser -u "$user" -- systemd-creds encrypt --with-key=host --name=x - "$hk/x.cred" </dev/null
fi
expect "the machine's host key neither made nor removed" "$([[ -e /var/lib/systemd/credential.secret ]] && echo yes || echo no)" "$had_host_key"
fails_with "systemd-creds --user: not on 252" "systemd-creds: unrecognized option '--user'" \
  runuser -u "$user" -- systemd-creds --user list

# --- 6. nowhere in clear -----------------------------------------------------------------------
expect "the keyring is up and unlocked while searching" "$(locked)" false
hits=$(printf '%s\n%s\n' "$pw" "$item" | tk_unattended_scan "$since" "$home" "$runtime" "$units" /tmp)
expect "password (0) and secret (1): in no file of home, runtime, units, /tmp, no argv or environ" "$hits" ""
hits=$(printf '%s\n%s\n' "$pw" "$item" | tk_unattended_scan 0 "$home" "$runtime")
expect "home and runtime, every file whatever its age" "$hits" ""
# The scan must be able to find: a file and an environ with a needle.
probe=probe-$RANDOM$RANDOM
printf %s "$probe" >"$runtime/scan-probe"
hits=$(export TK_SCAN_PROBE=$probe; printf '%s\n' "$probe" | tk_unattended_scan 0 "$runtime")
rm -f "$runtime/scan-probe"
contains "the scan finds a planted file" "$hits" "0 $runtime/scan-probe"
contains "the scan finds a planted environ" "$hits" "/environ"

# --- undo --------------------------------------------------------------------------------------
keyring_sum=$(sha <"$home/.local/share/keyrings/login.keyring")
tk_unattended_remove "$user" "$units" "$home"
expect "removed: no tokenctl unit or seal left" \
  "$(find "$units" "$home/.config/tokenctl" -name 'tokenctl-keyring*' -o -name keyring.conf -o -name 'keyring-seal.*')" ""
expect "removed: the stock socket enabled again" \
  "$(tk_user_systemctl "$user" is-enabled gnome-keyring-daemon.socket 2>&1 || true)" enabled
expect "removed: the keyring (and the item in it) stays" "$(sha <"$home/.local/share/keyrings/login.keyring")" "$keyring_sum"

tk_stop_user_manager "$user"
# shellcheck disable=SC2009 # zombies are to be left out, which pgrep cannot
expect "the manager's processes are gone (zombies aside: PID 1 here does not reap)" "$(ps -u "$user" -o stat= | grep -vc "^Z" || true)" 0
finished=1
echo "took $((SECONDS - began)) s"
if ((fails)); then echo "$fails check(s) failed" >&2; exit 1; fi
echo "all unattended checks passed"
