#!/usr/bin/env bash
# Self-check for Scripts/lib/services.sh: private bus, gnome-keyring, lock /
# unlock, kill + restart, two auth servers, the django-oauth-toolkit server, clean-up with no
# stray processes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=services.sh
source "$here/services.sh"

tk_require_packages "${TK_SERVICE_PACKAGES[@]}"

root=$(mktemp -d)
cleanup() { tk_services_stop_all || true; rm -rf "$root"; }
trap cleanup EXIT

fails=0
ok()  { printf 'ok   %s\n' "$1"; }
bad() { printf 'FAIL %s\n' "$1" >&2; fails=$((fails + 1)); }
check() { # check NAME COMMAND...
  local name=$1; shift
  if "$@"; then ok "$name"; else bad "$name"; fi
}
expect() { if [[ $2 == "$3" ]]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi; }
lookup() { timeout 10 secret-tool lookup service tokenctl-selftest 2>/dev/null || true; }

# live dbus-daemon / gnome-keyring-daemon / python processes started under our
# TK_SERVICES_DIR (they inherit it): precise even with other runs in parallel
ours() {
  local p comm
  for p in /proc/[0-9]*; do
    comm=$(cat "$p/comm" 2>/dev/null) || continue
    [[ $comm == dbus-daemon || $comm == gnome-keyring-d || $comm == python* ]] || continue
    grep -q 'Z' <(awk '{print $3}' "$p/stat" 2>/dev/null) && continue
    tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qxF "TK_SERVICES_DIR=$root/svc" && printf '%s ' "${p#/proc/}"
  done
  return 0
}

export DISPLAY=:99 GNOME_KEYRING_CONTROL=/nonexistent DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent
tk_services_init "$root/svc"
expect "env HOME" "$HOME" "$root/svc/home"
expect "env XDG_RUNTIME_DIR" "$XDG_RUNTIME_DIR" "$root/svc/runtime"
expect "env XDG_DATA_HOME" "$XDG_DATA_HOME" "$root/svc/data"
expect "runtime mode" "$(stat -c %a "$XDG_RUNTIME_DIR")" 700
expect "root mode" "$(stat -c %a "$root/svc")" 700
expect "inherited vars unset" "${DISPLAY-unset}/${GNOME_KEYRING_CONTROL-unset}/${DBUS_SESSION_BUS_ADDRESS-unset}" unset/unset/unset
expect "caller's EXIT trap kept" "$(trap -p EXIT)" "trap -- 'cleanup' EXIT"

tk_start_dbus
dbus_pid=$(<"$TK_SERVICES_DIR/pids/dbus.pid")
expect "bus address" "$DBUS_SESSION_BUS_ADDRESS" "unix:path=$XDG_RUNTIME_DIR/bus"
check "dbus-daemon pid alive" _tk_alive "$dbus_pid"

tk_start_keyring
keyring_pid=$(<"$TK_SERVICES_DIR/pids/keyring.pid")
expect "keyring pid is gnome-keyring-daemon" "$(cat "/proc/$keyring_pid/comm")" gnome-keyring-d
check "login keyring on disk" test -f "$XDG_DATA_HOME/keyrings/login.keyring"
expect "unlocked after start" "$(tk_keyring_is_locked)" false

printf %s 's3cret value' | secret-tool store --label='tokenctl selftest' service tokenctl-selftest
expect "store + lookup (no trailing newline)" "$(lookup)" "s3cret value"

# --- lock / unlock
tk_lock_keyring
expect "locked" "$(tk_keyring_is_locked)" true
expect "lookup on a locked keyring finds nothing" "$(lookup)" ""
if tk_unlock_keyring wrong 2>/dev/null; then bad "unlock with a wrong password failed"; else ok "wrong password refused"; fi
expect "still locked" "$(tk_keyring_is_locked)" true
tk_unlock_keyring test
expect "unlocked" "$(tk_keyring_is_locked)" false
expect "lookup after unlock" "$(lookup)" "s3cret value"

# --- kill the daemon: the secret service is gone (and not re-activated)
tk_kill_keyring
check "keyring daemon stopped" bash -c "! kill -0 $keyring_pid 2>/dev/null || grep -q '^State:.*Z' /proc/$keyring_pid/status"
check "no owner for org.freedesktop.secrets" bash -c '! dbus-send --session --dest=org.freedesktop.DBus --print-reply=literal /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets | grep -q true'
err=$(timeout 10 secret-tool lookup service tokenctl-selftest 2>&1 >/dev/null || true)
case $err in *ServiceUnknown*|*"was not provided"*|*"not activatable"*) ok "lookup with no daemon fails: ${err%%$'\n'*}" ;;
  *) bad "lookup with no daemon: unexpected '$err'" ;; esac
check "nothing re-activated the name" bash -c '! dbus-send --session --dest=org.freedesktop.DBus --print-reply=literal /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets | grep -q true'

# --- restart: same login keyring, same password, the item survives
tk_start_keyring
new_pid=$(<"$TK_SERVICES_DIR/pids/keyring.pid")
check "restarted with a new pid" test "$new_pid" != "$keyring_pid"
expect "item survives restart" "$(lookup)" "s3cret value"
secret-tool clear service tokenctl-selftest

# --- two auth servers
tk_start_authserver main
tk_start_authserver second-one
expect "URL var for main" "$TK_AUTHSERVER_URL_MAIN" "$(tk_authserver_url main)"
check "distinct servers" test "$TK_AUTHSERVER_URL_MAIN" != "$TK_AUTHSERVER_URL_SECOND_ONE"
expect "TK_AUTHSERVER_URL = latest" "$TK_AUTHSERVER_URL" "$TK_AUTHSERVER_URL_SECOND_ONE"
for u in "$TK_AUTHSERVER_URL_MAIN" "$TK_AUTHSERVER_URL_SECOND_ONE"; do
  iss=$(curl -sS --max-time 5 "$u/.well-known/oauth-authorization-server" | "$TK_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["issuer"])')
  expect "discovery on $u" "$iss" "$u"
done
second_url=$TK_AUTHSERVER_URL_SECOND_ONE
tk_stop_authserver second-one
check "stopped server refuses connections" bash -c "! curl -s --max-time 2 '$second_url/' >/dev/null"
expect "its URL var is unset" "${TK_AUTHSERVER_URL_SECOND_ONE-unset}" unset
tk_start_authserver second-one

# --- the real authorization server (django-oauth-toolkit in the cached virtualenv)
tk_start_dotserver 60 2
iss=$(curl -sS --max-time 5 "$TK_DOTSERVER_URL/o/.well-known/openid-configuration" | "$TK_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["issuer"])')
expect "dotserver issuer" "$iss" "$TK_DOTSERVER_URL/o"
dot_pid=$(<"$TK_SERVICES_DIR/pids/dotserver.pid")
dot_url=$TK_DOTSERVER_URL
tk_stop_dotserver
check "dotserver pid gone" bash -c "! kill -0 $dot_pid 2>/dev/null || [[ \$(awk '{print \$3}' /proc/$dot_pid/stat) == Z ]]"
check "stopped dotserver refuses connections" bash -c "! curl -s --max-time 2 '$dot_url/' >/dev/null"

# --- stop all (twice), nothing left
pids=$(cat "$TK_SERVICES_DIR"/pids/*.pid)
expect "4 recorded pids" "$(wc -w <<<"$pids")" 4
expect "4 live processes found by the leak check" "$(wc -w <<<"$(ours)")" 4
tk_services_stop_all
tk_services_stop_all
left=""
for p in $pids; do _tk_alive "$p" && left+=" $p"; done
expect "all recorded pids gone" "$left" ""
expect "pid files removed" "$(ls "$TK_SERVICES_DIR/pids")" ""
expect "no dbus-daemon / gnome-keyring-daemon / python process left" "$(ours)" ""
if ((fails)); then echo "$fails check(s) failed" >&2; exit 1; fi
echo "services selftest: all checks passed"
