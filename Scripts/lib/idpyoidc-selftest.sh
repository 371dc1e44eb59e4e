#!/usr/bin/env bash
# Self-check for Scripts/lib/idpyoidc.sh: idpyoidc's token exchange server (RFC 8693) on
# 127.0.0.1, driven with curl. Client A gets an access token by client credentials
# (client_secret_basic); the test writes it to a file; client B exchanges the file's token and
# gets a token whose introspection names client B and the subject A; the file replaced by
# client C's token, the next exchange's token names C; bad, forged and expired subject tokens
# get their errors; B authenticates with private_key_jwt (an EC key made with openssl, its JWKS
# registered; the assertion's aud measured) and client_secret_jwt; a public client exchanges
# with its client_id alone, a confidential one cannot (nor with a wrong secret); the JWT bearer grant
# (RFC 7523 §2.1) is shown unsupported; the discovery document's claims; everything is stopped
# by PID, with no stray process. The virtualenv is made on the first run (PyPI); needs root
# for apt-get only (when a package is missing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=services.sh
source "$here/services.sh"
# shellcheck source=idpyoidc.sh
source "$here/idpyoidc.sh"
# shellcheck source=selftest.sh
source "$here/selftest.sh"

tk_require_packages "${TK_IDPYOIDC_PACKAGES[@]}"
tk_require_idpyoidc_venv

started=$SECONDS
root=$(mktemp -d)
cleanup() {
  tk_idpyoidc_stop 2>/dev/null || true
  tk_services_stop_all || true
  if [[ -n ${KEEP:-} ]]; then echo "kept $root" >&2; else rm -rf "$root"; fi
}
trap cleanup EXIT

jose() { /usr/bin/python3 "$here/glewlwyd_jwt.py" "$@"; }
# field FILE EXPR: a Python expression over the JSON in FILE (as d); lists joined by spaces.
field() {
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=eval(sys.argv[2], {}, {"d": d}); print(" ".join(map(str, v)) if isinstance(v, list) else v)' "$1" "$2"
}

tk_services_init "$root/svc"
tk_idpyoidc_start
pid=$(<"$TK_SERVICES_DIR/pids/idpyoidc.pid")
expect "the recorded pid runs server.py" "$(tr '\0' ' ' <"/proc/$pid/cmdline" | grep -c "testserver/idpyoidc/server.py")" 1
expect "admin token is private" "$(stat -c %a "$TK_IDPYOIDC_DIR/admin-token")" 600

work=$root/work
mkdir -m 0700 "$work"
T=$TK_IDPYOIDC_TOKEN_ENDPOINT
I=$TK_IDPYOIDC_INTROSPECTION_ENDPOINT
exchange=urn:ietf:params:oauth:grant-type:token-exchange
at_type=urn:ietf:params:oauth:token-type:access_token
bearer=urn:ietf:params:oauth:client-assertion-type:jwt-bearer

# Discovery (RFC 8414) and the signing keys.
curl -sf "$TK_IDPYOIDC_DISCOVERY" >"$work/discovery.json" || bad "discovery"
expect "discovery issuer" "$(field "$work/discovery.json" 'd["issuer"]')" "$TK_IDPYOIDC_ISSUER"
expect "discovery token_endpoint" "$(field "$work/discovery.json" 'd["token_endpoint"]')" "$T"
expect "discovery introspection_endpoint" "$(field "$work/discovery.json" 'd["introspection_endpoint"]')" "$I"
expect "discovery jwks_uri" "$(field "$work/discovery.json" 'd["jwks_uri"]')" "$TK_IDPYOIDC_JWKS_URI"
expect "discovery grant_types_supported" "$(field "$work/discovery.json" 'd["grant_types_supported"]')" \
  "client_credentials $exchange"
expect "discovery token_endpoint_auth_methods_supported (added by server.py; public is none)" \
  "$(field "$work/discovery.json" 'd["token_endpoint_auth_methods_supported"]')" \
  "client_secret_basic client_secret_post client_secret_jwt private_key_jwt none"
expect "discovery token_endpoint_auth_methods (idpyoidc's own name and names)" \
  "$(field "$work/discovery.json" 'd["token_endpoint_auth_methods"]')" \
  "client_secret_basic client_secret_post client_secret_jwt private_key_jwt public"
expect "discovery token_endpoint_auth_signing_alg_values_supported (added by server.py)" \
  "$(field "$work/discovery.json" 'd["token_endpoint_auth_signing_alg_values_supported"]')" "ES256 HS256"
expect "no openid-configuration: 404" \
  "$(curl -s -o /dev/null -w '%{http_code}' "$TK_IDPYOIDC_ISSUER/.well-known/openid-configuration")" 404
curl -sf "$TK_IDPYOIDC_JWKS_URI" >"$work/jwks.json" || bad "jwks"

# The clients.
tk_idpyoidc_add_client <<<'{"client_id":"client-a","client_secret":"secret-a-0123456789","client_authn_method":["client_secret_basic"],"allowed_scopes":["read","write"]}'
tk_idpyoidc_add_client <<<'{"client_id":"client-b","client_secret":"secret-b-0123456789","allowed_scopes":["read"]}'
tk_idpyoidc_add_client <<<'{"client_id":"client-c","client_secret":"secret-c-0123456789","allowed_scopes":["read"]}'
tk_idpyoidc_add_client <<<'{"client_id":"client-short","client_secret":"secret-s-0123456789","allowed_scopes":["read"],"token_usage_rules":{"access_token":{"expires_in":2}}}'
openssl ecparam -name prime256v1 -genkey -noout -out "$work/pk.key" 2>/dev/null
openssl ecparam -name prime256v1 -genkey -noout -out "$work/other.key" 2>/dev/null
tk_idpyoidc_add_client <<<"{\"client_id\":\"client-pk\",\"client_authn_method\":[\"private_key_jwt\"],\"allowed_scopes\":[\"read\"],\"jwks\":{\"keys\":[$(jose jwk "$work/pk.key")]}}"
tk_idpyoidc_add_client <<<'{"client_id":"client-pub","client_authn_method":["public"],"allowed_scopes":["read"]}'
if tk_idpyoidc_add_client <<<'not json' 2>/dev/null; then bad "a malformed client was registered"; else ok "a malformed client is refused"; fi
for odd in '{"client_id":"p2","client_authn_method":["public"],"client_secret":"secret-p-0123456789"}' \
  '{"client_id":"p3","client_authn_method":["public","client_secret_basic"]}'; do
  if tk_idpyoidc_add_client <<<"$odd" 2>/dev/null; then bad "registered: $odd"; else ok "a public client with a secret or another method is refused"; fi
done
expect "the admin endpoint wants the admin token" \
  "$(curl -s -o /dev/null -w '%{http_code}' -d '{"client_id":"x"}' "$TK_IDPYOIDC_ISSUER/tk-admin/clients")" 401

# post NAME CURL_ARGS...: POST, leaving NAME.json; prints the status.
post() {
  local name=$1
  shift
  curl -s -o "$work/$name.json" -w '%{http_code}' "$@" || echo 000
}
token_of() { field "$work/$1.json" 'd["access_token"]'; }
claims() { jose claims "$(token_of "$1")" >"$work/$1.claims" && field "$work/$1.claims" "$2"; }
# introspect NAME: introspection of NAME's token by client-b, left in NAME.introspection.
introspect() {
  curl -s -u client-b:secret-b-0123456789 --data-urlencode "token=$(token_of "$1")" "$I" >"$work/$1.introspection"
}
error_of() { field "$work/$1.json" 'd["error"] + " " + d.get("error_description", "")'; }

# 1. Client credentials (client_secret_basic).
expect "client A, client credentials: 200" "$(post a1 -u client-a:secret-a-0123456789 -d grant_type=client_credentials "$T")" 200
expect "  ... token_type, scope" "$(field "$work/a1.json" 'd["token_type"], d["scope"]')" "('Bearer', 'read write')"
expect "  ... expires_in" "$(field "$work/a1.json" '3590 < d["expires_in"] <= 3600')" True
if verified=$(jose verify "$(token_of a1)" "$work/jwks.json" "$TK_IDPYOIDC_ISSUER" 2>&1); then
  printf '%s\n' "$verified" >"$work/a1.verified"
  expect "  ... a JWT that verifies with the JWKS, with no sub, client_id or aud" \
    "$(field "$work/a1.verified" 'd["token_class"], d["scope"], "sub" in d, "client_id" in d, "aud" in d')" \
    "('access_token', 'read write', False, False, False)"
else
  bad "client A's token does not verify: $verified"
fi
introspect a1
expect "  ... introspection: client A, subject A" "$(field "$work/a1.introspection" 'd["active"], d["client_id"], d["sub"]')" \
  "(True, 'client-a', 'client-a')"
expect "client A, a second request: 200 (idpyoidc's own helper fails it)" \
  "$(post a2 -u client-a:secret-a-0123456789 -d grant_type=client_credentials -d scope=read "$T")" 200
expect "  ... a new token, with the allowed scopes whatever the request asked" \
  "$(field "$work/a2.json" 'd["scope"]') $([[ $(token_of a1) != "$(token_of a2)" ]] && echo new)" "read write new"
expect "client A with client_secret_post, not allowed for it: 401" \
  "$(post a-post -d client_id=client-a -d client_secret=secret-a-0123456789 -d grant_type=client_credentials "$T")" 401
expect "  ... invalid_client" "$(error_of a-post)" "invalid_client UnAuthorizedClient: Authorization failed"
expect "client A, wrong secret: 401" "$(post a-wrong -u client-a:nope -d grant_type=client_credentials "$T")" 401

# 2. Token exchange (RFC 8693 §2.1): client B exchanges the token in a file.
subject=$work/subject-token
(umask 077 && printf %s "$(token_of a1)" >"$subject")
x=(-d "grant_type=$exchange" -d "subject_token_type=$at_type")
expect "client B exchanges A's token from the file: 200" \
  "$(post b1 -u client-b:secret-b-0123456789 "${x[@]}" --data-urlencode "subject_token@$subject" "$T")" 200
expect "  ... issued_token_type, token_type, scope" \
  "$(field "$work/b1.json" 'd["issued_token_type"], d["token_type"], sorted(d["scope"].split())')" \
  "('$at_type', 'Bearer', ['read', 'write'])"
introspect b1
expect "  ... introspection: active, client B, subject A" \
  "$(field "$work/b1.introspection" 'd["active"], d["client_id"], d["sub"], d["iss"]')" \
  "(True, 'client-b', 'client-a', '$TK_IDPYOIDC_ISSUER')"
expect "  ... the JWT: client_id B, sub A" "$(claims b1 'd["client_id"], d["sub"]')" "('client-b', 'client-a')"
expect "  ... the JWT's own exp is iat + 60 s, expires_in is the subject token's" \
  "$(field "$work/b1.claims" 'd["exp"] - d["iat"]') $(field "$work/b1.json" 'd["expires_in"] > 3000')" "60 True"

expect "client C, client credentials: 200" "$(post c1 -u client-c:secret-c-0123456789 -d grant_type=client_credentials "$T")" 200
printf %s "$(token_of c1)" >"$subject.new" && mv "$subject.new" "$subject"
expect "the file replaced by C's token: the next exchange: 200" \
  "$(post b2 -u client-b:secret-b-0123456789 "${x[@]}" --data-urlencode "subject_token@$subject" "$T")" 200
introspect b2
expect "  ... introspection: client B, subject C (the new file's token)" \
  "$(field "$work/b2.introspection" 'd["client_id"], d["sub"], d["scope"]')" "('client-b', 'client-c', 'read')"

for i in $(seq 32); do
  curl -s -o /dev/null -w '%{http_code}\n' -u client-b:secret-b-0123456789 "${x[@]}" \
    --data-urlencode "subject_token@$subject" "$T" >"$work/fan-$i.status" &
done
wait
expect "32 exchanges at once: all 200" "$(sort -u "$work"/fan-*.status | tr '\n' ' ')" "200 "
expect "exchange with scope and audience: 200" \
  "$(post b-aud -u client-b:secret-b-0123456789 "${x[@]}" --data-urlencode "subject_token=$(token_of a1)" \
     -d scope=read -d "audience=$TK_IDPYOIDC_AUDIENCE" -d "requested_token_type=$at_type" "$T")" 200
introspect b-aud
expect "  ... introspection: scope and aud" "$(field "$work/b-aud.introspection" 'd["scope"], d["aud"]')" \
  "('read', ['$TK_IDPYOIDC_AUDIENCE'])"
expect "  ... the JWT has no aud claim" "$(claims b-aud '"aud" in d, d["scope"]')" "(False, 'read')"
expect "exchange with the allowed resource: 200" \
  "$(post b-res -u client-b:secret-b-0123456789 "${x[@]}" --data-urlencode "subject_token=$(token_of a1)" \
     -d "resource=$TK_IDPYOIDC_RESOURCE" "$T")" 200
# fails NAME STATUS WANT_ERROR CURL_ARGS...: an exchange by client B that must fail so.
fails() {
  local name=$1 status=$2 want=$3
  shift 3
  expect "$name: $status" "$(post "$name" -u client-b:secret-b-0123456789 "$@" "$T")" "$status"
  expect "  ... $want" "$(error_of "$name")" "$want"
}
fails x-audience 400 "invalid_target Unknown audience" "${x[@]}" --data-urlencode "subject_token=$(token_of a1)" \
  -d audience=https://elsewhere.test
fails x-resource 400 "invalid_target Unknown resource" "${x[@]}" --data-urlencode "subject_token=$(token_of a1)" \
  -d resource=https://elsewhere.test
fails x-scope 400 "invalid_scope Invalid requested scopes" "${x[@]}" --data-urlencode "subject_token=$(token_of a1)" \
  -d scope=admin
fails x-refresh 400 "invalid_request Unsupported requested token type" "${x[@]}" \
  --data-urlencode "subject_token=$(token_of a1)" -d requested_token_type=urn:ietf:params:oauth:token-type:refresh_token
fails x-actor 400 "invalid_request Actor token not supported" "${x[@]}" --data-urlencode "subject_token=$(token_of a1)" \
  --data-urlencode "actor_token=$(token_of c1)" -d actor_token_type=$at_type
fails x-notype 400 "invalid_request Missing required attribute 'subject_token_type'" -d grant_type=$exchange \
  --data-urlencode "subject_token=$(token_of a1)"
fails x-jwt-type 400 "invalid_request Subject token invalid" -d "grant_type=$exchange" \
  -d subject_token_type=urn:ietf:params:oauth:token-type:jwt --data-urlencode "subject_token=$(token_of a1)"
fails x-garbage 400 "invalid_request Subject token invalid" "${x[@]}" -d subject_token=not-a-jwt
a1=$(token_of a1) c1=$(token_of c1)
fails x-forged 400 "invalid_request BadSignature: " "${x[@]}" --data-urlencode "subject_token=${a1%.*}.${c1##*.}"
expect "client-short, client credentials: 200, expires_in 2" \
  "$(post s1 -u client-short:secret-s-0123456789 -d grant_type=client_credentials "$T") $(field "$work/s1.json" 'd["expires_in"]')" "200 2"
sleep 3
fails x-expired 400 "invalid_request ToOld: Token has expired" "${x[@]}" --data-urlencode "subject_token=$(token_of s1)"
introspect s1
expect "  ... introspection of the expired token: inactive" "$(field "$work/s1.introspection" 'd')" "{'active': False}"

# 2b. A public client (client_authn_method ["public"], no secret: idpyoidc's PublicAuthn, "none"
# in the metadata) exchanges with its client_id alone; a confidential client cannot, nor with a
# wrong secret (server.py gives a client that names no methods the four that prove something).
expect "public client, client_id only: 200" \
  "$(post pub1 "${x[@]}" --data-urlencode "subject_token=$(token_of a1)" -d client_id=client-pub "$T")" 200
introspect pub1
expect "  ... introspection: client-pub, subject A" \
  "$(field "$work/pub1.introspection" 'd["active"], d["client_id"], d["sub"]')" "(True, 'client-pub', 'client-a')"
expect "  ... the JWT: client_id client-pub" "$(claims pub1 'd["client_id"]')" client-pub
expect "  ... server.log: idpyoidc did not count it authenticated; no credentials sent" \
  "$(grep -c 'token client: client_id=client-pub authenticated=False credentials=none$' "$TK_IDPYOIDC_DIR/server.log")" 1
expect "  ... while client B's basic exchanges count, with the Authorization header" \
  "$(grep -c 'token client: client_id=client-b authenticated=True credentials=authorization$' "$TK_IDPYOIDC_DIR/server.log" | awk '{print ($1 > 32)}')" 1
for who in client-b client-a client-pk; do
  expect "confidential $who, client_id only: 401" \
    "$(post "conf-$who" "${x[@]}" --data-urlencode "subject_token=$(token_of a1)" -d "client_id=$who" "$T")" 401
  expect "  ... invalid_client" "$(error_of "conf-$who")" "invalid_client UnAuthorizedClient: Authorization failed"
done
expect "confidential client-b, wrong secret (client_secret_post): 401" \
  "$(post conf-post "${x[@]}" --data-urlencode "subject_token=$(token_of a1)" -d client_id=client-b \
     -d client_secret=wrong-0123456789 "$T")" 401
expect "confidential client-b, wrong secret (client_secret_basic) and client_id in the form: 401" \
  "$(post conf-basic -u client-b:wrong-0123456789 "${x[@]}" --data-urlencode "subject_token=$(token_of a1)" \
     -d client_id=client-b "$T")" 401
expect "public client, client credentials (RFC 6749 §4.4: confidential only): 400 invalid_client" \
  "$(post pub-cc -d grant_type=client_credentials -d client_id=client-pub "$T") $(error_of pub-cc)" \
  "400 invalid_client client not authenticated"
expect "public client at introspection (not among its methods): 401" \
  "$(curl -s -o /dev/null -w '%{http_code}' -d client_id=client-pub --data-urlencode "token=$(token_of pub1)" "$I")" 401
expect "an unknown client_id: 401 invalid_client" \
  "$(post nobody "${x[@]}" --data-urlencode "subject_token=$(token_of a1)" -d client_id=nobody "$T") $(error_of nobody)" \
  "401 invalid_client UnknownClient: Unknown Client ID"

# 3. Client B-pk authenticates the exchange with private_key_jwt; client B with client_secret_jwt.
# pk NAME AUD [ASSERTION_ARGS...]: the exchange of A's token with a fresh assertion.
pk() {
  local name=$1 aud=$2 a
  shift 2
  a=$(jose assertion --client-id client-pk --aud "$aud" --key "${@:-$work/pk.key}")
  printf %s "$a" >"$work/$name.assertion"
  post "$name" "${x[@]}" --data-urlencode "subject_token=$a1" -d client_assertion_type=$bearer \
    --data-urlencode "client_assertion@$work/$name.assertion" "$T"
}
expect "private_key_jwt, aud = the token endpoint: 200" "$(pk pk1 "$T")" 200
introspect pk1
expect "  ... introspection: client-pk, subject A" "$(field "$work/pk1.introspection" 'd["client_id"], d["sub"]')" \
  "('client-pk', 'client-a')"
expect "private_key_jwt, aud = the issuer: 401" "$(pk pk-iss "$TK_IDPYOIDC_ISSUER")" 401
expect "private_key_jwt, aud = the issuer/: 401" "$(pk pk-iss2 "$TK_IDPYOIDC_ISSUER/")" 401
expect "private_key_jwt, another key: 401" "$(pk pk-other "$T" "$work/other.key")" 401
expect "private_key_jwt, replayed assertion: 401" \
  "$(post pk-replay "${x[@]}" --data-urlencode "subject_token=$a1" -d client_assertion_type=$bearer \
     --data-urlencode "client_assertion@$work/pk1.assertion" "$T")" 401
expect "private_key_jwt without kid: 200" \
  "$(post pk-nokid "${x[@]}" --data-urlencode "subject_token=$a1" -d client_assertion_type=$bearer \
     --data-urlencode "client_assertion=$(jose assertion --client-id client-pk --aud "$T" --key "$work/pk.key" --kid none)" "$T")" 200
expect "private_key_jwt without client_assertion_type: 200" \
  "$(post pk-notype "${x[@]}" --data-urlencode "subject_token=$a1" \
     --data-urlencode "client_assertion=$(jose assertion --client-id client-pk --aud "$T" --key "$work/pk.key")" "$T")" 200
expect "client_secret_jwt (HS256): 200" \
  "$(post hs "${x[@]}" --data-urlencode "subject_token=$a1" -d client_assertion_type=$bearer \
     --data-urlencode "client_assertion=$(jose assertion --client-id client-b --aud "$T" --secret secret-b-0123456789)" "$T")" 200
introspect hs
expect "  ... introspection: client B" "$(field "$work/hs.introspection" 'd["client_id"]')" client-b

# 4. The JWT bearer grant (RFC 7523 §2.1) is not one of idpyoidc's grants.
expect "idpyoidc's token endpoint's grant helpers" \
  "$("$TK_IDPYOIDC_PYTHON" -c 'from idpyoidc.server.oauth2.token import Token; print(" ".join(sorted(Token.helper_by_grant_type)))')" \
  "authorization_code client_credentials password refresh_token $exchange"
expect "jwt-bearer grant: 400" \
  "$(post jb -d grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer -d client_assertion_type=$bearer \
     --data-urlencode "client_assertion=$(jose assertion --client-id client-pk --aud "$T" --key "$work/pk.key")" \
     --data-urlencode "assertion=$(jose assertion --client-id client-pk --aud "$T" --key "$work/pk.key")" "$T")" 400
expect "  ... invalid_request" "$(error_of jb)" "invalid_request Unsupported grant_type: urn:ietf:params:oauth:grant-type:jwt-bearer"

# A restart with idpyoidc's own metadata; stop stops it, by PID.
tk_idpyoidc_start 60 --stock-metadata
expect "restart: the old server is gone" "$(_tk_alive "$pid" && echo alive || echo gone)" gone
pid=$(<"$TK_SERVICES_DIR/pids/idpyoidc.pid")
curl -sf "$TK_IDPYOIDC_DISCOVERY" >"$work/stock.json" || bad "stock discovery"
expect "stock metadata: no token_endpoint_auth_methods_supported, no signing algorithms" \
  "$(field "$work/stock.json" '"token_endpoint_auth_methods_supported" in d, "token_endpoint_auth_signing_alg_values_supported" in d, d["token_endpoint_auth_methods"]')" \
  "(False, False, ['client_secret_basic', 'client_secret_post', 'client_secret_jwt', 'private_key_jwt', 'public'])"
tk_idpyoidc_stop
tk_idpyoidc_stop
expect "stopped" "$(_tk_alive "$pid" && echo alive || echo gone)" gone
expect "pid files gone" "$(ls "$TK_SERVICES_DIR/pids")" ""
stray=
for p in /proc/[0-9]*; do
  tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF "$root/svc/" && _tk_alive "${p#/proc/}" && stray+="${p#/proc/} "
done
expect "no stray process" "$stray" ""

if ((fails)); then echo "$fails check(s) failed" >&2; exit 1; fi
echo "all idpyoidc checks passed in $((SECONDS - started)) s"
