#!/usr/bin/env python3
"""A real RFC 8693 token exchange server for tokenctl's tests: idpyoidc's OAuth 2.0
authorization server (idpyoidc.server.Server, version pinned in requirements.txt, configured by
config.json) behind the standard library's http.server on 127.0.0.1.

    python server.py --dir DIR --port-file PATH [--access-ttl SECONDS] [--stock-metadata]

Run with the cached virtualenv's python (Scripts/lib/idpyoidc.sh makes it and starts this).
DIR must hold admin-token (see /tk-admin/clients); idpyoidc keeps its keys in DIR/private.
Issuer: http://127.0.0.1:PORT (no path). Serves until SIGTERM: a thread per connection (a slow
client blocks nobody), idpyoidc called by one at a time (its session database is a plain dict,
not guarded for threads).

Endpoints (idpyoidc's, from config.json):
  GET  /.well-known/oauth-authorization-server   RFC 8414 metadata (idpyoidc's ServerMetadata);
       nothing at /.well-known/openid-configuration (it is an OAuth server, not an OP)
  GET  /jwks                                     the key the JWT access tokens are signed with
  POST /token                                    client_credentials (client_credentials.py),
                                                 urn:ietf:params:oauth:grant-type:token-exchange
  POST /introspection                            RFC 7662, for any registered client
This harness's own (NOT idpyoidc's):
  POST /tk-admin/clients    register or replace a client (Authorization: Bearer <DIR/admin-token>).
       The JSON body goes into idpyoidc's client database as is: client_id, client_secret,
       client_authn_method (the methods the client may use; absent: the four that prove
       something, every one of the token endpoint's but "public"; ["public"]: a public
       client, which may have no client_secret and no jwks), allowed_scopes (what client
       credentials grants), jwks (imported into idpyoidc's key jar for private_key_jwt),
       token_usage_rules (e.g. {"access_token": {"expires_in": 2}}); client_secret is also
       added to the key jar as the client_secret_jwt HMAC key.

What this harness adds to idpyoidc's answers (its server has no HTTP layer; the mapping follows
idpyoidc's example/flask_op/views.py where that has one):
- An error message idpyoidc returns is answered 400 with its JSON. An exception idpyoidc raises
  while parsing or processing is answered 400 {"error": "invalid_request", "error_description":
  "<exception class>: <words>"} as the flask example does, except a client authentication
  failure (ClientAuthenticationError and its subclasses), answered 401 {"error":
  "invalid_client"} (RFC 6749 §5.2; the flask example says 400 invalid_request).
- The metadata: idpyoidc 5.0.0 publishes the token endpoint's methods under
  "token_endpoint_auth_methods" (idpyoidc/claims.py get_endpoint_claims builds
  f"{endpoint_name}_auth_methods"), not RFC 8414's "token_endpoint_auth_methods_supported",
  and no "token_endpoint_auth_signing_alg_values_supported" (a "preference" for either is
  dropped: neither is a claim any endpoint supports). The harness adds both RFC 8414 names:
  the methods copied from idpyoidc's own list with its "public" under the registry's name for a
  public client, "none" (RFC 7591 §2, the IANA "OAuth Token Endpoint Authentication Methods"
  registry that RFC 8414 §2 refers to), the algorithms those the self-test shows accepted
  (ES256 private_key_jwt, HS256 client_secret_jwt). --stock-metadata serves idpyoidc's
  document untouched.
Each request is logged to stderr with its status, an exception with its traceback; a token
request whose client idpyoidc accepted also with "token client: client_id=ID
authenticated=True|False credentials=NAMES" (authenticated: idpyoidc's own flag, False for its
"public" and "none"; NAMES: which of the Authorization header, client_secret and
client_assertion the request had, "none" for none of them; names only, never a value).
idpyoidc's own logging (which writes tokens, e.g. an unknown subject token) is off unless
TK_IDPYOIDC_LOG_LEVEL names a level (DEBUG, INFO, ...).
"""

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs
from urllib.parse import urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
METADATA_PATH = "/.well-known/oauth-authorization-server"
# Shown accepted by Scripts/lib/idpyoidc-selftest.sh; cryptojwt itself takes any algorithm the
# registered key has.
ASSERTION_ALGS = ["ES256", "HS256"]
# idpyoidc's name for a public client's "method" (idpyoidc/server/client_authn.py PublicAuthn:
# a request with a client_id verifies) and the registry's (RFC 7591 §2): "none".
PUBLIC = "public"
REGISTRY_NAMES = {PUBLIC: "none"}


def substitute(value, table):
    """Replace config.json's whole-string values "{name}" from table."""
    if isinstance(value, dict):
        return {k: substitute(v, table) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, table) for v in value]
    if isinstance(value, str) and value.startswith("{") and value.endswith("}") and value[1:-1] in table:
        return table[value[1:-1]]
    return value


class Harness:
    def __init__(self, directory, issuer, access_ttl, stock_metadata):
        from idpyoidc.server import Server
        from idpyoidc.server.configure import ASConfiguration

        with open(os.path.join(HERE, "config.json")) as f:
            conf = substitute(json.load(f), {"issuer": issuer, "access_ttl": access_ttl})
        self.server = Server(ASConfiguration(conf=conf, base_path=directory), cwd=directory)
        self.context = self.server.context
        self.issuer = issuer
        self.stock_metadata = stock_metadata
        with open(os.path.join(directory, "admin-token")) as f:
            self.admin_token = f.read().strip()
        if len(self.admin_token) < 16:
            raise SystemExit("admin-token: too short")
        self.routes = {}
        for endpoint in self.server.endpoint.values():
            self.routes[urlsplit(endpoint.full_path).path] = endpoint
        token_methods = self.server.get_endpoint("token").client_authn_method
        self.confidential_methods = [m for m in token_methods if m != PUBLIC]

    def metadata(self):
        endpoint = self.server.get_endpoint("server_metadata")
        info = json.loads(endpoint.do_response(**endpoint.process_request())["response"])
        if not self.stock_metadata:
            methods = info.get("token_endpoint_auth_methods", [])
            names = [REGISTRY_NAMES.get(m, m) for m in methods]
            info["token_endpoint_auth_methods_supported"] = names
            if "private_key_jwt" in methods or "client_secret_jwt" in methods:
                info["token_endpoint_auth_signing_alg_values_supported"] = ASSERTION_ALGS
        return json.dumps(info)

    def add_client(self, info):
        client_id = info["client_id"]
        if not isinstance(client_id, str) or not client_id:
            raise ValueError("client_id must be a non-empty string")
        info = dict(info)
        # idpyoidc's verify_client (idpyoidc/server/client_authn.py) tries the endpoint's
        # methods in order and takes the first that verifies and that the client's
        # client_authn_method lists; a client without that field may use any. With "public"
        # among the token endpoint's methods, such a client would pass with its client_id
        # alone, or with a wrong secret (client_secret_post fails, public is tried next and
        # verifies): so a client that does not name its methods gets those that prove
        # something, and a public client is one that names "public" alone and has nothing to
        # prove with.
        methods = info.setdefault("client_authn_method", list(self.confidential_methods))
        if not isinstance(methods, list):
            raise ValueError("client_authn_method must be a list")
        credentials = info.get("client_secret") or info.get("jwks")
        if PUBLIC in methods and (methods != [PUBLIC] or credentials):
            raise ValueError("a public client names only public and has no client_secret or jwks")
        keyjar = self.context.keyjar
        if client_id in keyjar.owners():
            del keyjar[client_id]
        self.context.cdb[client_id] = info
        if info.get("jwks"):
            keyjar.import_jwks(info["jwks"], client_id)
        if info.get("client_secret"):
            keyjar.add_symmetric(client_id, info["client_secret"])


def make_handler(harness):
    from idpyoidc.message.oauth2 import ResponseMessage
    from idpyoidc.server.exception import ClientAuthenticationError

    lock = threading.Lock()

    def is_error(message):
        return isinstance(message, ResponseMessage) and "error" in message

    class Handler(BaseHTTPRequestHandler):
        server_version = "tokenctl-idpyoidc"

        def log_message(self, fmt, *args):
            sys.stderr.write("%s %s\n" % (self.log_date_time_string(), fmt % args))

        def answer(self, status, body, headers=()):
            data = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            names = set()
            for name, value in headers:
                if name.lower() != "content-length":
                    self.send_header(name, value)
                    names.add(name.lower())
            if "content-type" not in names:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def error(self, status, code, description):
            self.answer(status, error_body(code, description))

        def do_GET(self):
            path = urlsplit(self.path).path
            if path == "/jwks":
                with lock:
                    body = json.dumps(harness.context.keyjar.export_jwks(issuer_id=""))
                self.answer(200, body)
            elif path == METADATA_PATH:
                with lock:
                    body = harness.metadata()
                self.answer(200, body)
            else:
                self.error(404, "not_found", "no such path")

        def do_POST(self):
            path = urlsplit(self.path).path
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            if path == "/tk-admin/clients":
                if self.headers.get("Authorization") != "Bearer " + harness.admin_token:
                    self.error(401, "invalid_token", "the admin token is DIR/admin-token")
                    return
                with lock:
                    answer = add_client(body)
                self.answer(*answer)
                return
            endpoint = harness.routes.get(path)
            if endpoint is None or path == METADATA_PATH:
                self.error(404, "not_found", "no such path")
                return
            # The form as a dict, as idpyoidc's flask example passes request.form (a string
            # would be parsed as the endpoint's request_format: "json" for the token
            # endpoint); a repeated parameter (audience, resource: RFC 8693 §2.1) stays a list.
            form = {}
            for key, values in parse_qs(body, keep_blank_values=True).items():
                form[key] = values[0] if len(values) == 1 else values
            headers = {k.lower(): v for k, v in self.headers.items()}
            http_info = {"headers": headers, "method": "POST", "url": harness.issuer + path}
            with lock:
                answer, authn = serve(endpoint, form, http_info)
            if authn is not None and path == "/token":
                sent = [name for name in ("client_secret", "client_assertion") if name in form]
                if "authorization" in headers:
                    sent.insert(0, "authorization")
                self.log_message("token client: %s credentials=%s", authn, ",".join(sent) or "none")
            self.answer(*answer)

    def error_body(code, description):
        return json.dumps({"error": code, "error_description": description})

    def add_client(body):
        try:
            harness.add_client(json.loads(body))
        except Exception as err:
            return 400, error_body("invalid_request", "%s: %s" % (type(err).__name__, err))
        return 201, "{}"

    # serve ENDPOINT FORM HTTP_INFO: idpyoidc's answer as (status, body, headers), and the
    # client it accepted ("client_id=ID authenticated=BOOL") or None.
    def serve(endpoint, form, http_info):
        authn = [None]
        return answer_of(endpoint, form, http_info, authn), authn[0]

    def answer_of(endpoint, form, http_info, authn):
        try:
            request = endpoint.parse_request(form, http_info=http_info)
            if is_error(request):
                return 400, request.to_json(), ()
            authenticated = bool(request.get("authenticated"))
            authn[0] = "client_id=%s authenticated=%s" % (request.get("client_id"), authenticated)
            args = endpoint.process_request(request, http_info=http_info)
            if is_error(args):
                return 400, args.to_json(), ()
            info = endpoint.do_response(request=request, **args)
        except ClientAuthenticationError as err:
            return 401, error_body("invalid_client", "%s: %s" % (type(err).__name__, err)), ()
        except Exception as err:
            traceback.print_exc()
            return 400, error_body("invalid_request", "%s: %s" % (type(err).__name__, err)), ()
        return info.get("response_code", 200), info["response"], info.get("http_headers", [])

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--access-ttl", type=int, default=3600)
    ap.add_argument("--stock-metadata", action="store_true")
    args = ap.parse_args()

    level = os.environ.get("TK_IDPYOIDC_LOG_LEVEL")
    logging.basicConfig(level=level or logging.CRITICAL + 1, stream=sys.stderr)
    directory = os.path.abspath(args.dir)
    port_file = os.path.abspath(args.port_file)
    os.umask(0o077)
    os.chdir(directory)

    # Bind first: the issuer names the port.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    issuer = "http://127.0.0.1:%d" % port

    harness = Harness(directory, issuer, args.access_ttl, args.stock_metadata)
    httpd = ThreadingHTTPServer(("127.0.0.1", port), make_handler(harness), bind_and_activate=False)
    httpd.daemon_threads = True
    httpd.request_queue_size = 128  # the listen backlog: fan-in tests connect many at once
    httpd.socket.close()
    httpd.socket = sock
    httpd.server_activate()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, port_file)
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()


if __name__ == "__main__":
    main()
