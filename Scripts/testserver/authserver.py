#!/usr/bin/env python3
"""Local OAuth 2.0 test authorization server for tokenctl's end-to-end tests.

Standard library only.  Binds 127.0.0.1, writes the port to --port-file once
listening (atomically: temp file + rename), serves until SIGTERM/SIGINT.

    python3 Scripts/testserver/authserver.py --port 0 --port-file PATH [--pid-file PATH] [--verbose]

Issuer: http://127.0.0.1:PORT (no trailing slash).

Public endpoints
  GET  /.well-known/openid-configuration      (404 when discovery_oidc is false)
  GET  /.well-known/oauth-authorization-server (RFC 8414)
  POST /token    grant_type=refresh_token, refresh_token, client_id, [scope]
  POST /revoke   token, [token_type_hint], [client_id]   (RFC 7009, always 200)

Test control (JSON in / JSON out)
  POST /_test/issue        {"client_id", "sub"?, "scope"?} -> {"refresh_token", "family"}
  POST /_test/config       partial config, merged -> full config (unknown keys: 400)
  GET  /_test/log          every /token, /revoke and discovery request, in order
  GET  /_test/token-status?token=X -> {"active", "kind", "spent", "family_revoked"}
  POST /_test/reset        state, log and config back to defaults
  GET  /_test/stats        {"token_requests", "issued", "invalid_grant", "reuse_detected"}

Config keys (defaults in DEFAULT_CONFIG):
  access_ttl, grace_seconds, rotate, date_offset_seconds, delay_seconds,
  faults, discovery_oidc, discovery_issuer_override, advertise_revocation,
  revoke_fault_status.

Faults (config "faults", a queue consumed one entry per /token request, before
normal handling; a faulted request never touches token state):
  {"status": 503, "body": "...", "content_type": "text/html",
   "headers": {"Retry-After": "2"}, "count": 2}   respond exactly that (count default 1;
                                                   a dict/list body is sent as JSON)
  {"hang": 30}      sleep 30 s, then close the connection without answering
  {"close": true}   close the connection without any response
  {"delay": 2}      sleep 2 s, then handle normally (this one does touch state)
Config "delay_seconds" makes every /token request sleep before it is handled
(after its fault entry, if any, was taken from the queue).

Token model: /_test/issue creates a family (sub, client_id, scope) and its first
refresh token.  Refresh tokens are strictly one-time-use when "rotate" is true:
a spent token replayed within grace_seconds of being spent gets a fresh pair;
replayed later it gets invalid_grant ("refresh token reuse detected") and the
whole family is revoked.  token-status reports a spent refresh token as not
active even while it is still inside the grace period.
"""

import argparse
import base64
import copy
import email.utils
import hashlib
import hmac
import http.server
import json
import os
import secrets
import signal
import sys
import threading
import time
import urllib.parse

JWT_KEY = b"tokenctl-test-key"

DEFAULT_CONFIG = {
    "access_ttl": 3600,
    "grace_seconds": 0,
    "rotate": True,
    "date_offset_seconds": 0,
    "delay_seconds": 0.0,
    "faults": [],
    "discovery_oidc": True,
    "discovery_issuer_override": None,
    "advertise_revocation": True,
    "revoke_fault_status": None,
    # Access tokens as JWTs whose iat/exp are on the server's (possibly offset) clock.
    "jwt_access_tokens": False,
    # Leave expires_in out of token responses (the client must rely on the JWT exp).
    "omit_expires_in": False,
}

LOCK = threading.Lock()


class State:
    """All mutable server state; every access holds LOCK."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.config = copy.deepcopy(DEFAULT_CONFIG)
        self.families = {}  # id -> {"sub", "client_id", "scope", "revoked"}
        self.refresh = {}  # token -> {"family", "client_id", "spent_at", "revoked"}
        self.access = {}  # token -> {"family", "client_id", "expires_at", "revoked"}
        self.log = []
        self.stats = {"token_requests": 0, "issued": 0, "invalid_grant": 0, "reuse_detected": 0}


STATE = State()


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def make_jwt(claims):
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = b64url(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = (header + "." + payload).encode("ascii")
    sig = hmac.new(JWT_KEY, signing_input, hashlib.sha256).digest()
    return header + "." + payload + "." + b64url(sig)


class Closed(Exception):
    """Raised to drop the connection without sending a response."""


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tokenctl-testserver/1"
    sys_version = ""
    verbose = False

    # -- plumbing ---------------------------------------------------------

    def log_message(self, fmt, *args):
        if self.verbose:
            sys.stderr.write("authserver: %s - %s\n" % (self.address_string(), fmt % args))

    def date_time_string(self, timestamp=None):
        # Used by send_response for the Date header: honour date_offset_seconds.
        with LOCK:
            offset = STATE.config.get("date_offset_seconds") or 0
        return email.utils.formatdate(time.time() + float(offset), usegmt=True)

    @property
    def issuer(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def read_body(self):
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        if not length:
            return b""
        return self.rfile.read(int(length))

    def send(self, status, body=b"", content_type="application/json", headers=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            content_type = "application/json"
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        if body or content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Pragma", "no-cache")
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status, obj):
        self.send(status, json.dumps(obj).encode(), "application/json")

    def drop(self):
        self.close_connection = True
        raise Closed()

    def dispatch(self, method):
        parsed = urllib.parse.urlsplit(self.path)
        path = parsed.path
        try:
            body = self.read_body() if method == "POST" else b""
            route = ROUTES.get((method, path))
            if route is None:
                if method == "GET" and path.startswith("/.well-known/"):
                    with LOCK:
                        log_request(path, 404, "not_found")
                self.send_json(404, {"error": "not_found"})
                return
            route(self, body, urllib.parse.parse_qs(parsed.query))
        except Closed:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_DELETE(self):
        self.dispatch("DELETE")

    # -- discovery --------------------------------------------------------

    def discovery(self, body, query, oidc):
        with LOCK:
            cfg = STATE.config
            if oidc and not cfg["discovery_oidc"]:
                log_request(self.path, 404, "not_found")
                status, doc = 404, {"error": "not_found"}
            else:
                issuer = self.issuer
                doc = {
                    "issuer": cfg["discovery_issuer_override"] or issuer,
                    "token_endpoint": issuer + "/token",
                    "grant_types_supported": ["refresh_token"],
                    "token_endpoint_auth_methods_supported": ["none"],
                    "scopes_supported": ["openid", "offline_access", "profile", "email"],
                }
                if cfg["advertise_revocation"]:
                    doc["revocation_endpoint"] = issuer + "/revoke"
                status = 200
                log_request(self.path, 200, "discovery")
        self.send_json(status, doc)

    def oidc_discovery(self, body, query):
        self.discovery(body, query, True)

    def as_discovery(self, body, query):
        self.discovery(body, query, False)

    # -- /token -----------------------------------------------------------

    def token(self, body, query):
        form = parse_form(body)
        grant_type = form.get("grant_type")
        rt = form.get("refresh_token")
        client_id = form.get("client_id") or basic_client_id(self.headers.get("Authorization"))
        with LOCK:
            STATE.stats["token_requests"] += 1
            fault = take_fault()
            delay = float(STATE.config.get("delay_seconds") or 0)
            entry = {"grant_type": grant_type, "client_id": client_id, "refresh_token": rt}
            if fault is not None and "delay" not in fault:
                kind = "hang" if "hang" in fault else "close" if fault.get("close") else "status"
                log_request("/token", fault.get("status") if kind == "status" else None,
                            "fault", fault=kind, **entry)
        if fault is not None and "delay" in fault:
            time.sleep(float(fault["delay"]))
            fault = None
        if delay > 0:
            time.sleep(delay)
        if fault is not None:
            if "hang" in fault:
                time.sleep(float(fault["hang"]))
                self.drop()
            if fault.get("close"):
                self.drop()
            self.send(int(fault.get("status", 500)), fault.get("body", ""),
                      fault.get("content_type", "text/plain"), fault.get("headers"))
            return

        with LOCK:
            status, obj, outcome = token_grant(self.issuer, grant_type, rt, client_id, form.get("scope"))
            if status == 200:
                STATE.stats["issued"] += 1
            elif obj.get("error") == "invalid_grant":
                STATE.stats["invalid_grant"] += 1
            if outcome == "reuse_detected":
                STATE.stats["reuse_detected"] += 1
            log_request("/token", status, outcome, **entry)
        self.send_json(status, obj)

    # -- /revoke ----------------------------------------------------------

    def revoke(self, body, query):
        form = parse_form(body)
        token = form.get("token")
        client_id = form.get("client_id") or basic_client_id(self.headers.get("Authorization"))
        entry = {"token_type_hint": form.get("token_type_hint"), "client_id": client_id,
                 "refresh_token": token}
        with LOCK:
            fault_status = STATE.config.get("revoke_fault_status")
            if fault_status:
                log_request("/revoke", int(fault_status), "fault", **entry)
            elif not token:
                log_request("/revoke", 400, "invalid_request", **entry)
            else:
                outcome = revoke_token(token, client_id)
                log_request("/revoke", 200, outcome, **entry)
        if fault_status:
            self.send(int(fault_status), b"", None)
        elif not token:
            self.send_json(400, {"error": "invalid_request", "error_description": "missing token"})
        else:
            self.send(200, b"", None)

    # -- test control -----------------------------------------------------

    def t_issue(self, body, query):
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            return self.send_json(400, {"error": "invalid_json"})
        client_id = req.get("client_id")
        if not client_id:
            return self.send_json(400, {"error": "invalid_request", "error_description": "client_id required"})
        with LOCK:
            family = "fam_" + secrets.token_hex(8)
            STATE.families[family] = {
                "sub": req.get("sub") or "alice",
                "client_id": client_id,
                "scope": req.get("scope") or "openid offline_access",
                "revoked": False,
            }
            rt = new_refresh(family, client_id)
        self.send_json(200, {"refresh_token": rt, "family": family})

    def t_config(self, body, query):
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            return self.send_json(400, {"error": "invalid_json"})
        if not isinstance(req, dict):
            return self.send_json(400, {"error": "invalid_request", "error_description": "object expected"})
        unknown = sorted(set(req) - set(DEFAULT_CONFIG))
        if unknown:
            return self.send_json(400, {"error": "invalid_request",
                                        "error_description": "unknown config keys: " + ", ".join(unknown)})
        if "faults" in req and not isinstance(req["faults"], list):
            return self.send_json(400, {"error": "invalid_request", "error_description": "faults must be a list"})
        with LOCK:
            for k, v in req.items():
                STATE.config[k] = copy.deepcopy(v)
            cfg = copy.deepcopy(STATE.config)
        self.send_json(200, cfg)

    def t_log(self, body, query):
        with LOCK:
            data = copy.deepcopy(STATE.log)
        self.send_json(200, data)

    def t_status(self, body, query):
        token = (query.get("token") or [""])[0]
        with LOCK:
            result = token_status(token)
        self.send_json(200, result)

    def t_reset(self, body, query):
        with LOCK:
            STATE.reset()
        self.send_json(200, {"ok": True})

    def t_stats(self, body, query):
        with LOCK:
            data = dict(STATE.stats)
        self.send_json(200, data)


ROUTES = {
    ("GET", "/.well-known/openid-configuration"): Handler.oidc_discovery,
    ("GET", "/.well-known/oauth-authorization-server"): Handler.as_discovery,
    ("POST", "/token"): Handler.token,
    ("POST", "/revoke"): Handler.revoke,
    ("POST", "/_test/issue"): Handler.t_issue,
    ("POST", "/_test/config"): Handler.t_config,
    ("GET", "/_test/log"): Handler.t_log,
    ("GET", "/_test/token-status"): Handler.t_status,
    ("POST", "/_test/reset"): Handler.t_reset,
    ("GET", "/_test/stats"): Handler.t_stats,
}


# -- helpers below are called with LOCK held (except the pure ones) ----------


def parse_form(body):
    pairs = urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
    form = {}
    for k, v in pairs:
        form.setdefault(k, v)
    return form


def basic_client_id(auth):
    if not auth or not auth.lower().startswith("basic "):
        return None
    try:
        raw = base64.b64decode(auth[6:].strip()).decode()
        return urllib.parse.unquote_plus(raw.split(":", 1)[0]) or None
    except (ValueError, UnicodeDecodeError):
        return None


def log_request(path, status, outcome, **fields):
    entry = {"time": time.time(), "path": path}
    entry.update(fields)
    entry["status"] = status
    entry["outcome"] = outcome
    STATE.log.append(entry)


def take_fault():
    faults = STATE.config.get("faults") or []
    if not faults:
        return None
    fault = faults[0]
    count = int(fault.get("count", 1))
    if count <= 1:
        faults.pop(0)
    else:
        fault["count"] = count - 1
    return dict(fault)


def new_refresh(family, client_id):
    rt = "rt_" + secrets.token_urlsafe(32)
    STATE.refresh[rt] = {"family": family, "client_id": client_id, "spent_at": None, "revoked": False}
    return rt


def issue_pair(issuer, fam_id, rec_client, scope, rotate):
    fam = STATE.families[fam_id]
    # The server's own clock, which tests may set off from the client's.
    now = int(time.time() + (STATE.config.get("date_offset_seconds") or 0))
    ttl = int(STATE.config["access_ttl"])
    if STATE.config.get("jwt_access_tokens"):
        at = make_jwt({"iss": issuer, "sub": fam["sub"], "aud": rec_client, "iat": now, "exp": now + ttl,
                       "jti": secrets.token_urlsafe(16)})
    else:
        at = "at_" + secrets.token_urlsafe(32)
    STATE.access[at] = {"family": fam_id, "client_id": rec_client, "expires_at": time.time() + ttl,
                        "revoked": False}
    resp = {
        "access_token": at,
        "token_type": "Bearer",
        "expires_in": ttl,
        "scope": scope,
        "id_token": make_jwt({
            "iss": issuer,
            "sub": fam["sub"],
            "aud": rec_client,
            "iat": now,
            "exp": now + ttl,
            "email": fam["sub"] + "@example.test",
        }),
    }
    if STATE.config.get("omit_expires_in"):
        del resp["expires_in"]
    if rotate:
        resp["refresh_token"] = new_refresh(fam_id, rec_client)
    return resp


def token_grant(issuer, grant_type, rt, client_id, scope):
    """Returns (status, body, outcome)."""
    if not grant_type:
        return 400, {"error": "invalid_request", "error_description": "missing grant_type"}, "invalid_request"
    if grant_type != "refresh_token":
        return 400, {"error": "unsupported_grant_type"}, "unsupported_grant_type"
    if not rt or not client_id:
        return 400, {"error": "invalid_request",
                     "error_description": "missing refresh_token or client_id"}, "invalid_request"
    rec = STATE.refresh.get(rt)
    bad = {"error": "invalid_grant", "error_description": "refresh token is invalid or revoked"}
    if rec is None or rec["revoked"]:
        return 400, bad, "invalid"
    fam = STATE.families[rec["family"]]
    if fam["revoked"]:
        return 400, bad, "invalid"
    if rec["client_id"] != client_id:
        bad = {"error": "invalid_grant", "error_description": "refresh token was issued to another client"}
        return 400, bad, "invalid"
    granted = fam["scope"]
    if scope:
        if not set(scope.split()) <= set(granted.split()):
            return 400, {"error": "invalid_scope"}, "invalid_scope"
        granted = " ".join(scope.split())
    cfg = STATE.config
    rotate = bool(cfg["rotate"])
    now = time.time()
    if rec["spent_at"] is not None:
        grace = float(cfg["grace_seconds"] or 0)
        if grace > 0 and now - rec["spent_at"] < grace:
            return 200, issue_pair(issuer, rec["family"], client_id, granted, True), "grace_replay"
        fam["revoked"] = True
        return 400, {"error": "invalid_grant", "error_description": "refresh token reuse detected"}, "reuse_detected"
    resp = issue_pair(issuer, rec["family"], client_id, granted, rotate)
    if rotate:
        rec["spent_at"] = now
    return 200, resp, "issued"


def revoke_token(token, client_id):
    rec = STATE.refresh.get(token)
    if rec is not None:
        if client_id and rec["client_id"] != client_id:
            return "client_mismatch"
        STATE.families[rec["family"]]["revoked"] = True
        return "revoked"
    rec = STATE.access.get(token)
    if rec is not None:
        if client_id and rec["client_id"] != client_id:
            return "client_mismatch"
        rec["revoked"] = True
        return "revoked"
    return "unknown"


def token_status(token):
    rec = STATE.refresh.get(token)
    if rec is not None:
        fam_revoked = STATE.families[rec["family"]]["revoked"]
        spent = rec["spent_at"] is not None
        return {"active": not (spent or fam_revoked or rec["revoked"]), "kind": "refresh",
                "spent": spent, "family_revoked": fam_revoked}
    rec = STATE.access.get(token)
    if rec is not None:
        fam_revoked = STATE.families[rec["family"]]["revoked"]
        active = not fam_revoked and not rec["revoked"] and time.time() < rec["expires_at"]
        return {"active": active, "kind": "access", "spent": False, "family_revoked": fam_revoked}
    return {"active": False, "kind": "unknown", "spent": False, "family_revoked": False}


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True


def write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description="tokenctl OAuth test authorization server")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--pid-file")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--exit-with-parent", action="store_true",
                    help="stop when the process that started us ends (tests that crash leave nothing behind)")
    args = ap.parse_args()

    Handler.verbose = args.verbose
    server = Server(("127.0.0.1", args.port), Handler)
    port = server.server_address[1]

    def on_signal(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    if args.exit_with_parent:
        parent = os.getppid()

        def watch_parent():
            while os.getppid() == parent:
                time.sleep(0.5)
            server.shutdown()

        threading.Thread(target=watch_parent, daemon=True).start()

    if args.pid_file:
        write_atomic(args.pid_file, "%d\n" % os.getpid())
    if args.port_file:
        write_atomic(args.port_file, "%d\n" % port)
    if args.verbose:
        sys.stderr.write("authserver: listening on http://127.0.0.1:%d\n" % port)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
