#!/usr/bin/env bash
# Self-check for Scripts/lib/glewlwyd.sh: glewlwyd behind nginx (TLS) on 127.0.0.1, then the
# client credentials grant for a client registered with each client authentication method:
# client_secret_basic, client_secret_post, client_secret_jwt, private_key_jwt (EC P-256, kid =
# JWK thumbprint), tls_client_auth (a certificate from the private CA) and
# self_signed_tls_client_auth, each token verified against the issuer's JWKS; the mTLS tokens
# carry cnf.x5t#S256 = the certificate's thumbprint; a replayed assertion, a wrong secret, a
# missing scope and a certificate header sent by the client are refused; everything is stopped
# by PID, with no stray process. Needs root for apt-get only (when a package is missing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=services.sh
source "$here/services.sh"
# shellcheck source=glewlwyd.sh
source "$here/glewlwyd.sh"

tk_require_packages "${TK_GLEWLWYD_PACKAGES[@]}"

started=$SECONDS
root=$(mktemp -d)
cleanup() {
  tk_glewlwyd_stop 2>/dev/null || true
  tk_services_stop_all || true
  if [[ -n ${KEEP:-} ]]; then echo "kept $root" >&2; else rm -rf "$root"; fi
}
trap cleanup EXIT

# shellcheck source=selftest.sh
source "$(dirname "${BASH_SOURCE[0]}")/selftest.sh"
jose() { /usr/bin/python3 "$here/glewlwyd_jwt.py" "$@"; }

tk_services_init "$root/svc"
tk_glewlwyd_start "$TK_SERVICES_DIR/glewlwyd"
g_pid=$(<"$TK_SERVICES_DIR/pids/glewlwyd.pid")
n_pid=$(<"$TK_SERVICES_DIR/pids/glewlwyd-nginx.pid")
expect "glewlwyd pid is glewlwyd" "$(cat "/proc/$g_pid/comm")" glewlwyd
expect "nginx pid is nginx" "$(cat "/proc/$n_pid/comm")" nginx
expect "issuer is https through nginx" "${TK_GLEWLWYD_ISSUER%%:*}" https

C=(curl -s --cacert "$TK_GLEWLWYD_CA_FILE")
T=$TK_GLEWLWYD_TOKEN_ENDPOINT
M=$TK_GLEWLWYD_MTLS_TOKEN_ENDPOINT
scope=$TK_GLEWLWYD_SCOPE
work=$root/work
mkdir -p "$work"

# Discovery and the signing keys.
"${C[@]}" -f "$TK_GLEWLWYD_DISCOVERY" >"$work/discovery.json" || bad "discovery"
disc() { /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=eval(sys.argv[2], {}, {"d": d}); print(" ".join(v) if isinstance(v, list) else v)' "$work/discovery.json" "$1"; }
expect "discovery issuer" "$(disc 'd["issuer"]')" "$TK_GLEWLWYD_ISSUER"
expect "discovery token_endpoint" "$(disc 'd["token_endpoint"]')" "$T"
expect "discovery mtls alias" "$(disc 'd["mtls_endpoint_aliases"]["token_endpoint"]')" "$M"
expect "discovery auth methods" "$(disc 'sorted(d["token_endpoint_auth_methods_supported"])')" \
  "client_secret_basic client_secret_jwt client_secret_post private_key_jwt self_signed_tls_client_auth tls_client_auth"
"${C[@]}" -f "$TK_GLEWLWYD_JWKS_URI" >"$work/jwks.json" || bad "jwks"

# token NAME CURL_ARGS...: POST the grant; NAME.status and NAME.json are left in $work.
token() {
  local name=$1
  shift
  "${C[@]}" -o "$work/$name.json" -w '%{http_code}' -d grant_type=client_credentials "$@" >"$work/$name.status" || true
  cat "$work/$name.status"
}
access_token() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["access_token"])' "$work/$1.json"; }
# granted NAME: the token verifies with the issuer's JWKS, with iss, client_id and scope right.
granted() {
  local name=$1 client=$2 claims
  if ! claims=$(jose verify "$(access_token "$name")" "$work/jwks.json" "$TK_GLEWLWYD_ISSUER" 2>&1); then
    bad "$name: token does not verify: $claims"; return 1
  fi
  printf '%s\n' "$claims" >"$work/$name.claims"
  expect "$name: client_id and scope" \
    "$(/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["client_id"], c["scope"])' "$work/$name.claims")" \
    "$client $scope"
}
cnf() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("cnf", {}).get("x5t#S256", "none"))' "$work/$1.claims"; }
bearer=urn:ietf:params:oauth:client-assertion-type:jwt-bearer

# 1. client_secret_basic
tk_glewlwyd_add_client <<<'{"client_id":"m-basic","token_endpoint_auth_method":["client_secret_basic"],"client_secret":"basic-secret-1"}'
expect "client_secret_basic: 200" "$(token basic -u m-basic:basic-secret-1 -d scope="$scope" "$T")" 200
granted basic m-basic
expect "client_secret_basic, wrong secret: 403" "$(token basic-wrong -u m-basic:nope -d scope="$scope" "$T")" 403
expect "  ... with an empty body" "$(wc -c <"$work/basic-wrong.json" | tr -d ' ')" 0
expect "client_secret_basic, no scope: 403" "$(token basic-noscope -u m-basic:basic-secret-1 "$T")" 403

# 2. client_secret_post
tk_glewlwyd_add_client <<<'{"client_id":"m-post","token_endpoint_auth_method":["client_secret_post"],"client_secret":"post-secret-1"}'
expect "client_secret_post: 200" "$(token post -d client_id=m-post -d client_secret=post-secret-1 -d scope="$scope" "$T")" 200
granted post m-post

# 3. client_secret_jwt (RFC 7523 §2.2: HS256 with the client secret; aud = the token endpoint)
hs=hs256-secret-0123456789abcdef0123456789abcdef
tk_glewlwyd_add_client <<<"{\"client_id\":\"m-hs\",\"token_endpoint_auth_method\":[\"client_secret_jwt\"],\"client_secret\":\"$hs\"}"
a=$(jose assertion --client-id m-hs --aud "$T" --secret "$hs")
expect "client_secret_jwt: 200" "$(token hs -d client_assertion_type=$bearer --data-urlencode "client_assertion=$a" -d scope="$scope" "$T")" 200
granted hs m-hs
expect "client_secret_jwt, replayed assertion: 403" \
  "$(token hs-replay -d client_assertion_type=$bearer --data-urlencode "client_assertion=$a" -d scope="$scope" "$T")" 403

# 4. private_key_jwt (EC P-256, kid = RFC 7638 thumbprint)
openssl ecparam -name prime256v1 -genkey -noout -out "$work/pk.key" 2>/dev/null
tk_glewlwyd_add_client <<<"{\"client_id\":\"m-pk\",\"token_endpoint_auth_method\":[\"private_key_jwt\"],\"jwks\":{\"keys\":[$(jose jwk "$work/pk.key")]}}"
a=$(jose assertion --client-id m-pk --aud "$T" --key "$work/pk.key")
expect "private_key_jwt: 200" "$(token pk -d client_assertion_type=$bearer --data-urlencode "client_assertion=$a" -d scope="$scope" "$T")" 200
granted pk m-pk
expect "private_key_jwt, replayed assertion: 403" \
  "$(token pk-replay -d client_assertion_type=$bearer --data-urlencode "client_assertion=$a" -d scope="$scope" "$T")" 403
a=$(jose assertion --client-id m-pk --aud "$T" --key "$work/pk.key")
expect "private_key_jwt, trailing newline: 403" \
  "$(token pk-nl -d client_assertion_type=$bearer --data-urlencode "client_assertion=$a"$'\n' -d scope="$scope" "$T")" 403
a=$(jose assertion --client-id m-pk --aud "$T" --key "$work/pk.key" --kid none)
expect "private_key_jwt without kid (jwks, no pubkey): 403" \
  "$(token pk-nokid -d client_assertion_type=$bearer --data-urlencode "client_assertion=$a" -d scope="$scope" "$T")" 403
a=$(jose assertion --client-id m-pk --aud "$T" --key "$work/pk.key")
expect "private_key_jwt at the mTLS alias, aud = token endpoint: 200" \
  "$(token pk-alias -d client_assertion_type=$bearer --data-urlencode "client_assertion=$a" -d scope="$scope" "$M")" 200
a=$(jose assertion --client-id m-pk --aud "$M" --key "$work/pk.key")
expect "private_key_jwt at the mTLS alias, aud = the alias: 403" \
  "$(token pk-alias-aud -d client_assertion_type=$bearer --data-urlencode "client_assertion=$a" -d scope="$scope" "$M")" 403

# 5. tls_client_auth (a certificate from the private CA, matched on its subject DN)
tk_glewlwyd_issue_cert m-tls
crt=$TK_GLEWLWYD_DIR/clients/m-tls.crt key=$TK_GLEWLWYD_DIR/clients/m-tls.key
tk_glewlwyd_add_client <<<'{"client_id":"m-tls","token_endpoint_auth_method":["tls_client_auth"],"tls_client_auth_subject_dn":"CN=m-tls,O=tokenctl-test"}'
expect "tls_client_auth at the mTLS alias: 200" "$(token tls --cert "$crt" --key "$key" -d client_id=m-tls -d scope="$scope" "$M")" 200
granted tls m-tls
expect "tls_client_auth: cnf x5t#S256 = the certificate's thumbprint" "$(cnf tls)" "$(jose x5t "$crt")"
expect "tls_client_auth at the plain token endpoint: 403" \
  "$(token tls-plain --cert "$crt" --key "$key" -d client_id=m-tls -d scope="$scope" "$T")" 403
expect "tls_client_auth without a certificate: 403" "$(token tls-none -d client_id=m-tls -d scope="$scope" "$M")" 403
expect "a certificate header sent by the client is not passed: 403" \
  "$(token tls-inject -H "SSL_CLIENT_CERT: $(tr '\n' ' ' <"$crt")" -H "SSL-CLIENT-CERT: $(tr '\n' ' ' <"$crt")" \
     -d client_id=m-tls -d scope="$scope" "$M")" 403

# 6. self_signed_tls_client_auth (the certificate registered in the client's jwks, x5c)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=m-self" \
  -keyout "$work/self.key" -out "$work/self.crt" 2>/dev/null
tk_glewlwyd_add_client <<<"{\"client_id\":\"m-self\",\"token_endpoint_auth_method\":[\"self_signed_tls_client_auth\"],\"jwks\":{\"keys\":[$(jose cert-jwk "$work/self.crt")]}}"
expect "self_signed_tls_client_auth: 200" "$(token self --cert "$work/self.crt" --key "$work/self.key" -d client_id=m-self -d scope="$scope" "$M")" 200
granted self m-self
expect "self_signed_tls_client_auth: cnf x5t#S256 = the certificate's thumbprint" "$(cnf self)" "$(jose x5t "$work/self.crt")"
expect "self_signed_tls_client_auth with another certificate: 403" \
  "$(token self-other --cert "$crt" --key "$key" -d client_id=m-self -d scope="$scope" "$M")" 403
expect "a secret-authenticated token has no cnf" "$(cnf basic)" none

# Idempotent start: a second start replaces the pair; stop stops both, by PID.
tk_glewlwyd_start "$TK_SERVICES_DIR/glewlwyd"
expect "restart: old glewlwyd gone" "$(_tk_alive "$g_pid" && echo alive || echo gone)" gone
expect "restart: old nginx gone" "$(_tk_alive "$n_pid" && echo alive || echo gone)" gone
g_pid=$(<"$TK_SERVICES_DIR/pids/glewlwyd.pid")
n_pid=$(<"$TK_SERVICES_DIR/pids/glewlwyd-nginx.pid")
expect "restart: discovery" "$("${C[@]}" -o /dev/null -w '%{http_code}' "$TK_GLEWLWYD_DISCOVERY")" 200
tk_glewlwyd_stop
tk_glewlwyd_stop
expect "stopped: glewlwyd" "$(_tk_alive "$g_pid" && echo alive || echo gone)" gone
expect "stopped: nginx" "$(_tk_alive "$n_pid" && echo alive || echo gone)" gone
expect "pid files gone" "$(ls "$TK_SERVICES_DIR/pids")" ""
mkdir "$root/foreign" && : >"$root/foreign/keep"
if tk_glewlwyd_start "$root/foreign" 2>/dev/null; then bad "a foreign non-empty DIR was taken"; tk_glewlwyd_stop
else expect "a foreign non-empty DIR is refused and kept" "$(ls "$root/foreign")" keep; fi
stray=
for p in /proc/[0-9]*; do
  tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF "$root/svc/glewlwyd/" && _tk_alive "${p#/proc/}" && stray+="${p#/proc/} "
done
expect "no stray process" "$stray" ""

if ((fails)); then echo "$fails check(s) failed" >&2; exit 1; fi
echo "all glewlwyd checks passed in $((SECONDS - started)) s"
