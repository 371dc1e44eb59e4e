# shellcheck shell=bash
# Scripts/lib/usermanager.sh: a systemd user manager (`systemd --user`, Debian's systemd 252) for
# a non-root user where PID 1 is not systemd (this machine: a Firecracker VM whose PID 1 is
# process_api; cgroup v1 hybrid with a cgroup2 at /sys/fs/cgroup/unified), so that socket units
# (Accept=yes) can be tested for real. Needs root. Source it after services.sh:
#
#   tk_start_user_manager USER [DIR]   # DIR (default mktemp -d /tmp/tokenctl-usermgr.XXXXXX,
#                                      # removed by tk_stop_user_manager) becomes USER's (0700):
#                                      # DIR/runtime is XDG_RUNTIME_DIR (%t), DIR/home is HOME;
#                                      # unit files go in DIR/home/.config/systemd/user.
#                                      # Exports TK_USER_MANAGER_RUNTIME, TK_USER_MANAGER_HOME,
#                                      # TK_USER_MANAGER_UNITS; records DIR/pids/usermanager-USER.pid
#   tk_user_systemctl USER ARGS...     # systemctl --user ARGS as USER (e.g. daemon-reload,
#                                      # start echo.socket)
#   tk_stop_user_manager USER          # SIGTERM (the manager stops its units and exits), by PID;
#                                      # then what is left in its cgroup, by PID; removes the cgroup
#                                      # and a DIR it made
#
# What it takes (each found by trying):
#   * "Trying to run as user instance, but the system has not been booted with systemd." unless
#     /run/systemd/system exists: the manager runs in a private mount namespace (unshare -m) with
#     a tmpfs on /run/systemd holding an empty system/, so nothing outside sees a "booted" system
#     (deb-systemd-invoke, systemctl, apt's maintainer scripts go by that directory).
#   * A cgroup of its own, delegated: the process starts at the root ("0::/") and the manager's
#     mkdir of /sys/fs/cgroup/unified/init.scope fails with EACCES. Root makes
#     tokenctl-usermgr-NAME in the cgroup2 hierarchy and in name=systemd, chowns them to USER and
#     moves the starting process into them.
#   * No logind, PAM session, journal or /dev/console access: the manager logs nowhere (ask it
#     with tk_user_systemctl USER status ...). The stock user units start too (dbus.socket of
#     dbus-user-session: a user bus at DIR/runtime/bus; gpg-agent, gnome-keyring sockets).

_tk_cgroup_roots() {
  local fs
  fs=$(stat -fc %T /sys/fs/cgroup 2>/dev/null) || return 1
  if [[ $fs == cgroup2fs ]]; then
    printf '%s\n' /sys/fs/cgroup
    return 0
  fi
  [[ -d /sys/fs/cgroup/unified ]] && printf '%s\n' /sys/fs/cgroup/unified
  [[ -d /sys/fs/cgroup/systemd ]] && printf '%s\n' /sys/fs/cgroup/systemd
  return 0
}

_tk_user_manager_env() { # USER RUNTIME HOME: the manager's (and systemctl's) environment
  printf '%s\n' "PATH=/usr/local/bin:/usr/bin:/bin" "HOME=$3" "USER=$1" "LOGNAME=$1" "SHELL=/bin/bash" \
    "XDG_RUNTIME_DIR=$2" "LANG=C.UTF-8"
}

# tk_start_user_manager USER [DIR]: see the header.
tk_start_user_manager() {
  _tk_need_dir || return 1
  local user=${1:?usage: tk_start_user_manager USER [DIR]} dir=${2:-} name pidf log cg roots=() env=() pid state
  if [[ $(id -u) != 0 ]]; then _tk_err "tk_start_user_manager needs root"; return 1; fi
  if ! id -u "$user" >/dev/null 2>&1; then _tk_err "no user $user"; return 1; fi
  if [[ ! -x /usr/lib/systemd/systemd ]]; then _tk_err "/usr/lib/systemd/systemd missing (Debian package systemd)"; return 1; fi
  name=usermanager-$user
  pidf=$TK_SERVICES_DIR/pids/$name.pid
  log=$TK_SERVICES_DIR/$name.log
  tk_stop_user_manager "$user" || return 1
  if [[ -z $dir ]]; then
    dir=$(mktemp -d /tmp/tokenctl-usermgr.XXXXXX) || { _tk_err "mktemp failed"; return 1; }
    printf '%s\n' "$dir" >"$TK_SERVICES_DIR/$name.dir.tmp"
  fi
  mkdir -p "$dir/runtime" "$dir/home/.config/systemd/user" || { _tk_err "cannot create $dir"; return 1; }
  dir=$(cd "$dir" && pwd)
  chown -R "$user:" "$dir"
  chmod 0700 "$dir" "$dir/runtime" "$dir/home"
  if ! runuser -u "$user" -- test -w "$dir/runtime"; then
    _tk_err "$user cannot reach $dir: a directory above it is closed to others"
    return 1
  fi
  mapfile -t roots < <(_tk_cgroup_roots)
  if ((${#roots[@]} == 0)); then _tk_err "no cgroup hierarchy under /sys/fs/cgroup"; return 1; fi
  cg=tokenctl-usermgr-$user-$$-$RANDOM
  printf '%s\n' "$cg" >"$TK_SERVICES_DIR/$name.cgroup"
  mapfile -t env < <(_tk_user_manager_env "$user" "$dir/runtime" "$dir/home")
  printf '%s\n' "$dir" >"$TK_SERVICES_DIR/$name.dir"
  : >"$log"
  # PID recorded = the manager's: unshare (no --fork), bash and setpriv all exec.
  # shellcheck disable=SC2016 # expanded by the inner bash
  ( unshare --mount --propagation private /bin/bash -c '
      set -e
      user=$1 cg=$2; shift 2
      mkdir -p /run/systemd
      mount -t tmpfs -o mode=0755 tokenctl-usermgr /run/systemd
      mkdir /run/systemd/system
      while [[ $1 != -- ]]; do
        mkdir -p "$1/$cg"
        chown -R "$user:" "$1/$cg"
        echo $$ >"$1/$cg/cgroup.procs"
        shift
      done
      shift
      exec setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --reset-env \
        /usr/bin/env -i "$@" /usr/lib/systemd/systemd --user
    ' tk-usermgr "$user" "$cg" "${roots[@]}" -- "${env[@]}" </dev/null >>"$log" 2>&1 &
    echo $! >"$pidf" )
  pid=$(<"$pidf")
  for _ in $(seq 100); do
    if ! _tk_alive "$pid"; then
      _tk_err "systemd --user exited: $(tail -n 20 "$log")"
      rm -f "$pidf"
      _tk_user_manager_cleanup "$user"
      return 1
    fi
    if [[ -S $dir/runtime/systemd/private ]]; then
      state=$(tk_user_systemctl "$user" show --property=SystemState --value 2>/dev/null || true)
      [[ $state == running || $state == degraded ]] && break
    fi
    sleep 0.1
  done
  if [[ $state != running && $state != degraded ]]; then
    _tk_err "systemd --user for $user not running after 10 s (state: ${state:-none}): $(tail -n 20 "$log")"
    tk_stop_user_manager "$user" || true
    return 1
  fi
  export TK_USER_MANAGER_RUNTIME=$dir/runtime TK_USER_MANAGER_HOME=$dir/home
  export TK_USER_MANAGER_UNITS=$dir/home/.config/systemd/user
}

# tk_user_systemctl USER ARGS...: systemctl --user as USER, talking to its manager.
tk_user_systemctl() {
  _tk_need_dir || return 1
  local user=${1:?usage: tk_user_systemctl USER ARGS...} dir env=()
  shift
  dir=$(cat "$TK_SERVICES_DIR/usermanager-$user.dir" 2>/dev/null || true)
  if [[ -z $dir ]]; then _tk_err "no user manager for $user"; return 1; fi
  mapfile -t env < <(_tk_user_manager_env "$user" "$dir/runtime" "$dir/home")
  setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --reset-env \
    /usr/bin/env -i "${env[@]}" systemctl --user --no-pager "$@"
}

# _tk_user_manager_cleanup USER: stop (by PID) what is left in the manager's cgroup, remove it.
_tk_user_manager_cleanup() {
  local user=$1 name=usermanager-$1 cgf cg root pids d made
  cgf=$TK_SERVICES_DIR/$name.cgroup
  if [[ -f $cgf ]]; then
    cg=$(<"$cgf")
    while read -r root; do
      [[ -n $cg && -d $root/$cg ]] || continue
      mapfile -t pids < <(cat "$root/$cg"/cgroup.procs "$root/$cg"/*/cgroup.procs "$root/$cg"/*/*/cgroup.procs \
        "$root/$cg"/*/*/*/cgroup.procs 2>/dev/null | sort -u)
      if ((${#pids[@]})); then _tk_stop_pids "${pids[@]}" || true; fi
      # Deepest first.
      while read -r d; do rmdir "$d" 2>/dev/null || true; done < <(find "$root/$cg" -depth -type d 2>/dev/null)
    done < <(_tk_cgroup_roots)
    rm -f "$cgf"
  fi
  if [[ -f $TK_SERVICES_DIR/$name.dir.tmp ]]; then
    made=$(<"$TK_SERVICES_DIR/$name.dir.tmp")
    [[ $made == /tmp/tokenctl-usermgr.* ]] && rm -rf "$made"
    rm -f "$TK_SERVICES_DIR/$name.dir.tmp"
  fi
  rm -f "$TK_SERVICES_DIR/$name.dir"
}

# tk_stop_user_manager USER: see the header.
tk_stop_user_manager() {
  _tk_need_dir || return 1
  local user=${1:?usage: tk_stop_user_manager USER}
  _tk_stop_named "usermanager-$user" || return 1
  _tk_user_manager_cleanup "$user"
  unset TK_USER_MANAGER_RUNTIME TK_USER_MANAGER_HOME TK_USER_MANAGER_UNITS
}
