#!/usr/bin/env bash
# Self-check for Scripts/testserver/authserver.py: starts it on an ephemeral
# port, exercises rotation, reuse detection, grace period and faults, stops it
# by PID.  Needs curl and python3.  Exit 0 = all checks passed.
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
