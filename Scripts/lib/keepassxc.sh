# shellcheck shell=bash
# Scripts/lib/keepassxc.sh: KeePassXC 2.7.4 (Debian 12) as a headless Secret
# Service provider for tokenctl's tests, instead of gnome-keyring.
#
# Source it after services.sh (it works under set -euo pipefail); every function
# is quiet on success, prints "services: ..." to stderr and returns non-zero on
# failure. Processes are recorded in DIR/pids (keepassxc.pid, keepassxc-xvfb.pid)
# and only ever stopped by those PIDs; tk_services_stop_all stops them too.
#
#   source Scripts/lib/services.sh; source Scripts/lib/keepassxc.sh
#   tk_require_packages "${TK_SERVICE_PACKAGES[@]}" "${TK_KEEPASSXC_PACKAGES[@]}"
#   tk_services_init "$(mktemp -d)"; tk_start_dbus      # NOT tk_start_keyring
#   tk_start_keepassxc [PASSWORD] [CONFIRM_ACCESS]     # default "test" false; exports
#       TK_KEEPASSXC_DB (DIR/keepassxc/login.kdbx) and TK_KEEPASSXC_COLLECTION
#       (/org/freedesktop/secrets/collection/login, what the "default" alias resolves to)
#   tk_keepassxc_is_locked              # prints true/false (Locked of the default collection)
#   tk_lock_keepassxc                   # MainWindow.lockAllDatabases
#   tk_unlock_keepassxc PASSWORD        # MainWindow.openDatabase DB PASSWORD
#   tk_keepassxc_set_secret ATTR VALUE... <secret   # Item.SetSecret on the matching item(s)
#   tk_keepassxc_approve_pending [TIMEOUT]   # Xvfb only: Return ("Allow Selected") on the
#                                       # access dialog; tk_keepassxc_dismiss_pending: Escape
#   tk_stop_keepassxc                   # also stops its Xvfb
#
# What KeePassXC 2.7.4 does differently from gnome-keyring (measured; see
# keepassxc-selftest.sh):
# - Replacing an existing item that another client (process) created --
#   CreateItem(replace=true), i.e. libsecret's secret_password_store /
#   `secret-tool store` when the item exists -- opens an "Access Request" dialog
#   even with ConfirmAccessItem=false (fixed in 2.7.6); the Prompt never
#   completes headless. Whatever the dialog's answer (Allow, Escape, Deny), the
#   replace then happens. Item.SetSecret on the existing item does not ask
#   (tk_keepassxc_set_secret). Creating a new item, reading, searching and
#   deleting (secret-tool clear, Item.Delete) do not ask.
# - While such a dialog is open (even after its client gave up), KeePassXC
#   ignores lockAllDatabases and SIGTERM: tk_stop_keepassxc sends SIGKILL after
#   2 s (tk_services_stop_all after 3 s, with a message). Under Xvfb,
#   tk_keepassxc_dismiss_pending closes it.
# - A locked database exposes no items at all: SearchItems returns nothing
#   (neither unlocked nor locked), so a lookup says "not found" (secret-tool
#   exit 1), not "locked"; only the collection's Locked property tells. Storing
#   into a locked collection (or `secret-tool search --unlock`; or any search
#   with FdoSecrets/UnlockBeforeSearch=true) opens an unlock dialog that never
#   completes headless.
# - Deleted items go to the database's Recycle Bin (not exposed to clients).
# - Secrets are kept as text: a text/plain secret's bytes are decoded as UTF-8
#   (invalid bytes become U+FFFD). The file is saved ~0.35 s after a change; a
#   SIGKILL before that loses it.
# - Locking and unlocking re-register the collection's D-Bus object; under load
#   a call can land in between and get UnknownObject. keepassxc_control.py
#   retries those and waits for a stable state; a test that calls tokenctl right
#   after tk_lock_keepassxc / tk_unlock_keepassxc may still, rarely, see it.
# - CONFIRM_ACCESS=true (FdoSecrets/ConfirmAccessItem): an item is locked for
#   every client (D-Bus connection, i.e. process) but the one that created it,
#   until that client calls Service.Unlock on it and the user allows it; the
#   "Remember" box only lasts for that connection, so every new process (every
#   tokenctl run, even the creator's next one) asks again. KeePassXC then runs on
#   a private Xvfb (not offscreen), so that tk_keepassxc_approve_pending can
#   press Return (the focused default button "Allow Selected") with xdotool;
#   tk_keepassxc_dismiss_pending presses Escape (the lookup gets nothing). Set
#   TK_KEEPASSXC_XVFB=1 to get the Xvfb with CONFIRM_ACCESS=false too (to answer
#   the replace dialog above).
# - ini keys that matter: FdoSecrets/Enabled=true (default false),
#   UnlockBeforeSearch=false (true: locked lookups hang on an unlock dialog),
#   ConfirmAccessItem (above). ShowNotification and ConfirmDeleteItem made no
#   difference headless (no delete dialog either way); they are set false.
#   The "default" alias resolves by itself to the first exposed database
#   opened (wait-ready would set it otherwise).
#
# Layout under DIR: keepassxc/login.kdbx (created with keepassxc-cli on first
# start, reused after), keepassxc/tmp/ (KeePassXC's TMPDIR: single-instance
# socket and lock), keepassxc.log, keepassxc-xvfb.log; the ini is
# config/keepassxc/keepassxc.ini ($XDG_CONFIG_HOME, where 2.7.4 reads it; also
# passed with --config), local state in cache/keepassxc/keepassxc.ini.

# shellcheck disable=SC2034 # used by callers
TK_KEEPASSXC_PACKAGES=(keepassxc libsecret-tools python3-dbus python3-gi xvfb xdotool)
TK_KEEPASSXC_CONTROL_PY=${TK_KEEPASSXC_CONTROL_PY:-$TK_SCRIPTS_LIB/keepassxc_control.py}

_tk_keepassxc_control() {
  if [[ -z ${DBUS_SESSION_BUS_ADDRESS:-} ]]; then _tk_err "no private bus (tk_start_dbus)"; return 1; fi
  "$TK_PYTHON" "$TK_KEEPASSXC_CONTROL_PY" "$@"
}

# _tk_bus_names METHOD: the names org.freedesktop.DBus.METHOD lists, one a line.
_tk_bus_names() {
  dbus-send --session --dest=org.freedesktop.DBus --type=method_call --print-reply=literal \
    /org/freedesktop/DBus "org.freedesktop.DBus.$1" 2>/dev/null | tr ' ' '\n' | grep -v -e '^array' -e '^\[' -e '^\]' -e '^$' || true
}

# If the bus can activate org.freedesktop.secrets (TK_DBUS_ACTIVATION=1: the stock
# session config reads /usr/share/dbus-1/services, where gnome-keyring's file
# lives), shadow it with one in $XDG_DATA_HOME/dbus-1/services (searched first)
# that runs /bin/false, so no client can start gnome-keyring behind KeePassXC's
# back (while it starts, or after it is stopped).
_tk_keepassxc_shadow_activation() {
  local dir=$XDG_DATA_HOME/dbus-1/services
  local names
  names=$(_tk_bus_names ListActivatableNames)
  grep -qxF org.freedesktop.secrets <<<"$names" || return 0
  [[ -f $dir/org.freedesktop.secrets.service ]] && grep -q '^Exec=/bin/false$' "$dir/org.freedesktop.secrets.service" && return 0
  mkdir -p "$dir"
  printf '[D-BUS Service]\nName=org.freedesktop.secrets\nExec=/bin/false\n' >"$dir/org.freedesktop.secrets.service"
  if ! dbus-send --session --dest=org.freedesktop.DBus --type=method_call --print-reply \
      /org/freedesktop/DBus org.freedesktop.DBus.ReloadConfig >/dev/null 2>&1; then
    _tk_err "dbus ReloadConfig failed (shadowing gnome-keyring's activation)"
    return 1
  fi
}

# _tk_keepassxc_create_db PATH PASSWORD: new database whose root group is exposed
# to the Secret Service (Meta/CustomData FDO_SECRETS_EXPOSED_GROUP = {uuid}).
# keepassxc-cli cannot set custom data, so: db-create, export XML, add it, import.
_tk_keepassxc_create_db() {
  local db=$1 password=$2 work
  work=$(dirname "$db")/create
  rm -rf "$work"; mkdir -m 0700 "$work"
  # db-create and import read the password twice (enter + repeat), one line each;
  # -t 100: the shortest key derivation time keepassxc-cli accepts (ms).
  if ! printf '%s\n%s\n' "$password" "$password" | keepassxc-cli db-create -q -p -t 100 "$work/plain.kdbx" \
      >"$work/log" 2>&1; then
    _tk_err "keepassxc-cli db-create failed: $(cat "$work/log")"; return 1
  fi
  if ! printf '%s\n' "$password" | keepassxc-cli export -q -f xml "$work/plain.kdbx" >"$work/db.xml" 2>"$work/log"; then
    _tk_err "keepassxc-cli export failed: $(cat "$work/log")"; return 1
  fi
  if ! "$TK_PYTHON" - "$work/db.xml" 2>"$work/log" <<'PY'
import base64, sys, uuid
import xml.etree.ElementTree as ET
path = sys.argv[1]
tree = ET.parse(path)
root = tree.getroot()
group = uuid.UUID(bytes=base64.b64decode(root.find("Root/Group/UUID").text))
meta = root.find("Meta")
data = meta.find("CustomData")
if data is None:
    data = ET.SubElement(meta, "CustomData")
item = ET.SubElement(data, "Item")
ET.SubElement(item, "Key").text = "FDO_SECRETS_EXPOSED_GROUP"
ET.SubElement(item, "Value").text = "{%s}" % group   # QUuid::toString() form, braces
tree.write(path, encoding="UTF-8", xml_declaration=True)
PY
  then
    _tk_err "adding FDO_SECRETS_EXPOSED_GROUP to the XML failed: $(cat "$work/log")"; return 1
  fi
  if ! printf '%s\n%s\n' "$password" "$password" | keepassxc-cli import -q -p -t 100 "$work/db.xml" "$db.new" \
      >"$work/log" 2>&1; then
    _tk_err "keepassxc-cli import failed: $(cat "$work/log")"; rm -f "$db.new"; return 1
  fi
  mv "$db.new" "$db"
  rm -rf "$work"   # the XML export holds the (empty) database in clear
}

# _tk_keepassxc_write_ini FILE CONFIRM_ACCESS
_tk_keepassxc_write_ini() {
  mkdir -p "$(dirname "$1")"
  cat >"$1" <<INI
[General]
ConfigVersion=2
SingleInstance=false
RememberLastDatabases=false
RememberLastKeyFiles=false
OpenPreviousDatabasesOnStartup=false
AutoSaveAfterEveryChange=true
AutoReloadOnChange=false
BackupBeforeSave=false
UpdateCheckMessageShown=true

[GUI]
CheckForUpdates=false
ShowTrayIcon=false
MinimizeOnStartup=false
ShowExpiredEntriesOnDatabaseUnlock=false

[Security]
LockDatabaseIdle=false
LockDatabaseScreenLock=false
LockDatabaseMinimize=false
ClearClipboard=false

[Browser]
Enabled=false

[SSHAgent]
Enabled=false

[FdoSecrets]
Enabled=true
ShowNotification=false
ConfirmAccessItem=$2
ConfirmDeleteItem=false
UnlockBeforeSearch=false
INI
}

# _tk_keepassxc_start_xvfb: a private X server for KeePassXC's dialogs; sets
# TK_KEEPASSXC_DISPLAY (:N, the first free display, chosen by Xvfb itself).
_tk_keepassxc_start_xvfb() {
  local pidf=$TK_SERVICES_DIR/pids/keepassxc-xvfb.pid dfile=$TK_SERVICES_DIR/keepassxc/xvfb.display pid n
  _tk_stop_named keepassxc-xvfb || return 1
  rm -f "$dfile"
  ( Xvfb -displayfd 3 -nolisten tcp -screen 0 1280x1024x24 \
      3>"$dfile" </dev/null >>"$TK_SERVICES_DIR/keepassxc-xvfb.log" 2>&1 &
    echo $! >"$pidf" )
  pid=$(<"$pidf")
  for _ in $(seq 100); do
    [[ -s $dfile ]] && break
    if ! _tk_alive "$pid"; then
      _tk_err "Xvfb exited: $(tail -n 20 "$TK_SERVICES_DIR/keepassxc-xvfb.log")"
      rm -f "$pidf"; return 1
    fi
    sleep 0.1
  done
  n=$(tr -dc 0-9 <"$dfile" 2>/dev/null || true)
  if [[ -z $n ]]; then
    _tk_err "Xvfb reported no display within 10 s"
    _tk_stop_named keepassxc-xvfb || true
    return 1
  fi
  TK_KEEPASSXC_DISPLAY=:$n
}

# tk_start_keepassxc [PASSWORD] [CONFIRM_ACCESS]
tk_start_keepassxc() {
  _tk_need_dir || return 1
  local password=${1-test} confirm=${2:-false} dir pidf pid ini local_ini coll owner env_gui
  if [[ -z ${DBUS_SESSION_BUS_ADDRESS:-} ]]; then _tk_err "tk_start_dbus first"; return 1; fi
  if [[ $confirm != true && $confirm != false ]]; then
    _tk_err "tk_start_keepassxc: CONFIRM_ACCESS must be true or false, not '$confirm'"; return 1
  fi
  if [[ -z $password || $password == *$'\n'* ]]; then
    _tk_err "tk_start_keepassxc: the password must be non-empty and one line"; return 1
  fi
  dir=$TK_SERVICES_DIR/keepassxc
  pidf=$TK_SERVICES_DIR/pids/keepassxc.pid
  tk_stop_keepassxc || return 1
  if _tk_secrets_owned; then
    owner=$( { _tk_bus_call GetConnectionUnixProcessID org.freedesktop.secrets || true; } | awk '{print $NF}')
    _tk_err "org.freedesktop.secrets is already owned (pid ${owner:-?}: gnome-keyring? stop it first)"
    return 1
  fi
  _tk_keepassxc_shadow_activation || return 1

  mkdir -p "$dir"
  chmod 0700 "$dir"
  rm -rf "$dir/tmp"
  mkdir -m 0700 "$dir/tmp"
  if [[ ! -f $dir/login.kdbx ]]; then
    _tk_keepassxc_create_db "$dir/login.kdbx" "$password" || return 1
  elif ! printf '%s\n' "$password" | keepassxc-cli db-info "$dir/login.kdbx" >/dev/null 2>"$dir/start.err"; then
    # KeePassXC itself would just sit on its unlock screen: check first (~0.1 s)
    _tk_err "cannot open the existing $dir/login.kdbx with that password: $(grep -v '^Enter password' "$dir/start.err" | head -n 1)"
    return 1
  fi
  ini=$XDG_CONFIG_HOME/keepassxc/keepassxc.ini
  local_ini=$XDG_CACHE_HOME/keepassxc/keepassxc.ini
  _tk_keepassxc_write_ini "$ini" "$confirm" || return 1
  mkdir -p "$(dirname "$local_ini")"

  env_gui=(QT_QPA_PLATFORM=offscreen)
  if [[ $confirm == true || ${TK_KEEPASSXC_XVFB:-0} == 1 ]]; then
    _tk_keepassxc_start_xvfb || return 1
    env_gui=(QT_QPA_PLATFORM=xcb "DISPLAY=$TK_KEEPASSXC_DISPLAY")
  fi
  # Started from a subshell (not a job of the caller's shell); --pw-stdin reads
  # one line. TMPDIR: the single-instance socket and lock live in QDir::tempPath().
  ( printf '%s\n' "$password" | env -u WAYLAND_DISPLAY -u DISPLAY -u SESSION_MANAGER \
      TMPDIR="$dir/tmp" QT_QPA_PLATFORMTHEME= QT_ACCESSIBILITY=0 NO_AT_BRIDGE=1 "${env_gui[@]}" \
      keepassxc --config "$ini" --localconfig "$local_ini" --pw-stdin "$dir/login.kdbx" \
      >>"$TK_SERVICES_DIR/keepassxc.log" 2>&1 &
    echo $! >"$pidf" )
  pid=$(<"$pidf")
  if ! coll=$(_tk_keepassxc_control wait-ready --timeout "${TK_KEEPASSXC_START_TIMEOUT:-20}" --pid "$pid" \
      2>"$dir/start.err"); then
    if ! _tk_alive "$pid"; then
      _tk_err "keepassxc exited: $(tail -n 20 "$TK_SERVICES_DIR/keepassxc.log")"
    else
      _tk_err "keepassxc not ready: $(cat "$dir/start.err") $(tail -n 5 "$TK_SERVICES_DIR/keepassxc.log")"
    fi
    tk_stop_keepassxc || true
    return 1
  fi
  export TK_KEEPASSXC_DB=$dir/login.kdbx TK_KEEPASSXC_COLLECTION=$coll
}

# tk_keepassxc_is_locked: prints true or false.
tk_keepassxc_is_locked() { _tk_keepassxc_control is-locked; }

# tk_lock_keepassxc: lock every open database (waits until the collection says Locked).
tk_lock_keepassxc() { _tk_keepassxc_control lock; }

# tk_unlock_keepassxc PASSWORD: unlock it again without a dialog.
tk_unlock_keepassxc() {
  local password=${1?usage: tk_unlock_keepassxc PASSWORD}
  _tk_need_dir || return 1
  printf '%s' "$password" | _tk_keepassxc_control unlock --password-stdin \
    --database "${TK_KEEPASSXC_DB:-$TK_SERVICES_DIR/keepassxc/login.kdbx}"
}

# tk_keepassxc_set_secret ATTR VALUE...: the secret (stdin, as is) of every
# matching item, with Item.SetSecret: the replace that never asks.
tk_keepassxc_set_secret() { _tk_keepassxc_control set-secret "$@"; }

# _tk_keepassxc_answer_dialog KEY TIMEOUT: wait up to TIMEOUT s for KeePassXC's
# access dialog ("KeePassXC -  Access Request") on its Xvfb, focus it, press KEY
# and wait for it to close.
_tk_keepassxc_answer_dialog() {
  local key=$1 timeout=$2 wid="" open
  # Another shell than the one that started it (each test step runs its own): the display
  # Xvfb chose is in its file.
  if [[ -z ${TK_KEEPASSXC_DISPLAY:-} && -s $TK_SERVICES_DIR/keepassxc/xvfb.display ]]; then
    TK_KEEPASSXC_DISPLAY=:$(<"$TK_SERVICES_DIR/keepassxc/xvfb.display")
  fi
  if [[ -z ${TK_KEEPASSXC_DISPLAY:-} || ! -f $TK_SERVICES_DIR/pids/keepassxc-xvfb.pid ]]; then
    _tk_err "keepassxc runs without Xvfb (start it with CONFIRM_ACCESS=true or TK_KEEPASSXC_XVFB=1)"
    return 1
  fi
  for _ in $(seq "$((timeout * 10))"); do
    wid=$(DISPLAY=$TK_KEEPASSXC_DISPLAY xdotool search --onlyvisible --name 'Access Request' 2>/dev/null | head -n 1 || true)
    [[ -n $wid ]] && break
    sleep 0.1
  done
  if [[ -z $wid ]]; then _tk_err "no KeePassXC access dialog within ${timeout} s"; return 1; fi
  if ! DISPLAY=$TK_KEEPASSXC_DISPLAY xdotool windowfocus --sync "$wid" key --clearmodifiers "$key" 2>/dev/null; then
    _tk_err "xdotool could not press $key on window $wid"
    return 1
  fi
  for _ in $(seq 30); do
    open=$(DISPLAY=$TK_KEEPASSXC_DISPLAY xdotool search --onlyvisible --name 'Access Request' 2>/dev/null || true)
    grep -qxF "$wid" <<<"$open" || return 0
    sleep 0.1
  done
  _tk_err "the access dialog (window $wid) is still open after pressing $key"
  return 1
}

# tk_keepassxc_approve_pending [TIMEOUT]: press Return on the access dialog
# (default 5 s to appear): "Allow Selected", the focused default button, with
# "Remember" checked, so that client (D-Bus connection) is allowed those items
# until it disconnects. Needs CONFIRM_ACCESS=true or TK_KEEPASSXC_XVFB=1.
tk_keepassxc_approve_pending() { _tk_keepassxc_answer_dialog Return "${1:-5}"; }

# tk_keepassxc_dismiss_pending [TIMEOUT]: press Escape on it: no decision. For an
# item access (ConfirmAccessItem=true) the client's Unlock completes without the
# item (secret-tool lookup prints nothing); for the replace dialog of
# CreateItem(replace=true) 2.7.4 replaces anyway, whatever the answer. Also
# what unblocks a KeePassXC whose client gave up: lockAllDatabases and SIGTERM
# do nothing while the dialog is open.
tk_keepassxc_dismiss_pending() { _tk_keepassxc_answer_dialog Escape "${1:-5}"; }

# tk_stop_keepassxc: TERM; KeePassXC ignores it while a dialog is open, so KILL
# after 2 s. Then its Xvfb, if any.
tk_stop_keepassxc() {
  _tk_need_dir || return 1
  local f=$TK_SERVICES_DIR/pids/keepassxc.pid pid rc=0 owner=
  if [[ -f $f ]]; then
    pid=$(<"$f")
    if [[ $pid =~ ^[0-9]+$ ]] && _tk_alive "$pid"; then
      if [[ -n ${DBUS_SESSION_BUS_ADDRESS:-} ]]; then
        owner=$( { _tk_bus_call GetConnectionUnixProcessID org.freedesktop.secrets || true; } | awk '{print $NF}')
      fi
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 20); do _tk_alive "$pid" || break; sleep 0.1; done
      if _tk_alive "$pid"; then
        kill -KILL "$pid" 2>/dev/null || true
        for _ in $(seq 20); do _tk_alive "$pid" || break; sleep 0.1; done
      fi
      if _tk_alive "$pid"; then _tk_err "could not stop keepassxc (pid $pid)"; return 1; fi
      # it owned the name: wait for the bus to let go of it
      if [[ $owner == "$pid" ]]; then
        for _ in $(seq 20); do _tk_secrets_owned || break; sleep 0.1; done
      fi
    fi
    rm -f "$f"
  fi
  _tk_stop_named keepassxc-xvfb || rc=1
  unset TK_KEEPASSXC_DISPLAY TK_KEEPASSXC_COLLECTION
  return "$rc"
}
