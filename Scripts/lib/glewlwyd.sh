# shellcheck shell=bash
# Scripts/lib/glewlwyd.sh: a real authorization server for the machine sign-in tests (the OAuth
# client credentials grant with every client authentication method): Debian's glewlwyd 2.7.5
# (SQLite, its OIDC plugin) behind Debian's nginx terminating TLS on 127.0.0.1, with a private
# CA made with openssl for nginx's certificate and for client certificates.
#
# Source it after services.sh (it uses tk_services_init's DIR and its PID records; it works
# under set -euo pipefail); every function is quiet on success, prints "services: ..." to
# stderr and returns non-zero on failure:
#
#   source Scripts/lib/services.sh; source Scripts/lib/glewlwyd.sh
#   tk_require_packages "${TK_GLEWLWYD_PACKAGES[@]}"
#   tk_services_init "$(mktemp -d)"
#   tk_glewlwyd_start [DIR]            # DIR default $TK_SERVICES_DIR/glewlwyd (made, mode 0700)
#   tk_glewlwyd_add_client <<<'{"client_id":"m1","token_endpoint_auth_method":["client_secret_basic"],
#                              "client_secret":"s3cret"}'
#   tk_glewlwyd_issue_cert NAME [SUBJECT]   # a CA-issued client certificate: prints nothing,
#                                      # writes DIR/clients/NAME.{key,crt}
#   tk_glewlwyd_stop                   # or tk_services_stop_all (stops both, by PID)
#
# tk_glewlwyd_start wipes DIR (only one it made, or an empty one) and starts afresh (idempotent: a running pair is stopped
# first); glewlwyd (a foreground process, recorded as DIR/../pids/glewlwyd.pid) listens on a
# free port of 127.0.0.1 over plain HTTP, nginx (one foreground process, master_process off,
# pids/glewlwyd-nginx.pid) on another with TLS and `ssl_verify_client optional_no_ca`.
# Exports:
#   TK_GLEWLWYD_ISSUER        https://127.0.0.1:PORT/api/oidc   (nginx; also the "iss")
#   TK_GLEWLWYD_DISCOVERY     ISSUER/.well-known/openid-configuration
#   TK_GLEWLWYD_TOKEN_ENDPOINT       ISSUER/token
#   TK_GLEWLWYD_MTLS_TOKEN_ENDPOINT  ISSUER/mtls/token  (mtls_endpoint_aliases, RFC 8705 §5)
#   TK_GLEWLWYD_JWKS_URI      ISSUER/jwks (the ES256 key the tokens are signed with)
#   TK_GLEWLWYD_CA_FILE       the private CA (trust it for nginx: curl --cacert)
#   TK_GLEWLWYD_CA_KEY        its key (to issue more client certificates)
#   TK_GLEWLWYD_SCOPE         machine: the scope every client gets by default
#   TK_GLEWLWYD_ADMIN_URL     http://127.0.0.1:PORT/api  (glewlwyd itself, the admin API)
#   TK_GLEWLWYD_ADMIN_USER / TK_GLEWLWYD_ADMIN_PASSWORD  admin / password (the schema's)
#   TK_GLEWLWYD_DIR           DIR
# Layout of DIR: glewlwyd.conf, glewlwyd.db (SQLite, from the package's schema), glewlwyd.log,
# nginx.conf, nginx-error.log, nginx-access.log, nginx-assertions.log (each client assertion's
# jti, iat and exp), cert.js (njs), nginx-tmp/, ca/ (ca.{key,crt},
# server.{key,crt}, sign.{key,pub}: the token signing key), clients/ (issued certificates).
#
# Installing the packages has side effects outside DIR: glewlwyd's postinst (dbconfig-common)
# makes a system database under /var/lib/dbconfig-common and pulls in a MySQL client, and on a
# machine run by systemd both packages start their system services (glewlwyd on port 4593,
# nginx on port 80). Neither is used or stopped here: ours run on their own free ports.
#
# Quirks of glewlwyd 2.7.5 worked around here or to know in the tests (measured on Debian 12;
# the documentation is github.com/babelouest/glewlwyd docs/, shipped in /usr/share/doc/glewlwyd):
# - Config file: `use_secure_connection=false` alone is refused ("secure connection is active
#   but certificate is not valid"): the key/pem paths are required whenever the key is present,
#   whatever its value. We leave it out (TLS is nginx's job).
# - Database: glewlwyd does not create its schema; the package ships it as
#   /usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz (docs/database/README.md "Initialize
#   Glewlwyd with the default settings"), which also seeds the admin user admin/password
#   (docs/GETTING_STARTED.md "First connection to the administration page").
# - Client module data-format (docs/CLIENT_DATABASE.md "Specific data format"): a property
#   not listed is silently dropped. The schema's list has tls_client_auth_san_* but not
#   tls_client_auth_subject_dn, so a client registered with a certificate subject (RFC 8705
#   §2.1.2) keeps none and matches nothing: glewlwyd_control.py setup adds the property. The
#   subject is compared in RFC 4514 order as glewlwyd (GnuTLS) prints it, "CN=m,O=tokenctl-test"
#   (most specific first); openssl's order "O=tokenctl-test,CN=m" is refused (measured).
# - Plugin settings (docs/OIDC.md "Authentication type client enabled", "Mutual-TLS Client
#   Authentication", "JWT requests, public keys and JWKS"): auth-type-client-enabled,
#   request-parameter-allow (assertions are JWT requests), client-jwks-parameter,
#   client-pubkey-parameter, client-cert-source "header", client-cert-header-name,
#   client-cert-use-endpoint-aliases (publishes mtls_endpoint_aliases .../mtls/token) and
#   client-cert-self-signed-allowed are all off or empty by default; glewlwyd_control.py sets
#   them. jwt-type takes "ecdsa" (not "ec").
# - Certificate header: behind a TLS front glewlwyd reads the client certificate PEM from a
#   header (docs/OIDC.md "Certificate source", "Corresponding header property"; RFC 8705 §2
#   leaves the transport to the deployment). nginx's $ssl_client_cert spreads the PEM over
#   several header lines (continuation lines), which glewlwyd does not join: 403; the
#   URL-encoded $ssl_client_escaped_cert gets a 500 (both measured). cert.js (njs,
#   libnginx-mod-http-js) sends $ssl_client_raw_cert with its newlines turned into spaces,
#   which glewlwyd accepts. nginx always sets the header (an empty value: not sent) and drops
#   client headers with an underscore (underscores_in_headers off), so a client cannot inject
#   its own.
# - With `ssl_verify_client optional_no_ca` nginx checks only that the client holds the key;
#   in header mode (with client-cert-self-signed-allowed) glewlwyd does not check the chain
#   either: a tls_client_auth client accepts a self-signed certificate with its registered
#   subject (measured). tls_client_auth therefore matches on the subject (or SAN) only; a test
#   of a wrong-CA certificate must use another subject.
# - With client-cert-use-endpoint-aliases on, certificate authentication (tls_client_auth,
#   self_signed_tls_client_auth) works only at ISSUER/mtls/token; the same request at
#   ISSUER/token is refused (403). The other methods work at both (RFC 8705 §5).
# - Client secret vs password (docs/OIDC.md "Client secret vs password"): client_secret_basic/
#   post check `client_secret` if set (kept in clear), else the hashed `password`;
#   client_secret_jwt (RFC 7523 §2.2) needs `client_secret` (the HMAC key).
# - Refusals are 403 with an empty body, not RFC 6749 §5.2's 400/401 invalid_client JSON;
#   the grant requires a `scope` (no default scope for client credentials).
# - Discovery lists client_credentials under response_types_supported, not
#   grant_types_supported.
# - Assertions (RFC 7523 §3): `aud` must be exactly the token endpoint (ISSUER/token), even
#   when posting to the mTLS alias; a `jti` seen before is refused (403, replay); an assertion
#   with a trailing newline is refused; an assertion without `kid` only verifies when the
#   client has a PEM `pubkey` (403 with `jwks` alone, measured), so always send `kid` (here:
#   the RFC 7638 thumbprint, which is also the registered JWK's kid).
# - RFC 8705 §3: a token issued to a client authenticated with a certificate carries
#   cnf.x5t#S256, the base64url SHA-256 of the certificate's DER.

# shellcheck disable=SC2034 # used by callers
TK_GLEWLWYD_PACKAGES=(glewlwyd nginx libnginx-mod-http-js openssl curl sqlite3 python3-jwt python3-cryptography)
TK_GLEWLWYD_CONTROL_PY=${TK_GLEWLWYD_CONTROL_PY:-$TK_SCRIPTS_LIB/glewlwyd_control.py}
TK_GLEWLWYD_SCHEMA=${TK_GLEWLWYD_SCHEMA:-/usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz}
TK_GLEWLWYD_NJS_MODULE=${TK_GLEWLWYD_NJS_MODULE:-/usr/lib/nginx/modules/ngx_http_js_module.so}

_tk_glewlwyd_free_port() {
  "$TK_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# _tk_glewlwyd_wait_http URL PIDNAME LOG [CURL_ARGS...]: up to 15 s for any HTTP answer.
_tk_glewlwyd_wait_http() {
  local url=$1 name=$2 log=$3 pid
  shift 3
  pid=$(<"$TK_SERVICES_DIR/pids/$name.pid")
  for _ in $(seq 150); do
    if curl -s -o /dev/null --max-time 2 "$@" "$url"; then return 0; fi
    if ! _tk_alive "$pid"; then
      _tk_err "$name exited: $(tail -n 20 "$log")"
      rm -f "$TK_SERVICES_DIR/pids/$name.pid"
      return 1
    fi
    sleep 0.1
  done
  _tk_err "$name does not answer at $url after 15 s: $(tail -n 20 "$log")"
  return 1
}

# _tk_glewlwyd_ca DIR: the private CA, nginx's certificate (127.0.0.1, localhost) and the token
# signing key, all EC P-256.
_tk_glewlwyd_ca() {
  local ca=$1/ca log=$1/openssl.log
  mkdir -m 0700 "$ca" "$1/clients" || return 1
  {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
      -subj "/O=tokenctl-test/CN=tokenctl test CA" -keyout "$ca/ca.key" -out "$ca/ca.crt" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
      -keyout "$ca/server.key" -out "$ca/server.csr" &&
    openssl x509 -req -in "$ca/server.csr" -CA "$ca/ca.crt" -CAkey "$ca/ca.key" -CAcreateserial \
      -days 30 -out "$ca/server.crt" \
      -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n') &&
    openssl ecparam -name prime256v1 -genkey -noout -out "$ca/sign.key" &&
    openssl ec -in "$ca/sign.key" -pubout -out "$ca/sign.pub"
  } >"$log" 2>&1 || { _tk_err "openssl failed: $(tail -n 5 "$log")"; return 1; }
}

# tk_glewlwyd_issue_cert NAME [SUBJECT]: a client certificate from the private CA (EC P-256,
# clientAuth), SUBJECT default "/O=tokenctl-test/CN=NAME" (glewlwyd prints it
# "CN=NAME,O=tokenctl-test": use that in tls_client_auth_subject_dn). Writes
# $TK_GLEWLWYD_DIR/clients/NAME.{key,crt}.
tk_glewlwyd_issue_cert() {
  local name=${1:?usage: tk_glewlwyd_issue_cert NAME [SUBJECT]} subject=${2:-} d
  if [[ -z ${TK_GLEWLWYD_DIR:-} ]]; then _tk_err "tk_glewlwyd_start first"; return 1; fi
  [[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || { _tk_err "bad certificate name '$name'"; return 1; }
  subject=${subject:-/O=tokenctl-test/CN=$name}
  d=$TK_GLEWLWYD_DIR/clients
  {
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$subject" \
      -keyout "$d/$name.key" -out "$d/$name.csr" &&
    openssl x509 -req -in "$d/$name.csr" -CA "$TK_GLEWLWYD_CA_FILE" -CAkey "$TK_GLEWLWYD_CA_KEY" \
      -CAcreateserial -days 30 -out "$d/$name.crt" -extfile <(printf 'extendedKeyUsage=clientAuth\n')
  } >"$d/$name.log" 2>&1 || { _tk_err "issuing $name failed: $(tail -n 5 "$d/$name.log")"; return 1; }
  rm -f "$d/$name.csr"
}

_tk_glewlwyd_write_conf() {
  local dir=$1 port=$2 external=$3
  cat >"$dir/glewlwyd.conf" <<EOF
# Written by Scripts/lib/glewlwyd.sh for the tokenctl tests. No use_secure_connection: see
# the quirks in glewlwyd.sh.
port=$port
bind_address="127.0.0.1"
external_url="$external"
login_url="login.html"
api_prefix="api"
allow_origin="*"
log_mode="console"
log_level="${TK_GLEWLWYD_LOG_LEVEL:-INFO}"
cookie_secure=0
session_expiration=3600
session_key="GLEWLWYD2_SESSION_ID"
admin_scope="g_admin"
profile_scope="g_profile"
user_module_path="/usr/lib/glewlwyd/user"
client_module_path="/usr/lib/glewlwyd/client"
user_auth_scheme_module_path="/usr/lib/glewlwyd/scheme"
plugin_module_path="/usr/lib/glewlwyd/plugin"
hash_algorithm="SHA512"
database = { type = "sqlite3"; path = "$dir/glewlwyd.db"; };
EOF
}

_tk_glewlwyd_write_nginx_conf() {
  local dir=$1 port=$2 upstream=$3
  cat >"$dir/cert.js" <<'EOF'
// The client certificate PEM on one line (newlines -> spaces): glewlwyd 2.7.5 does not join
// the continuation lines nginx's $ssl_client_cert makes. Empty without a certificate.
function oneLine(r) {
    return (r.variables.ssl_client_raw_cert || '').trim().replace(/\r?\n/g, ' ');
}
// What a request's client_assertion (RFC 7523 §2.2) says of itself, "jti=... iat=... exp=...",
// for the tests' replay and lifetime checks: never the assertion. Empty without one (the log's
// if= then skips the request). Read at the log phase, when the body nginx proxied is in memory.
function assertionClaims(r) {
    var body;
    try { body = r.requestText || ''; } catch (e) { return ''; }
    var found = /(?:^|&)client_assertion=([^&]*)/.exec(body);
    if (!found) return '';
    var parts = decodeURIComponent(found[1].replace(/\+/g, ' ')).split('.');
    if (parts.length !== 3) return 'malformed';
    try {
        var claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString());
        return 'jti=' + String(claims.jti).replace(/\s/g, '_') + ' iat=' + Number(claims.iat) + ' exp=' + Number(claims.exp);
    } catch (e) {
        return 'malformed';
    }
}
export default { oneLine, assertionClaims };
EOF
  cat >"$dir/nginx.conf" <<EOF
# Written by Scripts/lib/glewlwyd.sh for the tokenctl tests: one process, in the foreground.
load_module $TK_GLEWLWYD_NJS_MODULE;
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log info;
events { worker_connections 64; }
http {
    access_log $dir/nginx-access.log;
    # Each client assertion's jti, iat and exp as the token endpoint received it, with the time
    # of receipt (\$msec) and the request (its ?tk= marker): the tests' record of what was sent.
    log_format tk_assertions '\$msec \$request_uri \$tk_assertion';
    access_log $dir/nginx-assertions.log tk_assertions if=\$tk_assertion;
    client_body_temp_path $dir/nginx-tmp/body;
    proxy_temp_path $dir/nginx-tmp/proxy;
    fastcgi_temp_path $dir/nginx-tmp/fastcgi;
    uwsgi_temp_path $dir/nginx-tmp/uwsgi;
    scgi_temp_path $dir/nginx-tmp/scgi;
    js_import cert from $dir/cert.js;
    js_set \$tk_client_cert cert.oneLine;
    js_set \$tk_assertion cert.assertionClaims;
    # A token request's form stays in one memory buffer, for \$tk_assertion at the log phase.
    client_body_buffer_size 64k;
    client_body_in_single_buffer on;
    server {
        listen 127.0.0.1:$port ssl;
        server_name 127.0.0.1 localhost;
        ssl_certificate $dir/ca/server.crt;
        ssl_certificate_key $dir/ca/server.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        # Ask for a certificate, accept any (self-signed too, RFC 8705 §2.2); glewlwyd decides.
        ssl_verify_client optional_no_ca;
        location / {
            proxy_pass http://$upstream;
            proxy_http_version 1.1;
            proxy_set_header Host \$http_host;
            proxy_set_header X-Forwarded-Proto https;
            proxy_set_header X-Forwarded-For \$remote_addr;
            # Always set (never the client's own); an empty value is not sent.
            proxy_set_header SSL_CLIENT_CERT \$tk_client_cert;
        }
    }
}
EOF
}

# tk_glewlwyd_start [DIR]: see the header.
tk_glewlwyd_start() {
  _tk_need_dir || return 1
  local dir=${1:-$TK_SERVICES_DIR/glewlwyd} gport nport issuer attempt ok
  local pids=$TK_SERVICES_DIR/pids
  tk_glewlwyd_stop || return 1
  local b
  for b in glewlwyd nginx; do
    command -v "$b" >/dev/null || { _tk_err "$b missing: tk_require_packages \"\${TK_GLEWLWYD_PACKAGES[@]}\""; return 1; }
  done
  [[ -f $TK_GLEWLWYD_NJS_MODULE ]] || { _tk_err "$TK_GLEWLWYD_NJS_MODULE missing (libnginx-mod-http-js)"; return 1; }
  # Only a directory this made before (its marker file) is wiped; any other must be empty.
  if [[ -d $dir && ! -f $dir/.tk-glewlwyd && -n $(ls -A "$dir") ]]; then
    _tk_err "$dir is not empty and not a glewlwyd.sh directory: refusing to wipe it"
    return 1
  fi
  rm -rf "$dir"
  { mkdir -p "$dir" && chmod 0700 "$dir" && mkdir "$dir/nginx-tmp" && : >"$dir/.tk-glewlwyd"; } ||
    { _tk_err "cannot create $dir"; return 1; }
  dir=$(cd "$dir" && pwd)
  _tk_glewlwyd_ca "$dir" || return 1
  export TK_GLEWLWYD_DIR=$dir TK_GLEWLWYD_CA_FILE=$dir/ca/ca.crt TK_GLEWLWYD_CA_KEY=$dir/ca/ca.key

  # A free port is only free until someone takes it: try a few times.
  for attempt in 1 2 3 4 5; do
    if ! { gport=$(_tk_glewlwyd_free_port) && nport=$(_tk_glewlwyd_free_port); }; then
      _tk_err "no free port"; return 1
    fi
    [[ $gport != "$nport" ]] || continue
    rm -f "$dir/glewlwyd.db"
    if ! zcat "$TK_GLEWLWYD_SCHEMA" | sqlite3 "$dir/glewlwyd.db" 2>"$dir/sqlite.log"; then
      _tk_err "cannot create the database from $TK_GLEWLWYD_SCHEMA: $(cat "$dir/sqlite.log")"
      return 1
    fi
    issuer=https://127.0.0.1:$nport/api/oidc
    _tk_glewlwyd_write_conf "$dir" "$gport" "https://127.0.0.1:$nport"
    _tk_glewlwyd_write_nginx_conf "$dir" "$nport" "127.0.0.1:$gport"
    if ! nginx -t -c "$dir/nginx.conf" -p "$dir" -e "$dir/nginx-error.log" >"$dir/nginx-t.log" 2>&1; then
      _tk_err "nginx -t rejects $dir/nginx.conf: $(cat "$dir/nginx-t.log")"
      return 1
    fi
    : >"$dir/glewlwyd.log"
    ( glewlwyd -c "$dir/glewlwyd.conf" </dev/null >>"$dir/glewlwyd.log" 2>&1 &
      echo $! >"$pids/glewlwyd.pid" )
    ( nginx -c "$dir/nginx.conf" -p "$dir" -e "$dir/nginx-error.log" </dev/null >>"$dir/nginx.out" 2>&1 &
      echo $! >"$pids/glewlwyd-nginx.pid" )
    ok=1
    _tk_glewlwyd_wait_http "http://127.0.0.1:$gport/api/oidc/" glewlwyd "$dir/glewlwyd.log" || ok=
    if [[ -n $ok ]]; then
      _tk_glewlwyd_wait_http "https://127.0.0.1:$nport/" glewlwyd-nginx "$dir/nginx-error.log" \
        --cacert "$TK_GLEWLWYD_CA_FILE" || ok=
    fi
    [[ -n $ok ]] && break
    _tk_stop_named glewlwyd || true
    _tk_stop_named glewlwyd-nginx || true
    if ((attempt == 5)) || ! grep -qiE 'in use|bind' "$dir/glewlwyd.log" "$dir/nginx-error.log" 2>/dev/null; then
      return 1
    fi
  done

  export TK_GLEWLWYD_ADMIN_URL=http://127.0.0.1:$gport/api
  export TK_GLEWLWYD_ADMIN_USER=admin TK_GLEWLWYD_ADMIN_PASSWORD=password TK_GLEWLWYD_SCOPE=machine
  if ! _tk_glewlwyd_control setup --issuer "$issuer" --sign-key "$dir/ca/sign.key" \
      --sign-pub "$dir/ca/sign.pub" 2>"$dir/setup.log"; then
    _tk_err "configuring glewlwyd failed: $(cat "$dir/setup.log")"
    return 1
  fi
  export TK_GLEWLWYD_ISSUER=$issuer
  export TK_GLEWLWYD_DISCOVERY=$issuer/.well-known/openid-configuration
  export TK_GLEWLWYD_TOKEN_ENDPOINT=$issuer/token
  export TK_GLEWLWYD_MTLS_TOKEN_ENDPOINT=$issuer/mtls/token
  export TK_GLEWLWYD_JWKS_URI=$issuer/jwks
  # The plugin answers once loaded: wait for discovery through nginx.
  for _ in $(seq 50); do
    if [[ $(curl -s -o /dev/null -w '%{http_code}' --cacert "$TK_GLEWLWYD_CA_FILE" "$TK_GLEWLWYD_DISCOVERY") == 200 ]]; then
      return 0
    fi
    sleep 0.1
  done
  _tk_err "no discovery document at $TK_GLEWLWYD_DISCOVERY: $(tail -n 20 "$dir/glewlwyd.log")"
  return 1
}

_tk_glewlwyd_control() {
  "$TK_PYTHON" "$TK_GLEWLWYD_CONTROL_PY" --api "$TK_GLEWLWYD_ADMIN_URL" --user "$TK_GLEWLWYD_ADMIN_USER" \
    --password "$TK_GLEWLWYD_ADMIN_PASSWORD" --scope "${TK_GLEWLWYD_SCOPE:-machine}" "$@"
}

# tk_glewlwyd_add_client < JSON: register (or replace) a client through the admin API
# (docs/API.md "Add a new client"). Defaults: confidential, enabled, authorization_type
# ["client_credentials"], scope [$TK_GLEWLWYD_SCOPE]. Fields the methods use:
# token_endpoint_auth_method [METHOD], client_secret, jwks {"keys":[...]}, pubkey (PEM),
# tls_client_auth_subject_dn, tls_client_auth_san_{dns,uri,ip,email}.
tk_glewlwyd_add_client() {
  if [[ -z ${TK_GLEWLWYD_ADMIN_URL:-} ]]; then _tk_err "tk_glewlwyd_start first"; return 1; fi
  _tk_glewlwyd_control add-client
}

# tk_glewlwyd_delete_client CLIENT_ID
tk_glewlwyd_delete_client() {
  if [[ -z ${TK_GLEWLWYD_ADMIN_URL:-} ]]; then _tk_err "tk_glewlwyd_start first"; return 1; fi
  _tk_glewlwyd_control delete-client "${1:?usage: tk_glewlwyd_delete_client CLIENT_ID}"
}

# tk_glewlwyd_stop: stop nginx and glewlwyd by their recorded PIDs; safe to call twice. DIR
# stays (logs) until the caller removes tk_services_init's directory.
tk_glewlwyd_stop() {
  _tk_need_dir || return 1
  _tk_stop_named glewlwyd-nginx || return 1
  _tk_stop_named glewlwyd || return 1
  unset TK_GLEWLWYD_ISSUER TK_GLEWLWYD_DISCOVERY TK_GLEWLWYD_TOKEN_ENDPOINT TK_GLEWLWYD_MTLS_TOKEN_ENDPOINT \
    TK_GLEWLWYD_JWKS_URI TK_GLEWLWYD_ADMIN_URL
}
