#!/usr/bin/env bash
# Self-check for Scripts/lib/usermanager.sh (run as root): a systemd user manager for
# tokenctl-remote (the user Scripts/lib/sshd.sh makes), a socket unit with Accept=yes whose
# per-connection service (/bin/cat) echoes, and everything stopped by PID, its cgroup removed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=services.sh
source "$here/services.sh"
# shellcheck source=sshd.sh
source "$here/sshd.sh"
# shellcheck source=usermanager.sh
source "$here/usermanager.sh"

user=$TK_SSHD_USER_NAME
root=$(mktemp -d)
cleanup() {
  tk_stop_user_manager "$user" 2>/dev/null || true
  tk_services_stop_all || true
  rm -rf "$root"
}
trap cleanup EXIT

# shellcheck source=selftest.sh
source "$(dirname "${BASH_SOURCE[0]}")/selftest.sh"

tk_services_init "$root/svc"
_tk_sshd_user
tk_start_user_manager "$user"
pid=$(<"$TK_SERVICES_DIR/pids/usermanager-$user.pid")
expect "the recorded pid is systemd --user" "$(tr '\0' ' ' <"/proc/$pid/cmdline")" "/usr/lib/systemd/systemd --user "
expect "it runs as $user" "$(stat -c %U "/proc/$pid")" "$user"
expect "no booted marker outside" "$(test -e /run/systemd/system && echo yes || echo no)" no

cat >"$TK_USER_MANAGER_UNITS/echo.socket" <<'UNIT'
[Socket]
ListenStream=%t/echo.sock
Accept=yes
UNIT
cat >"$TK_USER_MANAGER_UNITS/echo@.service" <<'UNIT'
[Service]
ExecStart=/bin/cat
StandardInput=socket
UNIT
chown "$user:" "$TK_USER_MANAGER_UNITS"/echo*
tk_user_systemctl "$user" daemon-reload
tk_user_systemctl "$user" start echo.socket
expect "echo.socket listening" "$(tk_user_systemctl "$user" show -p SubState --value echo.socket)" listening
echo_once() {
  "$TK_PYTHON" -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode()); s.shutdown(socket.SHUT_WR)
print(s.recv(100).decode())' "$TK_USER_MANAGER_RUNTIME/echo.sock" "$1"
}
expect "a connection spawns echo@.service" "$(echo_once ping)" ping
expect "and another" "$(echo_once pong)" pong
expect "accepted count" "$(tk_user_systemctl "$user" show -p NAccepted --value echo.socket)" 2

cg=$(<"$TK_SERVICES_DIR/usermanager-$user.cgroup")
tk_stop_user_manager "$user"
if _tk_alive "$pid"; then bad "systemd --user still running"; else ok "manager stopped"; fi
expect "cgroups removed" "$(find /sys/fs/cgroup -maxdepth 2 -name "$cg" | wc -l)" 0
expect "pid file gone" "$(ls "$TK_SERVICES_DIR/pids")" ""

if ((fails)); then echo "$fails check(s) failed" >&2; exit 1; fi
echo "all user manager checks passed"
