#!/usr/bin/env bash
# Self-check for Scripts/testserver/authserver.py: starts it on an ephemeral
# port, exercises rotation, reuse detection, grace period, faults and DPoP, stops
# it by PID.  Needs curl, python3 and python3-cryptography (DPoP proofs are made
# here with it, independently of the server's verifier).  Exit 0 = all checks passed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=${TK_PYTHON:-python3}
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

fails=0
ok()   { printf 'ok   %s\n' "$1"; }
bad()  { printf 'FAIL %s\n' "$1" >&2; fails=$((fails + 1)); }
expect() { # expect NAME ACTUAL WANTED
  if [[ $2 == "$3" ]]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi
}
# jget JSON EXPR  -- evaluate a Python expression over the parsed JSON `j`
jget() { "$py" -c 'import json,sys; j=json.loads(sys.argv[1]); v=eval(sys.argv[2]); print(json.dumps(v) if isinstance(v,(bool,dict,list)) or v is None else v)' "$1" "$2"; }

"$py" "$here/authserver.py" --port 0 --port-file "$tmp/port" --pid-file "$tmp/pid" &
pid=$!
for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.05; done
[[ -s $tmp/port ]] || { echo "authserver did not start" >&2; exit 1; }
port=$(<"$tmp/port")
expect "pid file" "$(<"$tmp/pid")" "$pid"
base="http://127.0.0.1:$port"

# status + body of a request: prints "STATUS<TAB>BODY"
req() { curl -sS -o "$tmp/body" -w '%{http_code}' "$@"; }
refresh() { # refresh RT [CLIENT]
  code=$(req -D "$tmp/headers" -X POST "$base/token" \
    --data-urlencode grant_type=refresh_token --data-urlencode "refresh_token=$1" \
    --data-urlencode "client_id=${2:-cli}")
  body=$(<"$tmp/body")
}
tjson() { curl -sS -X POST -H 'Content-Type: application/json' --data "$2" "$base$1"; }
status_of() { curl -sS "$base/_test/token-status?token=$1"; }

# --- discovery
d=$(curl -sS "$base/.well-known/openid-configuration")
expect "oidc discovery issuer" "$(jget "$d" 'j["issuer"]')" "$base"
expect "oidc discovery token_endpoint" "$(jget "$d" 'j["token_endpoint"]')" "$base/token"
expect "oidc discovery revocation_endpoint" "$(jget "$d" 'j["revocation_endpoint"]')" "$base/revoke"
tjson /_test/config '{"discovery_oidc": false, "discovery_issuer_override": "http://evil.test", "advertise_revocation": false}' >/dev/null
expect "oidc discovery disabled" "$(req "$base/.well-known/openid-configuration")" 404
req "$base/.well-known/oauth-authorization-server" >/dev/null
d=$(<"$tmp/body")
expect "rfc8414 issuer override" "$(jget "$d" 'j["issuer"]')" "http://evil.test"
expect "rfc8414 no revocation" "$(jget "$d" '"revocation_endpoint" in j')" false
expect "unknown path" "$(req "$base/nope")" 404
expect "unknown config key rejected" "$(req -X POST --data '{"bogus":1}' "$base/_test/config")" 400
tjson /_test/reset '{}' >/dev/null

# --- issue + refresh (rotation)
r=$(tjson /_test/issue '{"client_id":"cli","sub":"alice","scope":"openid offline_access"}')
rt1=$(jget "$r" 'j["refresh_token"]')
refresh "$rt1"
expect "refresh 200" "$code" 200
rt2=$(jget "$body" 'j["refresh_token"]')
at2=$(jget "$body" 'j["access_token"]')
expect "token_type" "$(jget "$body" 'j["token_type"]')" Bearer
expect "expires_in" "$(jget "$body" 'j["expires_in"]')" 3600
expect "access token prefix" "${at2:0:3}" at_
expect "rotated refresh token differs" "$([[ $rt2 != "$rt1" && ${rt2:0:3} == rt_ ]] && echo y)" y
idt=$(jget "$body" 'j["id_token"]')
claims=$("$py" - "$idt" <<'EOF'
import base64, hashlib, json, sys, urllib.request
h, p, s = sys.argv[1].split(".")
pad = lambda x: x + "=" * (-len(x) % 4)
b = lambda x: base64.urlsafe_b64decode(pad(x))
# RS256 against the served JWKS: s^e mod n must end with the SHA-256 of the signing input.
issuer = json.loads(b(p))["iss"]
key = json.load(urllib.request.urlopen(issuer + "/jwks"))["keys"][0]
n, e = int.from_bytes(b(key["n"]), "big"), int.from_bytes(b(key["e"]), "big")
em = pow(int.from_bytes(b(s), "big"), e, n).to_bytes(256, "big")
sig = em.startswith(b"\x00\x01\xff") and em.endswith(hashlib.sha256((h + "." + p).encode()).digest())
c = json.loads(b(p))
print(sig, json.loads(b(h))["alg"], c["sub"], c["aud"], c["email"], c["exp"] - c["iat"], "=" not in sys.argv[1])
EOF
)
expect "id_token" "$claims" "True RS256 alice cli alice@example.test 3600 True"
if grep -qi '^Cache-Control: no-store' "$tmp/headers"; then ok "cache-control"; else bad "cache-control missing"; fi
if grep -qi '^Date: .* GMT' "$tmp/headers"; then ok "date header"; else bad "date header missing"; fi
if grep -qi '^Content-Type: application/json' "$tmp/headers"; then ok "content-type"; else bad "content-type"; fi
s=$(status_of "$rt1")
expect "old token spent" "$(jget "$s" '[j["active"], j["kind"], j["spent"], j["family_revoked"]]')" '[false, "refresh", true, false]'
s=$(status_of "$at2")
expect "access token active" "$(jget "$s" '[j["active"], j["kind"]]')" '[true, "access"]'

# --- client mismatch, missing params, wrong grant
refresh "$rt2" other
expect "client mismatch" "$code/$(jget "$body" 'j["error"]')" 400/invalid_grant
code=$(req -X POST "$base/token" --data grant_type=refresh_token)
expect "missing params" "$code/$(jget "$(<"$tmp/body")" 'j["error"]')" 400/invalid_request
code=$(req -X POST "$base/token" --data grant_type=password --data client_id=cli)
expect "unsupported grant" "$code/$(jget "$(<"$tmp/body")" 'j["error"]')" 400/unsupported_grant_type

# --- replay of the spent token: reuse detected, family revoked
refresh "$rt1"
expect "replay -> invalid_grant" "$code/$(jget "$body" 'j["error"]')" 400/invalid_grant
expect "replay description" "$(jget "$body" 'j["error_description"]')" "refresh token reuse detected"
s=$(status_of "$rt2")
expect "newest token revoked with family" "$(jget "$s" '[j["active"], j["family_revoked"]]')" '[false, true]'
expect "access token revoked with family" "$(jget "$(status_of "$at2")" 'j["active"]')" false
refresh "$rt2"
expect "newest token rejected" "$code/$(jget "$body" 'j["error"]')" 400/invalid_grant
l=$(curl -sS "$base/_test/log")
expect "log outcomes" "$(jget "$l" '[e["outcome"] for e in j if e["path"] == "/token"]')" \
  '["issued", "invalid", "invalid_request", "unsupported_grant_type", "reuse_detected", "invalid"]'
st=$(curl -sS "$base/_test/stats")
expect "stats" "$(jget "$st" '[j["token_requests"], j["issued"], j["invalid_grant"], j["reuse_detected"]]')" '[6, 1, 3, 1]'

# --- grace period
tjson /_test/config '{"grace_seconds": 5}' >/dev/null
r=$(tjson /_test/issue '{"client_id":"cli","sub":"bob"}')
g1=$(jget "$r" 'j["refresh_token"]')
refresh "$g1"; g2=$(jget "$body" 'j["refresh_token"]')
refresh "$g1"
expect "grace replay succeeds" "$code" 200
g3=$(jget "$body" 'j["refresh_token"]')
expect "grace replay fresh token" "$([[ $g3 != "$g2" && $g3 != "$g1" ]] && echo y)" y
expect "family still valid" "$(jget "$(status_of "$g2")" '[j["active"], j["family_revoked"]]')" '[true, false]'
l=$(curl -sS "$base/_test/log")
expect "grace log outcome" "$(jget "$l" 'j[-1]["outcome"]')" grace_replay
tjson /_test/config '{"grace_seconds": 1}' >/dev/null
refresh "$g3"; g4=$(jget "$body" 'j["refresh_token"]')
sleep 1.2
refresh "$g3"
expect "replay after grace -> reuse" "$code/$(jget "$body" 'j["error_description"]')" "400/refresh token reuse detected"
expect "family revoked after grace" "$(jget "$(status_of "$g4")" 'j["family_revoked"]')" true

# --- rotate=false: same refresh token stays valid, none returned
tjson /_test/config '{"rotate": false, "grace_seconds": 0, "access_ttl": 30, "date_offset_seconds": 3600}' >/dev/null
r=$(tjson /_test/issue '{"client_id":"cli"}'); n1=$(jget "$r" 'j["refresh_token"]')
refresh "$n1"; refresh "$n1"
expect "no rotation" "$code/$(jget "$body" '"refresh_token" in j')/$(jget "$body" 'j["expires_in"]')" 200/false/30
srv_date=$(sed -n 's/^Date: //Ip' "$tmp/headers" | tr -d '\r')
skew=$("$py" -c 'import email.utils,sys,time; print(round((email.utils.parsedate_to_datetime(sys.argv[1]).timestamp()-time.time())/60))' "$srv_date")
expect "date offset applied (minutes)" "$skew" 60

# --- 503 fault (count 2), then normal handling; faults don't touch state
tjson /_test/reset '{}' >/dev/null
r=$(tjson /_test/issue '{"client_id":"cli"}'); f1=$(jget "$r" 'j["refresh_token"]')
tjson /_test/config '{"faults": [{"status": 503, "body": "<html>down</html>", "content_type": "text/html", "headers": {"Retry-After": "2"}, "count": 2}]}' >/dev/null
refresh "$f1"
expect "503 fault" "$code/$body" "503/<html>down</html>"
if grep -qi '^Retry-After: 2' "$tmp/headers"; then ok "fault header"; else bad "Retry-After missing"; fi
if grep -qi '^Content-Type: text/html' "$tmp/headers"; then ok "fault content-type"; else bad "fault content-type"; fi
refresh "$f1"
expect "503 fault count 2" "$code" 503
expect "token untouched by fault" "$(jget "$(status_of "$f1")" 'j["active"]')" true
refresh "$f1"
expect "after faults: normal" "$code" 200
f2=$(jget "$body" 'j["refresh_token"]')

# --- a fault whose error_description echoes the refresh token and the request it was sent
tjson /_test/config '{"faults": [{"status": 400, "body": {"error": "invalid_grant", "error_description": "token {refresh_token} in {request}"}}]}' >/dev/null
refresh "$f2"
expect "echo fault" "$code/$(jget "$body" 'j["error_description"].split(" in ")[0]')" "400/token $f2"
expect "echo fault request" "$(jget "$body" '"grant_type=refresh_token" in j["error_description"]')" true
expect "token untouched by echo fault" "$(jget "$(status_of "$f2")" 'j["active"]')" true

# --- hang fault: curl --max-time 1 gives up (exit 28), state untouched
tjson /_test/config '{"faults": [{"hang": 3}]}' >/dev/null
rc=0; curl -sS --max-time 1 -o /dev/null -X POST "$base/token" --data grant_type=refresh_token \
  --data-urlencode "refresh_token=$f2" --data client_id=cli 2>/dev/null || rc=$?
expect "hang -> curl timeout (28)" "$rc" 28
expect "token untouched by hang" "$(jget "$(status_of "$f2")" 'j["active"]')" true

# --- close fault: empty reply (curl 52)
tjson /_test/config '{"faults": [{"close": true}]}' >/dev/null
rc=0; curl -sS --max-time 5 -o /dev/null -X POST "$base/token" --data grant_type=refresh_token \
  --data-urlencode "refresh_token=$f2" --data client_id=cli 2>/dev/null || rc=$?
expect "close -> empty reply (52)" "$rc" 52

# --- delay fault + delay_seconds, then normal handling
tjson /_test/config '{"faults": [{"delay": 0.5}], "delay_seconds": 0.3}' >/dev/null
t0=$(date +%s%N); refresh "$f2"; t1=$(date +%s%N)
expect "delay fault then normal" "$code/$(( (t1 - t0) >= 800000000 ))" 200/1
tjson /_test/config '{"delay_seconds": 0}' >/dev/null

# --- revocation
f3=$(jget "$body" 'j["refresh_token"]'); a3=$(jget "$body" 'j["access_token"]')
expect "revoke unknown -> 200" "$(req -X POST "$base/revoke" --data token=nope --data client_id=cli)" 200
tjson /_test/config '{"revoke_fault_status": 503}' >/dev/null
expect "revoke fault" "$(req -X POST "$base/revoke" --data-urlencode "token=$f3" --data client_id=cli)" 503
expect "revoke fault does not revoke" "$(jget "$(status_of "$f3")" 'j["active"]')" true
tjson /_test/config '{"revoke_fault_status": null}' >/dev/null
code=$(req -X POST "$base/revoke" --data-urlencode "token=$f3" --data token_type_hint=refresh_token --data client_id=cli)
expect "revoke 200 empty" "$code/$(wc -c <"$tmp/body")" 200/0
expect "revoked family" "$(jget "$(status_of "$a3")" '[j["active"], j["family_revoked"]]')" '[false, true]'
refresh "$f3"
expect "revoked token refused" "$code/$(jget "$body" 'j["error"]')" 400/invalid_grant

# --- DPoP (RFC 9449): proofs made here, independently, with python3-cryptography
tjson /_test/reset '{}' >/dev/null
cat >"$tmp/dpop.py" <<'EOF'
# dpop.py key FILE                      -> make a P-256 key (PEM) unless FILE exists
# dpop.py jkt FILE                      -> RFC 7638 thumbprint of its public key
# dpop.py proof FILE METHOD URL [k=v..] -> a DPoP proof JWT.  k: nonce, ath (the access token),
#   jti, iat (seconds added to now), alg, typ, tamper=1, private=1 (jwk with "d")
import base64, hashlib, json, os, sys, time, uuid
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
enc = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
cmd, path = sys.argv[1], sys.argv[2]
if cmd == "key":
    if not os.path.exists(path):
        k = ec.generate_private_key(ec.SECP256R1())
        open(path, "wb").write(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    sys.exit(0)
key = serialization.load_pem_private_key(open(path, "rb").read(), None)
nums = key.public_key().public_numbers()
jwk = {"kty": "EC", "crv": "P-256", "x": enc(nums.x.to_bytes(32, "big")), "y": enc(nums.y.to_bytes(32, "big"))}
if cmd == "jkt":
    print(enc(hashlib.sha256(json.dumps(jwk, sort_keys=True, separators=(",", ":")).encode()).digest()))
    sys.exit(0)
method, url = sys.argv[3], sys.argv[4]
opt = dict(a.split("=", 1) for a in sys.argv[5:])
if opt.get("private"):
    jwk["d"] = enc(key.private_numbers().private_value.to_bytes(32, "big"))
header = {"typ": opt.get("typ", "dpop+jwt"), "alg": opt.get("alg", "ES256"), "jwk": jwk}
claims = {"jti": opt.get("jti", str(uuid.uuid4())), "htm": method, "htu": url,
          "iat": int(time.time()) + int(opt.get("iat", "0"))}
if "nonce" in opt:
    claims["nonce"] = opt["nonce"]
if "ath" in opt:
    claims["ath"] = enc(hashlib.sha256(opt["ath"].encode("ascii")).digest())
si = enc(json.dumps(header).encode()) + "." + enc(json.dumps(claims).encode())
if header["alg"] == "none":
    sig = b""
else:
    r, s = decode_dss_signature(key.sign(si.encode(), ec.ECDSA(hashes.SHA256())))
    sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    if opt.get("tamper"):
        sig = sig[:10] + bytes([sig[10] ^ 1]) + sig[11:]
print(si + "." + enc(sig))
EOF
dp() { "$py" "$tmp/dpop.py" "$@"; }
dp key "$tmp/k1.pem"; dp key "$tmp/k2.pem"
jkt1=$(dp jkt "$tmp/k1.pem"); jkt2=$(dp jkt "$tmp/k2.pem")
dpref() { # dpref RT PROOF [CLIENT]  -- refresh with a DPoP header (none when PROOF is empty)
  local h=(); [[ -n $2 ]] && h=(-H "DPoP: $2")
  code=$(req -D "$tmp/headers" "${h[@]}" -X POST "$base/token" \
    --data-urlencode grant_type=refresh_token --data-urlencode "refresh_token=$1" \
    --data-urlencode "client_id=${3:-cli}")
  body=$(<"$tmp/body")
}
err() { jget "$body" 'j.get("error")'; }
desc() { jget "$body" 'j.get("error_description")'; }
hdr() { sed -n "s/^$1: //Ip" "$tmp/headers" | tr -d '\r'; }
newrt() { jget "$(tjson /_test/issue '{"client_id":"cli"}')" 'j["refresh_token"]'; }

d=$(curl -sS "$base/.well-known/openid-configuration")
expect "dpop: oidc discovery advertises ES256" "$(jget "$d" 'j.get("dpop_signing_alg_values_supported")')" '["ES256"]'
d=$(curl -sS "$base/.well-known/oauth-authorization-server")
expect "dpop: rfc8414 discovery advertises ES256" "$(jget "$d" 'j.get("dpop_signing_alg_values_supported")')" '["ES256"]'
tjson /_test/config '{"dpop_algs": []}' >/dev/null
d=$(curl -sS "$base/.well-known/openid-configuration")
expect "dpop: dpop_algs [] -> not advertised" "$(jget "$d" '"dpop_signing_alg_values_supported" in j')" false
tjson /_test/config '{"dpop_algs": ["ES256"]}' >/dev/null

# a valid proof on a refresh: a DPoP-bound pair
d1=$(newrt)
dpref "$d1" "$(dp proof "$tmp/k1.pem" POST "$base/token")"
expect "dpop: refresh with proof -> DPoP" "$code/$(jget "$body" 'j["token_type"]')" 200/DPoP
d2=$(jget "$body" 'j["refresh_token"]'); da2=$(jget "$body" 'j["access_token"]')
expect "dpop: token-status jkt (refresh)" "$(jget "$(status_of "$d2")" 'j["jkt"]')" "$jkt1"
expect "dpop: token-status jkt (access)" "$(jget "$(status_of "$da2")" 'j["jkt"]')" "$jkt1"
l=$(curl -sS "$base/_test/log")
expect "dpop: log entry" "$(jget "$l" '[j[-1]["dpop"]["valid"], j[-1]["dpop"]["jkt"], j[-1]["dpop"]["htm"], j[-1]["token_type"]]')" \
  "[true, \"$jkt1\", \"POST\", \"DPoP\"]"

# invalid proofs: 400 invalid_dpop_proof, the refresh token untouched
for case in "signature tampered|tamper=1|signature invalid" "alg none|alg=none|alg \"none\" not supported" \
            "alg HS256|alg=HS256|alg \"HS256\" not supported" "jwk with d|private=1|jwk contains private key members: d" \
            "typ JWT|typ=JWT|typ is not dpop+jwt" "iat 120 s old|iat=-120|iat outside the accepted window" \
            "iat 120 s ahead|iat=120|iat outside the accepted window"; do
  IFS='|' read -r what opt why <<<"$case"
  dpref "$d2" "$(dp proof "$tmp/k1.pem" POST "$base/token" "$opt")"
  expect "dpop: $what -> invalid_dpop_proof" "$code/$(err)/$(desc)" "400/invalid_dpop_proof/$why"
done
dpref "$d2" "$(dp proof "$tmp/k1.pem" POST "$base/token" iat=-50)"
expect "dpop: iat 50 s old accepted (window 60)" "$code/$(jget "$body" 'j["token_type"]')" 200/DPoP
d2=$(jget "$body" 'j["refresh_token"]')
dpref "$d2" "$(dp proof "$tmp/k1.pem" GET "$base/token")"
expect "dpop: htm wrong -> invalid_dpop_proof" "$code/$(err)/$(desc)" "400/invalid_dpop_proof/htm mismatch"
dpref "$d2" "$(dp proof "$tmp/k1.pem" POST "$base/revoke")"
expect "dpop: htu other path -> invalid_dpop_proof" "$code/$(err)/$(desc)" "400/invalid_dpop_proof/htu mismatch"
dpref "$d2" "not.a-proof"
expect "dpop: garbage -> invalid_dpop_proof" "$code/$(err)" 400/invalid_dpop_proof
p=$(dp proof "$tmp/k1.pem" POST "$base/token")
code=$(req -H "DPoP: $p" -H "DPoP: $p" -X POST "$base/token" --data grant_type=refresh_token \
  --data-urlencode "refresh_token=$d2" --data client_id=cli); body=$(<"$tmp/body")
expect "dpop: two DPoP headers -> invalid_dpop_proof" "$code/$(err)" 400/invalid_dpop_proof
expect "dpop: invalid proofs spent nothing" "$(jget "$(status_of "$d2")" 'j["active"]')" true
l=$(curl -sS "$base/_test/log")
expect "dpop: invalid proof logged" "$(jget "$l" '[j[-1]["dpop"]["valid"], j[-1]["dpop"]["error"], j[-1]["outcome"], j[-1]["token_type"]]')" \
  '[false, "more than one DPoP header", "invalid_dpop_proof", null]'

# htu: upper-case scheme, query and fragment accepted; normalisation (host case, default port)
dpref "$d2" "$(dp proof "$tmp/k1.pem" POST "HTTP://127.0.0.1:$port/token?x=1#frag")"
expect "dpop: htu with query/fragment/upper-case scheme accepted" "$code/$(jget "$body" 'j["token_type"]')" 200/DPoP
d3=$(jget "$body" 'j["refresh_token"]')
expect "dpop: htu normalisation" "$(cd "$here" && "$py" -c '
import authserver as a
print(a.htu_matches("HTTPS://Auth.Example.TEST:443/token?q=1#f", "https://auth.example.test/token"),
      a.htu_matches("http://EXAMPLE.test:80/token", "http://example.test/token"),
      a.htu_matches("http://example.test/Token", "http://example.test/token"),
      a.htu_matches("http://example.test:8080/token", "http://example.test/token"),
      a.htu_matches("https://example.test/token", "http://example.test/token"))')" "True True False False False"

# jti reuse
p=$(dp proof "$tmp/k1.pem" POST "$base/token" jti=once-only)
dpref "$d3" "$p"
expect "dpop: first use of a jti" "$code" 200
d4=$(jget "$body" 'j["refresh_token"]')
dpref "$d4" "$p"
expect "dpop: jti reuse -> invalid_dpop_proof" "$code/$(err)/$(desc)" "400/invalid_dpop_proof/jti reused"

# a bound family: no proof, or another key -> invalid_grant, nothing spent
dpref "$d4" ""
expect "dpop: bound refresh without proof" "$code/$(err)/$(desc)" "400/invalid_grant/DPoP proof required"
dpref "$d4" "$(dp proof "$tmp/k2.pem" POST "$base/token")"
expect "dpop: bound refresh with another key" "$code/$(err)/$(desc)" "400/invalid_grant/DPoP key mismatch"
expect "dpop: refused refreshes spent nothing" \
  "$(jget "$(status_of "$d4")" '[j["active"], j["spent"], j["family_revoked"], j["jkt"]]')" "[true, false, false, \"$jkt1\"]"
dpref "$d4" "$(dp proof "$tmp/k1.pem" POST "$base/token")"
expect "dpop: bound refresh with its key" "$code/$(jget "$body" 'j["token_type"]')" 200/DPoP
d5=$(jget "$body" 'j["refresh_token"]'); da5=$(jget "$body" 'j["access_token"]')

# nonce dance (and rotation after 1 use)
tjson /_test/config '{"dpop_nonce_required": true, "dpop_nonce_rotate_after": 1}' >/dev/null
dpref "$d5" "$(dp proof "$tmp/k1.pem" POST "$base/token")"
n1=$(hdr DPoP-Nonce)
expect "dpop: no nonce -> use_dpop_nonce + DPoP-Nonce" "$code/$(err)/$([[ -n $n1 ]] && echo y)" 400/use_dpop_nonce/y
dpref "$d5" "$(dp proof "$tmp/k1.pem" POST "$base/token" nonce=stale)"
expect "dpop: stale nonce -> use_dpop_nonce" "$code/$(err)/$(hdr DPoP-Nonce)" "400/use_dpop_nonce/$n1"
dpref "$d5" "$(dp proof "$tmp/k1.pem" POST "$base/token" "nonce=$n1")"
n2=$(hdr DPoP-Nonce)
expect "dpop: with the nonce -> 200, nonce rotated" \
  "$code/$(jget "$body" 'j["token_type"]')/$([[ -n $n2 && $n2 != "$n1" ]] && echo y)" 200/DPoP/y
d6=$(jget "$body" 'j["refresh_token"]')
dpref "$d6" "$(dp proof "$tmp/k1.pem" POST "$base/token" "nonce=$n1")"
expect "dpop: rotated-out nonce -> use_dpop_nonce" "$code/$(err)/$(hdr DPoP-Nonce)" "400/use_dpop_nonce/$n2"
dpref "$(newrt)" ""
expect "dpop: nonce header on a proof-less 200" "$code/$(jget "$body" 'j["token_type"]')/$(hdr DPoP-Nonce)" "200/Bearer/$n2"
tjson /_test/config '{"dpop_nonce_required": false, "dpop_nonce_rotate_after": 0}' >/dev/null

# downgrade: a server that ignores DPoP
tjson /_test/config '{"dpop_downgrade": true}' >/dev/null
dpref "$(newrt)" "$(dp proof "$tmp/k1.pem" POST "$base/token")"
expect "dpop: downgrade -> Bearer" "$code/$(jget "$body" 'j["token_type"]')" 200/Bearer
expect "dpop: downgrade binds nothing" "$(jget "$(status_of "$(jget "$body" 'j["refresh_token"]')")" 'j["jkt"]')" null
tjson /_test/config '{"dpop_downgrade": false}' >/dev/null

# JWT access tokens: cnf.jkt (and another one with dpop_wrong_cnf)
cnf() { jget "$("$py" -c 'import base64,sys; p=sys.argv[1].split(".")[1]; print(base64.urlsafe_b64decode(p+"="*(-len(p)%4)).decode())' "$1")" 'j.get("cnf")'; }
tjson /_test/config '{"jwt_access_tokens": true}' >/dev/null
dpref "$(newrt)" "$(dp proof "$tmp/k2.pem" POST "$base/token")"
expect "dpop: JWT access token cnf.jkt" "$(cnf "$(jget "$body" 'j["access_token"]')")" "{\"jkt\": \"$jkt2\"}"
tjson /_test/config '{"dpop_wrong_cnf": true}' >/dev/null
dpref "$(newrt)" "$(dp proof "$tmp/k2.pem" POST "$base/token")"
c=$(cnf "$(jget "$body" 'j["access_token"]')")
expect "dpop: dpop_wrong_cnf -> another jkt, still DPoP" \
  "$(jget "$body" 'j["token_type"]')/$([[ $c == '{"jkt": "'* && $c != *"$jkt2"* ]] && echo y)" DPoP/y
dpref "$(newrt)" ""
expect "dpop: unbound JWT access token has no cnf" "$(cnf "$(jget "$body" 'j["access_token"]')")" null
tjson /_test/config '{"jwt_access_tokens": false, "dpop_wrong_cnf": false}' >/dev/null

# authorization code bound by /authorize's dpop_jkt (RFC 9449 §10)
verifier=pkce-verifier-0123456789-0123456789-0123456789
challenge=$("$py" -c 'import base64,hashlib,sys; print(base64.urlsafe_b64encode(hashlib.sha256(sys.argv[1].encode()).digest()).rstrip(b"=").decode())' "$verifier")
code_for() { # code_for DPOP_JKT -> the code in /authorize's redirect
  local loc
  loc=$(curl -sS -o /dev/null -w '%{redirect_url}' -G "$base/authorize" --data response_type=code \
    --data client_id=cli --data-urlencode "redirect_uri=http://127.0.0.1:1/cb" --data state=s \
    --data code_challenge_method=S256 --data "code_challenge=$challenge" \
    --data-urlencode "dpop_jkt=$1")
  "$py" -c 'import sys, urllib.parse as u; print(u.parse_qs(u.urlsplit(sys.argv[1]).query)["code"][0])' "$loc"
}
exchange() { # exchange CODE PROOF
  code=$(req -H "DPoP: $2" -X POST "$base/token" --data grant_type=authorization_code --data-urlencode "code=$1" \
    --data client_id=cli --data-urlencode "redirect_uri=http://127.0.0.1:1/cb" \
    --data "code_verifier=$verifier"); body=$(<"$tmp/body")
}
exchange "$(code_for "$jkt1")" "$(dp proof "$tmp/k2.pem" POST "$base/token")"
expect "dpop: code with dpop_jkt, other key" "$code/$(err)/$(desc)" "400/invalid_grant/dpop_jkt mismatch"
exchange "$(code_for "$jkt1")" "$(dp proof "$tmp/k1.pem" POST "$base/token")"
expect "dpop: code with dpop_jkt, its key" "$code/$(jget "$body" 'j["token_type"]')" 200/DPoP
expect "dpop: code grant binds" "$(jget "$(status_of "$(jget "$body" 'j["refresh_token"]')")" 'j["jkt"]')" "$jkt1"
l=$(curl -sS "$base/_test/log")
expect "dpop: /authorize logs dpop_jkt" "$(jget "$l" '[e["dpop_jkt"] for e in j if e["path"] == "/authorize"][-1]')" "$jkt1"

# the protected resource
res() { # res METHOD SCHEME TOKEN [PROOF]
  local h=(-H "Authorization: $2 $3"); [[ -n ${4:-} ]] && h+=(-H "DPoP: $4")
  code=$(req -D "$tmp/headers" -X "$1" "${h[@]}" "$base/resource"); body=$(<"$tmp/body")
}
res GET DPoP "$da5" "$(dp proof "$tmp/k1.pem" GET "$base/resource" "ath=$da5")"
expect "dpop: /resource DPoP + proof" "$code/$(jget "$body" '[j["ok"], j["sub"], j["token_type"]]')" '200/[true, "alice", "DPoP"]'
res POST DPoP "$da5" "$(dp proof "$tmp/k1.pem" POST "$base/resource" "ath=$da5")"
expect "dpop: /resource POST" "$code" 200
res GET DPoP "$da5" "$(dp proof "$tmp/k1.pem" GET "$base/resource" "ath=other-token")"
expect "dpop: /resource wrong ath" "$code/$(err)/$(hdr WWW-Authenticate)" \
  '401/invalid_dpop_proof/DPoP error="invalid_dpop_proof", error_description="ath mismatch"'
res GET DPoP "$da5" "$(dp proof "$tmp/k1.pem" GET "$base/resource")"
expect "dpop: /resource proof without ath" "$code/$(desc)" "401/ath missing"
res GET DPoP "$da5" "$(dp proof "$tmp/k2.pem" GET "$base/resource" "ath=$da5")"
expect "dpop: /resource proof with another key" "$code/$(err)" 401/invalid_dpop_proof
res GET DPoP "$da5"
expect "dpop: /resource DPoP without proof" "$code/$(err)" 401/invalid_dpop_proof
res GET Bearer "$da5"
expect "dpop: /resource Bearer for a bound token" "$code/$(hdr WWW-Authenticate)" \
  '401/DPoP error="invalid_token", error_description="DPoP-bound token presented as Bearer"'
dpref "$(newrt)" ""; ua=$(jget "$body" 'j["access_token"]')
res GET Bearer "$ua"
expect "dpop: /resource Bearer for an unbound token" "$code/$(jget "$body" 'j["token_type"]')" 200/Bearer
res GET Bearer "at_unknown"
expect "dpop: /resource unknown token" "$code/$(err)" 401/invalid_token
tjson /_test/config '{"dpop_resource_nonce_required": true}' >/dev/null
res GET DPoP "$da5" "$(dp proof "$tmp/k1.pem" GET "$base/resource" "ath=$da5")"
rn=$(hdr DPoP-Nonce)
expect "dpop: /resource nonce required" "$code/$(hdr WWW-Authenticate | cut -d, -f1)/$([[ -n $rn ]] && echo y)" \
  '401/DPoP error="use_dpop_nonce"/y'
res GET DPoP "$da5" "$(dp proof "$tmp/k1.pem" GET "$base/resource" "ath=$da5" "nonce=$rn")"
expect "dpop: /resource with the nonce" "$code/$(hdr DPoP-Nonce)" "200/$rn"
tjson /_test/config '{"dpop_resource_nonce_required": false}' >/dev/null
l=$(curl -sS "$base/_test/log")
expect "dpop: /resource log outcomes" "$(jget "$l" '[e["outcome"] for e in j if e["path"] == "/resource"]')" \
  '["ok", "ok", "invalid_dpop_proof", "invalid_dpop_proof", "invalid_dpop_proof", "invalid_dpop_proof", "bearer_for_bound_token", "ok", "invalid_token", "use_dpop_nonce", "ok"]'

# revocation of a bound family's token needs a proof with its key
rv() { # rv TOKEN [PROOF]
  local h=(); [[ -n ${2:-} ]] && h=(-H "DPoP: $2")
  code=$(req "${h[@]}" -X POST "$base/revoke" --data-urlencode "token=$1" --data client_id=cli); body=$(<"$tmp/body")
}
rv "$d6"
expect "dpop: revoke bound without proof" "$code/$(err)/$(desc)" "400/invalid_grant/DPoP proof required"
rv "$d6" "$(dp proof "$tmp/k2.pem" POST "$base/revoke")"
expect "dpop: revoke bound with another key" "$code/$(err)/$(desc)" "400/invalid_grant/DPoP key mismatch"
rv "$d6" "$(dp proof "$tmp/k1.pem" POST "$base/token")"
expect "dpop: revoke with an invalid proof" "$code/$(err)" 400/invalid_dpop_proof
expect "dpop: refused revocations revoked nothing" "$(jget "$(status_of "$d6")" 'j["active"]')" true
rv "$d6" "$(dp proof "$tmp/k1.pem" POST "$base/revoke")"
expect "dpop: revoke with its key" "$code/$(wc -c <"$tmp/body")/$(jget "$(status_of "$d6")" '[j["active"], j["family_revoked"]]')" \
  '200/0/[false, true]'
res GET DPoP "$da5" "$(dp proof "$tmp/k1.pem" GET "$base/resource" "ath=$da5")"
expect "dpop: /resource after revocation" "$code/$(err)" 401/invalid_token
l=$(curl -sS "$base/_test/log")
expect "dpop: /revoke log" "$(jget "$l" '[[e["outcome"], (e["dpop"] or {}).get("valid")] for e in j if e["path"] == "/revoke"]')" \
  '[["dpop_proof_required", null], ["dpop_key_mismatch", true], ["invalid_dpop_proof", false], ["revoked", true]]'
st=$(curl -sS "$base/_test/stats")
expect "dpop: stats counters" "$(jget "$st" '[j["dpop_proofs_valid"] > 0, j["dpop_proofs_invalid"] > 0]')" '[true, true]'
tjson /_test/reset '{}' >/dev/null
expect "dpop: reset clears the counters" \
  "$(jget "$(curl -sS "$base/_test/stats")" '[j["dpop_proofs_valid"], j["dpop_proofs_invalid"]]')" '[0, 0]'

# --- personas: GitHub as it behaves on the wire (docs.github.com, authorizing OAuth apps)
tjson /_test/reset '{}' >/dev/null
expect "persona: unknown refused" "$(req -X POST --data '{"persona":"nope"}' "$base/_test/config")" 400
cfg=$(tjson /_test/config '{"persona": "github-oauth-app", "device_interval": 30}')
expect "persona: implied config, then the request's keys" "$(jget "$cfg" '[j["omit_expires_in"], j["omit_refresh_token"], j["device_expires_in"], j["device_interval"]]')" '[true, true, 900, 30]'
expect "github: no OIDC discovery" "$(req "$base/.well-known/openid-configuration")" 404
expect "github: no RFC 8414 discovery" "$(req "$base/.well-known/oauth-authorization-server")" 404
code=$(req -X POST "$base/login/device/code" --data client_id=Ov23li --data-urlencode "scope=repo gist")
body=$(<"$tmp/body")
expect "github device: 200" "$code" 200
expect "github device: form-encoded without Accept" "$("$py" -c 'import sys,urllib.parse as u; d=dict(u.parse_qsl(sys.argv[1])); print(sorted(d), d["verification_uri"].endswith("/login/device"), d["expires_in"])' "$body")" \
  "['device_code', 'expires_in', 'interval', 'user_code', 'verification_uri'] True 900"
dc=$("$py" -c 'import sys,urllib.parse as u; print(dict(u.parse_qsl(sys.argv[1]))["device_code"])' "$body")
uc=$("$py" -c 'import sys,urllib.parse as u; print(dict(u.parse_qsl(sys.argv[1]))["user_code"])' "$body")
poll() { req -X POST "$base/login/oauth/access_token" -H "Accept: ${1:-application/json}" --data client_id=Ov23li \
  --data-urlencode "grant_type=urn:ietf:params:oauth:grant-type:device_code" --data-urlencode "device_code=$dc"; }
code=$(poll); body=$(<"$tmp/body")
expect "github poll too early: 200 slow_down with the raised interval" "$code $(jget "$body" '[j["error"], j["interval"]]')" '200 ["slow_down", 35]'
code=$(poll); body=$(<"$tmp/body")
expect "github poll within the raised interval: slow_down again" "$(jget "$body" '[j["error"], j["interval"]]')" '["slow_down", 40]'
tjson /_test/reset '{}' >/dev/null
tjson /_test/config '{"persona": "github-oauth-app", "device_interval": 0}' >/dev/null
curl -sS -o "$tmp/body" -X POST "$base/login/device/code" -H 'Accept: application/json' --data client_id=Ov23li --data-urlencode "scope=repo gist"
body=$(<"$tmp/body")
dc=$(jget "$body" 'j["device_code"]'); uc=$(jget "$body" 'j["user_code"]')
expect "github device: JSON with Accept, no verification_uri_complete" "$(jget "$body" '"verification_uri_complete" in j')" false
code=$(poll); body=$(<"$tmp/body")
expect "github poll pending: 200 authorization_pending" "$code $(jget "$body" 'j["error"]')" "200 authorization_pending"
tjson /_test/device/approve "{\"user_code\": \"$uc\"}" >/dev/null
code=$(poll "application/x-www-form-urlencoded"); body=$(<"$tmp/body")
expect "github oauth app token: form, comma scope, bearer, no expires_in/refresh_token" \
  "$code $("$py" -c 'import sys,urllib.parse as u; d=dict(u.parse_qsl(sys.argv[1])); print(sorted(d), d["scope"], d["token_type"], d["access_token"][:4])' "$body")" \
  "200 ['access_token', 'scope', 'token_type'] repo,gist bearer gho_"
tjson /_test/reset '{}' >/dev/null
tjson /_test/config '{"persona": "github-app", "client_secrets": {"Iv1.sec": "s3cret"}}' >/dev/null
r=$(tjson /_test/issue '{"client_id":"Iv1.app","scope":""}'); g1=$(jget "$r" 'j["refresh_token"]')
ghr() { req -X POST "$base/login/oauth/access_token" -H 'Accept: application/json' --data "client_id=${2:-Iv1.app}" \
  --data grant_type=refresh_token --data-urlencode "refresh_token=$1"; }
code=$(ghr "$g1"); body=$(<"$tmp/body")
expect "github app refresh: 8 h, ~6 months, ghr_, scope \"\"" \
  "$code $(jget "$body" '[j["expires_in"], j["refresh_token_expires_in"], j["refresh_token"][:4], j["scope"], j["token_type"]]')" \
  '200 [28800, 15897600, "ghr_", "", "bearer"]'
g2=$(jget "$body" 'j["refresh_token"]'); a2=$(jget "$body" 'j["access_token"]')
code=$(ghr "$g1"); body=$(<"$tmp/body")
expect "github app: a spent refresh token is 200 bad_refresh_token" "$code $(jget "$body" 'j["error"]')" "200 bad_refresh_token"
code=$(ghr "$g2"); body=$(<"$tmp/body")
expect "github app: no family revocation, the newest still works" "$code" 200
expect "github app: the refresh killed the access token it came with" "$(jget "$(status_of "$a2")" 'j["active"]')" false
code=$(ghr "x" "Iv1.sec"); body=$(<"$tmp/body")
expect "github: a bad client secret is 200 incorrect_client_credentials" "$code $(jget "$body" 'j["error"]')" "200 incorrect_client_credentials"
tjson /_test/config '{"device_flow_disabled": true, "numbers_as_strings": true}' >/dev/null
code=$(req -X POST "$base/login/device/code" -H 'Accept: application/json' --data client_id=Iv1.app); body=$(<"$tmp/body")
expect "github: device_flow_disabled with 200" "$code $(jget "$body" 'j["error"]')" "200 device_flow_disabled"
tjson /_test/config '{"device_flow_disabled": "unauthorized_client"}' >/dev/null
code=$(req -X POST "$base/login/device/code" -H 'Accept: application/json' --data client_id=Iv1.app); body=$(<"$tmp/body")
expect "github: device_flow_disabled unauthorized_client (GHES) with 200" "$code $(jget "$body" 'j["error"]')" "200 unauthorized_client"
tjson /_test/config '{"device_flow_disabled": false}' >/dev/null
code=$(req -X POST "$base/login/device/code" -H 'Accept: application/json' --data client_id=Iv1.app); body=$(<"$tmp/body")
expect "numbers_as_strings" "$(jget "$body" '[j["expires_in"], j["interval"]]')" '["900", "5"]'
tjson /_test/reset '{}' >/dev/null
expect "reset: no persona" "$(jget "$(tjson /_test/config '{}')" 'j["persona"]')" null

# --- personas: Okta, Auth0, GitLab (their public documentation)
post() { req -X POST "$base$1" "${@:2}"; }
poll() { post "$1" --data grant_type=urn:ietf:params:oauth:grant-type:device_code --data "device_code=$2" --data client_id=cli; }
rt_of() { jget "$(<"$tmp/body")" 'j.get("refresh_token")'; }
tjson /_test/config '{"persona": "okta"}' >/dev/null
d=$(curl -sS "$base/.well-known/openid-configuration")
expect "okta: discovery names the org server's paths" \
  "$(jget "$d" '[j["token_endpoint"][-16:], j["device_authorization_endpoint"][-27:], j["revocation_endpoint"][-17:]]')" \
  '["/oauth2/v1/token", "/oauth2/v1/device/authorize", "/oauth2/v1/revoke"]'
r=$(tjson /_test/issue '{"client_id":"cli"}'); o1=$(jget "$r" 'j["refresh_token"]')
code=$(post /oauth2/v1/token --data grant_type=refresh_token --data-urlencode "refresh_token=$o1" --data client_id=cli); o2=$(rt_of)
expect "okta: refresh at /oauth2/v1/token rotates" "$code $([[ $o2 != "$o1" ]] && echo new)" "200 new"
code=$(post /oauth2/v1/token --data grant_type=refresh_token --data-urlencode "refresh_token=$o1" --data client_id=cli)
expect "okta: the spent token works within the grace window (30 s)" "$code" 200
tjson /_test/config '{"grace_seconds": 0}' >/dev/null
code=$(post /oauth2/v1/token --data grant_type=refresh_token --data-urlencode "refresh_token=$o1" --data client_id=cli)
expect "okta: reuse after the window: Okta's words" "$code $(jget "$(<"$tmp/body")" 'j["error_description"]')" \
  "400 The refresh token is invalid or expired."
expect "okta: ... and the family is revoked" "$(jget "$(status_of "$o2")" 'j["family_revoked"]')" true
tjson /_test/config '{"rotate": false}' >/dev/null
r=$(tjson /_test/issue '{"client_id":"cli"}'); o1=$(jget "$r" 'j["refresh_token"]')
post /oauth2/v1/token --data grant_type=refresh_token --data-urlencode "refresh_token=$o1" --data client_id=cli >/dev/null
expect "okta persistent refresh token: the same one comes back" "$(rt_of)" "$o1"
code=$(post /oauth2/v1/device/authorize --data client_id=cli --data scope=openid); body=$(<"$tmp/body")
expect "okta: device endpoint, verification at /activate" "$code $(jget "$body" 'j["verification_uri"][-9:]')" "200 /activate"
dc=$(jget "$body" 'j["device_code"]'); uc=$(jget "$body" 'j["user_code"]')
tjson /_test/device/approve "{\"user_code\":\"$uc\"}" >/dev/null
poll /oauth2/v1/token "$dc" >/dev/null
expect "okta: no offline_access, no refresh token" "$(rt_of)" null
tjson /_test/reset '{}' >/dev/null

tjson /_test/config '{"persona": "auth0", "device_script": ["authorization_pending", "slow_down"]}' >/dev/null
post /oauth/device/code --data client_id=cli --data scope=openid --data audience=https://api.example >/dev/null
dc=$(jget "$(<"$tmp/body")" 'j["device_code"]'); uc=$(jget "$(<"$tmp/body")" 'j["user_code"]')
code=$(poll /oauth/token "$dc"); e1="$code $(jget "$(<"$tmp/body")" 'j["error"]')"
code=$(poll /oauth/token "$dc"); e2="$code $(jget "$(<"$tmp/body")" 'j["error"]')"
expect "auth0: pending 403, slow_down 429" "$e1, $e2" "403 authorization_pending, 429 slow_down"
tjson /_test/device/approve "{\"user_code\":\"$uc\"}" >/dev/null
code=$(poll /oauth/token "$dc"); at=$(jget "$(<"$tmp/body")" 'j["access_token"]')
expect "auth0: with audience a JWT for the API" "$code $(jget "$(<"$tmp/body")" 'j["access_token"].count(".")') $(rt_of)" "200 2 null"
tjson /_test/config '{"device_script": ["expired_token"]}' >/dev/null
post /oauth/device/code --data client_id=cli --data "scope=openid offline_access" >/dev/null
dc=$(jget "$(<"$tmp/body")" 'j["device_code"]'); uc=$(jget "$(<"$tmp/body")" 'j["user_code"]')
code=$(poll /oauth/token "$dc"); e1="$code $(jget "$(<"$tmp/body")" 'j["error"]')"
tjson /_test/device/approve "{\"user_code\":\"$uc\"}" >/dev/null
code=$(poll /oauth/token "$dc"); e2="$code $(jget "$(<"$tmp/body")" 'j["error"]')"
code=$(poll /oauth/token "$dc"); e3="$code $(jget "$(<"$tmp/body")" 'j["error_description"]')"
expect "auth0: expired_token once, then invalid_grant" "$e1, $e2, $e3" \
  "403 expired_token, 403 invalid_grant, 403 Invalid or expired device code."
tjson /_test/config '{"grace_seconds": 3600}' >/dev/null
r=$(tjson /_test/issue '{"client_id":"cli"}'); a1=$(jget "$r" 'j["refresh_token"]')
a0r() { post /oauth/token --data grant_type=refresh_token --data-urlencode "refresh_token=$1" --data client_id=cli; }
code=$(a0r "$a1"); a2=$(rt_of); at=$(jget "$(<"$tmp/body")" 'j["access_token"]')
expect "auth0: without audience an opaque access token" "$code $(jget "$(<"$tmp/body")" 'j["access_token"].count(".")')" "200 0"
a0r "$a2" >/dev/null; a3=$(rt_of)
code=$(a0r "$a2")
expect "auth0: the previous token may be used again within the leeway" "$code" 200
code=$(a0r "$a1")
expect "auth0: the second-to-last revokes the family" "$code $(jget "$(<"$tmp/body")" 'j["error"]') $(jget "$(status_of "$a3")" 'j["family_revoked"]')" \
  "403 invalid_grant true"
tjson /_test/reset '{}' >/dev/null

tjson /_test/config '{"persona": "gitlab", "created_at_offset_seconds": -600}' >/dev/null
r=$(tjson /_test/issue '{"client_id":"cli"}'); l1=$(jget "$r" 'j["refresh_token"]')
code=$(post /oauth/token --data grant_type=refresh_token --data-urlencode "refresh_token=$l1" --data client_id=cli); body=$(<"$tmp/body")
now=$(date +%s)
expect "gitlab: expires_in 7200, created_at 600 s back, Bearer" \
  "$code $(jget "$body" '[j["expires_in"], j["token_type"]]') $(( now - $(jget "$body" 'j["created_at"]') >= 599 ))" '200 [7200, "Bearer"] 1'
l2=$(rt_of)
code=$(post /oauth/token --data grant_type=refresh_token --data-urlencode "refresh_token=$l1" --data client_id=cli)
expect "gitlab: a spent token is invalid_grant with GitLab's words" "$code $(jget "$(<"$tmp/body")" 'j["error_description"][:35]')" \
  "400 The provided authorization grant is"
expect "gitlab: ... and the newer pair lives on" "$(jget "$(status_of "$l2")" 'j["active"]')" true
code=$(post /oauth/authorize_device --data client_id=cli --data scope=openid); body=$(<"$tmp/body")
expect "gitlab: device answer" "$code $(jget "$body" '[j["expires_in"], j["interval"], j["verification_uri_complete"].split("?")[0][-13:]]')" \
  '200 [300, 5, "/oauth/device"]'
dc=$(jget "$body" 'j["device_code"]'); tjson /_test/device/approve "{\"user_code\":\"$(jget "$body" 'j["user_code"]')\"}" >/dev/null
code=$(poll /oauth/token "$dc")
expect "gitlab: a device success without a refresh token" "$code $(rt_of)" "200 null"
tjson /_test/config '{"device_endpoint_missing": true, "device_script": [{"status": 200, "body": {"token_type": "bearer"}}]}' >/dev/null
code=$(post /oauth/authorize_device --data client_id=cli)
expect "gitlab old instance: 404 HTML at the device endpoint" "$code $(grep -c '<html>' "$tmp/body")" "404 1"
tjson /_test/config '{"device_endpoint_missing": false}' >/dev/null
post /oauth/authorize_device --data client_id=cli >/dev/null; dc=$(jget "$(<"$tmp/body")" 'j["device_code"]')
code=$(poll /oauth/token "$dc")
expect "device_script object: answered exactly so" "$code $(<"$tmp/body")" '200 {"token_type": "bearer"}'
# --- personas: Entra and Keycloak (their public documentation)
tjson /_test/config '{"persona": "entra", "device_interval": 0}' >/dev/null
d=$(curl -sS "$base/.well-known/openid-configuration")
expect "entra: no revocation_endpoint, an end_session_endpoint" "$(jget "$d" '["revocation_endpoint" in j, "end_session_endpoint" in j]')" '[false, true]'
expect "entra: no tenant paths without entra_tenant" "$(req "$base/common/v2.0/.well-known/openid-configuration")" 404
tjson /_test/config '{"entra_tenant": "common"}' >/dev/null
d=$(curl -sS "$base/common/v2.0/.well-known/openid-configuration")
expect "entra common: the {tenantid} issuer template, endpoints under /common" \
  "$(jget "$d" '[j["issuer"], j["token_endpoint"], j["device_authorization_endpoint"], "revocation_endpoint" in j]')" \
  "[\"$base/{tenantid}/v2.0\", \"$base/common/oauth2/v2.0/token\", \"$base/common/oauth2/v2.0/devicecode\", false]"
expect "entra: another tenant's paths are 404" "$(req "$base/organizations/v2.0/.well-known/openid-configuration")" 404
body=$(curl -sS -X POST "$base/common/oauth2/v2.0/devicecode" --data client_id=cli --data-urlencode "scope=openid offline_access")
dc=$(jget "$body" 'j["device_code"]'); uc=$(jget "$body" 'j["user_code"]')
expect "entra device: devicelogin, a message, no verification_uri_complete" \
  "$(jget "$body" '[j["verification_uri"], "verification_uri_complete" in j, j["message"].startswith("To sign in, use a web browser to open the page " + j["verification_uri"])]')" \
  "[\"$base/devicelogin\", false, true]"
epoll() { req -X POST "$base/common/oauth2/v2.0/token" --data client_id=cli \
  --data-urlencode "grant_type=urn:ietf:params:oauth:grant-type:device_code" --data-urlencode "device_code=$dc"; }
code=$(epoll); body=$(<"$tmp/body")
expect "entra poll pending: 400, AADSTS70016 in the description and error_codes, lines by \\r\\n" \
  "$code $(jget "$body" '[j["error"], j["error_codes"], j["error_description"].split("\r\n")[0], j["error_description"].split("\r\n")[1].startswith("Trace ID: "), sorted(k for k in j if k not in ("error", "error_description"))]')" \
  '400 ["authorization_pending", [70016], "AADSTS70016: OAuth 2.0 device flow error. Authorization is pending. Continue polling.", true, ["correlation_id", "error_codes", "error_uri", "timestamp", "trace_id"]]'
tjson /_test/device/deny "{\"user_code\": \"$uc\"}" >/dev/null
code=$(epoll); body=$(<"$tmp/body")
expect "entra: a denied code polls as authorization_declined" "$code $(jget "$body" 'j["error"]')" "400 authorization_declined"
body=$(curl -sS -X POST "$base/common/oauth2/v2.0/devicecode" --data client_id=cli)
dc=$(jget "$body" 'j["device_code"]'); uc=$(jget "$body" 'j["user_code"]')
tjson /_test/device/approve "{\"user_code\": \"$uc\"}" >/dev/null
code=$(epoll); body=$(<"$tmp/body")
claims=$("$py" -c 'import json,sys,base64; p=json.loads(sys.argv[1])["id_token"].split(".")[1]; print(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)).decode())' "$body")
expect "entra common: ID token iss per the user's tenant, tid" "$(jget "$claims" '[j["iss"], j["tid"], j["ver"]]')" \
  "[\"$base/8eaef023-2b34-4da1-9baa-8bc8c9d6a490/v2.0\", \"8eaef023-2b34-4da1-9baa-8bc8c9d6a490\", \"2.0\"]"
e1=$(jget "$body" 'j["refresh_token"]')
code=$(req -X POST "$base/common/oauth2/v2.0/token" --data client_id=cli --data grant_type=refresh_token --data-urlencode "refresh_token=$e1")
e2=$(jget "$(<"$tmp/body")" 'j["refresh_token"]')
code2=$(req -X POST "$base/common/oauth2/v2.0/token" --data client_id=cli --data grant_type=refresh_token --data-urlencode "refresh_token=$e1")
expect "entra: rotation without revocation (the old refresh token still works)" "$code $code2 $([[ $e1 != "$e2" ]] && echo rotated)" "200 200 rotated"
tjson /_test/config '{"entra_tenant": "3f2504e0-4f89-11d3-9a0c-0305e82c3301"}' >/dev/null
d=$(curl -sS "$base/3f2504e0-4f89-11d3-9a0c-0305e82c3301/v2.0/.well-known/openid-configuration")
expect "entra tenant GUID: its own issuer" "$(jget "$d" 'j["issuer"]')" "$base/3f2504e0-4f89-11d3-9a0c-0305e82c3301/v2.0"
tjson /_test/config '{"aadsts_errors": [{"code": 90024}, {"code": 7000218}]}' >/dev/null
code=$(req -X POST "$base/token" --data client_id=cli --data grant_type=refresh_token --data-urlencode "refresh_token=$e2"); body=$(<"$tmp/body")
expect "aadsts_errors: AADSTS90024 as temporarily_unavailable" "$code $(jget "$body" '[j["error"], j["error_codes"]]')" '400 ["temporarily_unavailable", [90024]]'
code=$(req -X POST "$base/token" --data client_id=cli --data grant_type=refresh_token --data-urlencode "refresh_token=$e2"); body=$(<"$tmp/body")
expect "aadsts_errors: AADSTS7000218 as 401 invalid_client" "$code $(jget "$body" '[j["error"], j["error_description"].split(":")[0]]')" '401 ["invalid_client", "AADSTS7000218"]'
expect "aadsts_errors: nothing spent" "$(jget "$(status_of "$e2")" 'j["active"]')" true
tjson /_test/reset '{}' >/dev/null
tjson /_test/config '{"persona": "keycloak"}' >/dev/null
r=$(tjson /_test/issue '{"client_id":"cli"}'); k1=$(jget "$r" 'j["refresh_token"]')
refresh "$k1"; k2=$(jget "$body" 'j["refresh_token"]')
refresh "$k1"
expect "keycloak: reuse is Maximum allowed refresh token reuse exceeded" "$code $(jget "$body" 'j["error_description"]')" "400 Maximum allowed refresh token reuse exceeded"
refresh "$k2"
expect "keycloak: the whole session died, the fresh token too" "$code $(jget "$body" 'j["error_description"]')" "400 Session not active"
r=$(tjson /_test/issue '{"client_id":"cli"}'); k1=$(jget "$r" 'j["refresh_token"]')
tjson /_test/config '{"keycloak_errors": ["Token is not active"]}' >/dev/null
refresh "$k1"
expect "keycloak_errors: the text, and the session ends" "$code $(jget "$body" '[j["error"], j["error_description"]]') $(jget "$(status_of "$k1")" 'j["family_revoked"]')" \
  '400 ["invalid_grant", "Token is not active"] true'
tjson /_test/config '{"client_secrets": {"kc": "right"}}' >/dev/null
r=$(tjson /_test/issue '{"client_id":"kc"}'); k1=$(jget "$r" 'j["refresh_token"]')
code=$(req -X POST "$base/token" --data client_id=kc --data client_secret=wrong --data grant_type=refresh_token --data-urlencode "refresh_token=$k1"); body=$(<"$tmp/body")
expect "keycloak: a wrong client secret is 401 unauthorized_client with Keycloak's text" "$code $(jget "$body" '[j["error"], j["error_description"]]')" \
  '401 ["unauthorized_client", "Invalid client or Invalid client credentials"]'
code=$(req -X POST "$base/device_authorization" --data client_id=kc --data client_secret=wrong); body=$(<"$tmp/body")
expect "keycloak: the device endpoint too" "$code $(jget "$body" '[j["error"], j["error_description"]]')" \
  '401 ["unauthorized_client", "Invalid client or Invalid client credentials"]'
tjson /_test/reset '{}' >/dev/null

# --- client_credentials (RFC 6749 §4.4) and the JWT bearer grant (RFC 7523 §2.1, §3)
tjson /_test/reset '{}' >/dev/null
cat >"$tmp/jb.py" <<'PY'
import base64, json, sys
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
if sys.argv[1] == "key":  # key PEM: a new P-256 key; prints its public JWK
    k = ec.generate_private_key(ec.SECP256R1())
    open(sys.argv[2], "wb").write(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    n = k.public_key().public_numbers()
    print(json.dumps({"kty": "EC", "crv": "P-256", "kid": "k1", "x": b64(n.x.to_bytes(32, "big")),
                      "y": b64(n.y.to_bytes(32, "big"))}))
else:  # sign PEM CLAIMS: an ES256 JWT with kid k1
    k = serialization.load_pem_private_key(open(sys.argv[2], "rb").read(), None)
    head = b64(json.dumps({"alg": "ES256", "kid": "k1", "typ": "JWT"}).encode()) + "." + b64(sys.argv[3].encode())
    r, s = decode_dss_signature(k.sign(head.encode(), ec.ECDSA(hashes.SHA256())))
    print(head + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big")))
PY
jwk=$("$py" "$tmp/jb.py" key "$tmp/jb.pem"); "$py" "$tmp/jb.py" key "$tmp/other.pem" >/dev/null
tjson /_test/config "{\"jwt_access_tokens\": true, \"client_secrets\": {\"svc\": \"svc-secret\"}, \"jwt_bearer_issuers\": {\"https://ci.test\": {\"keys\": [$jwk]}}}" >/dev/null
code=$(req -X POST "$base/token" -u svc:svc-secret --data grant_type=client_credentials --data scope=api); body=$(<"$tmp/body")
expect "client_credentials: 200, no refresh or ID token" "$code $(jget "$body" '[j["scope"], "refresh_token" in j, "id_token" in j]')" '200 ["api", false, false]'
expect "client_credentials: a wrong secret is 401" "$(req -X POST "$base/token" -u svc:nope --data grant_type=client_credentials)" 401
code=$(req -X POST "$base/token" --data client_id=cli --data grant_type=client_credentials); body=$(<"$tmp/body")
expect "client_credentials: a public client is 401 invalid_client" "$code $(err)" "401 invalid_client"
now=$(date +%s)
jb() { # jb KEY CLAIMS -> status and error_description of a jwt-bearer request
  local a; a=$("$py" "$tmp/jb.py" sign "$tmp/$1.pem" "$2")
  code=$(req -X POST "$base/token" --data grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer --data-urlencode "assertion=$a")
  body=$(<"$tmp/body"); echo "$code $(jget "$body" 'j.get("error_description") or j.get("token_type")')"
}
ok_claims="{\"iss\":\"https://ci.test\",\"sub\":\"job\",\"aud\":\"$base/token\",\"exp\":$((now + 60)),\"jti\":\"j1\"}"
expect "jwt-bearer: a good assertion: 200" "$(jb jb "$ok_claims")" "200 Bearer"
at=$(jget "$(<"$tmp/body")" 'j["access_token"]')
expect "  ... the token's sub is the assertion's" \
  "$("$py" -c 'import base64,json,sys; p=sys.argv[1].split(".")[1]; print(json.loads(base64.urlsafe_b64decode(p+"="*(-len(p)%4)))["sub"])' "$at")" job
expect "jwt-bearer: the same jti again: replay" "$(jb jb "$ok_claims")" "400 the assertion was used before (jti)"
expect "jwt-bearer: another key" "$(jb other "${ok_claims/j1/j2}")" "400 signature invalid"
expect "jwt-bearer: an untrusted iss" "$(jb jb "${ok_claims/ci.test/evil.test}")" "400 iss is not a trusted issuer"
expect "jwt-bearer: aud the issuer is accepted" "$(jb jb "{\"iss\":\"https://ci.test\",\"sub\":\"job\",\"aud\":\"$base\",\"exp\":$((now + 60))}")" "200 Bearer"
expect "jwt-bearer: another aud" "$(jb jb "{\"iss\":\"https://ci.test\",\"sub\":\"job\",\"aud\":\"https://x.test\",\"exp\":$((now + 60))}")" "400 aud does not name this server"
expect "jwt-bearer: no sub" "$(jb jb "{\"iss\":\"https://ci.test\",\"aud\":\"$base\",\"exp\":$((now + 60))}")" "400 sub missing"
expect "jwt-bearer: no exp" "$(jb jb "{\"iss\":\"https://ci.test\",\"sub\":\"job\",\"aud\":\"$base\"}")" "400 exp missing"
expect "jwt-bearer: expired" "$(jb jb "{\"iss\":\"https://ci.test\",\"sub\":\"job\",\"aud\":\"$base\",\"exp\":$((now - 5))}")" "400 the assertion has expired"
expect "jwt-bearer: nbf ahead" "$(jb jb "{\"iss\":\"https://ci.test\",\"sub\":\"job\",\"aud\":\"$base\",\"exp\":$((now + 60)),\"nbf\":$((now + 600))}")" "400 the assertion is not valid yet"
code=$(req -X POST "$base/token" --data grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer); body=$(<"$tmp/body")
expect "jwt-bearer: no assertion: invalid_request" "$code $(err)" "400 invalid_request"
# A public client (RFC 7523 §3.1: client authentication is optional): its client_id alone,
# the assertion still checked; the log says how each request authenticated its client.
tjson /_test/reset '{}' >/dev/null
tjson /_test/config "{\"client_secrets\": {\"svc\": \"svc-secret\"}, \"jwt_bearer_issuers\": {\"https://ci.test\": {\"keys\": [$jwk]}}}" >/dev/null
a=$("$py" "$tmp/jb.py" sign "$tmp/jb.pem" "${ok_claims/j1/j3}")
code=$(req -X POST "$base/token" --data grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer --data client_id=pub --data-urlencode "assertion=$a")
expect "jwt-bearer: a public client (client_id only): 200" "$code" 200
code=$(req -X POST "$base/token" --data grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer --data client_id=pub --data-urlencode "assertion=$a"); body=$(<"$tmp/body")
expect "jwt-bearer: a public client's replayed assertion is still refused" "$code $(err)" "400 invalid_grant"
a=$("$py" "$tmp/jb.py" sign "$tmp/jb.pem" "${ok_claims/j1/j4}")
code=$(req -X POST "$base/token" --data grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer --data client_id=svc --data-urlencode "assertion=$a"); body=$(<"$tmp/body")
expect "jwt-bearer: a confidential client without its secret: 401" "$code $(err)" "401 invalid_client"
code=$(req -X POST "$base/token" -u svc:svc-secret --data grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer --data-urlencode "assertion=$a")
expect "jwt-bearer: a confidential client with its secret: 200" "$code" 200
code=$(req -X POST "$base/token" --data grant_type=client_credentials --data client_id=svc --data client_secret=svc-secret)
code=$(req -X POST "$base/token" --data grant_type=client_credentials --data client_id=svc --data client_assertion=x.y.z)
expect "log: client_auth of each /token request" \
  "$(jget "$(curl -sS "$base/_test/log")" '[(e["client_id"], e["client_auth"]) for e in j if e["path"] == "/token"]')" \
  '[["pub", "none"], ["pub", "none"], ["svc", "none"], ["svc", "basic"], ["svc", "post"], ["svc", "assertion"]]'
tjson /_test/reset '{}' >/dev/null

# --- concurrency: 256 parallel uses of one token: exactly one wins, the first
# loser trips reuse detection, the rest find the family revoked
tjson /_test/reset '{}' >/dev/null
tjson /_test/config '{"delay_seconds": 0.2}' >/dev/null
r=$(tjson /_test/issue '{"client_id":"cli"}'); c1=$(jget "$r" 'j["refresh_token"]')
for i in $(seq 256); do
  curl -sS -o /dev/null -w '%{http_code}\n' -X POST "$base/token" --data grant_type=refresh_token \
    --data-urlencode "refresh_token=$c1" --data client_id=cli >"$tmp/par.$i" &
done
for j in $(jobs -p); do [[ $j == "$pid" ]] && continue; wait "$j" || true; done
expect "parallel: one 200, 255 x 400" "$(cat "$tmp"/par.* | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')" "200:1 400:255 "
st=$(curl -sS "$base/_test/stats")
expect "parallel stats" "$(jget "$st" '[j["token_requests"], j["issued"], j["reuse_detected"]]')" '[256, 1, 1]'

# --- stop by PID
kill -TERM "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then bad "server still running after SIGTERM"; else ok "stopped by SIGTERM"; wait "$pid" || true; pid=""; fi

if ((fails)); then echo "$fails check(s) failed" >&2; exit 1; fi
echo "authserver selftest: all checks passed"
