#!/usr/bin/env bash
# Self-check for Scripts/lib/swtpm.sh, against software TPMs only (never /dev/tpm*). Run as root
# (it also runs a part as the user nobody, and systemd-creds). Shows:
#  1. the TPM answers TPM_RC_INITIALIZE until tpm2_startup -c; an EC P-256 key created inside
#     the TPM by `openssl genpkey -provider tpm2` (a TSS2 PEM file: a blob wrapped by the TPM),
#     used by openssl pkeyutl / dgst with the tpm2 provider, the signature verified by plain
#     OpenSSL with the exported public key, and an ES256 JWT client assertion (RFC 7523 2.2)
#     signed by the TPM and verified by python3-cryptography; that the private key cannot be
#     had in the clear (-text shows no private scalar, PKCS#8 and traditional exports fail,
#     plain OpenSSL cannot read the file, fixedTPM and fixedParent are set);
#  2. a random 32-byte secret sealed under a primary key with a PCR 7 policy (tpm2_create),
#     unsealed again (tpm2_unseal) with only the two blobs on disk; refused once PCR 7 is
#     extended; unsealed again after a restart of the swtpm (a reboot); refused by a second,
#     fresh swtpm (another machine), which cannot use the signing key either; the same with
#     systemd-creds encrypt/decrypt --with-key=tpm2 (systemd 252);
#  3. no transient object or loaded session left in the TPM after each step;
#  4. access: Debian's udev rule gives /dev/tpmrm0 to group tss; a swtpm's socket is its
#     user's own (another user cannot connect; nobody runs one of its own with this library);
# and everything stopped by PID, no stray process. KEEP=1 keeps the temporary directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=services.sh
source "$here/services.sh"
# shellcheck source=swtpm.sh
source "$here/swtpm.sh"

if [[ $(id -u) != 0 ]]; then echo "swtpm-selftest.sh: run it as root" >&2; exit 1; fi
tk_require_packages "${TK_SWTPM_PACKAGES[@]}" python3 python3-cryptography systemd util-linux

began=$SECONDS
# A short path: the sockets must fit AF_UNIX's 108 bytes.
root=$(mktemp -d /tmp/tokenctl-swtpm.XXXXXX)
cleanup() {
  local rc=$?
  if [[ -z ${finished:-} ]]; then echo "swtpm-selftest.sh: stopped early (status $rc; $fails check(s) failed before): see above" >&2; fi
  tk_services_stop_all || true
  if [[ -n ${KEEP:-} ]]; then echo "kept $root" >&2; else rm -rf "$root"; fi
}
trap cleanup EXIT

# shellcheck source=selftest.sh
source "$(dirname "${BASH_SOURCE[0]}")/selftest.sh"
# contains NAME TEXT NEEDLE / lacks NAME TEXT NEEDLE
contains() { if [[ $2 == *"$3"* ]]; then ok "$1"; else bad "$1: '$3' not in: $2"; fi; }
lacks() { if [[ $2 != *"$3"* ]]; then ok "$1"; else bad "$1: '$3' found in: $2"; fi; }
# fails_with NAME NEEDLE COMMAND...: COMMAND must fail, and say NEEDLE.
fails_with() {
  local name=$1 needle=$2 out
  shift 2
  if out=$("$@" 2>&1); then bad "$name: succeeded"; return; fi
  contains "$name" "$out" "$needle"
}
# clean STEP [NAME]: nothing left in the TPM after STEP.
clean() {
  local left
  if ! left=$(tk_swtpm_transients "${2:-}"); then bad "$1: cannot ask the TPM"; return; fi
  expect "$1: no transient objects or sessions left${2:+ ($2)}" "$(printf %s "$left" | tr '\n' ' ')" ""
}
# run COMMAND...: must succeed; its output goes to $work/log.
run() {
  if "$@" >>"$work/log" 2>&1; then return 0; fi
  bad "$* failed: $(tail -n 5 "$work/log")"
  return 1
}

tk_services_init "$root/svc"
work=$root/work
mkdir -m 0700 "$work"
cd "$work"

# --- 1. startup, a key inside the TPM, signing -------------------------------------------------
TK_SWTPM_STARTUP=0 tk_start_swtpm
swtpm_pid=$(<"$TK_SERVICES_DIR/pids/swtpm-swtpm.pid")
expect "swtpm pid is swtpm" "$(cat "/proc/$swtpm_pid/comm")" swtpm
expect "TCTI" "$TPM2TOOLS_TCTI" "swtpm:path=$TK_SERVICES_DIR/swtpm/tpm.sock"
expect "provider TCTI" "$TPM2OPENSSL_TCTI" "$TPM2TOOLS_TCTI"
expect "socket owner and mode" "$(stat -c '%U %a' "$TK_SWTPM_DIR/tpm.sock")" "root 600"
fails_with "before tpm2_startup: TPM_RC_INITIALIZE" "TPM not initialized" tpm2_getrandom --hex 8
run tpm2_startup -c && ok "tpm2_startup -c"
expect "random bytes after startup" "$(tpm2_getrandom --hex 8 | tr -cd '0-9a-f' | wc -c)" 16
clean "startup"

tpm_ossl=(-provider tpm2 -provider default)
# Without -propquery, OpenSSL 3.0 fetches the default provider's ECDSA for a key the tpm2
# provider decoded and fails with "missing private key": ask for the tpm2 implementation.
tpm_sign=("${tpm_ossl[@]}" -propquery '?provider=tpm2')
if run openssl genpkey "${tpm_ossl[@]}" -algorithm EC -pkeyopt group:P-256 -out key.pem; then
  ok "openssl genpkey -provider tpm2: EC P-256 key created in the TPM"
fi
expect "key file is a TSS2 blob" "$(head -n 1 key.pem)" "-----BEGIN TSS2 PRIVATE KEY-----"
clean "genpkey"
run openssl pkey "${tpm_ossl[@]}" -in key.pem -pubout -out pub.pem
expect "public key exported" "$(head -n 1 pub.pem)" "-----BEGIN PUBLIC KEY-----"
contains "plain OpenSSL reads the public key" "$(openssl pkey -pubin -in pub.pem -noout -text)" "prime256v1"
clean "pubout"

head -c 1000 /dev/urandom >msg
run openssl pkeyutl "${tpm_sign[@]}" -sign -inkey key.pem -rawin -digest sha256 -in msg -out sig.der
expect "pkeyutl signature verified by plain OpenSSL" \
  "$(openssl pkeyutl -verify -pubin -inkey pub.pem -rawin -digest sha256 -in msg -sigfile sig.der 2>&1)" \
  "Signature Verified Successfully"
clean "pkeyutl -sign"
run openssl dgst -sha256 "${tpm_sign[@]}" -sign key.pem -out dgst.sig msg
expect "dgst signature verified by plain OpenSSL" \
  "$(openssl dgst -sha256 -verify pub.pem -signature dgst.sig msg 2>&1)" "Verified OK"
printf x >>msg
fails_with "signature of other bytes refused" "Verification failure" \
  openssl dgst -sha256 -verify pub.pem -signature dgst.sig msg
clean "dgst -sign"
fails_with "without -propquery the default provider's ECDSA fails" "missing private key" \
  openssl dgst -sha256 "${tpm_ossl[@]}" -sign key.pem -out /dev/null msg
clean "dgst -sign without propquery"

# An RFC 7523 client assertion: the JWS signing input signed by the TPM (DER ECDSA), turned
# into ES256's r||s and verified by another implementation.
cat >"$work/jws.py" <<'PY'
import base64, json, sys, time
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

def b64(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
def unb64(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))

if sys.argv[1] == "input":
    now = int(time.time())
    header = {"alg": "ES256", "typ": "JWT", "kid": "tpm"}
    claims = {"iss": "tokenctl-test", "sub": "tokenctl-test", "aud": "https://as.example/token",
              "jti": "j-%d" % now, "iat": now, "exp": now + 60}
    sys.stdout.write(b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode()))
else:  # assemble INPUT SIG.DER PUB.PEM: print the JWS after checking it
    signing_input = open(sys.argv[2], "rb").read()
    r, s = decode_dss_signature(open(sys.argv[3], "rb").read())
    jws = signing_input.decode() + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
    head, body, sig = jws.split(".")
    raw = unb64(sig)
    key = serialization.load_pem_public_key(open(sys.argv[4], "rb").read())
    key.verify(encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")),
               (head + "." + body).encode(), ec.ECDSA(hashes.SHA256()))
    assert json.loads(unb64(head))["alg"] == "ES256" and len(raw) == 64
    print(jws)
PY
/usr/bin/python3 "$work/jws.py" input >jws.input
if run openssl dgst -sha256 "${tpm_sign[@]}" -sign key.pem -out jws.sig jws.input \
    && jws=$(/usr/bin/python3 "$work/jws.py" assemble jws.input jws.sig pub.pem 2>>"$work/log"); then
  expect "ES256 client assertion signed in the TPM, verified by python3-cryptography" \
    "$(tr -cd . <<<"$jws")" ".."
else bad "ES256 client assertion: $(tail -n 5 "$work/log")"; fi
clean "JWS"

# The private key in the clear: not to be had.
text=$(openssl pkey "${tpm_ossl[@]}" -in key.pem -noout -text 2>&1)
contains "-text: a TPM key" "$text" "Private-Key: (EC P-256, TPM 2.0)"
lacks "-text: no private scalar" "$text" "priv:"
contains "key is fixedTPM (the TPM will not duplicate it)" "$text" "fixedTPM"
contains "key is fixedParent" "$text" "fixedParent"
fails_with "traditional EC PRIVATE KEY export fails" "i2d_ECPrivateKey" \
  openssl pkey "${tpm_sign[@]}" -in key.pem -traditional -out clear.pem
fails_with "PKCS#8 export fails" "Error converting key" \
  openssl pkcs8 -topk8 -nocrypt "${tpm_ossl[@]}" -in key.pem -out clear.p8
run openssl pkey "${tpm_ossl[@]}" -in key.pem -out again.pem
expect "pkey -out writes the TSS2 blob again, not a clear key" "$(head -n 1 again.pem)" "-----BEGIN TSS2 PRIVATE KEY-----"
fails_with "plain OpenSSL cannot read the key file" "Could not read key" openssl pkey -in key.pem -noout
clean "export attempts"

# --- 2. sealing ----------------------------------------------------------------------------------
head -c 32 /dev/urandom >secret.bin
expect "secret is 32 bytes" "$(stat -c %s secret.bin)" 32
# The primary is derived from the owner seed and the template: the same on every boot of the
# same TPM, so only seal.pub and seal.priv need to be kept on disk. Each tool leaves what it
# loaded in the TPM, and libtpms holds 3 objects: flush after each.
run tpm2_createprimary -Q -C o -g sha256 -G ecc -c primary.ctx && run tpm2_flushcontext -t
# The policy: PCR 7's current value (on a real machine: the Secure Boot state).
run tpm2_startauthsession -Q -S trial.ctx && run tpm2_policypcr -Q -S trial.ctx -l sha256:7 -L pcr7.policy \
  && run tpm2_flushcontext trial.ctx
clean "primary and PCR policy"
# A sealed-data object (keyedhash, -i): fixedTPM|fixedParent, no userWithAuth: the policy only.
if run tpm2_create -Q -C primary.ctx -g sha256 -a 'fixedtpm|fixedparent' -L pcr7.policy \
    -i secret.bin -u seal.pub -r seal.priv; then ok "secret sealed (tpm2_create -i)"; fi
run tpm2_flushcontext -t
clean "seal"
if [[ $(od -An -v -tx1 seal.priv seal.pub | tr -d ' \n') == *"$(od -An -v -tx1 secret.bin | tr -d ' \n')"* ]]; then
  bad "the secret is in the blobs in the clear"
else ok "the secret is not in the blobs in the clear"; fi

# unseal OUT [TCTI]: primary again, load the blobs, a policy session satisfying PCR 7, unseal,
# flush everything (whatever failed).
unseal() {
  local out=$1 tcti=${2:-$TPM2TOOLS_TCTI} rc=0
  rm -f "$out" p.ctx s.ctx ps.ctx
  {
    TPM2TOOLS_TCTI=$tcti tpm2_createprimary -Q -C o -g sha256 -G ecc -c p.ctx \
      && TPM2TOOLS_TCTI=$tcti tpm2_flushcontext -t \
      && TPM2TOOLS_TCTI=$tcti tpm2_load -Q -C p.ctx -u seal.pub -r seal.priv -c s.ctx \
      && TPM2TOOLS_TCTI=$tcti tpm2_flushcontext -t \
      && TPM2TOOLS_TCTI=$tcti tpm2_startauthsession -Q --policy-session -S ps.ctx \
      && TPM2TOOLS_TCTI=$tcti tpm2_policypcr -Q -S ps.ctx -l sha256:7 \
      && TPM2TOOLS_TCTI=$tcti tpm2_unseal -c s.ctx -p session:ps.ctx -o "$out"
  } 2>&1 || rc=1
  TPM2TOOLS_TCTI=$tcti tpm2_flushcontext -t || rc=1
  TPM2TOOLS_TCTI=$tcti tpm2_flushcontext -l || rc=1
  TPM2TOOLS_TCTI=$tcti tpm2_flushcontext -s || rc=1
  return "$rc"
}
if unseal out.bin >>"$work/log" && cmp -s secret.bin out.bin; then ok "unsealed, equal"
else bad "unseal: $(tail -n 5 "$work/log")"; fi
clean "unseal"

run tpm2_pcrextend "7:sha256=$(printf '%064d' 1)"
fails_with "PCR 7 extended: unseal refused" "a policy check failed" unseal out.bin
clean "unseal with PCR 7 changed"

# A reboot: same state, PCRs reset by TPM2_Startup(CLEAR).
tk_stop_swtpm
tk_start_swtpm
expect "after a restart: a new swtpm process" "$(_tk_alive "$swtpm_pid" && echo alive || echo gone)" gone
swtpm_pid=$(<"$TK_SERVICES_DIR/pids/swtpm-swtpm.pid")
if unseal out.bin >>"$work/log" && cmp -s secret.bin out.bin; then ok "after a restart (reboot): unsealed, equal"
else bad "unseal after restart: $(tail -n 5 "$work/log")"; fi
clean "unseal after restart"
fails_with "the saved primary context is dead after the reboot" "integrity check failed" \
  tpm2_create -Q -C primary.ctx -i secret.bin -u x.pub -r x.priv
run tpm2_flushcontext -t
clean "stale context"

# Another machine: a second, fresh swtpm (its own seeds). Started after the first, so it now
# holds the exports: put them back to the first one after.
first_tcti=$TPM2TOOLS_TCTI
tk_start_swtpm other
other_pid=$(<"$TK_SERVICES_DIR/pids/swtpm-other.pid")
other=$(tk_swtpm_tcti other)
expect "the second swtpm has the exports" "$TPM2TOOLS_TCTI" "$other"
tk_swtpm_use swtpm
expect "tk_swtpm_use: back to the first" "$TPM2TOOLS_TCTI $SYSTEMD_TPM2_DEVICE" "$first_tcti $first_tcti"
fails_with "a fresh swtpm cannot load the sealed blobs" "integrity check failed" unseal out.bin "$other"
clean "unseal on the other TPM" other
fails_with "a fresh swtpm cannot use the signing key" "Error" \
  env TPM2OPENSSL_TCTI="$other" openssl dgst -sha256 "${tpm_sign[@]}" -sign key.pem -out /dev/null msg
clean "sign on the other TPM" other
clean "the first swtpm untouched"
run env TPM2OPENSSL_TCTI="$first_tcti" openssl dgst -sha256 "${tpm_sign[@]}" -sign key.pem -out dgst.sig msg \
  && expect "the first swtpm still signs" "$(openssl dgst -sha256 -verify pub.pem -signature dgst.sig msg 2>&1)" "Verified OK"

# systemd-creds (systemd 252) sealing to the swtpm: --tpm2-device or SYSTEMD_TPM2_DEVICE.
had_host_key=$([[ -e /var/lib/systemd/credential.secret ]] && echo yes || echo no)
if run systemd-creds encrypt --with-key=tpm2 --name=keyring-unlock secret.bin unlock.cred; then
  ok "systemd-creds encrypt --with-key=tpm2 to the swtpm"
fi
clean "systemd-creds encrypt"
if systemd-creds decrypt --name=keyring-unlock unlock.cred creds.out >>"$work/log" 2>&1 && cmp -s secret.bin creds.out; then
  ok "systemd-creds decrypt: equal"
else bad "systemd-creds decrypt: $(tail -n 5 "$work/log")"; fi
# systemd 252 leaves its session loaded after a decrypt (a resource manager would flush it): the
# third decrypt in a row fails. A test against a swtpm flushes loaded sessions after each.
left=$(tk_swtpm_transients)
expect "known: systemd-creds 252 decrypt leaves one loaded session" "$(printf %s "$left" | grep -c '^0x2' || true) $(printf %s "$left" | grep -vc '^0x2' || true)" "1 0"
systemd-creds decrypt --name=keyring-unlock unlock.cred /dev/null >>"$work/log" 2>&1 || true
fails_with "known: a third decrypt without a flush fails" "out of memory for session contexts" \
  systemd-creds decrypt --name=keyring-unlock unlock.cred /dev/null
run tk_swtpm_flush
clean "systemd-creds decrypt (after tk_swtpm_flush)"
rm -f creds.out
fails_with "systemd-creds decrypt on the other swtpm fails" "Failed" \
  systemd-creds decrypt --tpm2-device="$other" --name=keyring-unlock unlock.cred creds.out
run tk_swtpm_flush other
clean "systemd-creds on the other TPM (after tk_swtpm_flush)" other
if [[ ! -e /dev/tpmrm0 ]]; then
  fails_with "systemd-creds without a device looks for /dev/tpmrm0" "/dev/tpmrm0" \
    env -u SYSTEMD_TPM2_DEVICE systemd-creds decrypt --name=keyring-unlock unlock.cred creds.out
fi
expect "no host key created" "$([[ -e /var/lib/systemd/credential.secret ]] && echo yes || echo no)" "$had_host_key"

tk_stop_swtpm other
if _tk_alive "$other_pid"; then bad "other swtpm still running"; else ok "other swtpm stopped"; fi

# --- 4. who may use it ---------------------------------------------------------------------------
rules=/lib/udev/rules.d/60-tpm-udev.rules
rule=$(grep -E '^KERNEL=="tpmrm' "$rules" || true)
contains "udev: /dev/tpmrm* is group tss" "$rule" 'GROUP="tss"'
contains "udev: /dev/tpmrm* mode 0660" "$rule" 'MODE="0660"'
lacks "udev: /dev/tpm* (no rm) has no group" "$(grep -E '^KERNEL=="tpm\[' "$rules" || true)" 'GROUP='
expect "group tss exists" "$(getent group tss | cut -d: -f1)" tss

# Another user, with every directory above the socket open: the socket's 0600 alone stops it.
chmod 0711 "$root" "$TK_SERVICES_DIR" "$TK_SWTPM_DIR"
fails_with "nobody: the tools cannot reach root's swtpm" "Failed to connect to" \
  runuser -u nobody -- env TPM2TOOLS_TCTI="$TPM2TOOLS_TCTI" tpm2_getrandom --hex 4
fails_with "nobody: connect(2) to root's socket: EACCES" "Permission denied" \
  runuser -u nobody -- /usr/bin/python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' \
  "$TK_SWTPM_DIR/tpm.sock"
chmod 0700 "$TK_SERVICES_DIR" "$TK_SWTPM_DIR"

# nobody runs its own swtpm with this library: no root, no group.
user=$root/user
mkdir -m 0700 "$user" && cp "$here/services.sh" "$here/swtpm.sh" "$user/" && chown -R nobody: "$user"
cat >"$user/run.sh" <<'EOF'
set -euo pipefail
cd "$(dirname "$0")"
source ./services.sh
source ./swtpm.sh
tk_services_init "$PWD/svc"
tk_start_swtpm
echo "socket: $(stat -c '%U %a' "$TK_SWTPM_DIR/tpm.sock")"
echo "random: $(tpm2_getrandom --hex 8 | wc -c)"
head -c 32 /dev/urandom >s.bin
systemd-creds encrypt --with-key=tpm2 --name=x s.bin s.cred 2>/dev/null
systemd-creds decrypt --name=x s.cred s.out 2>/dev/null
cmp -s s.bin s.out && echo "creds: equal"
tpm2_flushcontext -l   # systemd-creds 252 decrypt's session (see swtpm.sh)
echo "left: [$(tk_swtpm_transients)]"
echo "pid: $(<"$TK_SERVICES_DIR/pids/swtpm-swtpm.pid")"
tk_stop_swtpm
echo "stopped"
EOF
chown nobody: "$user/run.sh"
if out=$(runuser -u nobody -- bash "$user/run.sh" 2>&1); then
  contains "nobody: own swtpm, own socket" "$out" "socket: nobody 600"
  contains "nobody: the tools talk to it" "$out" "random: 16"
  contains "nobody: systemd-creds --with-key=tpm2 round trip, no root" "$out" "creds: equal"
  contains "nobody: nothing left in its TPM" "$out" "left: []"
  contains "nobody: stopped" "$out" "stopped"
  nobody_pid=$(sed -n 's/^pid: //p' <<<"$out")
  if [[ -n $nobody_pid ]] && _tk_alive "$nobody_pid"; then bad "nobody's swtpm still running"; fi
else bad "nobody's run: $out"; fi
chmod 0700 "$root"

# --- stop ----------------------------------------------------------------------------------------
tk_start_swtpm
expect "start again (idempotent): the old one stopped" "$(_tk_alive "$swtpm_pid" && echo alive || echo gone)" gone
swtpm_pid=$(<"$TK_SERVICES_DIR/pids/swtpm-swtpm.pid")
tk_stop_swtpm
tk_stop_swtpm
if _tk_alive "$swtpm_pid"; then bad "swtpm still running after tk_stop_swtpm"; else ok "swtpm stopped"; fi
expect "exports dropped" "${TPM2TOOLS_TCTI:-}${TK_SWTPM_TCTI:-}" ""
tk_start_swtpm
swtpm_pid=$(<"$TK_SERVICES_DIR/pids/swtpm-swtpm.pid")
tk_services_stop_all
if _tk_alive "$swtpm_pid"; then bad "swtpm still running after tk_services_stop_all"; else ok "stop_all stops swtpm"; fi
expect "pid files gone" "$(ls "$TK_SERVICES_DIR/pids")" ""
stray=
for p in /proc/[0-9]*; do
  { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF "$root/" && _tk_alive "${p#/proc/}" && stray+="${p#/proc/} "
done
expect "no stray swtpm" "$stray" ""

finished=1
echo "took $((SECONDS - began)) s"
if ((fails)); then echo "$fails check(s) failed" >&2; exit 1; fi
echo "all swtpm checks passed"
