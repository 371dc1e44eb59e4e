#!/usr/bin/env bash
# Self-check for Scripts/lib/kwallet.sh: kwalletd5 as the Secret Service on a
# private bus: start (new wallet), store / replace / lookup, lock / unlock,
# delete, restart with the same wallet, stop; the same on a bus with D-Bus
# activation (nothing gets activated once kwalletd5 is stopped); the
# TK_KWALLET_PROMPTS=dialog behaviour; clean-up with no stray processes.
# Prints what it measured; exits non-zero if any check fails.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=services.sh
source "$here/services.sh"
# shellcheck source=kwallet.sh
source "$here/kwallet.sh"

tk_require_packages "${TK_KWALLET_PACKAGES[@]}"

root=$(mktemp -d)
cleanup() { tk_services_stop_all || true; rm -rf "$root"; }
trap cleanup EXIT

fails=0
ok()   { printf 'ok   %s\n' "$1"; }
bad()  { printf 'FAIL %s\n' "$1" >&2; fails=$((fails + 1)); }
info() { printf 'info %s\n' "$1"; }
check() { # check NAME COMMAND...
  local name=$1; shift
  if "$@"; then ok "$name"; else bad "$name"; fi
}
expect() { if [[ $2 == "$3" ]]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

ATTRS=(application tokenctl kind session profile p issuer i client_id c)
# kwalletd5 fails about 1 secret-tool call in 125 at random (see "DH sessions" in
# kwallet.sh): st_try retries such a failure (a known message, or exit 1 with no
# output and no message) up to 3 times; `flakes` counts the failed tries of calls
# that then succeeded (an expected failure is tried 3 times and not counted).
flakes=0
# st_try [VALUE_FOR_STDIN|-] SUBCOMMAND ARGS...: secret-tool under `timeout 5`; sets
# st_out, st_err, st_rc, st_ms (of the last try; rc 124 = killed by timeout: it hung).
st_try() {
  local input=$1 t0 errf=$root/st.err retried=0; shift
  for _ in 1 2 3; do
    t0=$(now_ms); st_rc=0
    if [[ $input == - ]]; then st_out=$(timeout 5 secret-tool "$@" </dev/null 2>"$errf") || st_rc=$?
    else st_out=$(printf %s "$input" | timeout 5 secret-tool "$@" 2>"$errf") || st_rc=$?; fi
    st_ms=$(($(now_ms) - t0))
    st_err=$(head -c 300 "$errf")
    if [[ $st_rc == 0 ]]; then flakes=$((flakes + retried)); return 0; fi
    [[ $st_rc == 1 ]] || return 0
    grep -Eq "$TK_KWALLET_DH_FLAKE_RE" "$errf" || [[ -z $st_out && -z $st_err ]] || return 0
    retried=$((retried + 1))
  done
}
run_st() { st_try - "$@"; }
lookup() { st_try - lookup "${ATTRS[@]}"; }
store_n() { st_try "$1" store --label x "${ATTRS[@]}"; }  # VALUE stored with no trailing newline

# live processes started under our TK_SERVICES_DIR (they inherit it)
ours() {
  local p comm
  for p in /proc/[0-9]*; do
    comm=$(cat "$p/comm" 2>/dev/null) || continue
    [[ $comm == dbus-daemon || $comm == kwalletd5 || $comm == gnome-keyring-d || $comm == python* ]] || continue
    [[ $(awk '{print $3}' "$p/stat" 2>/dev/null) == Z ]] && continue
    tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qxF "TK_SERVICES_DIR=$root/svc" && printf '%s ' "${p#/proc/}"
  done
  return 0
}

tk_services_init "$root/svc"
tk_start_dbus

# --- first start: creates the wallet (with one restart of kwalletd5)
t0=$(now_ms)
tk_start_kwallet secret-pw
info "tk_start_kwallet, new wallet: $(($(now_ms) - t0)) ms"
kw_pid=$(<"$TK_SERVICES_DIR/pids/kwallet.pid")
expect "kwallet.pid is kwalletd5" "$(cat "/proc/$kw_pid/comm")" kwalletd5
expect "org.freedesktop.secrets owned by it" "$(_tk_name_pid org.freedesktop.secrets)" "$kw_pid"
expect "salt is 56 bytes" "$(stat -c %s "$XDG_DATA_HOME/kwalletd/kdewallet.salt")" 56
check "wallet file on disk" test -s "$XDG_DATA_HOME/kwalletd/kdewallet.kwl"
expect "default alias" "$(dbus-send --session --print-reply=literal --dest=org.freedesktop.secrets /org/freedesktop/secrets \
  org.freedesktop.Secret.Service.ReadAlias string:default | tr -d ' ')" /org/freedesktop/secrets/collection/kdewallet
expect "unlocked after start" "$(tk_kwallet_is_locked)" false

# --- store, look up, store again with the same attributes
store_n v1
expect "store rc" "$st_rc" 0
info "store: ${st_ms} ms"
lookup
expect "lookup after store (no trailing newline)" "$st_out" v1
store_n v2
expect "store again, same attributes: rc (124 = hung)" "$st_rc" 0
info "store again (replace): ${st_ms} ms, rc $st_rc${st_err:+, stderr: $st_err}"
lookup
expect "lookup returns the new value" "$st_out" v2
run_st search --all "${ATTRS[@]}"
expect "one item after the second store (replaced, not duplicated)" "$(grep -c '^\[' <<<"$st_out" || true)" 1

# --- lock
tk_lock_kwallet
expect "locked after tk_lock_kwallet" "$(tk_kwallet_is_locked)" true
lookup
if [[ $st_rc != 0 && $st_rc != 124 && -z $st_out ]]; then ok "lookup on a locked wallet fails (rc $st_rc, ${st_ms} ms)"
else bad "lookup on a locked wallet: rc $st_rc, out '$st_out' (124 = hung)"; fi
store_n v3
if [[ $st_rc != 0 && $st_rc != 124 ]]; then ok "store on a locked wallet fails (rc $st_rc, ${st_ms} ms: $st_err)"
else bad "store on a locked wallet: rc $st_rc (124 = hung)"; fi
expect "still locked after the refused prompts" "$(tk_kwallet_is_locked)" true
if tk_unlock_kwallet wrong-pw 2>/dev/null; then bad "unlock with a wrong password succeeded"; else ok "wrong password refused"; fi
expect "still locked" "$(tk_kwallet_is_locked)" true

# --- unlock
t0=$(now_ms)
tk_unlock_kwallet secret-pw
info "tk_unlock_kwallet: $(($(now_ms) - t0)) ms"
expect "unlocked" "$(tk_kwallet_is_locked)" false
lookup
expect "lookup after unlock" "$st_out" v2
check "[Auto Deny] back in kwalletrc after the unlock" grep -qx 'kdewallet=KDE System' "$XDG_CONFIG_HOME/kwalletrc"
expect "same kwalletd5 (deny mode never needs a restart)" "$(<"$TK_SERVICES_DIR/pids/kwallet.pid")" "$kw_pid"

# --- delete
run_st clear "${ATTRS[@]}"
expect "clear rc" "$st_rc" 0
lookup
expect "lookup after clear finds nothing" "$st_out/$st_rc" /1

# --- stop, restart with the same wallet and password: the item survives
store_n kept
tk_stop_kwallet
check "kwalletd5 stopped" bash -c "! kill -0 $kw_pid 2>/dev/null || [[ \$(awk '{print \$3}' /proc/$kw_pid/stat) == Z ]]"
check "org.freedesktop.secrets released" bash -c "! dbus-send --session --dest=org.freedesktop.DBus --print-reply=literal /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets | grep -q true"
lookup
case $st_err in *ServiceUnknown*|*"was not provided"*|*"not activatable"*) ok "lookup with no daemon fails: ${st_err%%$'\n'*}" ;;
  *) bad "lookup with no daemon: rc $st_rc, '$st_err'" ;; esac
t0=$(now_ms)
tk_start_kwallet secret-pw
info "tk_start_kwallet, existing wallet: $(($(now_ms) - t0)) ms"
lookup
expect "item survives a restart" "$st_out" kept
if tk_start_kwallet other-pw 2>/dev/null; then bad "restart with another password succeeded"; else ok "restart with another password fails"; fi
check "a failed start leaves no kwalletd5 behind" test ! -e "$TK_SERVICES_DIR/pids/kwallet.pid"
check "... and no owner of org.freedesktop.secrets" bash -c '! dbus-send --session --dest=org.freedesktop.DBus --print-reply=literal /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets | grep -q true'
tk_start_kwallet secret-pw

# --- a bus with D-Bus activation: our service files shadow the system ones
tk_stop_kwallet
tk_services_stop_all
TK_DBUS_ACTIVATION=1 tk_start_dbus
t0=$(now_ms)
tk_start_kwallet secret-pw
info "tk_start_kwallet on an activation bus: $(($(now_ms) - t0)) ms"
lookup
expect "activation bus: lookup" "$st_out" kept
tk_stop_kwallet
lookup
if [[ $st_rc != 0 && -z $st_out ]]; then ok "activation bus, no daemon: lookup fails (${st_err%%$'\n'*})"; else bad "activation bus, no daemon: rc $st_rc out '$st_out'"; fi
sleep 0.3
check "activation bus: nothing took org.freedesktop.secrets" bash -c '! dbus-send --session --dest=org.freedesktop.DBus --print-reply=literal /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets | grep -q true'
check "activation bus: nothing took org.kde.kwalletd5" bash -c '! dbus-send --session --dest=org.freedesktop.DBus --print-reply=literal /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner string:org.kde.kwalletd5 | grep -q true'
expect "activation bus: only our dbus-daemon is running" "$(wc -w <<<"$(ours)")" 1

# --- TK_KWALLET_PROMPTS=dialog: what a desktop kwalletd does with a locked wallet
TK_KWALLET_PROMPTS=dialog tk_start_kwallet secret-pw
kw_pid=$(<"$TK_SERVICES_DIR/pids/kwallet.pid")
tk_lock_kwallet
run_st lookup "${ATTRS[@]}"
info "dialog mode, locked: lookup rc $st_rc after ${st_ms} ms (124 = hung on an invisible password dialog)"
expect "dialog mode: lookup on a locked wallet hangs" "$st_rc" 124
t0=$(now_ms)
tk_unlock_kwallet secret-pw
info "dialog mode: tk_unlock_kwallet with a dialog up: $(($(now_ms) - t0)) ms (restarts kwalletd5)"
check "dialog mode: kwalletd5 was restarted" test "$(<"$TK_SERVICES_DIR/pids/kwallet.pid")" != "$kw_pid"
lookup
expect "dialog mode: lookup after unlock" "$st_out" kept

# --- stop all (twice), nothing left
recorded=$(cat "$TK_SERVICES_DIR"/pids/*.pid)
expect "2 recorded pids (dbus, kwallet)" "$(wc -w <<<"$recorded")" 2
expect "2 live processes found by the leak check" "$(wc -w <<<"$(ours)")" 2
tk_services_stop_all
tk_services_stop_all
left=""
for p in $recorded; do _tk_alive "$p" && left+=" $p"; done
expect "all recorded pids gone" "$left" ""
expect "pid files removed" "$(ls "$TK_SERVICES_DIR/pids")" ""
expect "no dbus-daemon / kwalletd5 / gnome-keyring-daemon / python process left" "$(ours)" ""
info "secret-tool calls that failed at random and succeeded when retried (kwalletd DH sessions): $flakes"
if ((fails)); then echo "$fails check(s) failed" >&2; exit 1; fi
echo "kwallet selftest: all checks passed"
