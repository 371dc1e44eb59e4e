# shellcheck shell=bash
# Scripts/lib/swtpm.sh: a software TPM 2.0 (Debian 12's swtpm 0.7.1, libtpms) for the tests of
# the TPM features: a client key created inside the TPM that signs JWT client assertions
# (RFC 7523 2.2) through OpenSSL 3's tpm2 provider (tpm2-openssl 1.1.1), and a keyring unlock
# secret sealed to the machine (tpm2-tools 5.4 / libtss2 3.2.1, or systemd-creds). No test ever
# needs a real /dev/tpm*: each swtpm listens on a unix socket of its own in DIR.
#
# Source it after services.sh (it uses tk_services_init's DIR and its PID records); it works
# under set -euo pipefail, is quiet on success, prints "services: ..." and returns non-zero on
# failure. It needs no root: every file and socket is the calling user's.
#
#   source Scripts/lib/services.sh
#   source Scripts/lib/swtpm.sh
#   tk_require_packages "${TK_SWTPM_PACKAGES[@]}"
#   tk_services_init "$(mktemp -d)"
#   tk_start_swtpm [NAME]          # default NAME "swtpm"; then TPM2_Startup(CLEAR) (tpm2_startup
#                                  # -c) unless TK_SWTPM_STARTUP=0 (the TPM then answers
#                                  # TPM_RC_INITIALIZE until someone sends it)
#   tpm2_getrandom --hex 8         # the tools, the provider and systemd-creds find it (below)
#   tk_swtpm_tcti NAME             # prints NAME's TCTI string, for a second instance:
#                                  # TPM2TOOLS_TCTI=$(tk_swtpm_tcti other) tpm2_...
#   tk_swtpm_use NAME              # points the exports below at NAME (started earlier)
#   tk_swtpm_transients [NAME]     # prints the handles of transient objects and of loaded and
#                                  # saved sessions still in the TPM (empty: nothing left behind)
#   tk_swtpm_flush [NAME]          # flushes them all (tpm2_flushcontext -t, -l, -s)
#   tk_stop_swtpm [NAME]           # stops it by PID; its state stays (a later tk_start_swtpm
#                                  # NAME is a reboot of the same machine: same seeds, so the
#                                  # same primary keys, PCRs reset); tk_services_stop_all stops it
#
# Exports (for the instance started last):
#   TPM2TOOLS_TCTI      swtpm:path=DIR/NAME/tpm.sock   tpm2-tools
#   TPM2OPENSSL_TCTI    the same                         OpenSSL's tpm2 provider
#   SYSTEMD_TPM2_DEVICE the same                         systemd-creds (and cryptenroll)
#   TCTI                the same                         tpm2-tss tools that read $TCTI
#   TK_SWTPM_TCTI, TK_SWTPM_DIR (DIR/NAME), TK_SWTPM_STATE (DIR/NAME/state), TK_SWTPM_NAME
# Layout under DIR: NAME/ (0700) with state/ (tpm2-00.permall: the seeds and NV, mode 0600),
# tpm.sock (the TPM command channel) and tpm.sock.ctrl (swtpm's control channel, which the
# swtpm TCTI finds by appending ".ctrl"), both 0600; pids/swtpm-NAME.pid; the log is
# DIR/swtpm-NAME.log.
#
# What the TCTI strings mean (the tpm2-tss TCTI loader's conventions, as every tool reads them):
#   unset (and no $TCTI)         the loader's list, in order (measured, TSS2_LOG=tcti+debug):
#                                libtss2-tcti-default.so, tabrmd (D-Bus), device:/dev/tpmrm0,
#                                device:/dev/tpm0, then swtpm AND mssim on 127.0.0.1:2321: a
#                                test that forgets its TCTI may reach any local user's TCP
#                                swtpm on the default port; here all fail
#   swtpm:path=SOCK              libtss2-tcti-swtpm over AF_UNIX (3.2.1 has it: SOCK and
#                                SOCK.ctrl; path at most 102 bytes, AF_UNIX's limit less ".ctrl")
#   swtpm:host=127.0.0.1,port=N  the same over TCP (N and N+1). Not used here: a loopback port
#                                is open to every local user, with no authentication.
#   device:/dev/tpmrm0           a kernel TPM
#
# No resource manager: a swtpm socket is the bare TPM, as /dev/tpm0 is (not /dev/tpmrm0, whose
# kernel resource manager flushes what a client left when it closes the device). The tools
# leave what they load in the TPM (tpm2_createprimary -c F saves a context AND leaves the object
# loaded; tpm2_load loads the parent's context again besides the new object), and libtpms holds
# 3 transient objects (then TPM_RC_OBJECT_MEMORY, "out of memory for object contexts") and 3
# sessions (TPM_RC_SESSION_MEMORY). So flush after each step, even inside a chain such as
# createprimary, load, unseal: tpm2_flushcontext -t (objects), -l (loaded sessions) and -s
# (saved sessions: tpm2_startauthsession -S F saves its session); NB -s is not "sessions" in
# general: loaded ones need -l. tk_swtpm_transients shows what is left, tk_swtpm_flush flushes
# it all. The tpm2 provider flushes its own. tpm2_startup -c on a started TPM succeeds.
# systemd-creds 252 encrypt flushes its own, but each `systemd-creds decrypt` leaves one loaded
# session (0x02000000, ...): the third decrypt in a row fails with "out of memory for session
# contexts" unless the test flushes (-l) in between (swtpm-selftest.sh checks it). With
# /dev/tpmrm0 the kernel cleans up after it, so only tests against a swtpm see it.
# Only one client at a time: swtpm serves one connection; a second waits until the first
# closes, so a test must not keep one open (each tpm2_* command opens and closes its own).
#
# OpenSSL's tpm2 provider (what the client-assertion code will do through libcrypto):
# - `openssl genpkey -provider tpm2 -provider default -algorithm EC -pkeyopt group:P-256` makes
#   the key inside the TPM and writes a "TSS2 PRIVATE KEY" PEM (OID 2.23.133.10.1.3): the public
#   part and the private part encrypted by the parent, whose handle is 0x40000001 (the owner
#   hierarchy: the provider derives its primary again at every load, nothing persistent in the
#   TPM). Attributes fixedTPM|fixedParent|sensitiveDataOrigin|userWithAuth|sign|decrypt.
# - Signing needs the tpm2 provider's signature implementation asked for by property:
#   `-propquery '?provider=tpm2'` (libcrypto: the props argument of EVP_DigestSignInit_ex or
#   EVP_PKEY_CTX_new_from_pkey). Without it OpenSSL 3.0.19 takes the default provider's ECDSA,
#   which gets the public half only: "missing private key".
# - The signature is DER (r, s); JWS ES256 wants the two 32-byte integers concatenated.
# - Exporting the private key: -text shows no private scalar, -traditional and PKCS#8 fail,
#   `pkey -out` writes the same TSS2 blob, plain OpenSSL (no tpm2 provider) cannot read it, and
#   another TPM cannot use it.
#
# Access for a non-root user:
# - A real kernel TPM: Debian's tpm-udev 0.6 (a dependency of libtss2-esys, so always there with
#   the tools) installs /lib/udev/rules.d/60-tpm-udev.rules and a system user and group "tss":
#     KERNEL=="tpm[0-9]*",   MODE="0660", OWNER="tss"                (raw TPM: user tss only)
#     KERNEL=="tpmrm[0-9]*", MODE="0660", OWNER="tss", GROUP="tss"   (resource manager)
#   so a user must be in group tss (usermod -aG tss USER, then a new login) to use
#   /dev/tpmrm0, and nobody but tss (and root) reaches /dev/tpm0. Members of tss share one TPM
#   and its owner hierarchy with no password by default: a member can load (and so unseal) any
#   other member's blob that has no auth value or a policy it can satisfy. tokenctl's sealed
#   objects therefore need an auth value or a policy bound to something only that user has
#   (swtpm-selftest.sh only shows the mechanism: PCR policy, no auth value).
# - swtpm: the socket is the user's own (0600 in a 0700 directory): no group needed, and
#   another user cannot connect: connect(2) gets EACCES (swtpm-selftest.sh checks both).
#
# systemd-creds on this systemd 252 (measured as root, swtpm-selftest.sh checks it):
# `systemd-creds encrypt --with-key=tpm2 --tpm2-device=swtpm:path=SOCK` works against a swtpm:
# systemd 252 reads --tpm2-device (or $SYSTEMD_TPM2_DEVICE) as DRIVER:CONF, dlopens
# libtss2-tcti-DRIVER.so.0 and passes CONF (a bare path means device:PATH). It runs
# TPM2_Startup itself, creates an ECC primary under the owner hierarchy, seals with a PCR 7
# policy by default (--tpm2-pcrs=), flushes what it loaded (decrypt does not: above), and
# `systemd-creds decrypt` with the same device gives the secret back; another swtpm's fails. It warns "PCR
# policy effectively unenforced": a fresh swtpm's PCR 7 is all zeros (no firmware measured
# anything), which systemd takes as an uninitialised bank. Without a device (and no
# SYSTEMD_TPM2_DEVICE) it fails: "Failed to open specified TCTI device file /dev/tpmrm0".
# `systemd-creds has-tpm2` says "partial" (-firmware -driver +system -subsystem) and exits 11
# here, SYSTEMD_TPM2_DEVICE or not: it looks for the EFI TPM log and the kernel's tpm class, not
# at the device given. So --with-key=auto (which
# decides by such checks) is not to be relied on here (not tried: falling back to host would
# create the machine's key file); name tpm2 explicitly. --with-key=host and host+tpm2 read (and
# create!) /var/lib/systemd/credential.secret, the machine's own key: the tests never use them.
# Root is not needed for --with-key=tpm2: any user who can reach the TPM encrypts and decrypts
# (the self-test does it as nobody on nobody's own swtpm). But on 252 such a credential is bound
# to the TPM (and PCRs) only, not to a user: anyone in group tss can decrypt it on a real
# machine. Credentials bound to a user (systemd-creds --user, the uid in the credential and the
# host key readable only through systemd) came with systemd 256.

# tpm-udev comes with libtss2-esys; named so a reader sees where the tss group comes from.
# shellcheck disable=SC2034 # used by callers
TK_SWTPM_PACKAGES=(swtpm tpm2-tools tpm2-openssl libtss2-tcti-swtpm0 tpm-udev openssl)

_tk_swtpm_name() {
  local name=${1:-swtpm}
  if [[ ! $name =~ ^[A-Za-z0-9_-]+$ ]]; then _tk_err "bad swtpm name '$name'"; return 1; fi
  printf '%s\n' "$name"
}

# tk_swtpm_tcti [NAME]: print NAME's TCTI configuration string.
tk_swtpm_tcti() {
  _tk_need_dir || return 1
  local name
  name=$(_tk_swtpm_name "${1:-}") || return 1
  printf 'swtpm:path=%s\n' "$TK_SERVICES_DIR/$name/tpm.sock"
}

# tk_start_swtpm [NAME]: see the header.
tk_start_swtpm() {
  _tk_need_dir || return 1
  local name dir sock pidf log pid tcti
  name=$(_tk_swtpm_name "${1:-}") || return 1
  dir=$TK_SERVICES_DIR/$name sock=$TK_SERVICES_DIR/$name/tpm.sock
  pidf=$TK_SERVICES_DIR/pids/swtpm-$name.pid log=$TK_SERVICES_DIR/swtpm-$name.log
  if ! command -v swtpm >/dev/null || ! command -v tpm2_startup >/dev/null; then
    _tk_err "swtpm or tpm2-tools missing: tk_require_packages \"\${TK_SWTPM_PACKAGES[@]}\""
    return 1
  fi
  if ((${#sock} > 102)); then
    _tk_err "socket path too long for AF_UNIX (${#sock} > 102 bytes): $sock; use a shorter DIR"
    return 1
  fi
  tk_stop_swtpm "$name" || return 1
  mkdir -p "$dir/state" || { _tk_err "cannot create $dir/state"; return 1; }
  chmod 0700 "$dir" "$dir/state"
  rm -f "$sock" "$sock.ctrl"
  : >"$log"
  # not-need-init: the swtpm TCTI never sends swtpm's CMD_INIT, so the TPM must be on without it.
  # --log level 1: errors only (level 2 and up dump every command).
  ( swtpm socket --tpm2 \
      --tpmstate "dir=$dir/state,mode=0600" \
      --server "type=unixio,path=$sock,mode=0600" \
      --ctrl "type=unixio,path=$sock.ctrl,mode=0600" \
      --flags not-need-init \
      --log "file=$log,level=1" \
      </dev/null >>"$log" 2>&1 &
    echo $! >"$pidf" )
  pid=$(<"$pidf")
  for _ in $(seq 100); do
    [[ -S $sock && -S $sock.ctrl ]] && break
    if ! _tk_alive "$pid"; then
      _tk_err "swtpm '$name' exited: $(tail -n 20 "$log")"
      rm -f "$pidf"
      return 1
    fi
    sleep 0.1
  done
  if [[ ! -S $sock || ! -S $sock.ctrl ]]; then
    _tk_err "swtpm '$name' made no socket within 10 s: $(tail -n 20 "$log")"
    _tk_stop_named "swtpm-$name" || true
    return 1
  fi
  tcti="swtpm:path=$sock"
  if [[ ${TK_SWTPM_STARTUP:-1} != 0 ]]; then
    if ! TPM2TOOLS_TCTI=$tcti tpm2_startup -c >>"$log" 2>&1; then
      _tk_err "tpm2_startup -c on swtpm '$name' failed: $(tail -n 20 "$log")"
      _tk_stop_named "swtpm-$name" || true
      return 1
    fi
  fi
  tk_swtpm_use "$name"
}

# tk_swtpm_use [NAME]: point the exports (see the header) at NAME, a running instance.
tk_swtpm_use() {
  _tk_need_dir || return 1
  local name tcti dir
  name=$(_tk_swtpm_name "${1:-}") || return 1
  dir=$TK_SERVICES_DIR/$name
  if [[ ! -S $dir/tpm.sock ]]; then _tk_err "swtpm '$name' is not running"; return 1; fi
  tcti="swtpm:path=$dir/tpm.sock"
  export TPM2TOOLS_TCTI=$tcti TPM2OPENSSL_TCTI=$tcti SYSTEMD_TPM2_DEVICE=$tcti TCTI=$tcti
  export TK_SWTPM_TCTI=$tcti TK_SWTPM_DIR=$dir TK_SWTPM_STATE=$dir/state TK_SWTPM_NAME=$name
}

# tk_swtpm_transients [NAME]: the transient objects, loaded sessions and saved sessions left in
# the TPM, one handle a line (nothing: clean). Fails when the TPM cannot be asked.
tk_swtpm_transients() {
  local tcti out kind
  tcti=$(tk_swtpm_tcti "${1:-}") || return 1
  for kind in handles-transient handles-loaded-session handles-saved-session; do
    out+=$(TPM2TOOLS_TCTI=$tcti tpm2_getcap "$kind") || { _tk_err "tpm2_getcap $kind on $tcti failed"; return 1; }
    out+=$'\n'
  done
  # tpm2_getcap prints "- 0x80000000" per handle.
  sed -n 's/^- //p' <<<"$out"
}

# tk_swtpm_flush [NAME]: flush every transient object (tpm2_flushcontext -t), loaded session
# (-l) and saved session (-s) from NAME's TPM.
tk_swtpm_flush() {
  local tcti opt
  tcti=$(tk_swtpm_tcti "${1:-}") || return 1
  for opt in -t -l -s; do
    TPM2TOOLS_TCTI=$tcti tpm2_flushcontext "$opt" || { _tk_err "tpm2_flushcontext $opt on $tcti failed"; return 1; }
  done
}

# tk_stop_swtpm [NAME]: stop it by its recorded PID; the state directory stays. Drops the
# exports when they point at this instance.
tk_stop_swtpm() {
  _tk_need_dir || return 1
  local name tcti
  name=$(_tk_swtpm_name "${1:-}") || return 1
  _tk_stop_named "swtpm-$name" || return 1
  rm -f "$TK_SERVICES_DIR/$name/tpm.sock" "$TK_SERVICES_DIR/$name/tpm.sock.ctrl"
  tcti="swtpm:path=$TK_SERVICES_DIR/$name/tpm.sock"
  if [[ ${TK_SWTPM_TCTI:-} == "$tcti" ]]; then
    unset TPM2TOOLS_TCTI TPM2OPENSSL_TCTI SYSTEMD_TPM2_DEVICE TCTI \
      TK_SWTPM_TCTI TK_SWTPM_DIR TK_SWTPM_STATE TK_SWTPM_NAME
  fi
}
