#!/usr/bin/env python3
"""A real authorization server for tokenctl's integration tests: django-oauth-toolkit 3.4.1
(oauthlib 3.3.1) on 127.0.0.1 with sqlite in a throwaway directory.

    python dotserver.py --dir DIR --port-file PATH [--access-ttl SECONDS] [--grace SECONDS]

Issuer: http://127.0.0.1:PORT/o. Run with the virtualenv's python (Scripts/lib/services.sh
tk_start_dotserver creates it). Serves until SIGTERM.

Fixtures: user "alice" / "wonderland-pass"; applications
  tokenctl-device   public, device code grant
  tokenctl-browser  public, authorization code with PKCE, redirect http://127.0.0.1/callback
                    (any port: RFC 8252 §7.3 loopback)
  tokenctl-confidential  confidential (secret "tokenctl-secret"), device code grant
Settings: OIDC with an RSA key (RS256 ID tokens), ROTATE_REFRESH_TOKEN,
REFRESH_TOKEN_GRACE_PERIOD_SECONDS (--grace), REFRESH_TOKEN_REUSE_PROTECTION, revocation
at /o/revoke_token/ and the device endpoint at /o/device-authorization/ (neither is in the
toolkit's discovery document: clients pass them explicitly).
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--access-ttl", type=int, default=3600)
    ap.add_argument("--grace", type=int, default=0)
    args = ap.parse_args()

    # Bind first: the device verification URI must name the port.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    base = "http://127.0.0.1:%d" % port

    key_path = os.path.join(args.dir, "oidc.key")
    if not os.path.exists(key_path):
        subprocess.run(["openssl", "genrsa", "-out", key_path, "2048"], check=True, capture_output=True)
    with open(key_path) as f:
        private_key = f.read()

    from django.conf import settings

    settings.configure(
        DEBUG=False,
        ALLOWED_HOSTS=["127.0.0.1"],
        SECRET_KEY="tokenctl-test-only-" + os.urandom(8).hex(),
        ROOT_URLCONF="dot_urls",
        INSTALLED_APPS=[
            "django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions",
            "django.contrib.messages", "oauth2_provider",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[{
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "DIRS": [os.path.join(HERE, "templates")],
            "APP_DIRS": True,
            "OPTIONS": {"context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]},
        }],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.path.join(args.dir, "db.sqlite3")}},
        USE_TZ=True,
        LOGIN_URL="/accounts/login/",
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],  # test speed only
        OAUTH2_PROVIDER={
            "OIDC_ENABLED": True,
            "OIDC_RSA_PRIVATE_KEY": private_key,
            "SCOPES": {"openid": "OpenID Connect", "offline_access": "Stay signed in", "read": "Read"},
            "ACCESS_TOKEN_EXPIRE_SECONDS": args.access_ttl,
            "ROTATE_REFRESH_TOKEN": True,
            "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": args.grace,
            "REFRESH_TOKEN_REUSE_PROTECTION": True,
            "PKCE_REQUIRED": True,
            "DEVICE_FLOW_INTERVAL": 1,
            "OAUTH_DEVICE_VERIFICATION_URI": base + "/o/device/",
        },
    )
    sys.path.insert(0, HERE)
    import django
    django.setup()

    from django.core.management import call_command
    call_command("migrate", verbosity=0, interactive=False)
    create_fixtures()

    from django.core.handlers.wsgi import WSGIHandler
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, fmt, *a):
            sys.stderr.write("dotserver: %s\n" % (fmt % a))

    server = ThreadedWSGIServer(("127.0.0.1", port), QuietHandler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.server_address = sock.getsockname()
    server.server_name, server.server_port = "127.0.0.1", port
    server.setup_environ()
    server.server_activate()
    server.set_app(WSGIHandler())
    server.daemon_threads = True

    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, args.port_file)
    server.serve_forever(poll_interval=0.2)


def create_fixtures():
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_application_model

    User = get_user_model()
    if not User.objects.filter(username="alice").exists():
        User.objects.create_user("alice", "alice@example.test", "wonderland-pass")
    Application = get_application_model()
    fixtures = [
        ("tokenctl-device", Application.CLIENT_PUBLIC, Application.GRANT_DEVICE_CODE, "", ""),
        ("tokenctl-browser", Application.CLIENT_PUBLIC, Application.GRANT_AUTHORIZATION_CODE, "http://127.0.0.1/callback", ""),
        ("tokenctl-confidential", Application.CLIENT_CONFIDENTIAL, Application.GRANT_DEVICE_CODE, "", "tokenctl-secret"),
    ]
    for client_id, client_type, grant, redirect, secret in fixtures:
        if Application.objects.filter(client_id=client_id).exists():
            continue
        Application.objects.create(
            name=client_id, client_id=client_id, client_type=client_type, authorization_grant_type=grant,
            redirect_uris=redirect, client_secret=secret or "", hash_client_secret=True,
            algorithm=Application.RS256_ALGORITHM, skip_authorization=False)


if __name__ == "__main__":
    main()
