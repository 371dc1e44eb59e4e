# shellcheck shell=bash
# Scripts/lib/sshd.sh: a private OpenSSH server (Debian's /usr/sbin/sshd) on 127.0.0.1 for the
# forwarding end-to-end tests: a remote side reached with `ssh -R REMOTE_SOCK:LOCAL_SOCK` as a
# real other user, `tokenctl-remote`. Needs root (useradd, chown, sshd switching users).
#
# Source it after services.sh (it uses tk_services_init's DIR and its PID records):
#
#   source Scripts/lib/services.sh
#   source Scripts/lib/sshd.sh
#   tk_require_packages "${TK_SSHD_PACKAGES[@]}"
#   tk_services_init "$(mktemp -d)"
#   tk_start_sshd [REMOTE_DIR]
#   ssh -F "$TK_SSH_CONFIG" -R "$TK_SSHD_REMOTE_SOCKETS/a.sock:/local/a.sock" tokenctl-remote 'COMMAND'
#   tk_stop_sshd                       # or tk_services_stop_all (stops it, by PID, with the rest)
#
# tk_start_sshd [REMOTE_DIR]: creates the user tokenctl-remote when missing (useradd; shell
# /bin/bash; an unlocked account with no password: "*", since sshd without PAM refuses a locked
# "!" one), its directory REMOTE_DIR (default: a new mktemp -d /tmp/tokenctl-remote.XXXXXX,
# removed by tk_stop_sshd), an ed25519 host key and client key, and starts `sshd -D -e` on a free
# port of 127.0.0.1, recorded as DIR/pids/sshd.pid. REMOTE_DIR is the remote user's own
# (chowned to it, mode 0700), so every directory above it must be searchable by others (a
# directory inside tk_services_init's 0700 DIR is not); it holds
#   home/           0700, the remote sessions' HOME (sshd_config SetEnv; the passwd entry's home
#                   is /var/lib/tokenctl-remote, shared by every instance: it is only the working
#                   directory sshd starts a session in)
#   sockets/        0700, for the -R socket paths
#   authorized_keys root's, 0644: sshd reads it as the user. StrictModes is off: a key file
#                   under /tmp (mode 1777) is never "secure" by its rules.
# Exports:
#   TK_SSHD_PORT          the port on 127.0.0.1
#   TK_SSHD_USER          tokenctl-remote
#   TK_SSH_KEY            the client's private key (root's, 0600)
#   TK_SSH_KNOWN_HOSTS    a known_hosts file with the host key ([127.0.0.1]:PORT)
#   TK_SSH_CONFIG         an ssh client config: Host tokenctl-remote with everything set
#                         (StrictHostKeyChecking yes, BatchMode yes, ExitOnForwardFailure yes, ...)
#   TK_SSHD_REMOTE_DIR    REMOTE_DIR
#   TK_SSHD_REMOTE_HOME   REMOTE_DIR/home
#   TK_SSHD_REMOTE_SOCKETS REMOTE_DIR/sockets
# Files (DIR/sshd/, root's, 0700): sshd_config, host_ed25519{,.pub}, client_ed25519{,.pub},
# known_hosts, ssh_config, sshd.pid (sshd's PidFile); the server's log is DIR/sshd.log.
#
# Server side: StreamLocalBindUnlink yes (a socket file left at an -R path is replaced instead of
# the forward failing), AllowStreamLocalForwarding yes, no TCP listening (AllowTcpForwarding
# remote, since sshd 9.2 refuses a stream-local -R too with "no": "the request was denied";
# PermitListen none and PermitOpen none then keep TCP shut), no X11/agent forwarding, no PAM, no
# passwords, AllowUsers tokenctl-remote only.

# shellcheck disable=SC2034 # used by callers
TK_SSHD_PACKAGES=(openssh-server openssh-client)
TK_SSHD_USER_NAME=tokenctl-remote
TK_SSHD_USER_HOME=/var/lib/tokenctl-remote

# _tk_sshd_user: the user with a usable account (created when missing; the "*" password also
# fixes an existing one that useradd locked with "!").
_tk_sshd_user() {
  local user=$TK_SSHD_USER_NAME out
  if ! id -u "$user" >/dev/null 2>&1; then
    # Two instances may race: "already exists" (status 9) is success.
    if ! out=$(useradd --system --no-create-home --home-dir "$TK_SSHD_USER_HOME" --shell /bin/bash \
        --user-group --password '*' "$user" 2>&1) && [[ $out != *"already exists"* ]]; then
      _tk_err "useradd $user failed: $out"
      return 1
    fi
  fi
  if [[ $(getent shadow "$user" | cut -d: -f2) == '!'* ]]; then
    usermod --password '*' "$user" || { _tk_err "cannot unlock $user"; return 1; }
  fi
  if [[ ! -d $TK_SSHD_USER_HOME ]]; then
    if ! { mkdir -p "$TK_SSHD_USER_HOME" && chown "$user:" "$TK_SSHD_USER_HOME" && chmod 0700 "$TK_SSHD_USER_HOME"; }; then
      _tk_err "cannot create $TK_SSHD_USER_HOME"
      return 1
    fi
  fi
}

_tk_free_port() {
  "$TK_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# _tk_write_sshd_config FILE PORT: the server's configuration (nothing read from /etc/ssh).
_tk_write_sshd_config() {
  local file=$1 port=$2 dir=$TK_SERVICES_DIR/sshd
  cat >"$file" <<EOF
# Written by Scripts/lib/sshd.sh for the tokenctl tests.
ListenAddress 127.0.0.1:$port
AddressFamily inet
HostKey $dir/host_ed25519
PidFile $dir/sshd.pid
AuthorizedKeysFile $TK_SSHD_REMOTE_DIR/authorized_keys
AuthorizedPrincipalsFile none
AllowUsers $TK_SSHD_USER_NAME
PermitRootLogin no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
UsePAM no
StrictModes no
PermitUserEnvironment no
SetEnv HOME=$TK_SSHD_REMOTE_HOME
AllowStreamLocalForwarding yes
StreamLocalBindUnlink yes
AllowTcpForwarding remote
PermitListen none
PermitOpen none
AllowAgentForwarding no
X11Forwarding no
PermitTunnel no
PrintMotd no
PrintLastLog no
UseDNS no
LogLevel VERBOSE
EOF
}

# tk_start_sshd [REMOTE_DIR]: see the header.
tk_start_sshd() {
  _tk_need_dir || return 1
  local remote=${1:-} dir=$TK_SERVICES_DIR/sshd pidf=$TK_SERVICES_DIR/pids/sshd.pid log=$TK_SERVICES_DIR/sshd.log
  local user=$TK_SSHD_USER_NAME pid port attempt listening
  if [[ $(id -u) != 0 ]]; then _tk_err "tk_start_sshd needs root (useradd, sshd)"; return 1; fi
  if [[ ! -x /usr/sbin/sshd ]]; then _tk_err "/usr/sbin/sshd missing: tk_require_packages \"\${TK_SSHD_PACKAGES[@]}\""; return 1; fi
  tk_stop_sshd || return 1
  _tk_sshd_user || return 1

  if [[ -z $remote ]]; then
    remote=$(mktemp -d /tmp/tokenctl-remote.XXXXXX) || { _tk_err "mktemp failed"; return 1; }
    printf '%s\n' "$remote" >"$TK_SERVICES_DIR/sshd-remote-dir.tmp"
  fi
  mkdir -p "$remote" || { _tk_err "cannot create $remote"; return 1; }
  remote=$(cd "$remote" && pwd)
  export TK_SSHD_REMOTE_DIR=$remote TK_SSHD_REMOTE_HOME=$remote/home TK_SSHD_REMOTE_SOCKETS=$remote/sockets
  mkdir -p "$TK_SSHD_REMOTE_HOME" "$TK_SSHD_REMOTE_SOCKETS"
  chown "$user:" "$remote" "$TK_SSHD_REMOTE_HOME" "$TK_SSHD_REMOTE_SOCKETS"
  chmod 0700 "$remote" "$TK_SSHD_REMOTE_HOME" "$TK_SSHD_REMOTE_SOCKETS"

  rm -rf "$dir"
  mkdir -m 0700 "$dir" || { _tk_err "cannot create $dir"; return 1; }
  if ! ssh-keygen -q -t ed25519 -N '' -C tokenctl-test-host -f "$dir/host_ed25519" </dev/null >/dev/null 2>"$log" \
      || ! ssh-keygen -q -t ed25519 -N '' -C tokenctl-test-client -f "$dir/client_ed25519" </dev/null >/dev/null 2>>"$log"; then
    _tk_err "ssh-keygen failed: $(cat "$log")"
    return 1
  fi
  install -m 0644 "$dir/client_ed25519.pub" "$remote/authorized_keys"
  # The user must reach its key file: no directory above REMOTE_DIR may be closed to others.
  if ! runuser -u "$user" -- test -r "$remote/authorized_keys"; then
    _tk_err "$user cannot read $remote/authorized_keys: a directory above $remote is closed to others"
    return 1
  fi
  # sshd's privilege-separation directory (root's, not writable by others).
  mkdir -p /run/sshd && chmod 0755 /run/sshd

  # A free port is only free until someone takes it: try a few.
  for attempt in 1 2 3 4 5; do
    port=$(_tk_free_port) || { _tk_err "cannot find a free port"; return 1; }
    _tk_write_sshd_config "$dir/sshd_config" "$port"
    if ! /usr/sbin/sshd -t -f "$dir/sshd_config" 2>"$log"; then
      _tk_err "sshd -t rejects $dir/sshd_config: $(cat "$log")"
      return 1
    fi
    : >"$log"
    ( /usr/sbin/sshd -D -e -f "$dir/sshd_config" </dev/null >>"$log" 2>&1 &
      echo $! >"$pidf" )
    pid=$(<"$pidf")
    listening=
    for _ in $(seq 100); do
      if grep -q "Server listening on 127.0.0.1 port $port" "$log"; then listening=1; break; fi
      _tk_alive "$pid" || break
      sleep 0.1
    done
    if [[ -n $listening ]] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    if _tk_alive "$pid"; then
      _tk_err "sshd is not listening on port $port after 10 s: $(tail -n 20 "$log")"
      _tk_stop_named sshd || true
      return 1
    fi
    rm -f "$pidf"
    if ((attempt == 5)) || ! grep -qi "bind" "$log"; then
      _tk_err "sshd exited: $(tail -n 20 "$log")"
      return 1
    fi
  done

  export TK_SSHD_PORT=$port TK_SSHD_USER=$user
  export TK_SSH_KEY=$dir/client_ed25519 TK_SSH_KNOWN_HOSTS=$dir/known_hosts TK_SSH_CONFIG=$dir/ssh_config
  printf '[127.0.0.1]:%s %s\n' "$port" "$(cut -d' ' -f1,2 "$dir/host_ed25519.pub")" >"$TK_SSH_KNOWN_HOSTS"
  cat >"$TK_SSH_CONFIG" <<EOF
# Written by Scripts/lib/sshd.sh: ssh -F $TK_SSH_CONFIG [-R REMOTE:LOCAL] $user COMMAND
Host $user
  HostName 127.0.0.1
  Port $port
  User $user
  IdentityFile $TK_SSH_KEY
  IdentitiesOnly yes
  IdentityAgent none
  UserKnownHostsFile $TK_SSH_KNOWN_HOSTS
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  CheckHostIP no
  UpdateHostKeys no
  BatchMode yes
  PasswordAuthentication no
  KbdInteractiveAuthentication no
  ExitOnForwardFailure yes
  StreamLocalBindUnlink yes
  ForwardAgent no
  ForwardX11 no
  ControlMaster no
  ControlPath none
  ConnectTimeout 10
  ServerAliveInterval 5
  ServerAliveCountMax 3
  LogLevel ERROR
EOF
  chmod 0600 "$TK_SSH_CONFIG" "$TK_SSH_KNOWN_HOSTS"
}

# tk_stop_sshd: stop the server (by its recorded PID) and remove the REMOTE_DIR that
# tk_start_sshd made itself (not one the caller gave). Sessions still open end with their client.
tk_stop_sshd() {
  _tk_need_dir || return 1
  _tk_stop_named sshd || return 1
  local f=$TK_SERVICES_DIR/sshd-remote-dir.tmp made
  if [[ -f $f ]]; then
    made=$(<"$f")
    [[ $made == /tmp/tokenctl-remote.* ]] && rm -rf "$made"
    rm -f "$f"
  fi
  unset TK_SSHD_PORT TK_SSHD_USER TK_SSH_KEY TK_SSH_KNOWN_HOSTS TK_SSH_CONFIG \
    TK_SSHD_REMOTE_DIR TK_SSHD_REMOTE_HOME TK_SSHD_REMOTE_SOCKETS
}
