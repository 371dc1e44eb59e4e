# shellcheck shell=bash
# Scripts/lib/idpyoidc.sh: a real OAuth 2.0 token exchange server (RFC 8693) for the machine
# sign-in tests: idpyoidc from PyPI (version pinned, with its dependencies, in
# Scripts/testserver/idpyoidc/requirements.txt) in a cached virtualenv, served on a free port of
# 127.0.0.1 over plain HTTP by Scripts/testserver/idpyoidc/server.py (whose header says what the
# harness adds to idpyoidc: the HTTP layer, client registration, two metadata names, a log line
# per accepted token request naming the client and which credentials it sent).
#
# Source it after services.sh (it uses tk_services_init's DIR and its PID records; it works
# under set -euo pipefail); every function is quiet on success, prints "services: ..." to
# stderr and returns non-zero on failure:
#
#   source Scripts/lib/services.sh; source Scripts/lib/idpyoidc.sh
#   tk_require_packages "${TK_IDPYOIDC_PACKAGES[@]}"
#   tk_require_idpyoidc_venv           # creates the virtualenv when missing or when
#                                      # requirements.txt changed; sets TK_IDPYOIDC_PYTHON
#   tk_services_init "$(mktemp -d)"
#   tk_idpyoidc_start [ACCESS_TTL] [--stock-metadata]   # default 3600 s
#   tk_idpyoidc_add_client <<<'{"client_id":"a","client_secret":"s3cret-s3cret","allowed_scopes":["read"]}'
#   tk_idpyoidc_stop                   # or tk_services_stop_all (by PID)
#
# The virtualenv: TK_IDPYOIDC_VENV, default ~/.cache/tokenctl-test/idpyoidc-venv in the
# account's home directory (whatever HOME says), or under TOKENCTL_TEST_CACHE. Its file
# .requirements-sha256 holds the SHA-256 of the requirements file it was made from; another
# file means a rebuild (pip from PyPI, ~15 s), the same one means nothing is downloaded. Made
# under flock, so concurrent runs wait.
#
# tk_idpyoidc_start starts afresh (a running server is stopped first) in
# $TK_SERVICES_DIR/idpyoidc (wiped; mode 0700; log: server.log; keys: private/), recorded as
# pids/idpyoidc.pid, and exports:
#   TK_IDPYOIDC_ISSUER          http://127.0.0.1:PORT (no path; also the tokens' "iss")
#   TK_IDPYOIDC_DISCOVERY       ISSUER/.well-known/oauth-authorization-server (RFC 8414; there
#                               is no /.well-known/openid-configuration: 404)
#   TK_IDPYOIDC_TOKEN_ENDPOINT  ISSUER/token
#   TK_IDPYOIDC_INTROSPECTION_ENDPOINT  ISSUER/introspection
#   TK_IDPYOIDC_JWKS_URI        ISSUER/jwks
#   TK_IDPYOIDC_AUDIENCE        https://api.tokenctl.test: the one audience an exchange may ask
#   TK_IDPYOIDC_RESOURCE        https://api.tokenctl.test/v1: the one resource it may ask
#   TK_IDPYOIDC_DIR             the server's directory
# Client fields (tk_idpyoidc_add_client; the JSON goes into idpyoidc's client database as is):
# client_id, client_secret, client_authn_method [METHOD...] (absent: the four that authenticate,
# client_secret_basic, client_secret_post, client_secret_jwt, private_key_jwt; ["public"]: a
# public client, refused with a client_secret or jwks), allowed_scopes (of "read", "write"),
# jwks {"keys":[...]} (private_key_jwt),
# token_usage_rules {"access_token": {"expires_in": SECONDS}} (this client's token lifetime).
#
# Measured with idpyoidc 5.0.0 with curl; idpyoidc-selftest.sh checks each but those marked
# "(by hand)", measured once:
# - Discovery (idpyoidc's own): grant_types_supported is what config.json's "preference" says
#   (client_credentials and urn:ietf:params:oauth:grant-type:token-exchange; without it
#   idpyoidc lists authorization_code, refresh_token, token-exchange, client_credentials and
#   password, whatever endpoints exist, and never jwt-bearer: by hand). The token endpoint's
#   methods are published as "token_endpoint_auth_methods" (idpyoidc/claims.py:250;
#   client_secret_basic, client_secret_post, client_secret_jwt, private_key_jwt, public), not
#   token_endpoint_auth_methods_supported, and there is no
#   token_endpoint_auth_signing_alg_values_supported: server.py adds both RFC 8414 names (the
#   methods with idpyoidc's "public" as "none", the registry's name for a public client, RFC 7591
#   §2; the algorithms: ES256, HS256), --stock-metadata leaves them out. Also published (by hand):
#   "jwks_uri", "introspection_endpoint", "version": "3.0", "client_authn_method", id_token_*
#   and subject_types_supported (OIDC leftovers in an OAuth server's metadata).
# - Client credentials: idpyoidc 5.0.0's own helper fails a client's second request (400
#   TypeError) and issues tokens that cannot be exchanged (by hand); client_credentials.py
#   replaces it
#   (its header says how). The scope granted is always the client's allowed_scopes: a `scope`
#   parameter is ignored. The answer: {"access_token", "token_type": "Bearer", "scope",
#   "expires_in"}; no refresh token.
# - Access tokens are JWTs (ES256 with a kid, verifiable with the JWKS; iss = ISSUER, iat, exp,
#   scope, jti, sid, token_class "access_token"). A client-credentials token has no sub, no
#   client_id and no aud claim (introspection says client_id and sub: the client); an exchanged
#   one has client_id (the exchanging client) and sub (the subject token's client), and never an
#   aud claim, even when an audience was asked (introspection's aud lists it).
# - Token exchange (RFC 8693 §2.1): grant_type, subject_token and subject_token_type
#   (urn:ietf:params:oauth:token-type:access_token only) are required; without
#   subject_token_type: 400 invalid_request "Missing required attribute 'subject_token_type'";
#   another type, e.g. urn:ietf:params:oauth:token-type:jwt (what a platform's JWT is): 400
#   invalid_request "Subject token invalid" (token_exchange.py:31-34 maps only access_token and
#   refresh_token, and the subject must be a token this server issued). audience (only
#   TK_IDPYOIDC_AUDIENCE, else 400 invalid_target "Unknown audience"), resource (only
#   TK_IDPYOIDC_RESOURCE, else invalid_target "Unknown resource"), scope (a subset of the
#   subject token's, else 400 invalid_scope) and requested_token_type (access_token only; a
#   refresh_token request: 400 invalid_request "Unsupported requested token type") are optional;
#   actor_token is refused (invalid_request). The answer (§2.2.1): {"access_token",
#   "issued_token_type": "urn:ietf:params:oauth:token-type:access_token", "token_type":
#   "Bearer", "expires_in", "scope"}. The new token's client_id is the exchanging client, sub
#   the subject token's (the client that got it), aud (introspection only) the audience asked;
#   its scope is the subject token's (or the subset asked), NOT limited to the exchanging
#   client's allowed_scopes.
# - The exchanged token's lifetime disagrees with itself: expires_in and introspection's exp are
#   the subject token's, but the JWT's own exp is iat + 60 s (idpyoidc's ExchangeGrant
#   hard-codes usage_rules access_token expires_in 60, idpyoidc/server/session/grant.py:534), and
#   after those 60 s introspection says {"active": false} while the subject token is still
#   active (by hand).
# - A bad subject token (RFC 8693 §2.2.2 says invalid_request) is always 400 invalid_request:
#   not a JWT: "Subject token invalid" (idpyoidc's message); a JWT with a broken signature:
#   "BadSignature: " and an expired one: "ToOld: Token has expired" (exceptions idpyoidc does
#   not catch, server/oauth2/token_helper/token_exchange.py:80 catches KeyError, UnknownToken
#   and BadSyntax only; answered by the harness as idpyoidc's flask example does). Never
#   invalid_grant.
# - Client authentication: the four methods work at the token endpoint (introspection: tested
#   with client_secret_basic); a refusal is 401 invalid_client "UnAuthorizedClient:
#   Authorization failed" (the harness's mapping of idpyoidc's exception); an unknown client_id:
#   401 invalid_client "UnknownClient: Unknown Client ID". Assertions (RFC 7523
#   §3): `aud` must be the token endpoint (ISSUER/token); the issuer, with or without "/", is
#   refused; a `jti` seen before is refused; an assertion without `kid` verifies;
#   client_assertion_type may be left out. client_secret_jwt: HS256 with the client_secret.
# - A public client (RFC 6749 §2.1; "none" in the metadata): config.json adds idpyoidc's
#   "public" (PublicAuthn: any request with a client_id verifies) last among the token
#   endpoint's methods (introspection has no "public": a public client there, 401). A client
#   registered with client_authn_method ["public"] exchanges with client_id alone (200; the
#   token's client_id and introspection's are the public client, sub the subject token's; the
#   log says authenticated=False credentials=none). Its client credentials request: 400
#   invalid_client "client not authenticated" (client_credentials.py; RFC 6749 §4.4).
#   idpyoidc's verify_client (server/client_authn.py) tries the endpoint's methods in order and
#   takes the first that verifies and that the client's client_authn_method lists, any when it
#   has none: measured with stock registration, a client with a secret and no
#   client_authn_method got a token with its client_id alone, and with a wrong secret
#   (client_secret_post fails, public verifies) (by hand). server.py therefore gives a client
#   registered without the field the four methods that authenticate; measured: such a client,
#   one limited to client_secret_basic and one to private_key_jwt, each with client_id alone,
#   and the first with a wrong secret (client_secret_post, or Basic with client_id in the form):
#   401 invalid_client "UnAuthorizedClient: Authorization failed".
# - JWT bearer grant (RFC 7523 §2.1, urn:ietf:params:oauth:grant-type:jwt-bearer): not
#   implemented by idpyoidc 5.0.0 as a grant. Its token endpoint knows only the helpers in
#   idpyoidc/server/oauth2/token.py:40-46 helper_by_grant_type (authorization_code,
#   refresh_token, token-exchange, client_credentials, password; oidc/token.py adds none); the
#   name appears only in server/configure.py:416, the default "preference" (an advertised grant
#   with no helper). A request: 400 invalid_request "Unsupported grant_type:
#   urn:ietf:params:oauth:grant-type:jwt-bearer".
# - Introspection (RFC 7662): {"active", "scope", "client_id", "sub", "exp", "iat", "iss",
#   "token_type", ["aud"]}; an unknown or expired token: {"active": false}. config.json turns
#   off idpyoidc's enforce_audience_restriction (which answers inactive unless the asking
#   client is in the token's aud).

# shellcheck disable=SC2034 # used by callers
TK_IDPYOIDC_PACKAGES=(python3 python3-venv curl openssl util-linux python3-jwt python3-cryptography)
TK_IDPYOIDC_SERVER_DIR=$(cd "$TK_SCRIPTS_LIB/.." && pwd)/testserver/idpyoidc
TK_IDPYOIDC_REQUIREMENTS=${TK_IDPYOIDC_REQUIREMENTS:-$TK_IDPYOIDC_SERVER_DIR/requirements.txt}
# The account's home from the password database, not $HOME: tk_services_init and Scripts/test
# point HOME and XDG_CACHE_HOME at throwaway directories, and a cache there would be rebuilt on
# every run.
TK_IDPYOIDC_VENV=${TK_IDPYOIDC_VENV:-${TOKENCTL_TEST_CACHE:-$(getent passwd "$(id -u)" | cut -d: -f6)/.cache/tokenctl-test}/idpyoidc-venv}

_tk_idpyoidc_venv_current() {
  [[ -x $TK_IDPYOIDC_VENV/bin/python && -f $TK_IDPYOIDC_VENV/.requirements-sha256 ]] &&
    [[ $(<"$TK_IDPYOIDC_VENV/.requirements-sha256") == "$1" ]]
}

# tk_require_idpyoidc_venv: see the header.
tk_require_idpyoidc_venv() {
  local want log=$TK_IDPYOIDC_VENV.log
  want=$(sha256sum "$TK_IDPYOIDC_REQUIREMENTS" | cut -d' ' -f1) || return 1
  TK_IDPYOIDC_PYTHON=$TK_IDPYOIDC_VENV/bin/python
  if _tk_idpyoidc_venv_current "$want"; then export TK_IDPYOIDC_PYTHON; return 0; fi
  mkdir -p "$(dirname "$TK_IDPYOIDC_VENV")" || return 1
  (
    flock -w 600 9 || { _tk_err "timed out waiting for $TK_IDPYOIDC_VENV.lock"; exit 1; }
    _tk_idpyoidc_venv_current "$want" && exit 0
    _tk_err "creating the idpyoidc virtualenv in $TK_IDPYOIDC_VENV"
    rm -rf "$TK_IDPYOIDC_VENV"
    if ! "$TK_PYTHON" -m venv "$TK_IDPYOIDC_VENV" >"$log" 2>&1; then
      _tk_err "python3 -m venv failed (is python3-venv installed?): $(tail -n 5 "$log")"
      exit 1
    fi
    if ! "$TK_IDPYOIDC_VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
        -r "$TK_IDPYOIDC_REQUIREMENTS" >>"$log" 2>&1; then
      _tk_err "pip install -r $TK_IDPYOIDC_REQUIREMENTS failed: $(tail -n 5 "$log")"
      rm -rf "$TK_IDPYOIDC_VENV"
      exit 1
    fi
    printf '%s\n' "$want" >"$TK_IDPYOIDC_VENV/.requirements-sha256"
  ) 9>"$TK_IDPYOIDC_VENV.lock" || return 1
  export TK_IDPYOIDC_PYTHON
}

# tk_idpyoidc_start [ACCESS_TTL] [--stock-metadata]: see the header.
tk_idpyoidc_start() {
  _tk_need_dir || return 1
  local ttl=${1:-3600} extra=() dir=$TK_SERVICES_DIR/idpyoidc pidf=$TK_SERVICES_DIR/pids/idpyoidc.pid pid port
  [[ $ttl =~ ^[0-9]+$ ]] || { _tk_err "bad access token lifetime '$ttl'"; return 1; }
  if [[ ${2:-} == --stock-metadata ]]; then extra=(--stock-metadata); fi
  if [[ -z ${TK_IDPYOIDC_PYTHON:-} ]]; then tk_require_idpyoidc_venv || return 1; fi
  tk_idpyoidc_stop || return 1
  rm -rf "$dir"
  (
    umask 077 && mkdir -p "$dir" && head -c 32 /dev/urandom | base64 | tr -d '/+=\n' >"$dir/admin-token" &&
      printf 'Authorization: Bearer %s\n' "$(<"$dir/admin-token")" >"$dir/admin-header"
  ) || { _tk_err "cannot create $dir"; return 1; }
  ( "$TK_IDPYOIDC_PYTHON" "$TK_IDPYOIDC_SERVER_DIR/server.py" --dir "$dir" --port-file "$dir/port" \
      --access-ttl "$ttl" "${extra[@]}" </dev/null >>"$dir/server.log" 2>&1 &
    echo $! >"$pidf" )
  pid=$(<"$pidf")
  for _ in $(seq 300); do
    [[ -s $dir/port ]] && break
    if ! _tk_alive "$pid"; then
      _tk_err "idpyoidc server exited: $(tail -n 20 "$dir/server.log")"
      rm -f "$pidf"
      return 1
    fi
    sleep 0.1
  done
  if [[ ! -s $dir/port ]]; then
    _tk_err "idpyoidc server wrote no port file within 30 s: $(tail -n 20 "$dir/server.log")"
    _tk_stop_named idpyoidc || true
    return 1
  fi
  port=$(<"$dir/port")
  export TK_IDPYOIDC_DIR=$dir
  export TK_IDPYOIDC_ISSUER=http://127.0.0.1:${port//[!0-9]/}
  export TK_IDPYOIDC_DISCOVERY=$TK_IDPYOIDC_ISSUER/.well-known/oauth-authorization-server
  export TK_IDPYOIDC_TOKEN_ENDPOINT=$TK_IDPYOIDC_ISSUER/token
  export TK_IDPYOIDC_INTROSPECTION_ENDPOINT=$TK_IDPYOIDC_ISSUER/introspection
  export TK_IDPYOIDC_JWKS_URI=$TK_IDPYOIDC_ISSUER/jwks
  export TK_IDPYOIDC_AUDIENCE=https://api.tokenctl.test TK_IDPYOIDC_RESOURCE=https://api.tokenctl.test/v1
}

# tk_idpyoidc_add_client < JSON: register or replace a client (fields: see the header). The
# secrets travel on stdin and in a header file, never in argv.
tk_idpyoidc_add_client() {
  if [[ -z ${TK_IDPYOIDC_ISSUER:-} ]]; then _tk_err "tk_idpyoidc_start first"; return 1; fi
  local status
  status=$(curl -s -o "$TK_IDPYOIDC_DIR/admin.out" -w '%{http_code}' -H "@$TK_IDPYOIDC_DIR/admin-header" \
    -H 'Content-Type: application/json' --data-binary @- "$TK_IDPYOIDC_ISSUER/tk-admin/clients") || status=000
  if [[ $status != 201 ]]; then
    _tk_err "registering the client failed ($status): $(cat "$TK_IDPYOIDC_DIR/admin.out" 2>/dev/null)"
    return 1
  fi
}

# tk_idpyoidc_stop: stop the server by its recorded PID; safe to call twice. Its directory stays
# (the log) until the caller removes tk_services_init's directory.
tk_idpyoidc_stop() {
  _tk_need_dir || return 1
  _tk_stop_named idpyoidc || return 1
  unset TK_IDPYOIDC_ISSUER TK_IDPYOIDC_DISCOVERY TK_IDPYOIDC_TOKEN_ENDPOINT \
    TK_IDPYOIDC_INTROSPECTION_ENDPOINT TK_IDPYOIDC_JWKS_URI
}
