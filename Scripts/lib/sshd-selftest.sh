#!/usr/bin/env bash
# Self-check for Scripts/lib/sshd.sh (run as root): a private sshd, a login as tokenctl-remote
# with the host key checked, a unix socket forwarded with ssh -R to a local echo server (and the
# peer the local server sees: root, the ssh client), a leftover socket file at the -R path
# replaced (StreamLocalBindUnlink), and everything stopped by PID, with no stray process.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=services.sh
source "$here/services.sh"
# shellcheck source=sshd.sh
source "$here/sshd.sh"

tk_require_packages "${TK_SSHD_PACKAGES[@]}" python3

root=$(mktemp -d)
echo_pid=
cleanup() {
  if [[ -n $echo_pid ]]; then kill "$echo_pid" 2>/dev/null || true; fi
  tk_stop_sshd 2>/dev/null || true
  tk_services_stop_all || true
  if [[ -n ${KEEP:-} ]]; then echo "kept $root" >&2; else rm -rf "$root"; fi
}
trap cleanup EXIT

# shellcheck source=selftest.sh
source "$(dirname "${BASH_SOURCE[0]}")/selftest.sh"

tk_services_init "$root/svc"
# The remote user's directory beside the (0700) services directory, as a caller would give it.
chmod 0711 "$root"
tk_start_sshd "$root/remote"
sshd_pid=$(<"$TK_SERVICES_DIR/pids/sshd.pid")
expect "sshd pid is sshd" "$(cat "/proc/$sshd_pid/comm")" sshd
expect "user" "$TK_SSHD_USER" tokenctl-remote
expect "sockets dir owner and mode" "$(stat -c '%U %a' "$TK_SSHD_REMOTE_SOCKETS")" "tokenctl-remote 700"
expect "client key mode" "$(stat -c %a "$TK_SSH_KEY")" 600

remote() { ssh -F "$TK_SSH_CONFIG" "$@"; }
expect "remote id -un" "$(remote tokenctl-remote id -un)" tokenctl-remote
# shellcheck disable=SC2016 # expanded remotely
expect "remote HOME" "$(remote tokenctl-remote 'printf %s "$HOME"')" "$TK_SSHD_REMOTE_HOME"
expect "remote stderr empty" "$(remote tokenctl-remote true 2>&1)" ""

# A wrong host key must be refused (StrictHostKeyChecking yes, BatchMode yes).
cp "$TK_SSH_KNOWN_HOSTS" "$root/known_hosts.good"
ssh-keygen -q -t ed25519 -N '' -f "$root/other_host" </dev/null
printf '[127.0.0.1]:%s %s\n' "$TK_SSHD_PORT" "$(cut -d' ' -f1,2 "$root/other_host.pub")" >"$TK_SSH_KNOWN_HOSTS"
if out=$(remote tokenctl-remote true 2>&1); then bad "wrong host key accepted"; else
  if [[ $out == *"HOST IDENTIFICATION HAS CHANGED"* || $out == *"Host key verification failed"* ]]; then
    ok "wrong host key refused"
  else bad "wrong host key: unexpected: $out"; fi
fi
cp "$root/known_hosts.good" "$TK_SSH_KNOWN_HOSTS"

# A local echo server on a unix socket that reports the peer's uid (SO_PEERCRED).
local_sock=$root/local.sock
peer_file=$root/peer
cat >"$root/echo.py" <<'PY'
import socket, struct, sys
path, peer_file = sys.argv[1], sys.argv[2]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(8)
while True:
    conn, _ = server.accept()
    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    with open(peer_file, "a") as f:
        f.write(f"{uid}\n")
    data = conn.recv(4096)
    conn.sendall(b"echo:" + data)
    conn.close()
PY
"$TK_PYTHON" "$root/echo.py" "$local_sock" "$peer_file" </dev/null >"$root/echo.log" 2>&1 &
echo_pid=$!
for _ in $(seq 50); do [[ -S $local_sock ]] && break; sleep 0.1; done
[[ -S $local_sock ]] || bad "echo server did not start: $(cat "$root/echo.log")"

remote_sock=$TK_SSHD_REMOTE_SOCKETS/forward.sock
client='import socket, sys, time
s = socket.socket(socket.AF_UNIX)
for _ in range(50):
    try:
        s.connect(sys.argv[1]); break
    except OSError:
        time.sleep(0.1)
s.sendall(b"hello")
print(s.recv(4096).decode())'
remote_cmd="python3 -c $(printf %q "$client") $(printf %q "$remote_sock")"
expect "echo over ssh -R" "$(remote -R "$remote_sock:$local_sock" tokenctl-remote "$remote_cmd")" "echo:hello"
expect "local server's peer is root" "$(tail -n 1 "$peer_file")" 0
expect "the -R socket is tokenctl-remote's, 0600" "$(stat -c '%U %a' "$remote_sock")" "tokenctl-remote 600"

# A socket file left at the path (sshd does not remove it when the session ends; a crashed
# listener's would be the same): replaced, not a failed forward.
remote tokenctl-remote "test -S $(printf %q "$remote_sock") || python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' $(printf %q "$remote_sock")"
expect "stale socket present" "$(remote tokenctl-remote "test -S $(printf %q "$remote_sock") && echo yes")" yes
expect "echo over a stale path" "$(remote -R "$remote_sock:$local_sock" tokenctl-remote "$remote_cmd")" "echo:hello"

# A forward that cannot be set up fails the ssh command (ExitOnForwardFailure yes).
if remote -R "/nonexistent/dir/x.sock:$local_sock" tokenctl-remote true 2>/dev/null; then
  bad "a failed -R forward did not fail ssh"
else ok "failed forward fails ssh"; fi

# TCP stays shut: no remote listening port (PermitListen none).
if remote -R 0:127.0.0.1:9 tokenctl-remote true 2>/dev/null; then
  bad "a TCP -R forward was allowed"
else ok "TCP -R refused"; fi

kill "$echo_pid"; echo_pid=
tk_stop_sshd
if _tk_alive "$sshd_pid"; then bad "sshd still running after tk_stop_sshd"; else ok "sshd stopped"; fi
expect "pid file gone" "$(ls "$TK_SERVICES_DIR/pids")" ""

# tk_services_stop_all stops it too; with no REMOTE_DIR given, tk_stop_sshd removes the one made.
tk_start_sshd
made=$TK_SSHD_REMOTE_DIR
sshd_pid=$(<"$TK_SERVICES_DIR/pids/sshd.pid")
expect "default remote dir" "${made#/tmp/tokenctl-remote.}" "${made##*.}"
expect "remote id -un (default dir)" "$(remote tokenctl-remote id -un)" tokenctl-remote
tk_services_stop_all
if _tk_alive "$sshd_pid"; then bad "sshd still running after tk_services_stop_all"; else ok "stop_all stops sshd"; fi
tk_stop_sshd
if [[ -e $made ]]; then bad "$made left behind"; else ok "made remote dir removed"; fi

# No listener of ours left (the per-connection children end with their clients).
stray=
for p in /proc/[0-9]*; do
  tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$root/svc/sshd/sshd_config" && _tk_alive "${p#/proc/}" && stray+="${p#/proc/} "
done
expect "no stray sshd" "$stray" ""

if ((fails)); then echo "$fails check(s) failed" >&2; exit 1; fi
echo "all sshd checks passed"
