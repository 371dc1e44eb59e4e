# shellcheck shell=bash
# Scripts/lib/kwallet.sh: KWallet (kwalletd5, KDE Frameworks 5) as a headless
# Secret Service provider for tokenctl's tests, on the private bus of
# Scripts/lib/services.sh. Source it after services.sh (it works under
# set -euo pipefail); like services.sh every function is quiet on success,
# prints "services: ..." to stderr and returns non-zero on failure.
#
#   source Scripts/lib/services.sh
#   source Scripts/lib/kwallet.sh
#   tk_require_packages "${TK_KWALLET_PACKAGES[@]}"
#   tk_services_init "$(mktemp -d)"; tk_start_dbus
#   tk_start_kwallet [PASSWORD]        # default "test"; wallet kdewallet created/opened with
#                                      # PASSWORD, its collection (the default alias,
#                                      # /org/freedesktop/secrets/collection/kdewallet) unlocked
#   tk_lock_kwallet                    # close the wallet: the collection reports Locked
#   tk_unlock_kwallet PASSWORD         # open it again, collection unlocked, no dialog
#                                      # (a no-op when it is not locked)
#   tk_kwallet_is_locked               # prints true/false (default collection's Locked)
#   tk_stop_kwallet                    # writes the wallet out, stops kwalletd5 (by PID),
#                                      # waits for org.freedesktop.secrets to go away
#
# Files: DIR/pids/kwallet.pid, DIR/kwallet.log (kwalletd5's output), DIR/kwallet.prompts,
# config/kwalletrc, data/kwalletd/kdewallet.{kwl,salt} (+ kdewallet_attributes.json,
# where kwalletd keeps Secret Service attributes), data/dbus-1/services/ (see below).
#
# How (kwallet_control.py does the D-Bus work):
# - kwalletrc: [org.freedesktop.secrets] apiEnabled=true (the Secret Service API),
#   no first-use wizard, no idle close. kwalletd5 runs with QT_QPA_PLATFORM=offscreen.
# - No dialog is ever needed: the wallet is opened as kwallet-pam does, with
#   org.kde.KWallet.pamOpen and PBKDF2-SHA512(password, data/kwalletd/kdewallet.salt,
#   50000, 56). A new wallet is created that way; kwalletd5 builds Secret Service
#   collections only for the wallets on disk when it starts, so the first start
#   restarts it once (~0.2 s more).
# - The collection stays Locked after pamOpen until Secret Service Unlock + Prompt,
#   which completes at once while the wallet is open.
# - TK_KWALLET_PROMPTS=deny (the default): kwalletrc's [Auto Deny] refuses the
#   Secret Service's own open requests, so a client's Unlock prompt on a locked
#   collection is dismissed at once (secret-tool lookup prints nothing and fails,
#   much like gnome-keyring with no prompter). tk_unlock_kwallet lifts it while it
#   unlocks. TK_KWALLET_PROMPTS=dialog is what a desktop does: such a prompt opens a
#   password dialog nobody can see, the client waits for it forever, and kwalletd
#   ignores pamOpen until the dialog is gone; tk_unlock_kwallet then restarts
#   kwalletd5 (new PID) to get rid of it. The mode is read by tk_start_kwallet and
#   kept in DIR/kwallet.prompts for the other functions.
# - D-Bus activation (TK_DBUS_ACTIVATION=1 buses only): tk_start_kwallet shadows
#   org.freedesktop.secrets and org.kde.kwalletd5 with service files in
#   $XDG_DATA_HOME/dbus-1/services that run /bin/false and has the bus reload them,
#   so a stopped kwalletd5 stays gone and gnome-keyring is never activated.
#
# Known problems of kwalletd5 5.103 as a Secret Service (measured with secret-tool,
# i.e. libsecret 0.20.5; tokenctl uses the same library):
# - DH sessions: about 1 secret-tool call in 125 fails at random (1000 lookups: 9
#   failures; 1000 stores: 7). kwalletd rejects a client public key whose big-endian
#   encoding has a leading zero byte (1 in 256: "Client public key size is invalid"),
#   and about as often the two sides derive different AES keys (store: "Can't find
#   session /org/freedesktop/secrets/session/N"; lookup: exit 1 with no output and
#   no message, i.e. it looks like "not found"). A retry succeeds; the probe in
#   tk_start_kwallet retries, and TK_KWALLET_DH_FLAKE_RE matches the two messages.
# - Secrets are stored as text: bytes that are not valid UTF-8 come back as U+FFFD.
# - kwalletd writes the wallet 5 s after a change and dies on SIGTERM without doing
#   so; tk_stop_kwallet closes (and so writes) the wallet first, but a kwalletd5
#   stopped any other way within 5 s of a write loses that write.
#
# Measured (kwallet-selftest.sh): start with a new wallet ~0.85 s, with an existing
# one ~0.4 s; unlock ~0.13 s; storing again with the same attributes replaces the
# item (one item, new value) at once, with no prompt; on a locked collection
# (deny mode) lookup/store/clear fail at once.
#
# Processes are only ever stopped by the PID in DIR/pids/kwallet.pid.

# shellcheck disable=SC2034 # used by callers
TK_KWALLET_PACKAGES=(libkf5wallet-bin libqca-qt5-2-plugins dbus libsecret-tools python3-dbus python3)
TK_KWALLET_WALLET=kdewallet
TK_KWALLET_PROMPTS=${TK_KWALLET_PROMPTS:-deny}
TK_KWALLET_DH_FLAKE_RE="Client public key size is invalid|Can't find session /org/freedesktop/secrets/session/"

_tk_name_owned() {
  [[ $(_tk_bus_call NameHasOwner "$1" || true) == *true* ]]
}

_tk_name_pid() {
  local pid
  pid=$( { _tk_bus_call GetConnectionUnixProcessID "$1" || true; } | awk '{print $NF}')
  [[ $pid =~ ^[0-9]+$ ]] && printf '%s\n' "$pid"
}

_tk_kwallet_control() {
  if [[ -z ${DBUS_SESSION_BUS_ADDRESS:-} ]]; then _tk_err "no private bus (tk_start_dbus)"; return 1; fi
  "$TK_PYTHON" "$TK_SCRIPTS_LIB/kwallet_control.py" --wallet "$TK_KWALLET_WALLET" "$@"
}

# Service files that win over /usr/share/dbus-1/services on a bus with activation.
_tk_kwallet_shadow_activation() {
  local dir=$XDG_DATA_HOME/dbus-1/services name
  mkdir -p "$dir" || return 1
  for name in org.freedesktop.secrets org.kde.kwalletd5; do
    printf '[D-BUS Service]\nName=%s\nExec=/bin/false\n' "$name" >"$dir/$name.service" || return 1
  done
  # The bus may not watch a directory that did not exist when it started.
  if ! dbus-send --session --dest=org.freedesktop.DBus --type=method_call --print-reply \
      /org/freedesktop/DBus org.freedesktop.DBus.ReloadConfig >/dev/null 2>"$TK_SERVICES_DIR/kwallet.probe.log"; then
    _tk_err "bus ReloadConfig failed: $(cat "$TK_SERVICES_DIR/kwallet.probe.log")"
    return 1
  fi
}

# _tk_kwallet_launch: start kwalletd5, record its PID, wait until it owns both names.
_tk_kwallet_launch() {
  local pidf=$TK_SERVICES_DIR/pids/kwallet.pid pid owner
  ( QT_QPA_PLATFORM=offscreen kwalletd5 </dev/null >>"$TK_SERVICES_DIR/kwallet.log" 2>&1 &
    echo $! >"$pidf" )
  pid=$(<"$pidf")
  for _ in $(seq 100); do
    _tk_secrets_owned && _tk_name_owned org.kde.kwalletd5 && break
    if ! _tk_alive "$pid"; then
      _tk_err "kwalletd5 exited: $(tail -n 20 "$TK_SERVICES_DIR/kwallet.log")"
      rm -f "$pidf"
      return 1
    fi
    sleep 0.05
  done
  owner=$(_tk_name_pid org.freedesktop.secrets || true)
  if [[ $owner != "$pid" ]]; then
    _tk_err "org.freedesktop.secrets is owned by pid '${owner:-none}', not kwalletd5 ($pid), after 5 s: $(tail -n 20 "$TK_SERVICES_DIR/kwallet.log")"
    _tk_kwallet_shutdown || true
    return 1
  fi
}

# _tk_kwallet_shutdown: write the wallet out (kwalletd syncs 5 s after a change and
# dies on SIGTERM without doing so), stop the recorded PID, and wait until the bus
# has dropped its names.
_tk_kwallet_shutdown() {
  local pidf=$TK_SERVICES_DIR/pids/kwallet.pid pid
  [[ -f $pidf ]] || return 0
  pid=$(<"$pidf")
  if [[ $pid =~ ^[0-9]+$ ]] && _tk_alive "$pid" && [[ $(_tk_name_pid org.kde.kwalletd5 || true) == "$pid" ]]; then
    timeout 10 "$TK_PYTHON" "$TK_SCRIPTS_LIB/kwallet_control.py" --wallet "$TK_KWALLET_WALLET" close \
      2>>"$TK_SERVICES_DIR/kwallet.log" || true
  fi
  _tk_stop_named kwallet || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 0
  for _ in $(seq 50); do
    [[ $(_tk_name_pid org.freedesktop.secrets || true) != "$pid" &&
       $(_tk_name_pid org.kde.kwalletd5 || true) != "$pid" ]] && return 0
    sleep 0.1
  done
  _tk_err "the bus still lists kwalletd5 ($pid) as a name owner 5 s after it was stopped"
  return 1
}

# tk_start_kwallet [PASSWORD]: see the header.
tk_start_kwallet() {
  _tk_need_dir || return 1
  local password=${1-test} wallet=$XDG_DATA_HOME/kwalletd/$TK_KWALLET_WALLET.kwl
  if [[ -z ${DBUS_SESSION_BUS_ADDRESS:-} ]]; then _tk_err "tk_start_dbus first"; return 1; fi
  if [[ $TK_KWALLET_PROMPTS != deny && $TK_KWALLET_PROMPTS != dialog ]]; then
    _tk_err "TK_KWALLET_PROMPTS must be deny or dialog, not '$TK_KWALLET_PROMPTS'"; return 1
  fi
  if ! command -v kwalletd5 >/dev/null; then
    _tk_err "kwalletd5 not found (tk_require_packages \"\${TK_KWALLET_PACKAGES[@]}\")"; return 1
  fi
  _tk_kwallet_shutdown || return 1
  if _tk_secrets_owned; then
    _tk_err "org.freedesktop.secrets is already owned by pid $(_tk_name_pid org.freedesktop.secrets || echo '?') (tk_kill_keyring first?)"
    return 1
  fi
  _tk_kwallet_shadow_activation || return 1
  if ! _tk_kwallet_control write-config --prompts "$TK_KWALLET_PROMPTS" 2>"$TK_SERVICES_DIR/kwallet.probe.log"; then
    _tk_err "cannot write kwalletrc: $(cat "$TK_SERVICES_DIR/kwallet.probe.log")"; return 1
  fi
  printf '%s\n' "$TK_KWALLET_PROMPTS" >"$TK_SERVICES_DIR/kwallet.prompts"

  if [[ ! -f $wallet || $(stat -c %s "$wallet") -lt 60 ]]; then
    # Create the wallet, then restart so the Secret Service side sees it.
    _tk_kwallet_launch || return 1
    if ! printf %s "$password" | _tk_kwallet_control pam-open --password-stdin \
        2>"$TK_SERVICES_DIR/kwallet.probe.log"; then
      _tk_err "creating wallet $TK_KWALLET_WALLET failed: $(cat "$TK_SERVICES_DIR/kwallet.probe.log")"
      _tk_kwallet_shutdown || true
      return 1
    fi
    _tk_kwallet_shutdown || return 1
    if [[ ! -f $wallet ]]; then _tk_err "kwalletd5 wrote no $wallet"; return 1; fi
  fi
  _tk_kwallet_launch || return 1
  if ! _tk_kwallet_ready "$password" "$wallet"; then
    _tk_kwallet_shutdown || true
    return 1
  fi
}

# _tk_kwallet_ready PASSWORD WALLET_FILE: unlock the collection, check it with a probe item.
_tk_kwallet_ready() {
  local password=$1 wallet=$2 probe got locked try
  if ! printf %s "$password" | _tk_kwallet_control unlock --password-stdin \
      2>"$TK_SERVICES_DIR/kwallet.probe.log"; then
    _tk_err "unlocking wallet $TK_KWALLET_WALLET failed (an existing $wallet with another password?): $(cat "$TK_SERVICES_DIR/kwallet.probe.log")"
    return 1
  fi
  locked=$(tk_kwallet_is_locked 2>"$TK_SERVICES_DIR/kwallet.probe.log" || true)
  if [[ $locked != false ]]; then
    _tk_err "default collection not unlocked after start (is-locked: ${locked:-error}): $(cat "$TK_SERVICES_DIR/kwallet.probe.log")"
    return 1
  fi
  # Up to 3 tries each: see "DH sessions" in the header.
  probe="probe-$$-$RANDOM"
  for try in 1 2 3; do
    printf %s "$probe" | timeout 10 secret-tool store --label=tokenctl-probe application tokenctl-probe \
      2>"$TK_SERVICES_DIR/kwallet.probe.log" && break
    if [[ $try == 3 ]] || ! grep -Eq "$TK_KWALLET_DH_FLAKE_RE" "$TK_SERVICES_DIR/kwallet.probe.log"; then
      _tk_err "kwallet probe store failed: $(cat "$TK_SERVICES_DIR/kwallet.probe.log")"
      return 1
    fi
  done
  for try in 1 2 3; do
    got=$(timeout 10 secret-tool lookup application tokenctl-probe 2>/dev/null || true)
    [[ $got == "$probe" ]] && break
  done
  for try in 1 2 3; do
    timeout 10 secret-tool clear application tokenctl-probe 2>/dev/null && break
  done
  if [[ $got != "$probe" ]]; then
    _tk_err "kwallet probe lookup returned '${got}', want '${probe}'"
    return 1
  fi
}

# tk_lock_kwallet: close the wallet; the default collection then reports Locked.
tk_lock_kwallet() {
  _tk_need_dir || return 1
  _tk_kwallet_control lock
}

# tk_unlock_kwallet PASSWORD: open the wallet (pamOpen) and unlock its collection.
tk_unlock_kwallet() {
  _tk_need_dir || return 1
  local password=${1?usage: tk_unlock_kwallet PASSWORD} rc=0
  printf %s "$password" | _tk_kwallet_control unlock --password-stdin \
    2>"$TK_SERVICES_DIR/kwallet.probe.log" || rc=$?
  if [[ $rc == 3 && $(cat "$TK_SERVICES_DIR/kwallet.prompts" 2>/dev/null || true) == dialog ]]; then
    # Possibly a password dialog nobody can answer: only a new kwalletd5 gets rid of it.
    _tk_kwallet_shutdown || return 1
    _tk_kwallet_launch || return 1
    rc=0
    printf %s "$password" | _tk_kwallet_control unlock --password-stdin \
      2>"$TK_SERVICES_DIR/kwallet.probe.log" || rc=$?
  fi
  if [[ $rc != 0 ]]; then
    _tk_err "unlocking wallet $TK_KWALLET_WALLET failed: $(cat "$TK_SERVICES_DIR/kwallet.probe.log")"
    return 1
  fi
}

# tk_kwallet_is_locked: prints true or false.
tk_kwallet_is_locked() { _tk_kwallet_control is-locked; }

# tk_stop_kwallet: see the header.
tk_stop_kwallet() {
  _tk_need_dir || return 1
  _tk_kwallet_shutdown
}
