# shellcheck shell=bash
# Scripts/lib/services.sh: start and stop the services tokenctl's tests need:
# a private D-Bus session bus, gnome-keyring's Secret Service, and local OAuth
# test authorization servers (Scripts/testserver/authserver.py).
#
# Source it (it works under set -euo pipefail); every function is quiet on
# success, prints "services: ..." to stderr and returns non-zero on failure.
#
#   source Scripts/lib/services.sh
#   tk_require_packages "${TK_SERVICE_PACKAGES[@]}"   # installs only what is missing
#   tk_services_init "$(mktemp -d)"    # throwaway HOME/XDG_* dirs; sets TK_SERVICES_DIR;
#                                      # installs `trap tk_services_stop_all EXIT` unless
#                                      # the caller already has an EXIT trap (then call
#                                      # tk_services_stop_all from yours)
#   tk_start_dbus                      # exports DBUS_SESSION_BUS_ADDRESS; the bus has no
#                                      # D-Bus activation (TK_DBUS_ACTIVATION=1 for the stock
#                                      # session config), so a killed keyring stays gone
#   tk_start_keyring [PASSWORD]        # default "test"; login collection unlocked
#   tk_lock_keyring; tk_keyring_is_locked  (prints true/false); tk_unlock_keyring PASSWORD
#   tk_kill_keyring                    # "daemon gone"; tk_start_keyring brings it back
#   tk_start_authserver NAME           # NAME: [A-Za-z0-9_-]+
#       exports TK_AUTHSERVER_URL_<NAME> (upper-cased, '-' -> '_'), e.g.
#       TK_AUTHSERVER_URL_MAIN=http://127.0.0.1:41234, and TK_AUTHSERVER_URL (the
#       latest one); `tk_authserver_url NAME` prints it too. Log: DIR/NAME.log.
#   tk_stop_authserver NAME
#   tk_require_dot_venv                # django-oauth-toolkit 3.4.1 + oauthlib 3.3.1 in a cached
#                                      # virtualenv (TK_DOT_VENV, default ~/.cache/tokenctl-test/venv),
#                                      # created only when missing; sets TK_DOT_PYTHON
#   tk_start_dotserver [ACCESS_TTL] [GRACE]  # the real authorization server (Scripts/testserver/
#                                      # django/dotserver.py); exports TK_DOTSERVER_URL (the base;
#                                      # issuer = base + /o). Log: DIR/dotserver.log.
#   tk_stop_dotserver
#   tk_services_stop_all               # TERM, up to 3 s, then KILL every PID in DIR/pids
#
# Layout of DIR (mode 0700): home/ runtime/ (0700, XDG_RUNTIME_DIR, bus socket
# at runtime/bus) config/ state/ cache/ data/ (XDG_DATA_HOME: keyrings live in
# data/keyrings) pids/ (NAME.pid: dbus, keyring, one per auth server), NAME.port,
# NAME.log.
#
# Processes are only ever stopped by the PIDs recorded in DIR/pids, never by name.
#
# Python: keyring_control.py needs python3-dbus, which Debian installs for
# /usr/bin/python3 only (a pyenv shim on PATH does not see it), so both helpers
# run with TK_PYTHON (default /usr/bin/python3).

# shellcheck disable=SC2034 # used by callers
TK_SERVICE_PACKAGES=(dbus gnome-keyring libsecret-tools python3-dbus python3 curl)
TK_PYTHON=${TK_PYTHON:-/usr/bin/python3}
TK_SCRIPTS_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TK_AUTHSERVER_PY=${TK_AUTHSERVER_PY:-$(cd "$TK_SCRIPTS_LIB/.." && pwd)/testserver/authserver.py}
_TK_APT_UPDATED=${_TK_APT_UPDATED:-}

_tk_err() { printf 'services: %s\n' "$*" >&2; }

_tk_need_dir() {
  if [[ -z ${TK_SERVICES_DIR:-} || ! -d ${TK_SERVICES_DIR:-} ]]; then
    _tk_err "call tk_services_init DIR first"
    return 1
  fi
}

# True while PID runs (a zombie counts as gone: PID 1 here may not reap).
_tk_alive() {
  local pid=$1 state
  kill -0 "$pid" 2>/dev/null || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ $state != Z ]]
}

# _tk_stop_pids PID...: TERM, wait up to 3 s for all, then KILL the rest.
_tk_stop_pids() {
  local pid left
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 30); do
    left=0
    for pid in "$@"; do _tk_alive "$pid" && left=1; done
    [[ $left == 0 ]] && return 0
    sleep 0.1
  done
  for pid in "$@"; do
    if _tk_alive "$pid"; then
      _tk_err "pid $pid ignored SIGTERM for 3 s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  for _ in $(seq 20); do
    left=0
    for pid in "$@"; do _tk_alive "$pid" && left=1; done
    [[ $left == 0 ]] && return 0
    sleep 0.1
  done
  _tk_err "could not stop pid(s): $*"
  return 1
}

# _tk_stop_named NAME: stop the process in DIR/pids/NAME.pid, drop the file.
_tk_stop_named() {
  local f=$TK_SERVICES_DIR/pids/$1.pid pid
  [[ -f $f ]] || return 0
  pid=$(<"$f")
  if [[ $pid =~ ^[0-9]+$ ]] && _tk_alive "$pid"; then
    _tk_stop_pids "$pid" || return 1
  fi
  rm -f "$f"
}

# tk_require_packages PKG...: apt-get install the ones dpkg does not list as installed.
tk_require_packages() {
  local pkg missing=() sudo=()
  for pkg in "$@"; do
    if [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true) != "install ok installed" ]]; then
      missing+=("$pkg")
    fi
  done
  ((${#missing[@]})) || return 0
  if [[ $(id -u) != 0 ]]; then
    if command -v sudo >/dev/null; then sudo=(sudo -n); else _tk_err "need root to install: ${missing[*]}"; return 1; fi
  fi
  _tk_err "installing ${missing[*]}"
  if [[ -z $_TK_APT_UPDATED ]]; then
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null; then
      _tk_err "apt-get update failed"; return 1
    fi
    _TK_APT_UPDATED=1
  fi
  if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; then
    _tk_err "apt-get install ${missing[*]} failed"; return 1
  fi
}

# tk_services_init DIR
tk_services_init() {
  local dir=${1:?usage: tk_services_init DIR} d
  mkdir -p "$dir" || { _tk_err "cannot create $dir"; return 1; }
  dir=$(cd "$dir" && pwd)
  chmod 0700 "$dir"
  for d in home runtime config state cache data pids; do mkdir -p "$dir/$d"; done
  chmod 0700 "$dir/runtime" "$dir/home"
  export TK_SERVICES_DIR=$dir
  export HOME=$dir/home
  export XDG_RUNTIME_DIR=$dir/runtime
  export XDG_CONFIG_HOME=$dir/config
  export XDG_STATE_HOME=$dir/state
  export XDG_CACHE_HOME=$dir/cache
  export XDG_DATA_HOME=$dir/data
  unset GNOME_KEYRING_CONTROL GNOME_KEYRING_PID DISPLAY WAYLAND_DISPLAY DBUS_SESSION_BUS_ADDRESS
  if [[ -z $(trap -p EXIT) ]]; then
    trap tk_services_stop_all EXIT
  fi
}

# The stock session.conf minus <standard_session_servicedirs/>: with no D-Bus
# activation a stopped keyring stays gone (a lookup fails with ServiceUnknown)
# instead of the bus spawning an unrecorded gnome-keyring-daemon that has no
# login collection. TK_DBUS_ACTIVATION=1 uses the stock --session config.
_tk_write_bus_config() {
  cat >"$1" <<'XML'
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
  <limit name="max_incoming_bytes">1000000000</limit>
  <limit name="max_incoming_unix_fds">250000000</limit>
  <limit name="max_outgoing_bytes">1000000000</limit>
  <limit name="max_outgoing_unix_fds">250000000</limit>
  <limit name="max_message_size">1000000000</limit>
  <limit name="service_start_timeout">120000</limit>
  <limit name="auth_timeout">240000</limit>
  <limit name="pending_fd_timeout">150000</limit>
  <limit name="max_completed_connections">100000</limit>
  <limit name="max_incomplete_connections">10000</limit>
  <limit name="max_connections_per_user">100000</limit>
  <limit name="max_pending_service_starts">10000</limit>
  <limit name="max_names_per_connection">50000</limit>
  <limit name="max_match_rules_per_connection">50000</limit>
  <limit name="max_replies_per_connection">50000</limit>
</busconfig>
XML
}

# tk_start_dbus: private session bus at $XDG_RUNTIME_DIR/bus (no activation;
# see _tk_write_bus_config).
tk_start_dbus() {
  _tk_need_dir || return 1
  local sock=$XDG_RUNTIME_DIR/bus pid
  local conf=(--session)
  _tk_stop_named dbus || return 1
  rm -f "$sock"
  if [[ ${TK_DBUS_ACTIVATION:-0} != 1 ]]; then
    _tk_write_bus_config "$TK_SERVICES_DIR/dbus.conf" || return 1
    conf=(--config-file="$TK_SERVICES_DIR/dbus.conf")
  fi
  if ! pid=$(dbus-daemon "${conf[@]}" --fork --nopidfile --address="unix:path=$sock" --print-pid=1 \
      </dev/null 2>"$TK_SERVICES_DIR/dbus.log"); then
    _tk_err "dbus-daemon failed: $(cat "$TK_SERVICES_DIR/dbus.log")"
    return 1
  fi
  pid=${pid//[!0-9]/}
  if [[ -z $pid ]]; then _tk_err "dbus-daemon printed no pid"; return 1; fi
  printf '%s\n' "$pid" >"$TK_SERVICES_DIR/pids/dbus.pid"
  export DBUS_SESSION_BUS_ADDRESS=unix:path=$sock
}

# _tk_bus_call METHOD ARG: call org.freedesktop.DBus (never triggers activation).
_tk_bus_call() {
  dbus-send --session --dest=org.freedesktop.DBus --type=method_call --print-reply=literal \
    /org/freedesktop/DBus "org.freedesktop.DBus.$1" "string:$2" 2>/dev/null
}

_tk_secrets_owned() {
  [[ $(_tk_bus_call NameHasOwner org.freedesktop.secrets || true) == *true* ]]
}

# tk_start_keyring [PASSWORD]: gnome-keyring (secrets only) on the private bus,
# login collection created/unlocked with PASSWORD; verified with a probe item.
tk_start_keyring() {
  _tk_need_dir || return 1
  local password=${1-test} pid probe got locked
  if [[ -z ${DBUS_SESSION_BUS_ADDRESS:-} ]]; then _tk_err "tk_start_dbus first"; return 1; fi
  unset GNOME_KEYRING_CONTROL
  _tk_stop_named keyring || return 1
  # Nothing may touch org.freedesktop.secrets before this daemon owns it, or
  # D-Bus activation starts one without a login collection.
  if ! printf %s "$password" | gnome-keyring-daemon --replace --unlock --daemonize --components=secrets \
      >"$TK_SERVICES_DIR/keyring.env" 2>"$TK_SERVICES_DIR/keyring.log"; then
    _tk_err "gnome-keyring-daemon failed: $(cat "$TK_SERVICES_DIR/keyring.log")"
    return 1
  fi
  for _ in $(seq 100); do
    _tk_secrets_owned && break
    sleep 0.1
  done
  if ! _tk_secrets_owned; then
    _tk_err "org.freedesktop.secrets has no owner after 10 s: $(cat "$TK_SERVICES_DIR/keyring.log")"
    return 1
  fi
  # literal reply: "   uint32 1234"
  pid=$( { _tk_bus_call GetConnectionUnixProcessID org.freedesktop.secrets || true; } | awk '{print $NF}')
  [[ $pid =~ ^[0-9]+$ ]] || pid=
  if [[ -z $pid ]]; then _tk_err "cannot get the keyring daemon's pid"; return 1; fi
  printf '%s\n' "$pid" >"$TK_SERVICES_DIR/pids/keyring.pid"

  locked=$(tk_keyring_is_locked 2>"$TK_SERVICES_DIR/keyring.probe.log" || true)
  if [[ $locked != false ]]; then
    _tk_err "default collection not unlocked after start (is-locked: ${locked:-error}; an existing $XDG_DATA_HOME/keyrings/login.keyring with another password?) $(cat "$TK_SERVICES_DIR/keyring.probe.log")"
    return 1
  fi
  probe="probe-$$-$RANDOM"
  if ! printf %s "$probe" | timeout 10 secret-tool store --label=tokenctl-probe application tokenctl-probe \
      2>"$TK_SERVICES_DIR/keyring.probe.log"; then
    _tk_err "keyring probe store failed (default collection missing or locked?): $(cat "$TK_SERVICES_DIR/keyring.probe.log")"
    return 1
  fi
  got=$(timeout 10 secret-tool lookup application tokenctl-probe 2>/dev/null || true)
  timeout 10 secret-tool clear application tokenctl-probe 2>/dev/null || true
  if [[ $got != "$probe" ]]; then
    _tk_err "keyring probe lookup returned '${got}', want '${probe}'"
    return 1
  fi
}

_tk_keyring_control() {
  if [[ -z ${DBUS_SESSION_BUS_ADDRESS:-} ]]; then _tk_err "no private bus (tk_start_dbus)"; return 1; fi
  "$TK_PYTHON" "$TK_SCRIPTS_LIB/keyring_control.py" "$@"
}

# tk_lock_keyring: lock the default (login) collection.
tk_lock_keyring() { _tk_keyring_control lock; }

# tk_unlock_keyring PASSWORD: unlock it without a prompt.
tk_unlock_keyring() {
  local password=${1?usage: tk_unlock_keyring PASSWORD}
  printf %s "$password" | _tk_keyring_control unlock --password-stdin
}

# tk_keyring_is_locked: prints true or false.
tk_keyring_is_locked() { _tk_keyring_control is-locked; }

# tk_kill_keyring: stop the keyring daemon (TERM, then KILL) and wait for its
# bus name to go away.
tk_kill_keyring() {
  _tk_need_dir || return 1
  if [[ ! -f $TK_SERVICES_DIR/pids/keyring.pid ]]; then _tk_err "no keyring daemon recorded"; return 1; fi
  _tk_stop_named keyring || return 1
  for _ in $(seq 50); do
    _tk_secrets_owned || return 0
    sleep 0.1
  done
  _tk_err "org.freedesktop.secrets still owned after the daemon was stopped"
  return 1
}

# tk_start_hung_secret_service MODE [SECRET_FILE]: instead of gnome-keyring, a fake Secret
# Service (hung_secret_service.py) that owns org.freedesktop.secrets and leaves calls
# unanswered: MODE silent answers nothing, open-session-only answers the session set-up and
# the default collection's look-up, never a search; garbles-first-secret also finds one
# session item and gives garbled bytes for its first read, SECRET_FILE's bytes after.
# Recorded as keyring.pid (tk_kill_keyring and tk_services_stop_all stop it); each call it
# gets is logged to hung-secret-service.log.
tk_start_hung_secret_service() {
  _tk_need_dir || return 1
  local mode=${1:?usage: tk_start_hung_secret_service silent|open-session-only|garbles-first-secret [SECRET_FILE]} pidfile
  local secret=()
  if [[ -n ${2:-} ]]; then secret=(--secret-file "$2"); fi
  if [[ -z ${DBUS_SESSION_BUS_ADDRESS:-} ]]; then _tk_err "tk_start_dbus first"; return 1; fi
  _tk_stop_named keyring || return 1
  pidfile=$TK_SERVICES_DIR/pids/keyring.pid
  /usr/bin/python3 "$TK_SCRIPTS_LIB/hung_secret_service.py" --mode "$mode" "${secret[@]}" --pid-file "$pidfile" \
    --log "$TK_SERVICES_DIR/hung-secret-service.log" </dev/null >/dev/null 2>"$TK_SERVICES_DIR/hung-secret-service.err" &
  local started=$!
  for _ in $(seq 100); do
    [[ -s $pidfile ]] && _tk_secrets_owned && return 0
    _tk_alive "$started" || break
    sleep 0.1
  done
  _tk_err "the fake Secret Service did not start: $(cat "$TK_SERVICES_DIR/hung-secret-service.err")"
  kill "$started" 2>/dev/null || true
  return 1
}

_tk_server_var() {
  local n=${1^^}
  printf 'TK_AUTHSERVER_URL_%s' "${n//-/_}"
}

# tk_start_authserver NAME: see the header for what it exports.
tk_start_authserver() {
  _tk_need_dir || return 1
  local name=${1:?usage: tk_start_authserver NAME} portf pidf pid port var
  if [[ ! $name =~ ^[A-Za-z0-9_-]+$ ]]; then _tk_err "bad auth server name '$name'"; return 1; fi
  if [[ $name == dbus || $name == keyring ]]; then _tk_err "reserved name '$name'"; return 1; fi
  portf=$TK_SERVICES_DIR/$name.port
  pidf=$TK_SERVICES_DIR/pids/$name.pid
  _tk_stop_named "$name" || return 1
  rm -f "$portf"
  # Started from a subshell so it is not a job of the caller's shell (no
  # "Terminated" notices); its PID is recorded before anything else happens.
  ( "$TK_PYTHON" "$TK_AUTHSERVER_PY" --port 0 --port-file "$portf" \
      </dev/null >>"$TK_SERVICES_DIR/$name.log" 2>&1 &
    echo $! >"$pidf" )
  pid=$(<"$pidf")
  for _ in $(seq 100); do
    [[ -s $portf ]] && break
    if ! _tk_alive "$pid"; then
      _tk_err "auth server '$name' exited: $(tail -n 20 "$TK_SERVICES_DIR/$name.log")"
      rm -f "$pidf"
      return 1
    fi
    sleep 0.1
  done
  if [[ ! -s $portf ]]; then
    _tk_err "auth server '$name' wrote no port file within 10 s"
    _tk_stop_named "$name" || true
    return 1
  fi
  port=$(<"$portf")
  var=$(_tk_server_var "$name")
  export "$var=http://127.0.0.1:${port//[!0-9]/}"
  export TK_AUTHSERVER_URL=${!var}
}

# tk_authserver_url NAME: print the server's base URL (the issuer).
tk_authserver_url() {
  _tk_need_dir || return 1
  local portf=$TK_SERVICES_DIR/${1:?usage: tk_authserver_url NAME}.port
  if [[ ! -s $portf ]]; then _tk_err "auth server '$1' is not running"; return 1; fi
  printf 'http://127.0.0.1:%s\n' "$(tr -dc 0-9 <"$portf")"
}

tk_stop_authserver() {
  _tk_need_dir || return 1
  _tk_stop_named "${1:?usage: tk_stop_authserver NAME}" || return 1
  rm -f "$TK_SERVICES_DIR/$1.port"
  unset "$(_tk_server_var "$1")"
}

# django-oauth-toolkit: pinned versions (oauthlib 4.0.1 breaks its device endpoint: it answers 500).
TK_DOT_REQUIREMENTS=(django-oauth-toolkit==3.4.1 oauthlib==3.3.1)
TK_DOT_VENV=${TK_DOT_VENV:-${TOKENCTL_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokenctl-test}/venv}
TK_DOTSERVER_DIR=$(cd "$TK_SCRIPTS_LIB/.." && pwd)/testserver/django

# tk_require_dot_venv: create the virtualenv once; later runs reuse it as long as the pinned
# versions are installed (checked with pip, offline).
tk_require_dot_venv() {
  local want="${TK_DOT_REQUIREMENTS[*]}" have
  TK_DOT_PYTHON=$TK_DOT_VENV/bin/python
  if [[ -x $TK_DOT_PYTHON ]]; then
    have=$("$TK_DOT_PYTHON" -m pip freeze 2>/dev/null | grep -Ei '^(django-oauth-toolkit|oauthlib)==' | sort -f | tr '\n' ' ')
    if [[ ${have,,} == "${want,,} " ]]; then export TK_DOT_PYTHON; return 0; fi
  fi
  _tk_err "creating the django-oauth-toolkit virtualenv in $TK_DOT_VENV"
  rm -rf "$TK_DOT_VENV"
  mkdir -p "$(dirname "$TK_DOT_VENV")"
  if ! "$TK_PYTHON" -m venv "$TK_DOT_VENV" >"$TK_DOT_VENV.log" 2>&1; then
    _tk_err "python3 -m venv failed (is python3-venv installed?): $(tail -n 5 "$TK_DOT_VENV.log")"
    return 1
  fi
  if ! "$TK_DOT_VENV/bin/python" -m pip install -q --disable-pip-version-check "${TK_DOT_REQUIREMENTS[@]}" >>"$TK_DOT_VENV.log" 2>&1; then
    _tk_err "pip install ${TK_DOT_REQUIREMENTS[*]} failed: $(tail -n 5 "$TK_DOT_VENV.log")"
    rm -rf "$TK_DOT_VENV"
    return 1
  fi
  export TK_DOT_PYTHON
}

# tk_start_dotserver [ACCESS_TTL] [GRACE]: django-oauth-toolkit on 127.0.0.1 with sqlite in DIR/dotserver.
tk_start_dotserver() {
  _tk_need_dir || return 1
  local ttl=${1:-3600} grace=${2:-0} dir=$TK_SERVICES_DIR/dotserver pidf=$TK_SERVICES_DIR/pids/dotserver.pid pid port
  if [[ -z ${TK_DOT_PYTHON:-} ]]; then tk_require_dot_venv || return 1; fi
  _tk_stop_named dotserver || return 1
  rm -rf "$dir"
  mkdir -p "$dir"
  ( "$TK_DOT_PYTHON" "$TK_DOTSERVER_DIR/dotserver.py" --dir "$dir" --port-file "$dir/port" \
      --access-ttl "$ttl" --grace "$grace" </dev/null >>"$TK_SERVICES_DIR/dotserver.log" 2>&1 &
    echo $! >"$pidf" )
  pid=$(<"$pidf")
  for _ in $(seq 300); do
    [[ -s $dir/port ]] && break
    if ! _tk_alive "$pid"; then
      _tk_err "dotserver exited: $(tail -n 20 "$TK_SERVICES_DIR/dotserver.log")"
      rm -f "$pidf"
      return 1
    fi
    sleep 0.1
  done
  if [[ ! -s $dir/port ]]; then
    _tk_err "dotserver wrote no port file within 30 s"
    _tk_stop_named dotserver || true
    return 1
  fi
  port=$(<"$dir/port")
  export TK_DOTSERVER_URL=http://127.0.0.1:${port//[!0-9]/}
}

tk_stop_dotserver() {
  _tk_need_dir || return 1
  _tk_stop_named dotserver || return 1
  unset TK_DOTSERVER_URL
}

# tk_services_stop_all: stop every recorded PID (only those); safe to call twice.
tk_services_stop_all() {
  [[ -n ${TK_SERVICES_DIR:-} && -d $TK_SERVICES_DIR/pids ]] || return 0
  local f pid pids=() files=() rc=0
  for f in "$TK_SERVICES_DIR"/pids/*.pid; do
    [[ -f $f ]] || continue
    pid=$(<"$f")
    files+=("$f")
    if [[ $pid =~ ^[0-9]+$ ]] && _tk_alive "$pid"; then pids+=("$pid"); fi
  done
  if ((${#pids[@]})); then _tk_stop_pids "${pids[@]}" || rc=1; fi
  if ((${#files[@]})); then rm -f "${files[@]}"; fi
  return "$rc"
}
