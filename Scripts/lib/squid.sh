# shellcheck shell=bash
# Scripts/lib/squid.sh: the network a company puts between tokenctl and its identity provider,
# for the proxy and private-CA tests: Debian's squid (squid-openssl) on 127.0.0.1 as an open
# proxy, a proxy asking for Basic credentials, a TLS-inspecting (ssl_bump) proxy and an
# https:// proxy; and an authorization server on a name other than localhost
# (idp.tokenctl.test), behind Debian's nginx with a certificate from a private CA made here.
#
# Source it after services.sh (it uses tk_services_init's DIR, its PID records and
# tk_start_authserver; it works under set -euo pipefail); every function is quiet on success,
# prints "services: ..." to stderr and returns non-zero on failure:
#
#   source Scripts/lib/services.sh; source Scripts/lib/squid.sh
#   tk_require_packages "${TK_SQUID_PACKAGES[@]}"
#   tk_services_init "$(mktemp -d)"
#   tk_idp_start [DIR]     # DIR default $TK_SERVICES_DIR/idp: the private CA, the test server
#                          # (tk_start_authserver idp) behind nginx at https://idp.tokenctl.test:PORT
#   tk_squid_start [DIR]   # DIR default $TK_SERVICES_DIR/squid: one squid, four ports (below);
#                          # after tk_idp_start it resolves and trusts the idp
#   tk_idp_run CMD [ARG...]  # CMD in a private mount namespace whose /etc/hosts is
#                          # $TK_IDP_HOSTS: how a direct request reaches the idp
#   tk_squid_wait_lines LOG N   # up to 10 s until LOG has at least N lines
#   tk_squid_stop; tk_idp_stop  # or tk_services_stop_all (everything, by PID)
#
# Both start functions wipe their DIR (only one they made, or an empty one) and start afresh
# (a running instance is stopped first). Processes, recorded in $TK_SERVICES_DIR/pids:
# squid.pid (squid -N: one process; its helpers basic_ncsa_auth and security_file_certgen are
# its children and exit with it), idp.pid (authserver.py), idp-nginx.pid (nginx,
# master_process off).
#
# Exports of tk_idp_start:
#   TK_IDP_NAME           idp.tokenctl.test (resolves to 127.0.0.1 only through TK_IDP_HOSTS)
#   TK_IDP_ISSUER         https://idp.tokenctl.test:PORT (nginx; discovery, tokens' iss, every
#                         endpoint the server publishes)
#   TK_IDP_PORT           PORT
#   TK_IDP_CA_FILE        the private CA's certificate (the only one that verifies nginx's)
#   TK_IDP_CA_SUBJECT     its subject as OpenSSL prints it: O = tokenctl-test, CN = tokenctl idp CA
#   TK_IDP_HOSTS          a hosts(5) file: "127.0.0.1 idp.tokenctl.test" and localhost
#   TK_IDP_CONTROL_URL    http://127.0.0.1:APORT: the test server itself, for its /_test/ control
#                         endpoints (also TK_AUTHSERVER_URL_IDP)
#   TK_IDP_ACCESS_LOG     nginx's access log: one line per request that reached the server
#   TK_IDP_DIR            DIR
# Exports of tk_squid_start (each port its own access log; a request shows in the log of the
# port it came in on; log lines: TIME CLIENT USER STATUS METHOD URL PEER, see logformat below):
#   TK_SQUID_URL          http://127.0.0.1:P1   an open proxy            TK_SQUID_LOG
#   TK_SQUID_AUTH_URL     http://127.0.0.1:P2   Basic credentials needed TK_SQUID_AUTH_LOG
#   TK_SQUID_USER / TK_SQUID_PASSWORD           the one account (the password random per start;
#                         kept only in DIR/htpasswd, hashed)
#   TK_SQUID_BUMP_URL     http://127.0.0.1:P3   TLS-inspecting (ssl_bump)  TK_SQUID_BUMP_LOG
#   TK_SQUID_BUMP_CA      the CA its forged server certificates chain to
#   TK_SQUID_HTTPS_URL    https://127.0.0.1:P4  an https:// proxy (TLS to the proxy itself)
#                                                                      TK_SQUID_HTTPS_LOG
#   TK_SQUID_PROXY_CA     the CA of the https:// proxy's own certificate (CURLOPT_PROXY_CAINFO)
#   TK_SQUID_CLOSED_URL   http://127.0.0.1:P5   nothing listens there (an unreachable proxy)
#   TK_SQUID_DIR          DIR
# Layout of squid's DIR: squid.conf, hosts (its hosts_file), htpasswd, cache.log,
# access-{open,auth,bump,https}.log, ca/ (bump.*, proxyca.*, proxy.*: the https:// proxy's own
# certificate, outgoing.pem: what squid trusts upstream), ssl_db/ (the forged certificates).
# Layout of the idp's DIR: nginx.conf, nginx-access.log, nginx-error.log, hosts, ca/ (ca.*,
# server.*); the test server's log is $TK_SERVICES_DIR/idp.log.
#
# Installing squid-openssl has a side effect outside DIR: on a machine run by systemd it
# enables and starts the system squid on port 3128. It is not used or stopped here.
#
# Measured on Debian 12 (squid-openssl 5.7-2+deb12u6, nginx 1.22.1, curl and libcurl 7.88.1
# OpenSSL/3.0; curlprobe = Scripts/lib/curlprobe.c, a request through libcurl with no option
# but the ones named, as tokenctl makes it). squid-selftest.sh checks them again (all but the
# package and root-only facts of the first list).
#
# The harness (squid, nginx, unshare):
# - squid and squid-openssl conflict as packages (each "Conflicts:" the other: installing one
#   removes the other); squid-openssl ships the same programs and helpers (basic_ncsa_auth
#   among them) built with OpenSSL, which ssl_bump and security_file_certgen need, so this
#   installs squid-openssl only. Its postinst's service start is refused here
#   (invoke-rc.d: policy-rc.d denied execution of start); ours never uses port 3128.
# - As root, squid switches to cache_effective_user proxy and then cannot write a 0700
#   directory of root's ("FATAL: Cannot open '.../access.log' for writing. The parent
#   directory must be writeable by the user 'proxy'"); `cache_effective_user root` is refused
#   ("FATAL: Don't run Squid as root, set 'cache_effective_user'!"). Run under `unshare --user
#   --map-user=proxy --map-group=proxy`, squid is not root, stays itself and owns root's files;
#   it logs "WARNING: no_suid: setuid(0): (22) Invalid argument" twice, harmlessly.
# - squid -N with shutdown_lifetime 0 exits within about 1 s of SIGTERM; its helpers
#   (basic_ncsa_auth, security_file_certgen: its children) go with it.
# - squid resolves names from its hosts_file only (then DNS, not /etc/hosts): with "::1
#   localhost" there, a request for http://localhost:PORT is tried on ::1 and answered 503.
# - Access log: one line per request; a CONNECT tunnel is one line, written when the tunnel
#   closes (an open tunnel is not in the log: checked with a client holding one), 4-5 ms after
#   the curl tool exits; two requests over one tunnel (curl URL URL) are one TCP_TUNNEL/200
#   CONNECT line and two lines at nginx. Count requests at nginx (TK_IDP_ACCESS_LOG), tunnels
#   at squid, and wait for squid's line with tk_squid_wait_lines once the client has exited.
# - Basic credentials: a request without them or with a wrong password gets
#   "HTTP/1.1 407 Proxy Authentication Required" with `Proxy-Authenticate: Basic
#   realm="tokenctl-test proxy"` and `X-Squid-Error: ERR_CACHE_ACCESS_DENIED 0`, logged
#   TCP_DENIED/407 (with the user name when one was sent), and nothing reaches the server;
#   libcurl sends Basic credentials from the proxy URL at once (no 407 round trip). The
#   password is in no file of squid's but the hashed htpasswd (basic_ncsa_auth reads
#   `openssl passwd -1` hashes).
# - Bumped (ssl_bump): a refused handshake logs "NONE_NONE/200 CONNECT idp.tokenctl.test:PORT"
#   alone; an accepted one that line and "TCP_MISS/200 GET https://idp.tokenctl.test:PORT/...".
#   The forged certificate: subject "O = tokenctl-test, CN = idp.tokenctl.test" (the origin's),
#   issuer "O = tokenctl-test, CN = tokenctl inspecting proxy CA"; squid sends the CA in the
#   chain (3 certificates), so the error is "self-signed certificate in certificate chain".
# - https_port (forward proxy over TLS) works: curl -x https://127.0.0.1:P --proxy-cacert CA.
# - tk_idp_run: as root `unshare -m` + `mount --bind HOSTS /etc/hosts` works (getent hosts
#   idp.tokenctl.test: 127.0.0.1 inside; exit 2 outside); as another user `unshare -m` alone
#   fails ("unshare failed: Operation not permitted"), `unshare -r -m` works but makes the
#   command uid 0 of a user namespace, hence the nested namespace mapping the user back.
#
# What libcurl 7.88.1 does (curlprobe, requests run in tk_idp_run; VIA = the port libcurl
# connected to, CURLINFO_PRIMARY_PORT; the self-test starts each with no proxy or CA variable
# but the ones named: mind CURL_CA_BUNDLE and SSL_CERT_FILE exported by CI images, which change
# the curl tool's answers):
# - CA variables: libcurl ignores SSL_CERT_FILE, SSL_CERT_DIR and CURL_CA_BUNDLE (60,
#   "SSL certificate problem: unable to get local issuer certificate"); only CURLOPT_CAINFO /
#   CAPATH change what it trusts. The curl tool honours all three (it reads them itself when
#   neither --cacert nor --capath is given), CURL_CA_BUNDLE first, then SSL_CERT_DIR, then SSL_CERT_FILE, and
#   --cacert over all of them; openssl s_client honours SSL_CERT_FILE and SSL_CERT_DIR.
# - Proxy variables: http_proxy (lower case only: HTTP_PROXY is ignored) for http:// URLs;
#   https_proxy or HTTPS_PROXY for https:// URLs (http_proxy alone leaves them direct);
#   all_proxy or ALL_PROXY for both; a proxy without a scheme is http://. CURLOPT_PROXY ""
#   turns every proxy variable off; CURLOPT_NOPROXY "" overrides NO_PROXY.
# - Loopback is not exempt: http://127.0.0.1:P/, http://localhost:P/ and http://[::1]:P/ all go
#   through http_proxy (the proxy answers; 503 for ::1, where nothing listens).
# - NO_PROXY / no_proxy (comma-separated, spaces allowed, case-insensitive) for
#   https://idp.tokenctl.test: "idp.tokenctl.test", ".tokenctl.test", "tokenctl.test",
#   "test" and "*" skip the proxy; "*.tokenctl.test", "idp.tokenctl.test:PORT", "127.0.0.1" and
#   "127.0.0.0/8" do not (address entries match only URLs with that literal address). For
#   http://127.0.0.1: "127.0.0.1", "127.0.0.0/8", "127.0.0.0/24", "*" skip it; "10.0.0.0/8" and
#   "localhost" do not. "127.0.0.0/8" does not cover http://localhost. For http://[::1]: "::1"
#   skips it; "[::1]" and "::1/128" do not (an IPv6 CIDR entry did not match here).
# - 407 on CONNECT (https:// URL; no credentials or a wrong password): CURLE_RECV_ERROR (56),
#   "CONNECT tunnel failed, response 407", CURLINFO_HTTP_CONNECTCODE 407, CURLINFO_RESPONSE_CODE
#   0. For an http:// URL through the same proxy: CURLE_OK with CURLINFO_RESPONSE_CODE 407.
# - Proxy credentials: from the proxy URL's user:password@ (percent-decoded: %34 for "4"
#   works), or CURLOPT_PROXYUSERNAME / CURLOPT_PROXYPASSWORD with the proxy from the
#   environment; when both are there the URL's win (a wrong password in https_proxy with the
#   right one in CURLOPT_PROXYPASSWORD: 407). CURLOPT_VERBOSE's trace prints
#   "Proxy auth using Basic with user 'NAME'" and the whole "Proxy-Authorization: Basic
#   BASE64(user:password)" header: a -v built on libcurl's trace shows the password.
# - No CURLINFO says which proxy a request used (CURLINFO_USED_PROXY came in libcurl 8.7.0:
#   https://curl.se/libcurl/c/CURLINFO_USED_PROXY.html); the
#   connected peer (CURLINFO_PRIMARY_IP/PORT) is the proxy's address when one was used.
# - Unreachable proxy: nothing listening, CURLE_COULDNT_CONNECT (7) "Failed to connect to
#   127.0.0.1 port P after 0 ms: Couldn't connect to server"; a name that does not resolve,
#   CURLE_COULDNT_RESOLVE_PROXY (5) "Could not resolve proxy: proxy.invalid". CONNECTCODE 0.
# - https:// proxy: its certificate is checked against CURLOPT_PROXY_CAINFO only (default: the
#   system bundle), never CURLOPT_CAINFO (both CAs in CAINFO: still refused); refused is 60
#   "SSL certificate problem: unable to get local issuer certificate" with
#   CURLINFO_PROXY_SSL_VERIFYRESULT 20 and CURLINFO_SSL_VERIFYRESULT 0.
# - A certificate that does not verify: CURLE_PEER_FAILED_VERIFICATION (60), errbuf "SSL
#   certificate problem: unable to get local issuer certificate" (private CA not trusted;
#   CURLINFO_SSL_VERIFYRESULT 20) or "... self-signed certificate in certificate chain" (the
#   inspecting proxy, which sends its CA; 19, CONNECTCODE 200). CURLINFO_CERTINFO is empty on
#   that failure (CURLOPT_CERTINFO: 0 certificates). Two ways that do get the subject and
#   issuer: an OpenSSL verify callback installed from CURLOPT_SSL_CTX_FUNCTION
#   (SSL_CTX_set_verify keeping the mode; X509_STORE_CTX_get0_cert is the server's
#   certificate whichever depth fails: OpenSSL stops at the first failing depth, so a
#   depth-0 check sees nothing when the chain fails higher up), or a second handshake with
#   CURLOPT_CONNECT_ONLY, SSL_VERIFYPEER 0 and CERTINFO (no HTTP request is sent; CURLE_OK,
#   certificate 0 = the server's). Names print as "O = tokenctl-test, CN = idp.tokenctl.test"
#   (X509_NAME_print_ex XN_FLAG_ONELINE, as CERTINFO's Subject:/Issuer:).

# gcc, libc6-dev, libcurl4-openssl-dev, libssl-dev: squid-selftest.sh builds curlprobe.c.
# shellcheck disable=SC2034 # used by callers
TK_SQUID_PACKAGES=(squid-openssl nginx openssl curl python3 util-linux gcc libc6-dev libcurl4-openssl-dev libssl-dev)
TK_IDP_NAME=idp.tokenctl.test
TK_SQUID_BIN=${TK_SQUID_BIN:-/usr/sbin/squid}
TK_SQUID_HELPERS=${TK_SQUID_HELPERS:-/usr/lib/squid}

_tk_squid_free_port() {
  "$TK_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# _tk_squid_fresh_dir DIR MARKER: DIR made anew (mode 0700), or refused when it is neither
# empty nor one made here before (its marker file). Prints the absolute path.
_tk_squid_fresh_dir() {
  local dir=$1 marker=$2
  if [[ -d $dir && ! -f $dir/$marker && -n $(ls -A "$dir") ]]; then
    _tk_err "$dir is not empty and not a squid.sh directory: refusing to wipe it"
    return 1
  fi
  rm -rf "$dir"
  { mkdir -p "$dir" && chmod 0700 "$dir" && : >"$dir/$marker"; } || { _tk_err "cannot create $dir"; return 1; }
  (cd "$dir" && pwd)
}

# _tk_squid_ca DIR NAME CN: a CA (EC P-256): DIR/NAME.{key,crt}.
_tk_squid_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj "/O=tokenctl-test/CN=$3" -keyout "$1/$2.key" -out "$1/$2.crt" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}

# _tk_squid_leaf DIR CA NAME CN SAN: a server certificate from DIR/CA: DIR/NAME.{key,crt}.
_tk_squid_leaf() {
  local d=$1 ca=$2 name=$3 cn=$4 san=$5
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/O=tokenctl-test/CN=$cn" \
    -keyout "$d/$name.key" -out "$d/$name.csr" &&
  openssl x509 -req -in "$d/$name.csr" -CA "$d/$ca.crt" -CAkey "$d/$ca.key" -CAcreateserial \
    -days 30 -out "$d/$name.crt" \
    -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san") &&
  rm -f "$d/$name.csr"
}

# _tk_squid_wait_answer URL PIDNAME LOG [CURL_ARGS...]: up to 15 s for any answer.
_tk_squid_wait_answer() {
  local url=$1 name=$2 log=$3 pid
  shift 3
  pid=$(<"$TK_SERVICES_DIR/pids/$name.pid")
  for _ in $(seq 150); do
    if curl -s -o /dev/null --max-time 2 --noproxy '*' "$@" "$url"; then return 0; fi
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

_tk_idp_write_nginx_conf() {
  local dir=$1 port=$2 upstream=$3
  cat >"$dir/nginx.conf" <<CONF
# Written by Scripts/lib/squid.sh for the tokenctl tests: one process, in the foreground.
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log info;
events { worker_connections 64; }
http {
    log_format tk '\$remote_addr "\$request" \$status \$ssl_server_name';
    access_log $dir/nginx-access.log tk;
    client_body_temp_path $dir/nginx-tmp/body;
    proxy_temp_path $dir/nginx-tmp/proxy;
    fastcgi_temp_path $dir/nginx-tmp/fastcgi;
    uwsgi_temp_path $dir/nginx-tmp/uwsgi;
    scgi_temp_path $dir/nginx-tmp/scgi;
    server {
        listen 127.0.0.1:$port ssl;
        server_name $TK_IDP_NAME;
        ssl_certificate $dir/ca/server.crt;
        ssl_certificate_key $dir/ca/server.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {
            proxy_pass http://$upstream;
            proxy_http_version 1.1;
            proxy_set_header Host \$http_host;
            proxy_set_header X-Forwarded-Proto https;
            proxy_set_header X-Forwarded-For \$remote_addr;
        }
    }
}
CONF
}

# tk_idp_start [DIR]: see the header.
tk_idp_start() {
  _tk_need_dir || return 1
  local dir=${1:-$TK_SERVICES_DIR/idp} nport aport attempt ok
  local pids=$TK_SERVICES_DIR/pids
  tk_idp_stop || return 1
  command -v nginx >/dev/null || { _tk_err "nginx missing: tk_require_packages \"\${TK_SQUID_PACKAGES[@]}\""; return 1; }
  dir=$(_tk_squid_fresh_dir "$dir" .tk-idp) || return 1
  mkdir -m 0700 "$dir/ca" "$dir/nginx-tmp"
  if ! { _tk_squid_ca "$dir/ca" ca "tokenctl idp CA" &&
         _tk_squid_leaf "$dir/ca" ca server "$TK_IDP_NAME" "DNS:$TK_IDP_NAME"; } >"$dir/openssl.log" 2>&1; then
    _tk_err "openssl failed: $(tail -n 5 "$dir/openssl.log")"; return 1
  fi
  printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n127.0.0.1 %s\n' "$TK_IDP_NAME" >"$dir/hosts"
  chmod 0644 "$dir/hosts"
  export TK_IDP_NAME TK_IDP_DIR=$dir TK_IDP_CA_FILE=$dir/ca/ca.crt TK_IDP_HOSTS=$dir/hosts
  export TK_IDP_CA_SUBJECT="O = tokenctl-test, CN = tokenctl idp CA" TK_IDP_ACCESS_LOG=$dir/nginx-access.log
  for attempt in 1 2 3 4 5; do
    nport=$(_tk_squid_free_port) || { _tk_err "no free port"; return 1; }
    # The test server publishes the nginx URL as its issuer (authserver.py --issuer's default).
    TK_AUTHSERVER_ISSUER=https://$TK_IDP_NAME:$nport tk_start_authserver idp || return 1
    aport=$(tr -dc 0-9 <"$TK_SERVICES_DIR/idp.port")
    _tk_idp_write_nginx_conf "$dir" "$nport" "127.0.0.1:$aport"
    if ! nginx -t -c "$dir/nginx.conf" -p "$dir" -e "$dir/nginx-error.log" >"$dir/nginx-t.log" 2>&1; then
      _tk_err "nginx -t rejects $dir/nginx.conf: $(cat "$dir/nginx-t.log")"
      return 1
    fi
    ( nginx -c "$dir/nginx.conf" -p "$dir" -e "$dir/nginx-error.log" </dev/null >>"$dir/nginx.out" 2>&1 &
      echo $! >"$pids/idp-nginx.pid" )
    ok=1
    _tk_squid_wait_answer "https://$TK_IDP_NAME:$nport/.well-known/openid-configuration" idp-nginx \
      "$dir/nginx-error.log" --cacert "$TK_IDP_CA_FILE" --resolve "$TK_IDP_NAME:$nport:127.0.0.1" || ok=
    [[ -n $ok ]] && break
    _tk_stop_named idp-nginx || true
    tk_stop_authserver idp || true
    if ((attempt == 5)) || ! grep -qiE 'in use|bind' "$dir/nginx-error.log" 2>/dev/null; then return 1; fi
  done
  export TK_IDP_PORT=$nport TK_IDP_ISSUER=https://$TK_IDP_NAME:$nport TK_IDP_CONTROL_URL=$TK_AUTHSERVER_URL_IDP
}

# tk_idp_stop: nginx and the test server, by their recorded PIDs; safe to call twice.
tk_idp_stop() {
  _tk_need_dir || return 1
  _tk_stop_named idp-nginx || return 1
  if [[ -f $TK_SERVICES_DIR/pids/idp.pid ]]; then tk_stop_authserver idp || return 1; fi
  unset TK_IDP_ISSUER TK_IDP_PORT TK_IDP_CONTROL_URL
}

# tk_idp_run CMD [ARG...]: CMD in a private mount namespace (unshare -m) where $TK_IDP_HOSTS
# is bind-mounted on /etc/hosts, so that TK_IDP_NAME resolves to 127.0.0.1 for CMD and its
# children and for nothing else on the machine. The environment, standard streams and exit
# status are CMD's; the mount goes away with the last process in the namespace. As root: a
# mount namespace alone. Otherwise (no CAP_SYS_ADMIN) a user namespace as well (unshare -r, in
# which the mount is allowed), then a nested one mapping the user back to their own uid and
# gid, so that CMD runs as the user (getuid(), D-Bus EXTERNAL authentication) and not as the
# namespace's root.
tk_idp_run() {
  if [[ -z ${TK_IDP_HOSTS:-} ]]; then _tk_err "tk_idp_start first"; return 1; fi
  # shellcheck disable=SC2016 # the inner shell expands them
  if [[ $(id -u) == 0 ]]; then
    unshare -m --propagation private -- /bin/sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$TK_IDP_HOSTS" "$@"
  else
    unshare -r -m --propagation private -- /bin/sh -c \
      'u=$1 g=$2; shift 2; mount --bind "$0" /etc/hosts && exec unshare --user --map-user="$u" --map-group="$g" -- "$@"' \
      "$TK_IDP_HOSTS" "$(id -u)" "$(id -g)" "$@"
  fi
}

_tk_squid_write_conf() {
  local dir=$1 p_open=$2 p_auth=$3 p_bump=$4 p_tls=$5 hosts=$6 cafile=$7
  cat >"$dir/squid.conf" <<CONF
# Written by Scripts/lib/squid.sh for the tokenctl tests: squid -N (one process, foreground),
# no cache, everything in $dir.
http_port 127.0.0.1:$p_open name=open
http_port 127.0.0.1:$p_auth name=auth
http_port 127.0.0.1:$p_bump name=bump ssl-bump generate-host-certificates=on dynamic_cert_mem_cache_size=4MB tls-cert=$dir/ca/bump.crt tls-key=$dir/ca/bump.key
https_port 127.0.0.1:$p_tls name=tls tls-cert=$dir/ca/proxy.crt tls-key=$dir/ca/proxy.key
pid_filename $dir/squid.pid
cache_log $dir/cache.log
cache_store_log none
cache deny all
coredump_dir $dir
netdb_filename none
pinger_enable off
icp_port 0
htcp_port 0
shutdown_lifetime 0 seconds
hosts_file $hosts
dns_timeout 5 seconds
# TIME CLIENT USER STATUS METHOD URL PEER: never a request header (Proxy-Authorization).
logformat tk %ts.%03tu %>a %un %Ss/%03>Hs %rm %ru %<a
acl p_open myportname open
acl p_auth myportname auth
acl p_bump myportname bump
acl p_tls myportname tls
access_log stdio:$dir/access-open.log logformat=tk p_open
access_log stdio:$dir/access-auth.log logformat=tk p_auth
access_log stdio:$dir/access-bump.log logformat=tk p_bump
access_log stdio:$dir/access-https.log logformat=tk p_tls
auth_param basic program $TK_SQUID_HELPERS/basic_ncsa_auth $dir/htpasswd
auth_param basic children 2 startup=1
auth_param basic realm tokenctl-test proxy
auth_param basic credentialsttl 1 second
acl authed proxy_auth REQUIRED
http_access deny p_auth !authed
http_access allow localhost
http_access deny all
sslcrtd_program $TK_SQUID_HELPERS/security_file_certgen -s $dir/ssl_db -M 4MB
sslcrtd_children 2 startup=1
# The origin's certificate is checked against these (the system's and the idp's private CA).
tls_outgoing_options cafile=$cafile
acl step1 at_step SslBump1
ssl_bump peek step1
ssl_bump bump all
CONF
}

# tk_squid_start [DIR]: see the header.
tk_squid_start() {
  _tk_need_dir || return 1
  local dir=${1:-$TK_SERVICES_DIR/squid} attempt ok p1 p2 p3 p4 p5 hosts cafile run=()
  local pids=$TK_SERVICES_DIR/pids
  tk_squid_stop || return 1
  [[ -x $TK_SQUID_BIN && -x $TK_SQUID_HELPERS/basic_ncsa_auth && -x $TK_SQUID_HELPERS/security_file_certgen ]] ||
    { _tk_err "squid missing: tk_require_packages \"\${TK_SQUID_PACKAGES[@]}\""; return 1; }
  dir=$(_tk_squid_fresh_dir "$dir" .tk-squid) || return 1
  mkdir -m 0700 "$dir/ca"
  if ! { _tk_squid_ca "$dir/ca" bump "tokenctl inspecting proxy CA" &&
         _tk_squid_ca "$dir/ca" proxyca "tokenctl proxy CA" &&
         _tk_squid_leaf "$dir/ca" proxyca proxy 127.0.0.1 "IP:127.0.0.1,DNS:localhost"; } >"$dir/openssl.log" 2>&1; then
    _tk_err "openssl failed: $(tail -n 5 "$dir/openssl.log")"; return 1
  fi
  export TK_SQUID_DIR=$dir TK_SQUID_BUMP_CA=$dir/ca/bump.crt TK_SQUID_PROXY_CA=$dir/ca/proxyca.crt
  export TK_SQUID_USER=tokenctl-proxy-user
  TK_SQUID_PASSWORD=$(openssl rand -hex 12)
  export TK_SQUID_PASSWORD
  # basic_ncsa_auth reads crypt(3) hashes, MD5 ($1$) among them.
  printf '%s:%s\n' "$TK_SQUID_USER" "$(printf %s "$TK_SQUID_PASSWORD" | openssl passwd -1 -stdin)" >"$dir/htpasswd"
  # squid reads names from this file only (then DNS): 127.0.0.1 for localhost (IPv4 only, as
  # the test servers listen) and, after tk_idp_start, for the idp.
  hosts=$dir/hosts
  printf '127.0.0.1 localhost%s\n' "${TK_IDP_HOSTS:+ $TK_IDP_NAME}" >"$hosts"
  cafile=$dir/ca/outgoing.pem
  cat /etc/ssl/certs/ca-certificates.crt ${TK_IDP_CA_FILE:+"$TK_IDP_CA_FILE"} >"$cafile" 2>/dev/null || true
  if ! "$TK_SQUID_HELPERS/security_file_certgen" -c -s "$dir/ssl_db" -M 4MB >"$dir/certgen.log" 2>&1; then
    _tk_err "security_file_certgen -c failed: $(cat "$dir/certgen.log")"; return 1
  fi
  # As root, squid switches to its cache_effective_user (proxy), which cannot reach a 0700
  # directory of root's ("FATAL: Cannot open ... for writing"), and refuses to stay root
  # ("FATAL: Don't run Squid as root"). In a user namespace where root is mapped to proxy's
  # uid it is not root, does not switch, and owns root's files.
  if [[ $(id -u) == 0 ]]; then run=(unshare --user --map-user=proxy --map-group=proxy --); fi
  for attempt in 1 2 3 4 5; do
    if ! { p1=$(_tk_squid_free_port) && p2=$(_tk_squid_free_port) && p3=$(_tk_squid_free_port) &&
           p4=$(_tk_squid_free_port) && p5=$(_tk_squid_free_port); }; then
      _tk_err "no free port"; return 1
    fi
    [[ $(printf '%s\n' "$p1" "$p2" "$p3" "$p4" "$p5" | sort -u | wc -l) == 5 ]] || continue
    _tk_squid_write_conf "$dir" "$p1" "$p2" "$p3" "$p4" "$hosts" "$cafile"
    if ! "$TK_SQUID_BIN" -k parse -f "$dir/squid.conf" >"$dir/parse.log" 2>&1; then
      _tk_err "squid -k parse rejects $dir/squid.conf: $(grep -iE 'fatal|error|warn' "$dir/parse.log" | head -n 5)"
      return 1
    fi
    : >"$dir/cache.log"
    ( "${run[@]}" "$TK_SQUID_BIN" -N -f "$dir/squid.conf" </dev/null >>"$dir/squid.out" 2>&1 &
      echo $! >"$pids/squid.pid" )
    ok=1
    _tk_squid_wait_answer "http://127.0.0.1:$p1/" squid "$dir/cache.log" || ok=
    [[ -n $ok ]] && break
    _tk_stop_named squid || true
    if ((attempt == 5)) || ! grep -qiE 'in use|bind' "$dir/cache.log" 2>/dev/null; then return 1; fi
  done
  export TK_SQUID_URL=http://127.0.0.1:$p1 TK_SQUID_AUTH_URL=http://127.0.0.1:$p2
  export TK_SQUID_BUMP_URL=http://127.0.0.1:$p3 TK_SQUID_HTTPS_URL=https://127.0.0.1:$p4
  export TK_SQUID_CLOSED_URL=http://127.0.0.1:$p5
  export TK_SQUID_LOG=$dir/access-open.log TK_SQUID_AUTH_LOG=$dir/access-auth.log
  export TK_SQUID_BUMP_LOG=$dir/access-bump.log TK_SQUID_HTTPS_LOG=$dir/access-https.log
}

# tk_squid_wait_lines LOG N: wait up to 10 s until LOG has at least N lines (squid writes a
# CONNECT tunnel's line when the tunnel closes, after the client has gone: see the header).
tk_squid_wait_lines() {
  local log=${1:?usage: tk_squid_wait_lines LOG N} n=${2:?usage: tk_squid_wait_lines LOG N}
  for _ in $(seq 100); do
    [[ -f $log && $(wc -l <"$log") -ge $n ]] && return 0
    sleep 0.1
  done
  _tk_err "$log has $(wc -l <"$log" 2>/dev/null || echo 0) line(s) after 10 s, want $n"
  return 1
}

# tk_squid_stop: squid by its recorded PID (its helpers follow); safe to call twice. DIR stays
# (logs) until the caller removes tk_services_init's directory.
tk_squid_stop() {
  _tk_need_dir || return 1
  _tk_stop_named squid || return 1
  unset TK_SQUID_URL TK_SQUID_AUTH_URL TK_SQUID_BUMP_URL TK_SQUID_HTTPS_URL TK_SQUID_CLOSED_URL
}
