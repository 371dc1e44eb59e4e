#!/usr/bin/env python3
"""Resource servers for tokenctl's end-to-end tests, on 127.0.0.1 (standard library only).

  resourceserver.py git  --repos DIR --authserver URL --port-file F [--exit-with-parent]
      git's smart HTTP (git http-backend as CGI) for the repositories under DIR; every request
      must carry an access token the test authorization server says is active: HTTP Basic with
      the token as the password (what a credential helper gives git), or "Bearer TOKEN".
      Without one: 401 with WWW-Authenticate: Basic, so git asks its credential helpers.
  resourceserver.py kube --port-file F [--exit-with-parent]
      A stand-in for a Kubernetes API server: answers a request with a bearer token with a
      small JSON document, and one without with 401. kubectl runs exec credential plugins only
      for HTTPS servers: give --tls-cert and --tls-key.

Both record each request's Authorization header; GET /_test/log returns them in order.
"""
import argparse, base64, json, os, signal, subprocess, sys, threading, urllib.parse, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = []
LOCK = threading.Lock()
ARGS = None


def token_of(header):
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            _, _, password = base64.b64decode(value.strip()).decode().partition(":")
            return password
        except Exception:
            return None
    return None


def active(token):
    query = urllib.parse.urlencode({"token": token})
    with urllib.request.urlopen(ARGS.authserver + "/_test/token-status?" + query, timeout=5) as answer:
        status = json.load(answer)
    return status.get("active") is True and status.get("kind") == "access"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def send_plain(self, status, body, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def record(self, allowed):
        with LOCK:
            LOG.append({"method": self.command, "path": self.path, "authorization": self.headers.get("Authorization"), "allowed": allowed})

    def do_GET(self):
        if self.path == "/_test/log":
            with LOCK:
                body = json.dumps(LOG).encode()
            return self.send_plain(200, body, [("Content-Type", "application/json")])
        self.serve()

    def do_POST(self):
        self.serve()

    def serve(self):
        if ARGS.mode == "kube":
            # As an API server with token authentication: 401 without a bearer token.
            allowed = token_of(self.headers.get("Authorization")) is not None
            self.record(allowed)
            if not allowed:
                body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Unauthorized", "code": 401}).encode()
                return self.send_plain(401, body, [("Content-Type", "application/json")])
            body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Success", "message": "ok"}).encode()
            return self.send_plain(200, body, [("Content-Type", "application/json")])
        token = token_of(self.headers.get("Authorization"))
        allowed = bool(token) and active(token)
        self.record(allowed)
        if not allowed:
            return self.send_plain(401, b"token required\n", [("WWW-Authenticate", 'Basic realm="tokenctl-test"')])
        self.git_http_backend()

    def git_http_backend(self):
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        environment = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": ARGS.repos, "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": urllib.parse.unquote(path), "QUERY_STRING": query, "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "tokenctl", "REMOTE_ADDR": "127.0.0.1", "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        result = subprocess.run(["git", "http-backend"], input=body, env=environment, capture_output=True, timeout=60)
        head, _, payload = result.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = result.stdout.partition(b"\n\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_plain(status, payload, headers)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["git", "kube"])
    parser.add_argument("--repos")
    parser.add_argument("--authserver")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--tls-cert", help="serve HTTPS with this certificate (and --tls-key)")
    parser.add_argument("--tls-key")
    parser.add_argument("--exit-with-parent", action="store_true")
    ARGS = parser.parse_args()
    if ARGS.exit_with_parent:
        import ctypes
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if ARGS.tls_cert:
        import ssl
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(ARGS.tls_cert, ARGS.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(ARGS.port_file + ".tmp", ARGS.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
