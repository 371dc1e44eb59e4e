#!/usr/bin/env bash
# Self-check for Scripts/lib/squid.sh, and the measurements its header records: the test
# authorization server behind nginx at https://idp.tokenctl.test:PORT (a private CA, the name
# resolving only in tk_idp_run's namespace and in squid's hosts_file), squid's four ports (open,
# Basic credentials, TLS-inspecting, https://) each logging what went through it, and what
# libcurl 7.88.1 makes of the proxy environment variables, NO_PROXY, CA settings, a 407, an
# unreachable proxy and a certificate that does not verify (Scripts/lib/curlprobe.c, built
# here with gcc, against the system libcurl tokenctl links), compared with the curl tool;
# everything is stopped by PID, with no stray process. Needs root for apt-get (when a package
# is missing) and, to run the direct requests as root, nothing else.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=services.sh
source "$here/services.sh"
# shellcheck source=squid.sh
source "$here/squid.sh"

tk_require_packages "${TK_SQUID_PACKAGES[@]}"

started=$SECONDS
root=$(mktemp -d)
cleanup() {
  tk_squid_stop 2>/dev/null || true
  tk_idp_stop 2>/dev/null || true
  tk_services_stop_all || true
  if [[ -n ${KEEP:-} ]]; then echo "kept $root" >&2; else rm -rf "$root"; fi
}
trap cleanup EXIT

# shellcheck source=selftest.sh
source "$here/selftest.sh"

probe_bin=$root/curlprobe
gcc -O1 -o "$probe_bin" "$here/curlprobe.c" -lcurl -lssl -lcrypto
tk_services_init "$root/svc"
tk_idp_start
tk_squid_start
s_pid=$(<"$TK_SERVICES_DIR/pids/squid.pid")
n_pid=$(<"$TK_SERVICES_DIR/pids/idp-nginx.pid")
a_pid=$(<"$TK_SERVICES_DIR/pids/idp.pid")
expect "squid pid is squid" "$(cat "/proc/$s_pid/comm")" squid
expect "nginx pid is nginx" "$(cat "/proc/$n_pid/comm")" nginx
expect "test server pid is python3" "$(cat "/proc/$a_pid/comm")" python3

# Ports by name, for "where did the request go" (CURLINFO_PRIMARY_PORT).
declare -A via
name_ports() {
  via=(["${TK_SQUID_URL##*:}"]=open ["${TK_SQUID_AUTH_URL##*:}"]=auth ["${TK_SQUID_BUMP_URL##*:}"]=bump
    ["${TK_SQUID_HTTPS_URL##*:}"]=https ["$TK_IDP_PORT"]=direct ["${TK_IDP_CONTROL_URL##*:}"]=direct)
}
name_ports
I=$TK_IDP_ISSUER/.well-known/openid-configuration # https, by name
H=$TK_IDP_CONTROL_URL/.well-known/openid-configuration # http, 127.0.0.1
CA=(--cainfo "$TK_IDP_CA_FILE")
proxy_vars=(http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
  SSL_CERT_FILE SSL_CERT_DIR CURL_CA_BUNDLE)
# clean_run [VAR=VALUE...] -- CMD...: CMD in tk_idp_run's namespace with no proxy or CA
# variable but the ones given.
clean_run() {
  (
    unset "${proxy_vars[@]}"
    while [[ $1 != -- ]]; do export "${1?}"; shift; done
    shift
    tk_idp_run "$@"
  )
}
# probe [VAR=VALUE...] -- [curlprobe OPTIONS] URL: curlprobe through clean_run; prints
# "NAME RESPONSE_CODE CONNECT_CODE VIA" and leaves its whole output in $root/probe.out.
probe() {
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  clean_run "${envs[@]}" -- "$probe_bin" "$@" >"$root/probe.out" 2>"$root/probe.err" || true
  local name code connect port
  name=$(sed -n 's/^result=[0-9]* name=//p' "$root/probe.out")
  code=$(sed -n 's/^response_code=//p' "$root/probe.out")
  connect=$(sed -n 's/^connect_code=//p' "$root/probe.out")
  port=$(sed -n 's/^primary=.*://p' "$root/probe.out")
  printf '%s %s %s %s\n' "${name:-none}" "$code" "$connect" "${via[$port]:-port$port}"
}
field() { sed -n "s/^$1=//p" "$root/probe.out"; }
lines() { if [[ -f $1 ]]; then wc -l <"$1" | tr -d ' '; else echo 0; fi; }

# 1. The name: resolved in the namespace, not outside it.
expect "idp name does not resolve outside" "$(getent hosts "$TK_IDP_NAME" >/dev/null && echo resolves || echo no)" no
expect "idp name resolves in tk_idp_run" "$(tk_idp_run getent hosts "$TK_IDP_NAME" | awk '{print $1}')" 127.0.0.1
expect "tk_idp_run keeps the exit status" "$(tk_idp_run sh -c 'exit 7' && echo 0 || echo $?)" 7
# shellcheck disable=SC2016 # expanded by the inner shell
if [[ $(id -u) == 0 ]]; then
  # The other path of tk_idp_run, as nobody (with a copy of the hosts file nobody can read).
  hosts_copy=$(mktemp)
  cp "$TK_IDP_HOSTS" "$hosts_copy" && chmod 0644 "$hosts_copy"
  expect "tk_idp_run as another user: the name resolves, the uid is the user's" \
    "$(TK_IDP_HOSTS=$hosts_copy setpriv --reuid=65534 --regid=65534 --clear-groups \
       bash -c "$(declare -f tk_idp_run _tk_err); tk_idp_run sh -c 'id -u; getent hosts $TK_IDP_NAME'" | awk '{print $1}' | tr '\n' ' ')" \
    "65534 127.0.0.1 "
  rm -f "$hosts_copy"
fi
expect "tk_idp_run keeps the environment" "$(TK_PROBE_VAR=kept tk_idp_run sh -c 'echo $TK_PROBE_VAR')" kept

# 2. The server behind nginx: discovery names the TLS front as issuer, endpoints under it.
tk_idp_run curl -sf --cacert "$TK_IDP_CA_FILE" "$I" >"$root/discovery.json" || bad "discovery through nginx"
disc() { "$TK_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$root/discovery.json" "$1"; }
expect "discovery issuer" "$(disc issuer)" "$TK_IDP_ISSUER"
expect "discovery token_endpoint" "$(disc token_endpoint)" "$TK_IDP_ISSUER/token"
expect "discovery device endpoint" "$(disc device_authorization_endpoint)" "$TK_IDP_ISSUER/device_authorization"
expect "nginx logged it with SNI" "$(tail -n 1 "$TK_IDP_ACCESS_LOG")" \
  "127.0.0.1 \"GET /.well-known/openid-configuration HTTP/1.1\" 200 $TK_IDP_NAME"
expect "control endpoint answers on 127.0.0.1" "$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' "$TK_IDP_CONTROL_URL/_test/stats")" 200
# A refresh through the open proxy, seen at squid, at nginx and by the server.
rt=$(curl -s --noproxy '*' -d '{"client_id":"cli"}' "$TK_IDP_CONTROL_URL/_test/issue" |
  "$TK_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["refresh_token"])')
expect "refresh through the open proxy: 200" \
  "$(clean_run -- curl -s -o "$root/token.json" -w '%{http_code}' --cacert "$TK_IDP_CA_FILE" -x "$TK_SQUID_URL" \
     -d grant_type=refresh_token --data-urlencode "refresh_token=$rt" -d client_id=cli "$TK_IDP_ISSUER/token")" 200
expect "  ... an access token" "$("$TK_PYTHON" -c 'import json,sys; print("access_token" in json.load(open(sys.argv[1])))' "$root/token.json")" True
expect "  ... nginx saw POST /token" "$(tail -n 1 "$TK_IDP_ACCESS_LOG")" "127.0.0.1 \"POST /token HTTP/1.1\" 200 $TK_IDP_NAME"
tk_squid_wait_lines "$TK_SQUID_LOG" 1 || true
expect "  ... squid's open port logged the tunnel" "$(awk '{print $4, $5, $6}' "$TK_SQUID_LOG")" \
  "TCP_TUNNEL/200 CONNECT $TK_IDP_NAME:$TK_IDP_PORT"
expect "  ... the server logged the grant" \
  "$(curl -s --noproxy '*' "$TK_IDP_CONTROL_URL/_test/log" | "$TK_PYTHON" -c 'import json,sys; e=[x for x in json.load(sys.stdin) if x["path"]=="/token"]; print(len(e), e[-1]["status"])')" "1 200"

# 3. A certificate that does not verify; the CA settings libcurl reads and those it does not.
expect "libcurl, no CA option: refused" "$(probe -- --certinfo --ctx-chain "$I")" "CURLE_PEER_FAILED_VERIFICATION 0 0 direct"
expect "  ... message" "$(field error)" "SSL certificate problem: unable to get local issuer certificate"
expect "  ... CURLINFO_SSL_VERIFYRESULT 20 (X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY)" "$(field verify_result)" 20
expect "  ... CURLINFO_CERTINFO is empty on failure" "$(field certs)" 0
expect "  ... an SSL_CTX verify callback sees the subject" "$(field chain.subject)" "O = tokenctl-test, CN = $TK_IDP_NAME"
expect "  ... and the issuer" "$(field chain.issuer)" "$TK_IDP_CA_SUBJECT"
expect "libcurl, CONNECT_ONLY without verification: handshake only" "$(probe -- --connect-only --no-verify --certinfo "$I")" \
  "CURLE_OK 0 0 direct"
expect "  ... CERTINFO subject" "$(field cert.0.subject)" "O = tokenctl-test, CN = $TK_IDP_NAME"
expect "  ... CERTINFO issuer" "$(field cert.0.issuer)" "$TK_IDP_CA_SUBJECT"
expect "libcurl, CURLOPT_CAINFO: accepted" "$(probe -- "${CA[@]}" "$I")" "CURLE_OK 200 0 direct"
expect "libcurl ignores SSL_CERT_FILE" "$(probe "SSL_CERT_FILE=$TK_IDP_CA_FILE" -- "$I")" "CURLE_PEER_FAILED_VERIFICATION 0 0 direct"
certdir=$root/certdir
mkdir "$certdir" && cp "$TK_IDP_CA_FILE" "$certdir/" && openssl rehash "$certdir" 2>/dev/null
expect "libcurl ignores SSL_CERT_DIR" "$(probe "SSL_CERT_DIR=$certdir" -- "$I")" "CURLE_PEER_FAILED_VERIFICATION 0 0 direct"
expect "libcurl ignores CURL_CA_BUNDLE" "$(probe "CURL_CA_BUNDLE=$TK_IDP_CA_FILE" -- "$I")" "CURLE_PEER_FAILED_VERIFICATION 0 0 direct"
ctool() { clean_run "$@" -- curl -s -o /dev/null -w '%{http_code} %{exitcode}' "$I" || true; }
expect "curl tool honours SSL_CERT_FILE" "$(ctool "SSL_CERT_FILE=$TK_IDP_CA_FILE")" "200 0"
expect "curl tool honours SSL_CERT_DIR" "$(ctool "SSL_CERT_DIR=$certdir")" "200 0"
expect "curl tool honours CURL_CA_BUNDLE" "$(ctool "CURL_CA_BUNDLE=$TK_IDP_CA_FILE")" "200 0"
sys=/etc/ssl/certs/ca-certificates.crt
mkdir "$root/emptydir"
expect "curl tool: CURL_CA_BUNDLE wins over SSL_CERT_FILE" \
  "$(ctool "CURL_CA_BUNDLE=$sys" "SSL_CERT_FILE=$TK_IDP_CA_FILE")" "000 60"
expect "curl tool: SSL_CERT_DIR wins over SSL_CERT_FILE" \
  "$(ctool "SSL_CERT_DIR=$root/emptydir" "SSL_CERT_FILE=$TK_IDP_CA_FILE")" "000 60"
expect "curl tool: --cacert wins over SSL_CERT_FILE" \
  "$(clean_run "SSL_CERT_FILE=$TK_IDP_CA_FILE" -- curl -s -o /dev/null -w '%{http_code} %{exitcode}' --cacert "$sys" "$I" || true)" "000 60"
osc() {
  clean_run "$@" -- openssl s_client -connect "127.0.0.1:$TK_IDP_PORT" -servername "$TK_IDP_NAME" \
    -verify_return_error </dev/null 2>&1 | sed -n 's/^Verify return code: //p'
}
expect "openssl s_client honours SSL_CERT_FILE" "$(osc "SSL_CERT_FILE=$TK_IDP_CA_FILE")" "0 (ok)"
expect "openssl s_client honours SSL_CERT_DIR" "$(osc "SSL_CERT_DIR=$certdir")" "0 (ok)"

# 4. The proxy variables: which libcurl reads (VIA: the port it connected to).
expect "http URL, http_proxy: through the proxy (loopback too)" "$(probe "http_proxy=$TK_SQUID_URL" -- "$H")" "CURLE_OK 200 0 open"
expect "http URL, HTTP_PROXY (upper case) ignored" "$(probe "HTTP_PROXY=$TK_SQUID_URL" -- "$H")" "CURLE_OK 200 0 direct"
expect "http URL localhost, http_proxy: through the proxy" "$(probe "http_proxy=$TK_SQUID_URL" -- "${H/127.0.0.1/localhost}")" \
  "CURLE_OK 200 0 open"
expect "http URL [::1], http_proxy: through the proxy" "$(probe "http_proxy=$TK_SQUID_URL" -- "${H/127.0.0.1/[::1]}")" \
  "CURLE_OK 503 0 open"
expect "https URL, http_proxy alone: direct" "$(probe "http_proxy=$TK_SQUID_URL" -- "${CA[@]}" "$I")" "CURLE_OK 200 0 direct"
for v in https_proxy HTTPS_PROXY all_proxy ALL_PROXY; do
  expect "https URL, $v: CONNECT" "$(probe "$v=$TK_SQUID_URL" -- "${CA[@]}" "$I")" "CURLE_OK 200 200 open"
done
expect "http URL, ALL_PROXY" "$(probe "ALL_PROXY=$TK_SQUID_URL" -- "$H")" "CURLE_OK 200 0 open"
expect "https_proxy without a scheme is http://" "$(probe "https_proxy=${TK_SQUID_URL#http://}" -- "${CA[@]}" "$I")" \
  "CURLE_OK 200 200 open"
expect "CURLOPT_PROXY \"\" overrides the environment" "$(probe "https_proxy=$TK_SQUID_URL" -- --proxy "" "${CA[@]}" "$I")" \
  "CURLE_OK 200 0 direct"
expect "CURLOPT_NOPROXY \"\" overrides NO_PROXY" "$(probe "https_proxy=$TK_SQUID_URL" "NO_PROXY=*" -- --noproxy "" "${CA[@]}" "$I")" \
  "CURLE_OK 200 200 open"

# 5. NO_PROXY forms (libcurl 7.88.1): https URL by name, then http URLs by address.
for np in idp.tokenctl.test .tokenctl.test tokenctl.test test IDP.TOKENCTL.TEST "other.example, idp.tokenctl.test" "*"; do
  expect "NO_PROXY='$np' skips the proxy for $TK_IDP_NAME" "$(probe "https_proxy=$TK_SQUID_URL" "NO_PROXY=$np" -- "${CA[@]}" "$I")" \
    "CURLE_OK 200 0 direct"
done
expect "no_proxy (lower case) too" "$(probe "https_proxy=$TK_SQUID_URL" "no_proxy=.tokenctl.test" -- "${CA[@]}" "$I")" \
  "CURLE_OK 200 0 direct"
for np in "*.tokenctl.test" "idp.tokenctl.test:$TK_IDP_PORT" 127.0.0.1 127.0.0.0/8; do
  expect "NO_PROXY='$np' does not match $TK_IDP_NAME" "$(probe "https_proxy=$TK_SQUID_URL" "NO_PROXY=$np" -- "${CA[@]}" "$I")" \
    "CURLE_OK 200 200 open"
done
for np in 127.0.0.1 127.0.0.0/8 127.0.0.0/24 "*"; do
  expect "NO_PROXY='$np' skips it for 127.0.0.1" "$(probe "http_proxy=$TK_SQUID_URL" "NO_PROXY=$np" -- "$H")" "CURLE_OK 200 0 direct"
done
for np in 10.0.0.0/8 localhost; do
  expect "NO_PROXY='$np' does not match 127.0.0.1" "$(probe "http_proxy=$TK_SQUID_URL" "NO_PROXY=$np" -- "$H")" "CURLE_OK 200 0 open"
done
expect "NO_PROXY=127.0.0.0/8 does not match the name localhost" \
  "$(probe "http_proxy=$TK_SQUID_URL" "NO_PROXY=127.0.0.0/8" -- "${H/127.0.0.1/localhost}")" "CURLE_OK 200 0 open"
# Direct to [::1] is refused (the server listens on 127.0.0.1 only): that is how "direct" shows.
expect "NO_PROXY=::1 skips it for [::1]" "$(probe "http_proxy=$TK_SQUID_URL" "NO_PROXY=::1" -- "${H/127.0.0.1/[::1]}")" \
  "CURLE_COULDNT_CONNECT 0 0 port0"
for np in "[::1]" ::1/128; do
  expect "NO_PROXY='$np' does not match [::1]" "$(probe "http_proxy=$TK_SQUID_URL" "NO_PROXY=$np" -- "${H/127.0.0.1/[::1]}")" \
    "CURLE_OK 503 0 open"
done

# 6. The proxy asking for a password.
hdr=$root/407.headers
clean_run -- curl -s -D "$hdr" -o /dev/null -x "$TK_SQUID_AUTH_URL" -U "$TK_SQUID_USER:wrong" "$I" || true
expect "curl tool, wrong password: 407" "$(head -n 1 "$hdr" | tr -d '\r')" "HTTP/1.1 407 Proxy Authentication Required"
expect "  ... Proxy-Authenticate" "$(sed -n 's/^Proxy-Authenticate: //p' "$hdr" | tr -d '\r')" 'Basic realm="tokenctl-test proxy"'
expect "  ... X-Squid-Error" "$(sed -n 's/^X-Squid-Error: //p' "$hdr" | tr -d '\r')" "ERR_CACHE_ACCESS_DENIED 0"
nginx_before=$(lines "$TK_IDP_ACCESS_LOG")
a=${TK_SQUID_AUTH_URL#http://}
expect "libcurl, no credentials: 407 on CONNECT" "$(probe "https_proxy=$TK_SQUID_AUTH_URL" -- "${CA[@]}" "$I")" "CURLE_RECV_ERROR 0 407 auth"
expect "libcurl, wrong password: 407 on CONNECT" "$(probe "https_proxy=http://$TK_SQUID_USER:wrong@$a" -- "${CA[@]}" "$I")" \
  "CURLE_RECV_ERROR 0 407 auth"
expect "  ... message" "$(field error)" "CONNECT tunnel failed, response 407"
expect "libcurl, wrong password, http URL: a 407 response, CURLE_OK" \
  "$(probe "http_proxy=http://$TK_SQUID_USER:wrong@$a" -- "$H")" "CURLE_OK 407 0 auth"
expect "nothing reached the server" "$(lines "$TK_IDP_ACCESS_LOG")" "$nginx_before"
expect "libcurl, credentials in the proxy URL" "$(probe "https_proxy=http://$TK_SQUID_USER:$TK_SQUID_PASSWORD@$a" -- "${CA[@]}" "$I")" \
  "CURLE_OK 200 200 auth"
expect "libcurl, credentials percent-encoded in the proxy URL" \
  "$(probe "https_proxy=http://$TK_SQUID_USER:$(printf %%%02X "'${TK_SQUID_PASSWORD:0:1}")${TK_SQUID_PASSWORD:1}@$a" -- "${CA[@]}" "$I")" \
  "CURLE_OK 200 200 auth"
expect "libcurl, CURLOPT_PROXYUSERNAME/PASSWORD with the proxy from https_proxy" \
  "$(probe "https_proxy=$TK_SQUID_AUTH_URL" "CURLPROBE_PROXY_USER=$TK_SQUID_USER" "CURLPROBE_PROXY_PASSWORD=$TK_SQUID_PASSWORD" \
     -- --proxy-credentials "${CA[@]}" "$I")" "CURLE_OK 200 200 auth"
expect "  ... but credentials in the proxy URL win over them" \
  "$(probe "https_proxy=http://$TK_SQUID_USER:wrong@$a" "CURLPROBE_PROXY_USER=$TK_SQUID_USER" \
     "CURLPROBE_PROXY_PASSWORD=$TK_SQUID_PASSWORD" -- --proxy-credentials "${CA[@]}" "$I")" "CURLE_RECV_ERROR 0 407 auth"
probe "https_proxy=http://$TK_SQUID_USER:$TK_SQUID_PASSWORD@$a" -- --verbose "${CA[@]}" "$I" >/dev/null
basic=$(printf %s "$TK_SQUID_USER:$TK_SQUID_PASSWORD" | base64 -w0)
expect "CURLOPT_VERBOSE prints the Proxy-Authorization header (the password, base64)" \
  "$(grep -c "Proxy-Authorization: Basic $basic" "$root/probe.err")" 1
expect "  ... and the user name" "$(grep -c "Proxy auth using Basic with user '$TK_SQUID_USER'" "$root/probe.err")" 1
tk_squid_wait_lines "$TK_SQUID_AUTH_LOG" 9 || true
expect "auth log: refusals (the user named when one was sent), then the tunnel" \
  "$(awk '{print $3, $4, $5}' "$TK_SQUID_AUTH_LOG" | tr '\n' ';')" \
  "$TK_SQUID_USER TCP_DENIED/407 CONNECT;- TCP_DENIED/407 CONNECT;$TK_SQUID_USER TCP_DENIED/407 CONNECT;$TK_SQUID_USER TCP_DENIED/407 GET;$(
    for r in TCP_TUNNEL/200 TCP_TUNNEL/200 TCP_TUNNEL/200 TCP_DENIED/407 TCP_TUNNEL/200; do
      printf '%s %s CONNECT;' "$TK_SQUID_USER" "$r"
    done)"
expect "the password is in no squid file" "$(grep -rlF "$TK_SQUID_PASSWORD" "$TK_SQUID_DIR" || true)" ""

# 7. A proxy that cannot be reached.
expect "closed port: CURLE_COULDNT_CONNECT" "$(probe "https_proxy=$TK_SQUID_CLOSED_URL" -- "${CA[@]}" "$I")" \
  "CURLE_COULDNT_CONNECT 0 0 port0"
expect "  ... message" "$(field error | sed 's/after [0-9]* ms/after N ms/')" \
  "Failed to connect to 127.0.0.1 port ${TK_SQUID_CLOSED_URL##*:} after N ms: Couldn't connect to server"
expect "unresolvable name: CURLE_COULDNT_RESOLVE_PROXY" "$(probe "https_proxy=http://proxy.invalid:3128" -- "${CA[@]}" "$I")" \
  "CURLE_COULDNT_RESOLVE_PROXY 0 0 port0"
expect "  ... message" "$(field error)" "Could not resolve proxy: proxy.invalid"

# 8. The https:// proxy: its certificate is checked with CURLOPT_PROXY_CAINFO only.
expect "https proxy, PROXY_CAINFO" "$(probe "https_proxy=$TK_SQUID_HTTPS_URL" -- "${CA[@]}" --proxy-cainfo "$TK_SQUID_PROXY_CA" "$I")" \
  "CURLE_OK 200 200 https"
expect "https proxy, no PROXY_CAINFO: refused" "$(probe "https_proxy=$TK_SQUID_HTTPS_URL" -- "${CA[@]}" "$I")" \
  "CURLE_PEER_FAILED_VERIFICATION 0 0 https"
expect "  ... CURLINFO_PROXY_SSL_VERIFYRESULT" "$(field proxy_verify_result)" 20
cat "$TK_SQUID_PROXY_CA" "$TK_IDP_CA_FILE" >"$root/both.pem"
expect "https proxy, its CA in CAINFO only: refused" "$(probe "https_proxy=$TK_SQUID_HTTPS_URL" -- --cainfo "$root/both.pem" "$I")" \
  "CURLE_PEER_FAILED_VERIFICATION 0 0 https"

# 9. The TLS-inspecting proxy: refused until its CA is trusted; then it sees the requests.
expect "bump proxy, the idp's CA: refused" "$(probe "https_proxy=$TK_SQUID_BUMP_URL" -- "${CA[@]}" --ctx-chain "$I")" \
  "CURLE_PEER_FAILED_VERIFICATION 0 200 bump"
expect "  ... message" "$(field error)" "SSL certificate problem: self-signed certificate in certificate chain"
expect "  ... verify result 19 (X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN)" "$(field verify_result)" 19
expect "  ... the certificate names the idp" "$(field chain.subject)" "O = tokenctl-test, CN = $TK_IDP_NAME"
expect "  ... issued by the proxy's CA" "$(field chain.issuer)" "O = tokenctl-test, CN = tokenctl inspecting proxy CA"
expect "bump proxy, its CA trusted" "$(probe "https_proxy=$TK_SQUID_BUMP_URL" -- --cainfo "$TK_SQUID_BUMP_CA" "$I")" "CURLE_OK 200 200 bump"
tk_squid_wait_lines "$TK_SQUID_BUMP_LOG" 3 || true
expect "bump log: the refused CONNECT, then CONNECT and the decrypted GET" \
  "$(awk '{print $4, $5, $6}' "$TK_SQUID_BUMP_LOG" | tr '\n' ';')" \
  "NONE_NONE/200 CONNECT $TK_IDP_NAME:$TK_IDP_PORT;NONE_NONE/200 CONNECT $TK_IDP_NAME:$TK_IDP_PORT;TCP_MISS/200 GET $I;"

# 10. The access log: one line per CONNECT tunnel, written when the tunnel closes.
: >"$TK_SQUID_LOG"
nginx_before=$(lines "$TK_IDP_ACCESS_LOG")
tk_idp_run curl -s -o /dev/null -o /dev/null --cacert "$TK_IDP_CA_FILE" -x "$TK_SQUID_URL" "$I" "$I" || bad "two requests in one tunnel"
t0=$(date +%s%N)
tk_squid_wait_lines "$TK_SQUID_LOG" 1 || true
echo "     (the tunnel's line was there $((($(date +%s%N) - t0) / 1000000)) ms after curl exited)"
expect "two requests in one tunnel: one CONNECT line" "$(awk '{print $4, $5, $6}' "$TK_SQUID_LOG")" \
  "TCP_TUNNEL/200 CONNECT $TK_IDP_NAME:$TK_IDP_PORT"
expect "  ... two requests at nginx" "$(($(lines "$TK_IDP_ACCESS_LOG") - nginx_before))" 2
# A tunnel still open is not logged yet: a client holding it (python, 1 s) and the log read meanwhile.
: >"$TK_SQUID_LOG"
"$TK_PYTHON" - "${TK_SQUID_URL##*:}" "$TK_IDP_NAME:$TK_IDP_PORT" <<'EOF' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[2], sys.argv[2])).encode())
s.recv(4096)
time.sleep(1.5)
s.close()
EOF
holder=$!
sleep 0.7
expect "an open tunnel is not in the log yet" "$(lines "$TK_SQUID_LOG")" 0
wait "$holder"
tk_squid_wait_lines "$TK_SQUID_LOG" 1 || true
expect "  ... and is once it closes" "$(awk '{print $4, $5}' "$TK_SQUID_LOG")" "TCP_TUNNEL/200 CONNECT"

# 11. Restart and stop, by PID; the helpers go with squid.
helpers=$(pgrep -P "$s_pid" | tr '\n' ' ')
if [[ -n $helpers ]]; then ok "squid has helper children ($helpers)"; else bad "squid has no helper children"; fi
tk_squid_start
expect "restart: old squid gone" "$(_tk_alive "$s_pid" && echo alive || echo gone)" gone
s_pid=$(<"$TK_SERVICES_DIR/pids/squid.pid")
name_ports
expect "restart: proxy works" "$(probe "https_proxy=$TK_SQUID_URL" -- "${CA[@]}" "$I")" "CURLE_OK 200 200 open"
tk_squid_stop
tk_squid_stop
tk_idp_stop
tk_idp_stop
expect "stopped: squid" "$(_tk_alive "$s_pid" && echo alive || echo gone)" gone
expect "stopped: nginx" "$(_tk_alive "$n_pid" && echo alive || echo gone)" gone
expect "stopped: test server" "$(_tk_alive "$a_pid" && echo alive || echo gone)" gone
for h in $helpers; do _tk_alive "$h" && bad "helper $h outlived squid"; done
expect "pid files gone" "$(ls "$TK_SERVICES_DIR/pids")" ""
mkdir "$root/foreign" && : >"$root/foreign/keep"
if tk_squid_start "$root/foreign" 2>/dev/null; then bad "a foreign non-empty DIR was taken"; tk_squid_stop
else expect "a foreign non-empty DIR is refused and kept" "$(ls "$root/foreign")" keep; fi
stray=
for p in /proc/[0-9]*; do
  tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF "$root/svc/" && _tk_alive "${p#/proc/}" && stray+="${p#/proc/} "
done
expect "no stray process" "$stray" ""

if ((fails)); then echo "$fails check(s) failed" >&2; exit 1; fi
echo "all squid checks passed in $((SECONDS - started)) s"
